#pragma once
// The app's one idiom for work off the UI thread: run a function on Qt's global thread pool and
// hand its result (or the message of the exception it threw) back on the UI thread.
#include <QFutureWatcher>
#include <QObject>
#include <QString>
#include <QtConcurrent/QtConcurrentRun>

#include <exception>
#include <type_traits>
#include <utility>
#include <variant>

namespace glimpse::app {

// What a worker produced: `value`, or `error` (the exception's message) when it threw.
template <class T>
struct Outcome {
    T value{};
    QString error;
    bool ok() const { return error.isEmpty(); }
};

namespace detail {
template <class Work>
using WorkResult = std::conditional_t<std::is_void_v<std::invoke_result_t<Work&>>, std::monostate,
                                      std::invoke_result_t<Work&>>;
}

// Runs `work()` on a worker thread; then calls `done(Outcome<R>)` on `context`'s thread (not at
// all if `context` is destroyed first). Exceptions from `work` become Outcome::error; `work`
// must not touch widgets (copy what it needs into the lambda).
template <class Work, class Done>
void runAsync(QObject* context, Work work, Done done) {
    using R = detail::WorkResult<Work>;
    auto* watcher = new QFutureWatcher<Outcome<R>>(context);
    QObject::connect(watcher, &QFutureWatcher<Outcome<R>>::finished, context,
                     [watcher, done = std::move(done)]() mutable {
                         Outcome<R> r = watcher->result();
                         watcher->deleteLater();
                         done(std::move(r));
                     });
    watcher->setFuture(QtConcurrent::run([work = std::move(work)]() mutable {
        Outcome<R> r;
        try {
            if constexpr (std::is_void_v<std::invoke_result_t<Work&>>) work();
            else r.value = work();
        } catch (const std::exception& e) {
            r.error = QString::fromUtf8(e.what());
            if (r.error.isEmpty()) r.error = QStringLiteral("unknown error");
        }
        return r;
    }));
}

} // namespace glimpse::app
