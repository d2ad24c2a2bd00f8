#pragma once
// Results files (issue 53): what `glimpse eval letr|coat|fewshot --out R.h5` writes and the
// results browser reads: the summary the eval prints plus one record per sample (LETR image,
// classified image, few-shot episode), so a number leads back to the images behind it.
// Layout: docs/formats.md, "Results (glimpse.results, version 1)". Qt-free (core/).
//
// Writing streams: ResultsWriter creates the file, declares every dataset, starts HDF5 SWMR
// writing and appends samples in blocks (flushed every `flushEvery` samples), so a killed eval
// leaves a file that opens, says status "running" (the writer is gone) and holds every
// flushed sample. finish() writes the summary and status "complete" (or "stopped": the eval was
// asked to stop; the summary covers the samples written).
//
// Per-sample LETR records come from the same matching code as the summary
// (eval::LineEvaluator::add returns them): per row (decoder layer or baseline) and sample, the
// number of predictions, the true positives at each sAP threshold over ALL predictions (so
// the columns sum exactly to the pooled curve's last point), the sample's own AP, and the
// `keepLines` highest-scored predictions (endpoints as fixed point of the image size, exact
// float32 score, TP bit per threshold, nearest ground-truth line). With keepLines = -1
// (eval's default) every prediction is kept and the summary sAP can be recomputed exactly
// from the records (letrRecomputedSap).
//
// Reading is lazy: open() reads the header and the per-sample columns (a few numbers per
// sample and row); lines are read per sample (hyperslab) when asked for.
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>

#include "core/eval/line_metrics.h"

namespace glimpse::results {

constexpr const char* kKind = "glimpse.results";
constexpr int64_t kFormatVersion = 1;
// Stored endpoints: int16 fixed point, value = round(x / width * kCoordScale) (y likewise with
// the height), clamped to the int16 range, so endpoints within [-2, 2) of the image size keep
// 1/16384 of it.
constexpr float kCoordScale = 16384.0f;

enum class ResultsType { Letr, Classification, FewShot };
std::string typeName(ResultsType t);   // "letr", "classification", "fewshot"

enum class Status {
    Running,    // the writer has not finished: a live eval, or one that was killed (partial)
    Stopped,    // the eval was asked to stop: the summary covers the samples written
    Complete,
};
std::string statusName(Status s);   // "running", "stopped", "complete"

// Where the samples come from. `spec` is the dataset spec the eval was given (a data.json,
// a folder, "procedural:...", "fashion-mnist:DIR", ...) with `root` (absolute) the folder its
// files lie in ("" for generated data). A sample's `path` is relative to `root` when it lies
// under it (absolute otherwise, "" when it is not a file of its own: generated images,
// Fashion-MNIST's idx records); `index` is its index in the dataset the spec opens.
struct SourceInfo {
    std::string spec;
    std::string root;
    std::string split;   // classification / few-shot: "val", "novel", ... ("" for LETR)
};

// ---- records the writer takes and the reader returns -------------------------------------

// One predicted line as stored: endpoints in image pixels (after the fixed-point round trip
// when read back), exact score, `tp` bit k set when it is a true positive at thresholds[k],
// `gt` the nearest ground-truth line (index into the sample's GT lines; -1 when it has none).
struct LineRecord {
    float x1 = 0, y1 = 0, x2 = 0, y2 = 0;
    float score = 0;
    uint8_t tp = 0;
    int32_t gt = -1;
    bool isTp(size_t threshold) const { return (tp >> threshold) & 1u; }
};

// One row of the LETR table: a decoder layer ("coarse_1" ... "fine_6") or a baseline ("lsd",
// "mlsd"), as eval::EvalRow names them.
struct LetrRowInfo {
    std::string key, label;
    bool baseline = false;
};

// What the writer takes per LETR sample: the lines of every row (all predictions, any order)
// and their matches as LineEvaluator::add returned them.
struct LetrSampleIn {
    int64_t index = 0;        // in the dataset
    std::string name;         // LineSample::name
    std::string path;         // the image file ("" when generated)
    int width = 0, height = 0;
    std::vector<eval::GtLine> gt;
    struct Row {
        std::vector<eval::ScoredLine> lines;
        eval::ImageMatches matches;   // from LineEvaluator::add for these lines
    };
    std::vector<Row> rows;    // in the order of the writer's rows
};

// Classification (CoaT): one image.
struct ClassSampleIn {
    int64_t index = 0;
    std::string path;                 // the image file ("" for Fashion-MNIST / generated)
    int64_t label = 0;
    std::vector<int64_t> top5;        // classes, best first (fewer when there are < 5 classes)
    std::vector<float> top5Prob;      // their softmax probabilities
    float labelProb = 0;              // softmax probability of the label
};

// Few-shot: one episode.
struct EpisodeIn {
    int64_t setting = 0;              // index into the writer's settings (one per shot count)
    int64_t episode = 0;              // episode number within its seed
    std::vector<int64_t> classes;     // dataset labels, way order
    std::vector<int64_t> support;     // dataset indices, way-major [ways * shots]
    std::vector<int64_t> query;       // dataset indices, way-major [ways * queries]
    std::vector<int64_t> predicted;   // per query: the predicted way
    double accuracy = 0;
};
struct FewShotSetting {
    int64_t ways = 5, shots = 1, queries = 15;
    int64_t episodes = 0;             // planned
    uint64_t seed = 0;
};

// ---- summaries (finish() takes them, the reader returns them) ----------------------------

struct LetrSummary {
    std::vector<double> thresholds;            // sAP thresholds, e.g. {5, 10, 15}
    std::vector<LetrRowInfo> rows;
    std::vector<eval::LineMetrics> metrics;    // per row (curves subsampled to <= 512 points)
};
struct ClassSummary {
    std::vector<std::string> classNames;
    int64_t samples = 0, correct = 0, top5Correct = 0;
    double accuracy = 0, top5Accuracy = 0;
    std::vector<int64_t> confusion;            // [C x C] row-major: confusion[label * C + predicted]
};
struct FewShotSummaryRow {
    FewShotSetting setting;
    int64_t episodesDone = 0;
    double mean = 0, ci95 = 0;                 // fractions
};

// Everything a results file says about itself (root attributes and /meta).
struct ResultsHeader {
    ResultsType type = ResultsType::Letr;
    std::string command;          // the command line that wrote it
    std::string checkpoint;       // the model's checkpoint ("" for none)
    std::string family;           // "letr", "coat", "constellation"
    SourceInfo source;
    nlohmann::json config;        // the eval's options (free-form JSON)
    double createdAt = 0;         // Unix time
};

// ---- writer --------------------------------------------------------------------------------

struct WriterOptions {
    int64_t keepLines = -1;       // LETR: highest-scored lines kept per row and sample (-1: all)
    int64_t flushEvery = 32;      // samples between flushes (a killed eval loses at most these)
    int gzipLevel = -1;           // per-line datasets: >= 0 adds shuffle + deflate
    int64_t expectedSamples = -1; // for readers of a partial file ("3 of 200 samples")
};

class ResultsWriter {
public:
    // Creates `path` (its folder must exist; an existing file is replaced only when the writer
    // starts, the old one stays until then). LETR: `rows` and `thresholds` fix the columns.
    static std::unique_ptr<ResultsWriter> createLetr(const std::string& path, const ResultsHeader& header,
                                                     const std::vector<LetrRowInfo>& rows,
                                                     const std::vector<double>& thresholds,
                                                     const WriterOptions& options = {});
    static std::unique_ptr<ResultsWriter> createClassification(const std::string& path, const ResultsHeader& header,
                                                               const std::vector<std::string>& classNames,
                                                               const WriterOptions& options = {});
    static std::unique_ptr<ResultsWriter> createFewShot(const std::string& path, const ResultsHeader& header,
                                                        const std::vector<FewShotSetting>& settings,
                                                        const std::vector<std::string>& classNames,
                                                        const WriterOptions& options = {});
    ~ResultsWriter();   // without finish(): closes the file, status stays "running"

    void add(const LetrSampleIn& s);
    void add(const ClassSampleIn& s);
    void add(const EpisodeIn& e);
    int64_t samples() const;

    // Writes the summary and the status (Complete or Stopped), closes the file.
    void finish(const LetrSummary& summary, Status status);
    void finish(const ClassSummary& summary, Status status);
    void finish(const std::vector<FewShotSummaryRow>& summary, Status status);

    // Test hook: flush what is buffered and close the file WITHOUT a summary, exactly the
    // state a killed eval leaves after its last flush (the partial-file tests use it).
    void abandon();

    struct Impl;
private:
    explicit ResultsWriter(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

// ---- reader --------------------------------------------------------------------------------

// What moved: the dataset (spec file or folder) and/or sample files that are not where the
// file says (after any remap).
struct MissingSources {
    bool datasetMissing = false;       // the spec's file / folder is gone
    std::string datasetPath;           // what was looked for
    int64_t missingFiles = 0;          // samples whose own file is absent
    std::vector<int64_t> examples;     // the first (up to 20) such samples
    bool any() const { return datasetMissing || missingFiles > 0; }
    std::string describe() const;      // one paragraph for people
};

class ResultsFile {
public:
    // Throws glimpse::Error naming the file and the problem: missing, not HDF5, truncated or
    // corrupt, not a Glimpse file, another kind ("x.h5 is a glimpse.trace, expected a
    // glimpse.results"), another format version ("x.h5 has results format version 2; this
    // Glimpse reads version 1"), a missing or inconsistent dataset.
    static std::shared_ptr<ResultsFile> open(const std::string& path);
    ~ResultsFile();

    const std::string& path() const;
    const ResultsHeader& header() const;
    ResultsType type() const { return header().type; }
    Status status() const;
    int64_t size() const;                 // samples (episodes) readable
    int64_t expectedSamples() const;      // -1 when unknown
    // "complete: 200 samples", "partial: 34 of 200 samples (the eval did not finish)", ...
    std::string statusLine() const;

    // Sources.
    const SourceInfo& source() const;    // after remap
    int64_t datasetIndex(int64_t i) const;
    std::string sampleName(int64_t i) const;   // LETR: LineSample::name; else the path or "#index"
    std::string samplePath(int64_t i) const;   // absolute path of the sample's file ("" when none)
    MissingSources missingSources() const;     // stats every sample file: call off the UI thread
    // The sources moved: `newRoot` takes the place of source().root (spec and paths under
    // it follow). Throws when newRoot is not a folder. In memory only; the file is not changed.
    void remapSourceRoot(const std::string& newRoot);
    // The sample's image (RGB CV_8UC3; classification: as the dataset gives it, gray or RGB),
    // from its file or by reopening the dataset spec. Thread-safe. Throws Error naming the
    // source when it cannot be read.
    cv::Mat image(int64_t i) const;
    // An image of the dataset by its index there (few-shot supports and queries), from the
    // reopened dataset spec (split source().split). Thread-safe.
    cv::Mat datasetImage(int64_t datasetIndex) const;

    // ---- LETR ----
    const std::vector<LetrRowInfo>& letrRows() const;
    const std::vector<double>& thresholds() const;
    const LetrSummary& letrSummary() const;      // empty metrics while running
    int64_t keepLines() const;                   // -1: every prediction was kept
    int width(int64_t i) const;
    int height(int64_t i) const;
    // Per-sample columns (size() entries each), loaded on open.
    const std::vector<int32_t>& gtCount() const;
    const std::vector<int32_t>& predCount(size_t row) const;
    const std::vector<int32_t>& tpCount(size_t row, size_t threshold) const;   // over all predictions
    const std::vector<float>& sampleAp(size_t row, size_t threshold) const;     // the sample's own AP
    // Read on demand: ground truth (image pixels) and the stored lines of one row, best first.
    std::vector<eval::GtLine> gtLines(int64_t i) const;
    std::vector<LineRecord> lines(size_t row, int64_t i) const;
    // Whether sample i's stored lines are all its predictions in `row`.
    bool linesComplete(size_t row, int64_t i) const;
    // TP / FP / missed ground truth of sample i among predictions scored >= minScore, from the
    // stored lines; exact when the stored lines reach below minScore or are complete.
    struct Counts {
        int64_t tp = 0, fp = 0, missed = 0;
        bool exact = true;
    };
    Counts counts(size_t row, size_t threshold, int64_t i, float minScore) const;
    // counts() of every sample at once (one read of the row's stored lines; what a table
    // column at a chosen score uses). size() entries.
    std::vector<Counts> countsAll(size_t row, size_t threshold, float minScore) const;
    // sAP at each threshold recomputed from the stored per-sample records with the summary's
    // code (pooled hits, averagePrecision); equals the summary exactly when keepLines() == -1.
    std::vector<double> letrRecomputedSap(size_t row) const;

    // ---- classification ----
    const std::vector<std::string>& classNames() const;
    const ClassSummary& classSummary() const;
    const std::vector<int64_t>& labels() const;
    const std::vector<int64_t>& predicted() const;     // top-1
    const std::vector<float>& labelProb() const;
    std::vector<int64_t> top5(int64_t i) const;
    std::vector<float> top5Prob(int64_t i) const;

    // ---- few-shot (a sample is an episode) ----
    const std::vector<FewShotSetting>& settings() const;
    const std::vector<FewShotSummaryRow>& fewShotSummary() const;
    const std::vector<int64_t>& episodeSetting() const;
    const std::vector<double>& episodeAccuracy() const;
    EpisodeIn episode(int64_t i) const;

    struct Impl;
private:
    explicit ResultsFile(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

// `glimpse info R.h5`: kind, status, command, checkpoint, source (and whether it is there),
// then the summary table (LETR rows, classification accuracy and the most confused pairs,
// few-shot means). Throws glimpse::Error naming the file when it cannot be read.
std::string describeResults(const std::string& path);

// ---- table helpers (what the dock's sort and filter run; the benchmark times them) --------

// Indices 0..n-1 ordered by `key` (stable; descending when asked).
std::vector<int64_t> sortedOrder(const std::vector<double>& key, bool descending);
// Indices whose key lies in [lo, hi].
std::vector<int64_t> filterRange(const std::vector<double>& key, double lo, double hi);

} // namespace glimpse::results
