#pragma once
// M-LSD tiny: a light-weight line segment detector (Gu et al., AAAI 2022; docs/models.md "M-LSD").
//
// Encoder: the first 11 blocks of a MobileNetV2 (width 1.0) whose stem takes 4 channels (RGB
// plus a constant channel, as the official TFLite models do); stride-2 convolutions pad the
// bottom and right by one pixel and use no other padding (TensorFlow's "same"). Features at
// strides 4 (block 3, 24 ch), 8 (block 6, 32 ch) and 16 (block 10, 64 ch).
// Decoder: two FPN-like merges (block12: 1x1 conv + BN + ReLU on both inputs, the deeper one
// upsampled x2, bilinear with aligned corners, concatenated; block13/15: a residual 3x3 then a
// 3x3, both with BN + ReLU; block14 like block12) and block16 (3x3 dilated 5, 3x3, 1x1 to 16
// channels); channels 7..15 are kept and upsampled x2: [B, 9, S/2, S/2] for an S x S input.
// Channel 0 is the line-centre logit, channels 1..4 the displacements (dx, dy) from a centre to
// the start and to the end point, in map pixels; 5..8 are not used for lines.
//
// Parameter names equal the PyTorch port's state dict (lhwcv/mlsd_pytorch,
// MobileV2_MLSD_Tiny): backbone.features.{0..10}.*, block12..block16.*, so that
// installer/convert_mlsd.py copies tensors one to one. BatchNorm eps 1e-5, evaluation mode.
//
// Post-processing (decodeLines; the reference's pred_lines): sigmoid of the centre map, a
// k x k max pool keeps local maxima, the top-K of those; for each, the displacement vector at
// that cell gives the segment; kept when score > score_threshold and length > length_threshold
// (map pixels); coordinates x2 to the input and scaled by (W / S, H / S) to the image.
#include <array>
#include <memory>
#include <string>
#include <vector>

#include <opencv2/core.hpp>
#include <torch/torch.h>

#include "core/eval/lsd.h"
#include "core/models/mlsd/config.h"

namespace glimpse::mlsd {

// Conv2d (no bias) + BatchNorm2d + ReLU6, the MobileNetV2 unit; children "0" (conv), "1" (BN).
// Stride 2: zero padding of one row/column at the bottom/right only, no other padding.
class ConvBnRelu6Impl : public torch::nn::Module {
public:
    ConvBnRelu6Impl(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t groups);
    torch::Tensor forward(const torch::Tensor& x);
    int64_t stride = 1;
    torch::nn::Conv2d conv{nullptr};
    torch::nn::BatchNorm2d bn{nullptr};
};
TORCH_MODULE(ConvBnRelu6);

// MobileNetV2 inverted residual: [1x1 expand] -> 3x3 depthwise -> 1x1 linear projection + BN;
// residual when stride 1 and in == out. Children conv.{0,1,[2,3]} as in the reference.
class InvertedResidualImpl : public torch::nn::Module {
public:
    InvertedResidualImpl(int64_t in, int64_t out, int64_t stride, int64_t expand);
    torch::Tensor forward(const torch::Tensor& x);
    bool residual = false;
    std::vector<ConvBnRelu6> units;      // expand (when expand != 1), depthwise
    torch::nn::Conv2d project{nullptr};
    torch::nn::BatchNorm2d projectBn{nullptr};
};
TORCH_MODULE(InvertedResidual);

// Conv2d (with bias) + BatchNorm2d + ReLU; children "0", "1" (the decoder's unit).
class ConvBnReluImpl : public torch::nn::Module {
public:
    ConvBnReluImpl(int64_t in, int64_t out, int64_t kernel, int64_t dilation = 1);
    torch::Tensor forward(const torch::Tensor& x);
    torch::nn::Conv2d conv{nullptr};
    torch::nn::BatchNorm2d bn{nullptr};
};
TORCH_MODULE(ConvBnRelu);

// Decoder merge (the reference's BlockTypeA): conv2(a) ++ up2(conv1(b)).
class MergeBlockImpl : public torch::nn::Module {
public:
    MergeBlockImpl(int64_t inA, int64_t inB, int64_t outA, int64_t outB);
    torch::Tensor forward(const torch::Tensor& a, const torch::Tensor& b);
    ConvBnRelu conv1{nullptr}, conv2{nullptr};
};
TORCH_MODULE(MergeBlock);

// BlockTypeB: x = conv1(x) + x; conv2(x).
class RefineBlockImpl : public torch::nn::Module {
public:
    RefineBlockImpl(int64_t in, int64_t out);
    torch::Tensor forward(const torch::Tensor& x);
    ConvBnRelu conv1{nullptr}, conv2{nullptr};
};
TORCH_MODULE(RefineBlock);

// BlockTypeC: 3x3 dilated 5 -> 3x3 -> 1x1 (with bias, no BN).
class OutputBlockImpl : public torch::nn::Module {
public:
    OutputBlockImpl(int64_t in, int64_t out);
    torch::Tensor forward(const torch::Tensor& x);
    ConvBnRelu conv1{nullptr}, conv2{nullptr};
    torch::nn::Conv2d conv3{nullptr};
};
TORCH_MODULE(OutputBlock);

// The encoder's three feature maps.
struct MlsdFeatures {
    torch::Tensor c2;   // stride 4, 24 channels
    torch::Tensor c3;   // stride 8, 32 channels
    torch::Tensor c4;   // stride 16, 64 channels
};

// The decoder (block12 .. block16): the encoder's features -> [B, 9, 2 h2, 2 w2] for C2 of
// h2 x w2 (centre logit, 4 displacements, 4 unused channels). Each merge upsamples the deeper
// map to the size of the shallower one (bilinear, aligned corners): the reference's x2 for the
// square inputs it takes, and any size for LETR's proposals ("coarse_queries": "proposals").
class MlsdDecoderImpl : public torch::nn::Module {
public:
    MlsdDecoderImpl();
    torch::Tensor forward(const MlsdFeatures& f);
    MergeBlock block12{nullptr}, block14{nullptr};
    RefineBlock block13{nullptr}, block15{nullptr};
    OutputBlock block16{nullptr};
};
TORCH_MODULE(MlsdDecoder);

class MlsdTinyImpl : public torch::nn::Module {
public:
    MlsdTinyImpl();
    // [B, 4, S, S] (S a multiple of 32) -> the encoder's features.
    MlsdFeatures encode(const torch::Tensor& x);
    // [B, 4, S, S] -> [B, 9, S/2, S/2]: centre logit, 4 displacements, 4 unused channels.
    torch::Tensor forward(const torch::Tensor& x);
    // The decoder; its blocks are this module's children block12 .. block16 (the reference's names).
    MlsdDecoder decoder() const { return decoder_; }

private:
    ConvBnRelu6 stem_{nullptr};
    std::vector<InvertedResidual> blocks_;   // features.1 .. features.10
    MlsdDecoder decoder_{nullptr};
};
TORCH_MODULE(MlsdTiny);

// The top-k line-centre candidates of decoder maps [B, 9, h, w] (sigmoid of the centre map,
// local maxima of a nmsKernel max pool, top k of those; where fewer than k maxima exist the
// rest are suppressed cells of score 0), without thresholds, as the reference's pred_lines
// picks its candidates: lines [B, k, 4] (x1, y1, x2, y2) in map pixels x 2 (the network input's
// pixels), scores [B, k], highest first.
struct MlsdCandidates {
    torch::Tensor lines;
    torch::Tensor scores;
};
MlsdCandidates topCandidates(const torch::Tensor& maps, int64_t k, int64_t nmsKernel);

// A loaded detector: its config and network (evaluation mode).
struct MlsdModel {
    MlsdConfig config;
    MlsdTiny net{nullptr};
    std::string source;   // the checkpoint it was loaded from ("" when built in memory)
};

// Loads an M-LSD checkpoint (family "mlsd"; installer/convert_mlsd.py writes one); a .pth is
// refused with the conversion command; errors name the file.
std::shared_ptr<MlsdModel> loadMlsd(const std::string& path);

// The network input of an 8-bit RGB image (CV_8UC3): resized to size x size with area
// interpolation, a constant channel of ones appended, all four channels v / 127.5 - 1
// (float32, [1, 4, size, size]). Throws glimpse::Error on an empty or non-RGB image.
torch::Tensor mlsdInput(const cv::Mat& rgb, int64_t size);

// Lines from the network output `maps` [1, 9, h, w] for an image of imageWidth x imageHeight
// (the input was config.inputSize square), in image pixels, sorted by score, highest first.
std::vector<eval::ScoredLine> decodeLines(const torch::Tensor& maps, const MlsdConfig& config, int imageWidth,
                                          int imageHeight);

// mlsdInput -> net -> decodeLines, without gradients, on the network's device.
std::vector<eval::ScoredLine> detectMlsd(MlsdModel& model, const cv::Mat& rgb);

} // namespace glimpse::mlsd
