#pragma once
// LETR's "mlsd_tiny" backbone (issue 51 part 3; docs/decisions.md "LETR on photos"): the
// encoder of M-LSD tiny (core/models/mlsd: the first 11 blocks of a MobileNetV2, ImageNet- then
// Wireframe-trained) with DETR's frozen batch norm, plus one small trainable block that makes
// the stride-32 level LETR's coarse stage reads.
//
// Levels (entry i of forward() holds level i + 2):
//   C2  stride 4,  24 channels   features.3
//   C3  stride 8,  32 channels   features.6
//   C4  stride 16, 64 channels   features.10   (the fine stage's level)
//   C5  stride 32, 128 channels  extra: 3x3 conv stride 2 (64 -> 128) + ReLU, 3x3 conv + ReLU
//                                (biases; trained from scratch; the coarse stage's level)
// Input: the LETR image tensor [B, 3, H, W] normalized with mean = std = 0.5 (v / 127.5 - 1,
// M-LSD's own scaling; LetrConfig's defaults for this backbone); a fourth channel of the
// constant 1 / 127.5 - 1 is appended as M-LSD's input has it. Any H, W: stride-2 convolutions
// pad one row/column at the bottom/right (TensorFlow's "same" for even sizes), as M-LSD does.
//
// Parameter names (under LETR's backbone.0.body.): features.{0..10}.* exactly as M-LSD's
// backbone.features.{0..10}.* (num_batches_tracked dropped), and extra.{0,1}.{weight,bias}.
// Weights come from an M-LSD checkpoint (resources/mlsd_tiny.h5) with copyMlsdEncoder, or with
// the rest of a LETR checkpoint (the LETR file is self-contained).
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace glimpse::mlsd {
struct MlsdModel;
class MlsdDecoderImpl;
}

namespace glimpse::letr {

class MlsdBodyImpl : public torch::nn::Module {
public:
    MlsdBodyImpl();
    // [B, 3, H, W] -> levels C2..C<maxLevel> (maxLevel 2..5); levels above it are not computed.
    std::vector<torch::Tensor> forward(const torch::Tensor& images, int maxLevel = 5);
    static int64_t channels(int level);   // 24, 32, 64, 128 for levels 2..5

private:
    struct Unit {   // conv (no bias) + frozen BN + ReLU6; stride 2 pads bottom/right
        torch::nn::Conv2d conv{nullptr};
        std::shared_ptr<torch::nn::Module> bn;
        int64_t stride = 1;
    };
    struct Block {   // MobileNetV2 inverted residual
        std::vector<Unit> units;
        torch::nn::Conv2d project{nullptr};
        std::shared_ptr<torch::nn::Module> projectBn;
        bool residual = false;
    };
    Unit stem_;
    std::vector<Block> blocks_;   // features.1 .. features.10
    torch::nn::Conv2d extra1_{nullptr}, extra2_{nullptr};
};
TORCH_MODULE(MlsdBody);

// Copies M-LSD's encoder (features.0..10: weights and batch-norm statistics) into `body`.
// Throws glimpse::Error naming `source` when a tensor is missing or misshapen.
void copyMlsdEncoder(MlsdBodyImpl& body, const mlsd::MlsdModel& mlsd, const std::string& source);
// Copies M-LSD's decoder (block12 .. block16: weights and batch-norm statistics) into LETR's
// proposal decoder ("coarse_queries": "proposals"); errors as copyMlsdEncoder's.
void copyMlsdDecoder(mlsd::MlsdDecoderImpl& decoder, const mlsd::MlsdModel& mlsd, const std::string& source);

} // namespace glimpse::letr
