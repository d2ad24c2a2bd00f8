#pragma once
// Photographs labelled by M-LSD tiny (core/models/mlsd): the dataset spec mlsd:LIST (or
// mlsd:FOLDER) for LETR training (docs/decisions.md, "LETR on photos: data and evaluation
// (issue 51)"). M-LSD was trained on the Wireframe photographs, so its lines are structural
// (wall, window and furniture outlines) where LSD's are any gradient edge. With snapToEdges
// (spec mlsd-snapped:LIST) each label is then moved onto the image edge it nearly follows.
//
// Labels are computed once and cached in an HDF5 file beside the list (LIST.mlsd.h5, or
// FOLDER/mlsd_labels.h5), kind "glimpse.mlsd_labels", version 1:
//   root attribute  labeller      the labeller's identity (model digest and settings, JSON)
//   paths           uint8 [B]     the photos' keys joined by '\n': the path relative to the
//                                 cache's folder (absolute when outside it)
//   sizes, hashes   int64 [N]     file size and FNV-1a 64 of the file's bytes (as int64)
//   widths, heights int32 [N]     the decoded image size
//   offsets         int64 [N+1]   photo i's lines are rows offsets[i] .. offsets[i+1] of
//   lines           float32 [T,4] (x1, y1, x2, y2) in image pixels
//   scores          float32 [T]   M-LSD's centre score of each line
// An entry is reused when path, size and content hash all match; the others are labelled
// again (with a message) and the cache is rewritten atomically. A cache of another labeller
// (other model or settings), of another kind or version, or one that cannot be read is
// rebuilt whole, with a message saying why. Content hashes rather than modification times:
// the folder is copied between machines, and copies do not keep mtimes.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/data/lines.h"
#include "core/eval/lsd.h"

namespace glimpse::mlsd {
struct MlsdModel;
}

namespace glimpse::data {

struct MlsdLabelOptions {
    // Keep a line when M-LSD's centre score is at least this (the model's own threshold is
    // 0.10). Chosen on the 20 labelled Wireframe photos (tools/mlsd_label_study.py,
    // docs/decisions.md): 0.40 with at most 60 lines keeps 46 lines per photo of which 75% are
    // true positives at sAP10 (0.10: 59 lines, 61%), finding 43% of the labelled lines.
    double scoreThreshold = 0.40;
    int maxLines = 60;                 // the best-scored lines, at most this many per photo
    double minLength = 8.0;            // in image pixels, after clipping to the image
    // Move each line onto the image edge it nearly follows (eval::snapToEdge, up to 3 px across,
    // ends trimmed to the support by at most 25%): M-LSD's lines lie on the right structures but
    // often 1-2 px beside the edge. The dataset spec mlsd-snapped:LIST sets it. Off by default:
    // the shipped model was trained without it, and a model trained with it was no better
    // (docs/decisions.md "LETR on photos: input size and snapped labels"). Part of the cache's
    // identity, as every option here.
    bool snapToEdges = false;
    std::string toJson() const;
};

// Where the labels come from: `identity` names the model and is stored in the cache (a cache
// with another identity is rebuilt); `load` is called only when some photo needs labelling.
struct MlsdLabeller {
    std::string identity;
    std::function<std::shared_ptr<mlsd::MlsdModel>()> load;
};

// The labeller of an M-LSD checkpoint file: identity = its file name and the FNV-1a 64 of its
// bytes; loaded with mlsd::loadMlsd on first need. Throws glimpse::Error naming the file when
// it cannot be read.
MlsdLabeller mlsdCheckpointLabeller(const std::string& checkpointPath);

// The checkpoint the spec mlsd:LIST labels with (the app sets resources/mlsd_tiny.h5 at start;
// "" = none: opening an mlsd: spec is then an error saying so).
void setMlsdLabelCheckpoint(const std::string& path);
std::string mlsdLabelCheckpoint();

// The cache file of a list or folder (see above).
std::string mlsdLabelCachePath(const std::string& folderOrList);

// FNV-1a 64 of a file's bytes; throws glimpse::Error naming the file when it cannot be read.
uint64_t fileContentHash(const std::string& path);

// M-LSD's lines of `rgb` kept by `o`, best score first: [M, 4] float lines (clipped to the
// image) and [M] float scores.
void mlsdPseudoLines(mlsd::MlsdModel& model, const cv::Mat& rgb, const MlsdLabelOptions& o,
                     torch::Tensor& lines, torch::Tensor& scores);

// What mlsdPseudoLines keeps of a detector's lines `found` (best score first) on `rgb`: the
// options' score, count and length filters, each line clipped to the image and, with
// snapToEdges, moved onto its edge.
void pseudoLabels(const std::vector<eval::ScoredLine>& found, const cv::Mat& rgb, const MlsdLabelOptions& o,
                  torch::Tensor& lines, torch::Tensor& scores);

class MlsdPhotoLines : public LineDataset {
public:
    // Lists the photos (listImageFiles, core/io/image.h: a missing entry names the list and
    // its line), reads the cache, labels every photo it lacks (a photo that cannot be decoded
    // is an error naming the file) and rewrites the cache when anything changed. `log` gets
    // one line per event (cache rebuilt and why, photos labelled); default: standard error.
    MlsdPhotoLines(const std::string& folderOrList, MlsdLabeller labeller, MlsdLabelOptions o = {},
                   std::function<void(const std::string&)> log = {});
    int64_t size() const override { return int64_t(paths_.size()); }
    LineSample get(int64_t index) const override;   // thread-safe: the labels are read-only
    std::string describe() const override;

    const std::vector<std::string>& paths() const { return paths_; }
    const std::string& cachePath() const { return cache_; }
    int64_t labelledNow() const { return labelledNow_; }   // photos labelled by this open
    const torch::Tensor& scores(int64_t index) const { return scores_.at(size_t(index)); }

private:
    std::string source_, cache_;
    bool snapped_ = false;   // labels snapped to edges (spec mlsd-snapped:): describe() says so
    std::vector<std::string> paths_;
    std::vector<torch::Tensor> lines_, scores_;
    std::vector<cv::Size> sizes_;
    int64_t labelledNow_ = 0;
};

} // namespace glimpse::data
