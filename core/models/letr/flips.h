#pragma once
// Flip ensemble: LETR run on an image and on its mirror images in one batch, each decoder
// layer's lines merged across the views (test-time augmentation; docs/decisions.md, "Flip
// ensemble"). The weights and the architecture are untouched; only what a layer reports
// changes:
// - view 0 is the image, view 1 its left-right mirror, views 2 and 3 the up-down mirror and
//   both (views = 1, 2 or 4); every view's lines are mapped back into the image's frame;
// - per layer, the image's entities in descending score order each take, in every other view,
//   the nearest entity not yet taken (symmetric endpoint distance: the sum of the two endpoints'
//   squared distances in coordinates normalized to [0, 1], the better of the two endpoint
//   orders), when it is within matchRadius^2;
// - the entity's line becomes the mean of its own line and the taken ones (each oriented like
//   its own), its score the mean of the V views' scores with 0 for a view where nothing was
//   taken (a line only some views see ranks lower).
// Entity states, memories and attention stay those of view 0, so the inspector's attention of
// an entity is what the unflipped image gave; its line and score are the ensemble's.
#include <torch/types.h>

#include "core/models/letr/model.h"

namespace glimpse::letr {

// Checked: 1, 2 or 4; throws glimpse::Error otherwise (the message names `what`).
void checkFlipViews(int views, const char* what = "flips");

// lines [V, N, 4] (already in view 0's frame, normalized), probs [V, N] (line probability):
// the merged [N, 4] lines and [N] probabilities of view 0's entities, as described above.
// V == 1 returns view 0 unchanged.
std::pair<torch::Tensor, torch::Tensor> mergeFlipViews(const torch::Tensor& lines, const torch::Tensor& probs,
                                                        double matchRadius = 0.06);

// [3, H, W] (or [.., H, W]) image -> its mirror for view v (0..3).
torch::Tensor flipView(const torch::Tensor& image, int view);
// [.., 4] normalized lines seen in view v -> view 0's frame (the flips are their own inverses).
torch::Tensor unflipLines(const torch::Tensor& lines, int view);

// Runs `image` ([3, H, W], normalized) in `views` views as one batch and replaces batch item
// 0's lines and logits at every layer of every stage by the ensemble's (class 0's probability
// = the merged score, the other classes keep their proportions). Everything else in the
// output (states, memories, the other batch items) is as the forward pass gave it; read item 0.
// views == 1 is a plain forward pass.
LetrOutput forwardFlipEnsemble(LetrModel& model, const torch::Tensor& image, int views,
                               const LetrForwardOptions& options = {}, double matchRadius = 0.06);

} // namespace glimpse::letr
