#pragma once
// The three UI-latency scenarios of issue 22 (docs/ui-latency.md), each driving a real
// MainWindow on the UI thread with a UiLatencyProbe running: `glimpse bench ui` prints them,
// tests/test_ui_latency.cpp checks their structural properties.
//   letr   - LETR runs on an image again and again while the layer stepper is used; after
//            each run every layer is stepped through and entities are selected.
//   follow - the Training panel follows a run log that another thread writes (RunLogWriter)
//            at a high rate, until the writer finishes (the final file replaces the live one).
//   scrub  - an episode written with rl::writeEpisode is opened in the replay viewer and its
//            slider is dragged through every frame, then sought at random.
// Set-up (window, files, model, the image) happens before the probe starts; the probe covers
// the scenario itself. Every function here runs on the UI thread and spins the event loop.
#include <QString>

#include <functional>
#include <vector>

#include "app/ui_latency.h"

namespace glimpse::app {

class MainWindow;

struct UiScenarioOptions {
    double seconds = 6;             // letr: keep running for this long; follow: writer time
    QString workDir;                // where the run log, episode and random checkpoint go
    QString letrCheckpoint;         // empty: a random LETR (letrPreset) saved in workDir
    int letrPreset = 1;             // random LETR: 0 tiny (tests), 1 medium (bench)
    QString image;                  // LETR's image; empty: the built-in demo scene
    int minRuns = 2;                // letr: at least this many runs
    int stepEveryMs = 40;           // letr: stepper key repeat while a run is on the worker
    int rowsPerSecond = 500;        // follow: steps per second, each appending every series
    int series = 8;                 // follow: series in the run log
    int episodeSteps = 1500;        // scrub: episode length (210 x 160 RGB frames)
    int scrubPaceMs = 4;            // scrub: event-loop time between two slider positions
    int randomSeeks = 200;          // scrub
    int intervalMs = 5;             // probe interval
    std::function<void(const QString&)> log;
};

struct LetrRunSample {
    double runMs = 0;               // run() to traceReady (the pass on the worker + hand-over)
    LatencyStats during;            // the probe's ticks meanwhile
    int stepsDuring = 0;            // stepper moves meanwhile
};

struct LetrScenarioResult {
    LatencyStats all;
    std::vector<LetrRunSample> runs;
    int steps = 0;                  // stepper moves in all
    int positions = 0;              // the trace's layer positions
    long long framesDrawn = 0;      // viewport frames meanwhile
    long long framesWithUploads = 0;   // of which uploaded a texture (heatmap, image)
    long long uploadWaits = 0;      // frames whose upload the UI thread waited for
};

struct FollowScenarioResult {
    LatencyStats all;
    long long rowsWritten = 0;
    int polls = 0, pollsWithRows = 0;
    std::vector<int> ticksBetweenPolls;   // probe ticks between consecutive polls with rows
    QString finalStatus;            // the panel's status of the run at the end
};

struct ScrubScenarioResult {
    LatencyStats all;
    int seeks = 0;
    int uncachedSeeks = 0;          // seeks to a frame not in the cache
    int shownDuringSeek = 0;        // ... of which the frame was on screen when seek returned
    int framesShown = 0;
    LatencyStats seekCall;          // UI-thread time of each slider move (ms), as samples
    LatencyStats decode;            // frame reads by a second reader on a worker (ms), as samples
};

// Each throws glimpse::Error when the scenario cannot run (a model or file fails).
LetrScenarioResult runLetrScenario(MainWindow& w, UiLatencyProbe& probe, const UiScenarioOptions& o);
FollowScenarioResult runFollowScenario(MainWindow& w, UiLatencyProbe& probe, const UiScenarioOptions& o);
ScrubScenarioResult runScrubScenario(MainWindow& w, UiLatencyProbe& probe, const UiScenarioOptions& o);

// Spins the UI thread's event loop for `ms` (timers and posted events run meanwhile).
void pumpEvents(int ms);
// Spins the event loop until pred() or timeoutMs; returns pred().
bool pumpUntil(const std::function<bool()>& pred, int timeoutMs);

} // namespace glimpse::app
