#include "app/results/results_launch.h"

#include <QComboBox>
#include <QObject>

#include <memory>

#include "app/mainwindow.h"
#include "app/panel.h"
#include "app/results/results_panel.h"
#include "app/results/results_table.h"

namespace glimpse::app {

namespace {

// After a compare file opened (or at once without one): the sample, then --inspect.
void selectAndInspect(MainWindow& window, ResultsPanel* p, const ResultsLaunch& l) {
    auto* table = p->tableModel();
    long long sample = l.sample;
    if (sample < 0 && table->rowCount() > 0) sample = table->sampleAt(0);
    if (sample < 0) return;
    if (sample >= p->file()->size())
        return window.reportError(QStringLiteral("--sample %1: this results file has samples 0..%2")
                                      .arg(sample)
                                      .arg(p->file()->size() - 1));
    if (l.inspect) {
        auto conn = std::make_shared<QMetaObject::Connection>();
        *conn = QObject::connect(p, &ResultsPanel::shown, p, [p, conn] {
            QObject::disconnect(*conn);
            p->inspect();
        });
    }
    p->selectSample(sample);
}

void applyPick(MainWindow& window, ResultsPanel* p, const ResultsLaunch& l) {
    const auto type = p->file()->type();
    if (!l.layer.isEmpty()) {
        const int row = p->rowBox()->findText(l.layer);
        if (type != results::ResultsType::Letr || row < 0) {
            QStringList names;
            for (int i = 0; i < p->rowBox()->count(); ++i) names << p->rowBox()->itemText(i);
            window.reportError("--results-layer " + l.layer + ": this results file has " +
                               (names.isEmpty() ? QStringLiteral("no layers") : names.join(", ")));
        } else {
            p->setRow(row);
        }
    }
    if (l.cellTrue >= 0) {
        const int k = int(p->file()->classNames().size());
        if (type != results::ResultsType::Classification || l.cellTrue >= k || l.cellPredicted >= k)
            window.reportError(QStringLiteral("--results-cell %1,%2: this results file has %3")
                                   .arg(l.cellTrue)
                                   .arg(l.cellPredicted)
                                   .arg(type == results::ResultsType::Classification
                                            ? QStringLiteral("classes 0..%1").arg(k - 1)
                                            : QStringLiteral("no confusion matrix")));
        else
            p->pickCell(l.cellTrue, l.cellPredicted);
    }
    if (l.bin >= 0) {
        if (type != results::ResultsType::FewShot || l.bin >= 10)
            window.reportError(QStringLiteral("--results-bin %1: only few-shot results have an accuracy histogram "
                                              "(bars 0..9)")
                                   .arg(l.bin));
        else
            p->pickBin(l.bin);
    }
}

} // namespace

void wireResultsLaunch(MainWindow& window, const ResultsLaunch& l) {
    if (!l.any()) return;
    ResultsPanel* p = window.resultsPanel();
    auto conn = std::make_shared<QMetaObject::Connection>();
    *conn = QObject::connect(p, &ResultsPanel::opened, &window, [&window, p, l, conn] {
        QObject::disconnect(*conn);
        applyPick(window, p, l);
        if (l.compare.isEmpty()) return selectAndInspect(window, p, l);
        auto c2 = std::make_shared<QMetaObject::Connection>();
        *c2 = QObject::connect(p, &ResultsPanel::compareOpened, &window, [&window, p, l, c2] {
            QObject::disconnect(*c2);
            selectAndInspect(window, p, l);
        });
        p->openCompare(l.compare);
    });
}

bool resultsLaunchDone(MainWindow& window, const ResultsLaunch& l) {
    ResultsPanel* p = window.resultsPanel();
    if (!p->file() || p->busy() || p->countsPending()) return false;
    const bool wantsSample = l.sample != -1 || l.cellTrue >= 0 || l.bin >= 0 || l.inspect || !l.compare.isEmpty();
    if (wantsSample && p->shownSample() < 0 && p->tableModel()->rowCount() > 0) return false;
    if (l.inspect) {
        if (p->inspecting()) return false;
        if (ModelPanel* m = window.activePanel(); m && (m->busy() || m->runPending())) return false;
    }
    return true;
}

} // namespace glimpse::app
