#pragma once
// The command-line options of `glimpse R.h5` for the Results dock (issue 53): what to pick,
// select, compare and inspect once the results file is open, and when a --screenshot may be
// taken. app/gui.cpp parses them; this wires them to the dock.
#include <QString>

namespace glimpse::app {

class MainWindow;

struct ResultsLaunch {
    long long sample = -1;        // --sample N: select sample N (the file's numbering); -2: the first listed
    int cellTrue = -1, cellPredicted = -1;   // --results-cell T,P: the confusion matrix cell
    int bin = -1;                 // --results-bin B: the accuracy histogram's bar (0-based)
    QString layer;                // --results-layer NAME: the LETR row ("fine 6", "LSD")
    QString compare;              // --compare-results B.h5
    bool inspect = false;         // --inspect: the family's inspector on the selected sample
    bool any() const {
        return sample != -1 || cellTrue >= 0 || bin >= 0 || !layer.isEmpty() || !compare.isEmpty() || inspect;
    }
};

// Once the window's Results dock opens a file: the layer, the pick (then, without --sample,
// the first listed sample is selected), the compare file, the sample, then --inspect.
// Problems (a layer or cell the file has not) go to the window's reportError.
void wireResultsLaunch(MainWindow& window, const ResultsLaunch& launch);
// Whether everything the launch asked of the dock is done and drawn (for --screenshot): the
// file open, the sample shown, the inspector's run finished.
bool resultsLaunchDone(MainWindow& window, const ResultsLaunch& launch);

} // namespace glimpse::app
