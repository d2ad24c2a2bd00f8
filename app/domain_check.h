#pragma once
// DomainCheck: the line of a classifier panel (CoaT, ConstellationNet) that says what the model
// was trained on and warns when the shown image is far from it (core/data/domain.h: size,
// colour, brightness, contrast against a profile of the training images). The profile is
// measured on a worker thread when a model is loaded; the check itself is a few OpenCV passes
// over a reduced copy of the image.
#include <QLabel>
#include <QString>
#include <QStringList>
#include <functional>
#include <memory>
#include <optional>

#include "core/data/domain.h"
#include "widgets/viewport.h"

namespace glimpse::app {

class DomainCheck : public QLabel {
    Q_OBJECT
public:
    explicit DomainCheck(QWidget* parent = nullptr);

    // Measures the training data's profile on a worker (`make` opens the data and profiles it;
    // it may throw glimpse::Error); `name` is what the panel calls the data meanwhile.
    void loadProfile(const QString& name, std::function<data::DomainProfile()> make);
    const data::DomainProfile* profile() const { return profile_ ? &*profile_ : nullptr; }
    bool measuring() const { return generation_ != shownGeneration_; }
    // Checks the shown image (originalW/H > 0: the size of the image it was cropped from, e.g. a
    // trace opened from a file shows the network's crop); clear() forgets it.
    void check(const widgets::RgbImage& image, int originalW = 0, int originalH = 0);
    void clear();
    // The checked image's warnings (empty: in domain, or nothing checked yet).
    QStringList warnings() const { return warnings_; }

Q_SIGNALS:
    void profileReady();

private:
    void refreshText();
    std::optional<data::DomainProfile> profile_;
    QString name_, error_;
    std::optional<data::ImageStats> stats_;
    QStringList warnings_;
    int generation_ = 0, shownGeneration_ = 0;
};

} // namespace glimpse::app
