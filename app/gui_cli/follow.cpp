#include <chrono>
#include <iostream>
#include <thread>

#include "app/cli/cli.h"
#include "app/training/run_follower.h"
#include "core/error.h"
#include "core/run_files.h"

namespace glimpse::cli {

// glimpse info --follow RUN.h5: follows a run log exactly as the Training panel does
// (app::RunFollower: SWMR refresh, reopen when the file is replaced, dead-writer detection) and
// prints a line whenever the status or the step changes. Ends with status 0 once the run has
// finished (or, with --until-ended, ended in any way; "dead" counts as still going: a resume
// may follow), 1 on the first read error. Used by tools/crash_test.sh to prove that a follower
// never sees an unreadable run log while the trainer is killed and resumed.
int followRunLog(const std::vector<std::string>& args) {
    Args a(args, {"--follow", "--until-ended"});
    a.checkKnown({"--follow", "--until-ended", "--interval", "--timeout"});
    if (a.positional().size() != 1) throw Error("info --follow: expected one run log");
    const std::string path = findRunLog(a.positional()[0]);   // run.h5, runlog.h5 or the run folder
    const double interval = a.getDouble("--interval", 0.2);
    const double timeout = a.getDouble("--timeout", 0);
    if (!(interval > 0)) throw Error("--interval must be > 0");
    app::RunFollower f(QString::fromStdString(path));
    QString lastStatus;
    int64_t lastStep = -2, polls = 0, reopens = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (;;) {
        app::RunFollower::Update u;
        try {
            u = f.poll();
        } catch (const std::exception& e) {
            std::cout << "ERROR after " << polls << " polls: " << e.what() << std::endl;
            return 1;
        }
        ++polls;
        if (u.reset) ++reopens;
        const QString st = f.status();
        const int64_t step = f.progress().step;
        if (st != lastStatus || step != lastStep) {
            std::cout << "status " << st.toStdString() << " step " << step;
            if (st == "dead") std::cout << " (" << f.statusMessage().toStdString() << ")";
            std::cout << std::endl;
            lastStatus = st;
            lastStep = step;
        }
        const bool ended = st == "finished" || (a.has("--until-ended") && (st == "failed" || st == "stopped"));
        if (ended) {
            std::cout << "ended: " << st.toStdString() << " after " << polls << " polls, " << reopens
                      << " resets" << std::endl;
            return 0;
        }
        if (timeout > 0 &&
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > timeout) {
            std::cout << "TIMEOUT: still " << st.toStdString() << " after " << timeout << " s" << std::endl;
            return 1;
        }
        std::this_thread::sleep_for(std::chrono::duration<double>(interval));
    }
}


} // namespace glimpse::cli
