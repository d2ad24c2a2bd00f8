#include "core/info.h"

#include <cstdio>
#include <functional>
#include <new>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/h5/h5.h"
#include "core/models/xtra/dataset.h"
#include "core/h5/walk.h"
#include "core/replay/episode_reader.h"
#include "core/results/results.h"
#include "core/runlog.h"

namespace glimpse {

namespace {

std::string clip(const std::string& s, size_t n) { return s.size() <= n ? s : s.substr(0, n) + "..."; }

// An attribute's value for display: strings clipped, numbers as is.
std::string attrValue(const h5::Object& o, const std::string& name) {
    const std::string type = o.attrTypeDescription(name);
    try {
        if (type.rfind("string", 0) == 0) return "\"" + clip(o.attrString(name), 160) + "\"";
        if (type.rfind("int", 0) == 0 || type.rfind("uint", 0) == 0) return std::to_string(o.attrInt(name));
        if (type.rfind("float", 0) == 0) {
            std::ostringstream os;
            os.precision(15);
            os << o.attrDouble(name);
            return os.str();
        }
    } catch (const std::exception&) {
    }
    return "(" + type + ")";
}

// Attributes one per line; a string holding a JSON object (a model's or a run's config) as its
// keys, one per line below it, each value clipped, so that every option shows.
void attrLines(std::ostringstream& out, const h5::Object& o, const std::string& indent, bool skipHeader) {
    for (const auto& a : o.attrNames()) {
        if (skipHeader && (a == "kind" || a == "format_version")) continue;
        nlohmann::json j;
        try {
            if (o.attrTypeDescription(a).rfind("string", 0) == 0) j = nlohmann::json::parse(o.attrString(a), nullptr, false);
        } catch (const std::exception&) {
        }
        if (!j.is_object()) {
            out << indent << a << " = " << attrValue(o, a) << "\n";
            continue;
        }
        out << indent << a << " = (" << j.size() << " keys)\n";
        for (const auto& [k, v] : j.items()) out << indent << "    " << k << ": " << clip(v.dump(), 160) << "\n";
    }
}

struct Totals {
    long long datasets = 0, groups = 0, bytes = 0, stored = 0;
};

// One line for a group the walk does not enter: a hard link back to an ancestor, or too deep.
bool refused(std::ostringstream& out, h5::WalkGuard& walk, const h5::Group& g, const std::string& indent,
             const std::string& name) {
    switch (walk.tryEnter(g)) {
    case h5::WalkGuard::Entry::Ok:
        return false;
    case h5::WalkGuard::Entry::Cycle:
        out << indent << name << "/  (hard link back to an ancestor group: a cycle, not followed)\n";
        return true;
    case h5::WalkGuard::Entry::TooDeep:
        out << indent << name << "/  (nested deeper than " << h5::kMaxWalkDepth << " groups, not followed)\n";
        return true;
    }
    return true;
}

void tree(std::ostringstream& out, const h5::Group& g, int depth, Totals& t, h5::WalkGuard& walk) {
    for (const auto& name : g.children()) {
        const std::string indent(size_t(2 * depth + 2), ' ');
        if (g.hasGroup(name)) {
            h5::Group sub = g.group(name);
            if (refused(out, walk, sub, indent, name)) continue;
            const auto n = sub.children().size();
            out << indent << name << "/  (group, " << n << (n == 1 ? " member" : " members") << ")\n";
            ++t.groups;
            tree(out, sub, depth + 1, t, walk);
            walk.leave();
        } else if (g.hasDataset(name)) {
            h5::Dataset d = g.dataset(name);
            const auto shape = d.shape();
            const long long bytes = d.numElements() * d.elementBytes();
            std::string line = indent + name;
            if (line.size() < 48) line.resize(48, ' ');
            out << line << " " << d.typeDescription() << " "
                << (shape.empty() ? std::string("scalar") : h5::shapeString(shape)) << "  " << humanBytes(bytes)
                << "\n";
            ++t.datasets;
            t.bytes += bytes;
            t.stored += d.storageBytes();
        } else {
            out << indent << name << "  (other object)\n";
        }
    }
}

void readStrings(const h5::Object& o, const std::string& where) {
    for (const auto& a : o.attrNames()) {
        if (o.attrTypeDescription(a).rfind("string", 0) != 0) continue;
        try {
            (void)o.attrString(a);
        } catch (const std::bad_alloc&) {
            throw Error(o.fileName() + ": " + where + " attribute '" + a +
                        "': memory allocation failed reading its value");
        }
    }
}

void readStringsBelow(const h5::Group& g, const std::string& where, h5::WalkGuard& walk) {
    for (const auto& name : g.children()) {
        const std::string child = (where == "/" ? "/" : where + "/") + name;
        if (g.hasGroup(name)) {
            h5::Group sub = g.group(name);
            if (walk.tryEnter(sub) != h5::WalkGuard::Entry::Ok) continue;   // describeH5 reports those
            readStrings(sub, "group '" + child + "'");
            readStringsBelow(sub, child, walk);
            walk.leave();
        } else if (g.hasDataset(name)) {
            readStrings(g.dataset(name), "dataset '" + child + "'");
        }
    }
}

} // namespace

void readEveryStringAttribute(const std::string& path) {
    h5::File f = h5::File::open(path);
    h5::WalkGuard walk;
    const h5::WalkGuard::Scope root(walk, f);
    readStrings(f, "root");
    readStringsBelow(f, "/", walk);
}

std::string humanBytes(long long bytes) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = double(bytes);
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        ++u;
    }
    char buf[32];
    if (u == 0) std::snprintf(buf, sizeof buf, "%lld B", bytes);
    else std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
    return buf;
}

std::string describeEpisode(const std::string& path) {
    replay::ReaderOptions options;
    options.cacheBytes = 0;
    const replay::EpisodeReader r(path, options);
    const auto& m = r.meta();
    std::ostringstream out;
    out.precision(6);
    out << "  episode (format version " << r.formatVersion() << "): " << r.game() << ", " << r.length() << " steps, return "
        << r.totalReturn() << ", " << (r.terminal() ? "ended (terminal)" : "cut before the end (truncated)") << "\n";
    out << "  frames: " << r.frameWidth() << "x" << r.frameHeight() << " " << (r.frameChannels() == 1 ? "grey" : "RGB");
    if (r.hasObservations()) {
        const auto s = r.observationShape();
        out << "; observations " << s[0] << "x" << s[1] << "x" << s[2] << " (C x h x w)";
    }
    out << "\n";
    int64_t rewards = 0, lifeLosses = 0;
    for (int64_t t = r.nextReward(-1); t >= 0; t = r.nextReward(t)) ++rewards;
    for (int64_t t = r.nextLifeLoss(-1); t >= 0; t = r.nextLifeLoss(t)) ++lifeLosses;
    out << "  " << r.actionNames().size() << " actions:";
    for (const auto& n : r.actionNames()) out << " " << n;
    out << "\n  " << rewards << (rewards == 1 ? " step" : " steps") << " with a reward, " << lifeLosses
        << (lifeLosses == 1 ? " life loss" : " life losses");
    if (r.has(replay::Series::Lives) && r.length() > 0)
        out << ", lives " << r.series(replay::Series::Lives).front() << " -> " << r.series(replay::Series::Lives).back();
    out << "\n";
    if (!m.source.empty()) out << "  source: " << m.source << "\n";
    if (r.hasModel()) {
        out << "  model: " << m.model.family << ", checkpoint " << (m.model.checkpoint.empty() ? "(none)" : m.model.checkpoint)
            << ", " << m.model.simulations << " simulations per step\n  recorded:";
        bool any = false;
        for (auto s : {replay::Series::Value, replay::Series::ValuePrefix, replay::Series::RootValue})
            if (r.has(s)) {
                out << " " << replay::seriesName(s);
                any = true;
            }
        for (auto p : {replay::PerAction::Policy, replay::PerAction::Visits, replay::PerAction::ChildQ,
                       replay::PerAction::ChildPrior})
            if (r.has(p)) {
                out << " " << replay::perActionName(p);
                any = true;
            }
        out << (any ? "" : " (no per-step outputs)") << "\n";
    } else {
        out << "  model: none recorded\n";
    }
    if (r.hasTraining() && r.length() > 0) {
        out << "  training: self-play of the " << m.training.trainer << " run " << m.training.run << ", learner updates "
            << r.trainingUpdate(0) << "-" << r.trainingUpdate(r.length() - 1) << ", environment steps "
            << r.trainingEnvSteps(0) << "-" << r.trainingEnvSteps(r.length() - 1) << "\n";
        if (!r.taskNames().empty()) {
            out << "  task weights (first step -> last):";
            const auto first = r.taskWeights(0), last = r.taskWeights(r.length() - 1);
            for (size_t i = 0; i < first.size(); ++i)
                out << (i ? ", " : " ") << r.taskNames()[i] << " " << first[i] << " -> " << last[i];
            out << "\n";
        }
    }
    return out.str();
}

std::string describeH5(const std::string& path, bool tensors) {
    h5::File f = h5::File::open(path);
    std::ostringstream out;
    out << path << "\n";
    const bool glimpse = f.hasAttr("kind");
    if (glimpse) {
        out << "  kind: " << attrValue(f, "kind");
        if (f.hasAttr("format_version")) out << ", format version " << attrValue(f, "format_version");
        else out << ", no format_version attribute (damaged Glimpse file)";
        out << "\n";
    } else {
        out << "  not a Glimpse file (no 'kind' attribute): a foreign HDF5 file\n";
    }
    const bool isString = glimpse && f.attrTypeDescription("kind").rfind("string", 0) == 0;
    if (isString && f.attrString("kind") == "glimpse.checkpoint") {   // the summary first
        try {
            out << describeCheckpoint(path);
        } catch (const std::exception& e) {
            out << "  checkpoint summary unavailable: " << e.what() << "\n";
        }
    }
    attrLines(out, f, "  ", true);
    if (f.hasGroup("meta")) attrLines(out, f.group("meta"), "  ", false);
    if (glimpse && f.attrTypeDescription("kind").rfind("string", 0) == 0 &&
        f.attrString("kind") == "glimpse.runlog" && f.hasGroup("series")) {
        // Row counts per series: what a user wants first from a run log.
        out << "  series:";
        h5::WalkGuard walk;
        std::function<void(const h5::Group&, const std::string&)> list = [&](const h5::Group& g,
                                                                              const std::string& prefix) {
            const h5::WalkGuard::Scope in(walk, g);
            for (const auto& n : g.children()) {
                if (g.hasGroup(n)) list(g.group(n), prefix + n + "/");
                else if (g.hasDataset(n)) out << " " << prefix << n << " (" << g.dataset(n).numElements() << " rows)";
            }
        };
        list(f.group("series"), "");
        out << "\n";
        // A "running" log whose writer is gone (killed) must not read as running.
        try {
            RunWriterInfo w;
            if (f.hasAttr("writer_host")) w.host = f.attrString("writer_host");
            if (f.hasAttr("writer_pid")) w.pid = f.attrInt("writer_pid");
            if (f.hasAttr("heartbeat_interval")) w.heartbeatInterval = f.attrDouble("heartbeat_interval");
            if (f.hasDataset("heartbeat")) {
                const torch::Tensor hb = f.dataset("heartbeat").read(torch::kFloat64);
                if (hb.numel() == 1) w.heartbeat = hb.item<double>();
            }
            const std::string st = f.hasAttr("status") ? f.attrString("status") : "";
            const RunStatus status = st == "running"    ? RunStatus::Running
                                     : st == "finished" ? RunStatus::Finished
                                     : st == "failed"   ? RunStatus::Failed
                                                        : RunStatus::Stopped;
            const RunLiveness l = judgeLiveness(status, w, unixTimeNow(), localHostName());
            if (l.state == Liveness::Dead) out << "  run: DEAD, not running: " << l.description << "\n";
            else if (l.state != Liveness::Ended) out << "  run: " << l.description << "\n";
        } catch (const std::exception& e) {
            out << "  liveness unavailable: " << e.what() << "\n";
        }
    }
    if (glimpse && f.attrTypeDescription("kind").rfind("string", 0) == 0 && f.attrString("kind") == "glimpse.episode") {
        try {
            out << describeEpisode(path);
        } catch (const std::exception& e) {
            out << "  episode summary unavailable: " << e.what() << "\n";
        }
    }
    if (glimpse && f.attrTypeDescription("kind").rfind("string", 0) == 0 && f.attrString("kind") == results::kKind) {
        try {
            out << results::describeResults(path);
        } catch (const std::exception& e) {
            out << "  results summary unavailable: " << e.what() << "\n";
        }
    }
    if (glimpse && f.attrTypeDescription("kind").rfind("string", 0) == 0 && f.attrString("kind") == xtra::kDatasetKind) {
        try {
            out << "  offline dataset: " << xtra::describeDataset(xtra::readDataset(path)) << "\n";
        } catch (const std::exception& e) {
            out << "  dataset summary unavailable: " << e.what() << "\n";
        }
    }
    Totals t;
    h5::WalkGuard walk;
    const h5::WalkGuard::Scope root(walk, f);
    const bool listTree = tensors || !glimpse;
    std::ostringstream treeText;
    tree(treeText, f, 0, t, walk);
    if (listTree) out << "  /\n" << treeText.str();
    out << "  total: " << t.datasets << (t.datasets == 1 ? " dataset" : " datasets") << " in " << t.groups
        << (t.groups == 1 ? " group" : " groups") << ", " << humanBytes(t.bytes) << " of data, "
        << humanBytes(t.stored) << " stored" << (listTree ? "" : " (--tensors lists them)") << "\n";
    return out.str();
}

} // namespace glimpse
