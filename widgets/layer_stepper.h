#pragma once
// LayerStepper: steps through a model's layers, e.g. LETR's coarse 1..6 then fine 1..6.
// A slider with a label; left/right keys and the mouse wheel over it step one position.
// Plain Qt: positions are just labels ("coarse 3"); the owner maps them to its layers.
#include <QStringList>
#include <QWidget>

class QLabel;
class QSlider;
class QToolButton;

namespace glimpse::widgets {

class LayerStepper : public QWidget {
    Q_OBJECT
public:
    explicit LayerStepper(QWidget* parent = nullptr);

    // Replaces the positions; keeps the current index when it is still valid, else the last.
    void setPositions(const QStringList& labels);
    const QStringList& positions() const { return labels_; }
    int count() const { return int(labels_.size()); }
    int position() const;   // -1 when there are no positions

public Q_SLOTS:
    void setPosition(int index);   // clamped
    void stepForward();
    void stepBack();

Q_SIGNALS:
    void positionChanged(int index);

protected:
    void keyPressEvent(QKeyEvent* e) override;
    void wheelEvent(QWheelEvent* e) override;

private:
    void updateLabel();
    QStringList labels_;
    QSlider* slider_ = nullptr;
    QLabel* label_ = nullptr;
    QToolButton* back_ = nullptr;
    QToolButton* forward_ = nullptr;
    int wheelAccum_ = 0;
};

} // namespace glimpse::widgets
