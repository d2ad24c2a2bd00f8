#pragma once
// Wireframe / YorkUrban line datasets in the processed JSON form used by L-CNN and LETR: one
// JSON file holding a list of records {"filename": "00031546.png", "lines": [[x1, y1, x2, y2],
// ...], "width": 512, "height": 512}, with the images beside the file (DIR/filename, or
// DIR/images/filename). "width"/"height" are optional; when given, the decoded image must have
// that size. Every record is validated when the file is opened; a bad record is reported as
// "<file>: record <index> (<filename>): <problem>".
#include <functional>
#include <string>
#include <vector>

#include <torch/types.h>

#include "core/data/lines.h"

namespace glimpse::data {

struct WireframeRecord {
    std::string filename;
    std::vector<float> lines;   // 4 per segment, image pixels
    int width = 0, height = 0;  // 0 = not given
};

class WireframeLines : public LineDataset {
public:
    // Throws glimpse::Error naming the file (and the record) on any problem.
    explicit WireframeLines(const std::string& jsonPath);
    int64_t size() const override { return int64_t(records_.size()); }
    LineSample get(int64_t index) const override;
    std::string describe() const override;
    const std::vector<WireframeRecord>& records() const { return records_; }
    std::string imagePath(int64_t index) const;

private:
    std::string path_, dir_;
    std::vector<WireframeRecord> records_;
};

// Writes a dataset in this form: DIR/<name>.json plus DIR/images/NNNNNN.png (atomic writes).
// Returns the JSON path. `progress` (may be empty) is called after each image. With `overlays`,
// DIR/overlays/NNNNNN.png show the ground-truth segments drawn in red over each image.
std::string exportLineDataset(const LineDataset& ds, const std::string& dir,
                              const std::string& name = "dataset",
                              const std::function<void(int64_t done, int64_t total)>& progress = {},
                              bool overlays = false);

} // namespace glimpse::data
