#include "widgets/layer_stepper.h"

#include <QHBoxLayout>
#include <QKeyEvent>
#include <QLabel>
#include <QSlider>
#include <QToolButton>
#include <QVBoxLayout>
#include <QWheelEvent>

namespace glimpse::widgets {

LayerStepper::LayerStepper(QWidget* parent) : QWidget(parent) {
    setFocusPolicy(Qt::StrongFocus);
    auto* col = new QVBoxLayout(this);
    col->setContentsMargins(0, 0, 0, 0);
    label_ = new QLabel("-", this);
    label_->setAlignment(Qt::AlignCenter);
    QFont f = label_->font();
    f.setBold(true);
    label_->setFont(f);
    auto* row = new QHBoxLayout;
    back_ = new QToolButton(this);
    back_->setArrowType(Qt::LeftArrow);
    back_->setToolTip("Previous layer (Left)");
    forward_ = new QToolButton(this);
    forward_->setArrowType(Qt::RightArrow);
    forward_->setToolTip("Next layer (Right)");
    slider_ = new QSlider(Qt::Horizontal, this);
    slider_->setRange(0, 0);
    slider_->setPageStep(1);
    slider_->setTickPosition(QSlider::TicksBelow);
    slider_->setTickInterval(1);
    slider_->setFocusPolicy(Qt::NoFocus);   // keys go to the stepper itself
    row->addWidget(back_);
    row->addWidget(slider_, 1);
    row->addWidget(forward_);
    col->addWidget(label_);
    col->addLayout(row);
    connect(back_, &QToolButton::clicked, this, &LayerStepper::stepBack);
    connect(forward_, &QToolButton::clicked, this, &LayerStepper::stepForward);
    connect(slider_, &QSlider::valueChanged, this, [this](int v) {
        updateLabel();
        Q_EMIT positionChanged(v);
    });
    setEnabled(false);
}

void LayerStepper::setPositions(const QStringList& labels) {
    const int old = position();
    labels_ = labels;
    const QSignalBlocker block(slider_);
    slider_->setRange(0, std::max(0, int(labels.size()) - 1));
    const int keep = (old >= 0 && old < labels.size()) ? old : int(labels.size()) - 1;
    slider_->setValue(std::max(0, keep));
    setEnabled(!labels.isEmpty());
    updateLabel();
    if (!labels.isEmpty()) Q_EMIT positionChanged(slider_->value());
}

int LayerStepper::position() const { return labels_.isEmpty() ? -1 : slider_->value(); }

void LayerStepper::setPosition(int index) {
    if (labels_.isEmpty()) return;
    slider_->setValue(std::clamp(index, 0, int(labels_.size()) - 1));
}

void LayerStepper::stepForward() { setPosition(position() + 1); }
void LayerStepper::stepBack() { setPosition(position() - 1); }

void LayerStepper::keyPressEvent(QKeyEvent* e) {
    switch (e->key()) {
    case Qt::Key_Right: stepForward(); break;
    case Qt::Key_Left: stepBack(); break;
    case Qt::Key_Home: setPosition(0); break;
    case Qt::Key_End: setPosition(count() - 1); break;
    default: QWidget::keyPressEvent(e); return;
    }
    e->accept();
}

void LayerStepper::wheelEvent(QWheelEvent* e) {
    // One position per wheel notch (120 units); touchpads send smaller deltas that add up.
    wheelAccum_ += e->angleDelta().y();
    while (wheelAccum_ >= 120) { wheelAccum_ -= 120; stepForward(); }
    while (wheelAccum_ <= -120) { wheelAccum_ += 120; stepBack(); }
    e->accept();
}

void LayerStepper::updateLabel() {
    const int p = position();
    label_->setText(p < 0 ? QStringLiteral("-")
                          : QStringLiteral("%1   (%2 / %3)").arg(labels_[p]).arg(p + 1).arg(labels_.size()));
}

} // namespace glimpse::widgets
