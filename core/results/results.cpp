#include "core/results/results.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <limits>
#include <map>
#include <numeric>
#include <sstream>

#include "core/data/classification.h"
#include "core/data/fewshot.h"
#include "core/data/open.h"
#include "core/error.h"
#include "core/h5/h5.h"
#include "core/io/atomic_file.h"
#include "core/io/image.h"
#include "core/replay/h5_rows.h"

namespace glimpse::results {

namespace fs = std::filesystem;

std::string typeName(ResultsType t) {
    switch (t) {
    case ResultsType::Letr: return "letr";
    case ResultsType::Classification: return "classification";
    case ResultsType::FewShot: return "fewshot";
    }
    return "?";
}

std::string statusName(Status s) {
    switch (s) {
    case Status::Running: return "running";
    case Status::Stopped: return "stopped";
    case Status::Complete: return "complete";
    }
    return "?";
}

namespace {

constexpr int64_t kSampleChunk = 1024;   // rows per chunk of the per-sample columns
constexpr int64_t kItemChunk = 8192;     // rows per chunk of per-line / per-item data

std::string thresholdName(double t) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", t);
    return buf;
}

int16_t toFixed(float v, int size) {
    const float f = std::round(v / float(size) * kCoordScale);
    return int16_t(std::clamp(f, -32768.0f, 32767.0f));
}
float fromFixed(int16_t v, int size) { return float(v) / kCoordScale * float(size); }

ResultsType parseType(const std::string& s, const std::string& file) {
    if (s == "letr") return ResultsType::Letr;
    if (s == "classification") return ResultsType::Classification;
    if (s == "fewshot") return ResultsType::FewShot;
    throw Error(file + ": unknown results type '" + s + "' (expected letr, classification or fewshot)");
}

// The file or folder a dataset spec names ("" for generated data).
std::string specPath(const std::string& spec) {
    if (spec.rfind("procedural", 0) == 0 || spec == "fashion-mnist" || spec.rfind("mix:", 0) == 0) return "";
    if (spec.rfind("fashion-mnist:", 0) == 0) return spec.substr(14);
    if (spec.rfind("lsd:", 0) == 0) return spec.substr(4);
    return spec;
}

// The folder sample paths are relative to, for a spec ("" for generated data).
std::string specRoot(const std::string& spec) {
    const std::string p = specPath(spec);
    if (p.empty()) return "";
    std::error_code ec;
    fs::path abs = fs::absolute(p, ec);
    if (ec) return "";
    abs = abs.lexically_normal();
    if (fs::is_directory(abs, ec)) return abs.string();
    return abs.parent_path().string();
}

// `path` relative to `root` when it lies under it, else absolute.
std::string relativeTo(const std::string& path, const std::string& root) {
    if (path.empty()) return "";
    std::error_code ec;
    fs::path abs = fs::absolute(path, ec).lexically_normal();
    if (root.empty()) return abs.string();
    const fs::path rel = abs.lexically_relative(fs::path(root));
    if (rel.empty() || *rel.begin() == "..") return abs.string();
    return rel.string();
}

// One appendable dataset: rows of `width` elements of a native type, buffered until flush.
struct Column {
    h5::Dataset ds;
    hid_t memType;
    size_t elemBytes;
    int64_t width;   // 0: 1-D
    std::vector<char> pending;
    int64_t rows = 0;   // written to the file

    template <class T>
    void push(const T* v, size_t n) {
        const char* p = reinterpret_cast<const char*>(v);
        pending.insert(pending.end(), p, p + n * sizeof(T));
    }
    template <class T>
    void push(const T& v) { push(&v, 1); }

    void flush() {
        const size_t rowBytes = elemBytes * size_t(std::max<int64_t>(width, 1));
        const int64_t k = int64_t(pending.size() / rowBytes);
        if (k == 0) return;
        const int rank = width > 0 ? 2 : 1;
        hsize_t dims[2] = {hsize_t(rows + k), hsize_t(width)};
        ds.check(H5Dset_extent(ds.id(), dims), "cannot extend the dataset");
        h5::Id fspace(H5Dget_space(ds.id()), H5Sclose);
        hsize_t start[2] = {hsize_t(rows), 0}, count[2] = {hsize_t(k), hsize_t(width)};
        ds.check(H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start, nullptr, count, nullptr), "cannot select rows");
        h5::Id mspace(H5Screate_simple(rank, count, nullptr), H5Sclose);
        ds.check(H5Dwrite(ds.id(), memType, mspace.get(), fspace.get(), H5P_DEFAULT, pending.data()),
                 "cannot write rows");
        ds.check(H5Dflush(ds.id()), "cannot flush the dataset");
        rows += k;
        pending.clear();
    }
};

} // namespace

// ================================= writer ===================================================

struct ResultsWriter::Impl {
    std::string path;
    ResultsType type;
    WriterOptions opts;
    std::unique_ptr<h5::File> file;
    std::map<std::string, Column> cols;
    std::vector<std::string> order;   // flush order: item data first, per-sample columns last
    std::unique_ptr<h5::Dataset> state;
    std::string sourceRoot;
    int64_t samples = 0, sinceFlush = 0;
    bool closed = false;
    // LETR
    std::vector<LetrRowInfo> rows;
    std::vector<double> thresholds;
    int64_t nameEnd = 0, pathEnd = 0, gtEnd = 0;
    std::vector<int64_t> lineEnd;
    // few-shot
    std::vector<FewShotSetting> settings;
    int64_t classEnd = 0, supportEnd = 0, queryEnd = 0;
    int64_t numClasses = 0;

    Column& col(const std::string& name) { return cols.at(name); }

    void declare(const std::string& name, hid_t fileType, hid_t memType, size_t bytes, int64_t width, bool perItem) {
        const int64_t chunkRows = perItem ? kItemChunk : kSampleChunk;
        std::vector<int64_t> dims{0}, maxDims{-1}, chunk{chunkRows};
        if (width > 0) {
            dims.push_back(width);
            maxDims.push_back(width);
            chunk.push_back(width);
        }
        h5::Dataset ds = file->createDataset(name, fileType, dims, maxDims, chunk, perItem ? opts.gzipLevel : -1, true);
        cols.emplace(name, Column{std::move(ds), memType, bytes, width, {}, 0});
        order.push_back(name);
    }

    void writeState(Status s) {
        const int64_t v[2] = {s == Status::Complete ? 2 : s == Status::Stopped ? 1 : 0, samples};
        h5::Dataset& ds = *state;
        ds.check(H5Dwrite(ds.id(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v), "cannot write the state");
        ds.check(H5Dflush(ds.id()), "cannot flush the state");
    }

    void flush() {
        if (!file) return;
        h5::silenceErrors();
        // Ragged data before the *_end columns that point into it, and the state last, so a
        // reader trusting state[1] samples always finds their data.
        for (const auto& n : order) cols.at(n).flush();
        writeState(Status::Running);
        sinceFlush = 0;
    }

    void afterAdd() {
        ++samples;
        if (++sinceFlush >= std::max<int64_t>(1, opts.flushEvery)) flush();
    }

    void pushString(const std::string& base, const std::string& s, int64_t& end) {
        col(base).push(s.data(), s.size());
        end += int64_t(s.size());
        col(base + "_end").push(end);
    }

    void checkOpen(ResultsType want) const {
        if (closed) throw Error(path + ": the results writer is closed");
        if (type != want)
            throw Error(path + ": a " + typeName(want) + " record given to a " + typeName(type) + " results file");
    }

    // Closes the live file, then adds `write`'s summary to a copy renamed over it.
    void close(Status status, const std::function<void(h5::File&)>& write) {
        flush();
        cols.clear();
        state.reset();
        file->close();
        file.reset();
        closed = true;
        writeFileAtomically(path, [&](const std::string& tmp) {
            fs::copy_file(path, tmp, fs::copy_options::overwrite_existing);
            h5::File f = h5::File::open(tmp, h5::File::Mode::ReadWrite);
            write(f);
            const int64_t v[2] = {status == Status::Complete ? 2 : 1, samples};
            h5::Dataset st = f.dataset("state");
            st.check(H5Dwrite(st.id(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v), "cannot write the state");
            f.close();
        });
    }
};

ResultsWriter::ResultsWriter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ResultsWriter::~ResultsWriter() {
    if (impl_ && !impl_->closed && impl_->file) {
        try {
            impl_->flush();
            impl_->cols.clear();
            impl_->state.reset();
            impl_->file->close();
        } catch (...) {
        }
    }
}

namespace {

std::unique_ptr<ResultsWriter::Impl> startWriter(const std::string& path, const ResultsHeader& header,
                                                 const WriterOptions& opts,
                                                 const std::function<void(ResultsWriter::Impl&, h5::File&)>& declare) {
    auto impl = std::make_unique<ResultsWriter::Impl>();
    impl->path = path;
    impl->type = header.type;
    impl->opts = opts;
    impl->sourceRoot = header.source.root.empty() ? specRoot(header.source.spec) : header.source.root;
    h5::File::CreateOptions copts;
    copts.latestFormat = true;
    // Built under a temp name, switched to SWMR writing and renamed into place while open (as
    // run logs): a reader never sees a half-declared file.
    writeFileAtomically(path, [&](const std::string& tmp) {
        auto f = std::make_unique<h5::File>(h5::File::create(tmp, copts, path));
        h5::writeHeader(*f, kKind, kFormatVersion);
        f->setAttr("type", typeName(header.type));
        f->setAttr("family", header.family);
        f->setAttr("command", header.command);
        f->setAttr("checkpoint", header.checkpoint);
        f->setAttr("created_at", header.createdAt > 0 ? header.createdAt : double(std::time(nullptr)));
        f->setAttr("source_spec", header.source.spec);
        f->setAttr("source_root", impl->sourceRoot);
        f->setAttr("source_split", header.source.split);
        f->setAttr("config", header.config.is_null() ? std::string("{}") : header.config.dump());
        f->setAttr("expected_samples", opts.expectedSamples);
        impl->file = std::move(f);
        h5::File& F = *impl->file;
        impl->state = std::make_unique<h5::Dataset>(F.createDataset("state", H5T_STD_I64LE, {2}, {2}, {2}, -1, true));
        impl->writeState(Status::Running);
        impl->declare("samples/name", H5T_STD_U8LE, H5T_NATIVE_UINT8, 1, 0, true);
        impl->declare("samples/path", H5T_STD_U8LE, H5T_NATIVE_UINT8, 1, 0, true);
        declare(*impl, F);
        impl->declare("samples/index", H5T_STD_I64LE, H5T_NATIVE_INT64, 8, 0, false);
        impl->declare("samples/name_end", H5T_STD_I64LE, H5T_NATIVE_INT64, 8, 0, false);
        impl->declare("samples/path_end", H5T_STD_I64LE, H5T_NATIVE_INT64, 8, 0, false);
        F.check(H5Fstart_swmr_write(F.fileId()), "cannot start SWMR writing");
    });
    return impl;
}

void checkHeader(const ResultsHeader& h, ResultsType want, const std::string& path) {
    if (h.type != want)
        throw Error(path + ": the header says " + typeName(h.type) + ", the writer writes " + typeName(want));
}

} // namespace

std::unique_ptr<ResultsWriter> ResultsWriter::createLetr(const std::string& path, const ResultsHeader& header,
                                                         const std::vector<LetrRowInfo>& rows,
                                                         const std::vector<double>& thresholds,
                                                         const WriterOptions& options) {
    checkHeader(header, ResultsType::Letr, path);
    if (thresholds.empty() || thresholds.size() > 8)
        throw Error(path + ": results files record 1 to 8 sAP thresholds, got " + std::to_string(thresholds.size()));
    if (rows.empty()) throw Error(path + ": no LETR rows to record");
    for (const auto& r : rows)
        if (!h5::isValidRelativePath(r.key) || r.key.find('/') != std::string::npos)
            throw Error(path + ": invalid row key '" + r.key + "'");
    auto impl = startWriter(path, header, options, [&](Impl& w, h5::File& f) {
        nlohmann::json rj = nlohmann::json::array();
        for (const auto& r : rows) rj.push_back({{"key", r.key}, {"label", r.label}, {"baseline", r.baseline}});
        f.setAttr("rows", rj.dump());
        f.setAttr("keep_lines", options.keepLines);
        const int64_t T = int64_t(thresholds.size());
        f.writeTensor("letr/thresholds",
                      torch::tensor(torch::ArrayRef<double>(thresholds.data(), thresholds.size()), torch::kDouble).clone());
        w.declare("gt/lines", H5T_STD_I16LE, H5T_NATIVE_INT16, 2, 4, true);
        for (const auto& r : rows) {
            const std::string b = "letr/" + r.key + "/";
            w.declare(b + "lines", H5T_STD_I16LE, H5T_NATIVE_INT16, 2, 4, true);
            w.declare(b + "score", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 4, 0, true);
            w.declare(b + "tp_bits", H5T_STD_U8LE, H5T_NATIVE_UINT8, 1, 0, true);
            w.declare(b + "gt", H5T_STD_I16LE, H5T_NATIVE_INT16, 2, 0, true);
        }
        w.declare("samples/width", H5T_STD_I32LE, H5T_NATIVE_INT32, 4, 0, false);
        w.declare("samples/height", H5T_STD_I32LE, H5T_NATIVE_INT32, 4, 0, false);
        w.declare("samples/gt_end", H5T_STD_I64LE, H5T_NATIVE_INT64, 8, 0, false);
        for (const auto& r : rows) {
            const std::string b = "letr/" + r.key + "/";
            w.declare(b + "pred_count", H5T_STD_I32LE, H5T_NATIVE_INT32, 4, 0, false);
            w.declare(b + "tp", H5T_STD_I32LE, H5T_NATIVE_INT32, 4, T, false);
            w.declare(b + "ap", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 4, T, false);
            w.declare(b + "line_end", H5T_STD_I64LE, H5T_NATIVE_INT64, 8, 0, false);
        }
    });
    impl->rows = rows;
    impl->thresholds = thresholds;
    impl->lineEnd.assign(rows.size(), 0);
    return std::unique_ptr<ResultsWriter>(new ResultsWriter(std::move(impl)));
}

std::unique_ptr<ResultsWriter> ResultsWriter::createClassification(const std::string& path, const ResultsHeader& header,
                                                                   const std::vector<std::string>& classNames,
                                                                   const WriterOptions& options) {
    checkHeader(header, ResultsType::Classification, path);
    if (classNames.empty()) throw Error(path + ": no class names");
    auto impl = startWriter(path, header, options, [&](Impl& w, h5::File& f) {
        f.setAttr("class_names", nlohmann::json(classNames).dump());
        w.declare("class/label", H5T_STD_I32LE, H5T_NATIVE_INT32, 4, 0, false);
        w.declare("class/top5", H5T_STD_I32LE, H5T_NATIVE_INT32, 4, 5, false);
        w.declare("class/top5_prob", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 4, 5, false);
        w.declare("class/label_prob", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 4, 0, false);
    });
    impl->numClasses = int64_t(classNames.size());
    return std::unique_ptr<ResultsWriter>(new ResultsWriter(std::move(impl)));
}

std::unique_ptr<ResultsWriter> ResultsWriter::createFewShot(const std::string& path, const ResultsHeader& header,
                                                            const std::vector<FewShotSetting>& settings,
                                                            const std::vector<std::string>& classNames,
                                                            const WriterOptions& options) {
    checkHeader(header, ResultsType::FewShot, path);
    if (settings.empty()) throw Error(path + ": no few-shot settings");
    auto impl = startWriter(path, header, options, [&](Impl& w, h5::File& f) {
        nlohmann::json sj = nlohmann::json::array();
        for (const auto& s : settings)
            sj.push_back({{"ways", s.ways}, {"shots", s.shots}, {"queries", s.queries}, {"episodes", s.episodes},
                          {"seed", s.seed}});
        f.setAttr("settings", sj.dump());
        f.setAttr("class_names", nlohmann::json(classNames).dump());
        w.declare("fewshot/classes", H5T_STD_I64LE, H5T_NATIVE_INT64, 8, 0, true);
        w.declare("fewshot/support", H5T_STD_I64LE, H5T_NATIVE_INT64, 8, 0, true);
        w.declare("fewshot/query", H5T_STD_I64LE, H5T_NATIVE_INT64, 8, 0, true);
        w.declare("fewshot/predicted", H5T_STD_I16LE, H5T_NATIVE_INT16, 2, 0, true);
        w.declare("fewshot/setting", H5T_STD_I32LE, H5T_NATIVE_INT32, 4, 0, false);
        w.declare("fewshot/episode", H5T_STD_I64LE, H5T_NATIVE_INT64, 8, 0, false);
        w.declare("fewshot/accuracy", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 8, 0, false);
        w.declare("fewshot/class_end", H5T_STD_I64LE, H5T_NATIVE_INT64, 8, 0, false);
        w.declare("fewshot/support_end", H5T_STD_I64LE, H5T_NATIVE_INT64, 8, 0, false);
        w.declare("fewshot/query_end", H5T_STD_I64LE, H5T_NATIVE_INT64, 8, 0, false);
    });
    impl->settings = settings;
    return std::unique_ptr<ResultsWriter>(new ResultsWriter(std::move(impl)));
}

int64_t ResultsWriter::samples() const { return impl_->samples; }

void ResultsWriter::add(const LetrSampleIn& s) {
    Impl& w = *impl_;
    w.checkOpen(ResultsType::Letr);
    if (s.rows.size() != w.rows.size())
        throw Error(w.path + ": sample '" + s.name + "' has " + std::to_string(s.rows.size()) + " rows, expected " +
                    std::to_string(w.rows.size()));
    if (s.width <= 0 || s.height <= 0) throw Error(w.path + ": sample '" + s.name + "' has no image size");
    if (s.gt.size() > 32767) throw Error(w.path + ": sample '" + s.name + "' has more than 32767 ground-truth lines");
    const size_t T = w.thresholds.size();
    w.col("samples/index").push(s.index);
    w.pushString("samples/name", s.name, w.nameEnd);
    w.pushString("samples/path", relativeTo(s.path, w.sourceRoot), w.pathEnd);
    w.col("samples/width").push(int32_t(s.width));
    w.col("samples/height").push(int32_t(s.height));
    Column& gl = w.col("gt/lines");
    for (const auto& g : s.gt) {
        const int16_t v[4] = {toFixed(g.x1, s.width), toFixed(g.y1, s.height), toFixed(g.x2, s.width),
                              toFixed(g.y2, s.height)};
        gl.push(v, 4);
    }
    w.gtEnd += int64_t(s.gt.size());
    w.col("samples/gt_end").push(w.gtEnd);
    for (size_t r = 0; r < w.rows.size(); ++r) {
        const auto& row = s.rows[r];
        const size_t n = row.lines.size();
        if (row.matches.tp.size() != n || row.matches.nearestGt.size() != n)
            throw Error(w.path + ": sample '" + s.name + "', row " + w.rows[r].key + ": " + std::to_string(n) +
                        " lines but " + std::to_string(row.matches.tp.size()) + " matches");
        // Score order, ties in the given order: the order LineEvaluator ranks them in.
        std::vector<size_t> ord(n);
        std::iota(ord.begin(), ord.end(), size_t(0));
        std::stable_sort(ord.begin(), ord.end(), [&](size_t a, size_t b) { return row.lines[a].score > row.lines[b].score; });
        std::vector<int32_t> tp(T, 0);
        std::vector<float> ap(T, 0.0f);
        for (size_t k = 0; k < T; ++k) {
            eval::PrCurve c;
            int64_t hits = 0, seen = 0;
            for (size_t i : ord) {
                hits += (row.matches.tp[i] >> k) & 1u;
                ++seen;
                c.precision.push_back(double(hits) / double(seen));
                c.recall.push_back(s.gt.empty() ? 0.0 : double(hits) / double(s.gt.size()));
                c.score.push_back(row.lines[i].score);
            }
            tp[k] = int32_t(hits);
            ap[k] = s.gt.empty() ? 0.0f : float(eval::averagePrecision(c));
        }
        const std::string b = "letr/" + w.rows[r].key + "/";
        const size_t kept = w.opts.keepLines < 0 ? n : std::min(n, size_t(w.opts.keepLines));
        Column& lc = w.col(b + "lines");
        Column& sc = w.col(b + "score");
        Column& tc = w.col(b + "tp_bits");
        Column& gc = w.col(b + "gt");
        for (size_t j = 0; j < kept; ++j) {
            const size_t i = ord[j];
            const auto& l = row.lines[i];
            const int16_t v[4] = {toFixed(l.x1, s.width), toFixed(l.y1, s.height), toFixed(l.x2, s.width),
                                  toFixed(l.y2, s.height)};
            lc.push(v, 4);
            sc.push(l.score);
            tc.push(row.matches.tp[i]);
            gc.push(int16_t(row.matches.nearestGt[i]));
        }
        w.lineEnd[r] += int64_t(kept);
        w.col(b + "pred_count").push(int32_t(n));
        w.col(b + "tp").push(tp.data(), T);
        w.col(b + "ap").push(ap.data(), T);
        w.col(b + "line_end").push(w.lineEnd[r]);
    }
    w.afterAdd();
}

void ResultsWriter::add(const ClassSampleIn& s) {
    Impl& w = *impl_;
    w.checkOpen(ResultsType::Classification);
    if (s.label < 0 || s.label >= w.numClasses)
        throw Error(w.path + ": sample " + std::to_string(s.index) + " has label " + std::to_string(s.label) +
                    " outside 0.." + std::to_string(w.numClasses - 1));
    if (s.top5.empty() || s.top5.size() > 5 || s.top5Prob.size() != s.top5.size())
        throw Error(w.path + ": sample " + std::to_string(s.index) + ": expected 1 to 5 top classes with probabilities");
    w.col("samples/index").push(s.index);
    const std::string name = s.path.empty() ? "#" + std::to_string(s.index) : s.path;
    w.pushString("samples/name", name, w.nameEnd);
    w.pushString("samples/path", relativeTo(s.path, w.sourceRoot), w.pathEnd);
    int32_t top[5] = {-1, -1, -1, -1, -1};
    float prob[5] = {0, 0, 0, 0, 0};
    for (size_t i = 0; i < s.top5.size(); ++i) {
        top[i] = int32_t(s.top5[i]);
        prob[i] = s.top5Prob[i];
    }
    w.col("class/label").push(int32_t(s.label));
    w.col("class/top5").push(top, 5);
    w.col("class/top5_prob").push(prob, 5);
    w.col("class/label_prob").push(s.labelProb);
    w.afterAdd();
}

void ResultsWriter::add(const EpisodeIn& e) {
    Impl& w = *impl_;
    w.checkOpen(ResultsType::FewShot);
    if (e.setting < 0 || e.setting >= int64_t(w.settings.size()))
        throw Error(w.path + ": episode of setting " + std::to_string(e.setting) + ", the file has " +
                    std::to_string(w.settings.size()));
    if (e.predicted.size() != e.query.size())
        throw Error(w.path + ": episode " + std::to_string(e.episode) + " has " + std::to_string(e.query.size()) +
                    " queries but " + std::to_string(e.predicted.size()) + " predictions");
    w.col("samples/index").push(e.episode);
    w.pushString("samples/name", "", w.nameEnd);
    w.pushString("samples/path", "", w.pathEnd);
    w.col("fewshot/classes").push(e.classes.data(), e.classes.size());
    w.col("fewshot/support").push(e.support.data(), e.support.size());
    w.col("fewshot/query").push(e.query.data(), e.query.size());
    for (int64_t p : e.predicted) w.col("fewshot/predicted").push(int16_t(p));
    w.classEnd += int64_t(e.classes.size());
    w.supportEnd += int64_t(e.support.size());
    w.queryEnd += int64_t(e.query.size());
    w.col("fewshot/setting").push(int32_t(e.setting));
    w.col("fewshot/episode").push(e.episode);
    w.col("fewshot/accuracy").push(e.accuracy);
    w.col("fewshot/class_end").push(w.classEnd);
    w.col("fewshot/support_end").push(w.supportEnd);
    w.col("fewshot/query_end").push(w.queryEnd);
    w.afterAdd();
}

namespace {

torch::Tensor doubles(const std::vector<double>& v) {
    return torch::tensor(torch::ArrayRef<double>(v.data(), v.size()), torch::kDouble).clone();
}
torch::Tensor int64s(const std::vector<int64_t>& v) {
    return torch::tensor(torch::ArrayRef<int64_t>(v.data(), v.size()), torch::kLong).clone();
}

void putCurve(h5::File& f, const std::string& base, const eval::PrCurve& c) {
    const eval::PrCurve s = c.subsampled(512);
    f.writeTensor(base + "/precision", doubles(s.precision));
    f.writeTensor(base + "/recall", doubles(s.recall));
    f.writeTensor(base + "/score", doubles(s.score));
}

} // namespace

void ResultsWriter::finish(const LetrSummary& summary, Status status) {
    Impl& w = *impl_;
    w.checkOpen(ResultsType::Letr);
    if (summary.metrics.size() != w.rows.size())
        throw Error(w.path + ": the summary has " + std::to_string(summary.metrics.size()) + " rows, the file " +
                    std::to_string(w.rows.size()));
    w.close(status, [&](h5::File& f) {
        for (size_t r = 0; r < w.rows.size(); ++r) {
            const eval::LineMetrics& m = summary.metrics[r];
            const std::string b = "summary/" + w.rows[r].key;
            f.writeTensor(b + "/sAP", doubles(m.sAP));
            f.writeTensor(b + "/sF", doubles(m.sF));
            f.writeTensor(b + "/APH", torch::tensor(m.APH, torch::kDouble));
            f.writeTensor(b + "/FH", torch::tensor(m.FH, torch::kDouble));
            f.writeTensor(b + "/counts", int64s({m.images, m.gtLines, m.predLines}));
            for (size_t k = 0; k < m.thresholds.size() && k < m.curves.size(); ++k)
                putCurve(f, b + "/pr" + thresholdName(m.thresholds[k]), m.curves[k]);
            putCurve(f, b + "/prH", m.heatmapCurve);
        }
    });
}

void ResultsWriter::finish(const ClassSummary& s, Status status) {
    Impl& w = *impl_;
    w.checkOpen(ResultsType::Classification);
    const int64_t C = w.numClasses;
    if (int64_t(s.confusion.size()) != C * C)
        throw Error(w.path + ": the confusion matrix has " + std::to_string(s.confusion.size()) + " cells, expected " +
                    std::to_string(C * C));
    w.close(status, [&](h5::File& f) {
        f.writeTensor("summary/accuracy", torch::tensor(s.accuracy, torch::kDouble));
        f.writeTensor("summary/top5_accuracy", torch::tensor(s.top5Accuracy, torch::kDouble));
        f.writeTensor("summary/counts", int64s({s.samples, s.correct, s.top5Correct}));
        f.writeTensor("summary/confusion", int64s(s.confusion).view({C, C}));
    });
}

void ResultsWriter::finish(const std::vector<FewShotSummaryRow>& s, Status status) {
    Impl& w = *impl_;
    w.checkOpen(ResultsType::FewShot);
    if (s.size() != w.settings.size())
        throw Error(w.path + ": the summary has " + std::to_string(s.size()) + " settings, the file " +
                    std::to_string(w.settings.size()));
    std::vector<double> mean, ci;
    std::vector<int64_t> done;
    for (const auto& r : s) {
        mean.push_back(r.mean);
        ci.push_back(r.ci95);
        done.push_back(r.episodesDone);
    }
    w.close(status, [&](h5::File& f) {
        f.writeTensor("summary/mean", doubles(mean));
        f.writeTensor("summary/ci95", doubles(ci));
        f.writeTensor("summary/episodes", int64s(done));
    });
}

void ResultsWriter::abandon() {
    Impl& w = *impl_;
    if (w.closed) return;
    w.flush();
    w.cols.clear();
    w.state.reset();
    w.file->close();
    w.file.reset();
    w.closed = true;
}

// ================================= reader ===================================================

std::string MissingSources::describe() const {
    std::string s;
    if (datasetMissing) s += "the dataset " + datasetPath + " is not there";
    if (missingFiles > 0) {
        if (!s.empty()) s += "; ";
        s += std::to_string(missingFiles) + (missingFiles == 1 ? " sample file is" : " sample files are") + " missing";
    }
    if (s.empty()) return "every source is in place";
    return s + " (the sources moved? point to their new folder)";
}

struct ResultsFile::Impl {
    std::string path;
    ResultsHeader header;
    std::string originalRoot;
    Status status = Status::Running;
    int64_t size = 0, expected = -1;
    std::unique_ptr<h5::File> file;
    mutable std::mutex mutex;   // hyperslab reads and the dataset cache

    std::vector<int64_t> index, nameEnd, pathEnd;
    std::vector<char> names, paths;
    // LETR
    std::vector<LetrRowInfo> rows;
    std::vector<double> thresholds;
    int64_t keepLines = -1;
    std::vector<int32_t> width, height, gtCount;
    std::vector<int64_t> gtEnd;
    struct Row {
        std::vector<int32_t> predCount;
        std::vector<std::vector<int32_t>> tp;   // [T][S]
        std::vector<std::vector<float>> ap;     // [T][S]
        std::vector<int64_t> lineEnd;
        std::unique_ptr<h5::Dataset> lines, score, tpBits, gt;
    };
    std::vector<Row> letr;
    std::unique_ptr<h5::Dataset> gtLines;
    LetrSummary letrSummary;
    // classification
    std::vector<std::string> classNames;
    std::vector<int64_t> labels, predicted;
    std::vector<float> labelProb;
    std::vector<int32_t> top5;
    std::vector<float> top5Prob;
    ClassSummary classSummary;
    // few-shot
    std::vector<FewShotSetting> settings;
    std::vector<FewShotSummaryRow> fewShotSummary;
    std::vector<int64_t> episodeSetting, episodeNumber;
    std::vector<double> episodeAccuracy;
    std::vector<int64_t> classEnd, supportEnd, queryEnd;
    std::unique_ptr<h5::Dataset> fsClasses, fsSupport, fsQuery, fsPredicted;
    // images
    mutable std::shared_ptr<data::LineDataset> lineData;
    mutable std::shared_ptr<const data::ClassificationDataset> classData;

    [[noreturn]] void fail(const std::string& what) const { throw Error(path + ": " + what); }

    // The first `size` rows of a per-sample dataset (checking it has them).
    template <class T>
    std::vector<T> column(const std::string& name, hid_t memType, int64_t width = 0) const {
        if (!file->hasDataset(name)) fail("no dataset '" + name + "' (not a complete results file)");
        h5::Dataset ds = file->dataset(name);
        const auto shape = ds.shape();
        if (shape.empty() || (width > 0 && (shape.size() != 2 || shape[1] != width)) || (width == 0 && shape.size() != 1))
            fail("dataset '" + name + "' has shape " + h5::shapeString(shape) + ", expected [" +
                 std::to_string(size) + (width > 0 ? "," + std::to_string(width) : "") + "]");
        if (shape[0] < size)
            fail("dataset '" + name + "' has " + std::to_string(shape[0]) + " rows, the file says " +
                 std::to_string(size) + " samples (truncated?)");
        std::vector<T> out(static_cast<size_t>(size * std::max<int64_t>(width, 1)));
        replay::readRows(ds, memType, 0, size, out.data());
        return out;
    }
    std::unique_ptr<h5::Dataset> itemData(const std::string& name, int64_t needRows) const {
        if (!file->hasDataset(name)) fail("no dataset '" + name + "'");
        auto ds = std::make_unique<h5::Dataset>(file->dataset(name));
        const auto shape = ds->shape();
        if (shape.empty() || shape[0] < needRows)
            fail("dataset '" + name + "' has " + (shape.empty() ? std::string("no") : std::to_string(shape[0])) +
                 " rows, its index needs " + std::to_string(needRows) + " (truncated?)");
        return ds;
    }
    void checkEnds(const std::vector<int64_t>& ends, const std::string& name) const {
        int64_t prev = 0;
        for (size_t i = 0; i < ends.size(); ++i) {
            if (ends[i] < prev) fail("dataset '" + name + "' decreases at sample " + std::to_string(i) + " (corrupt)");
            prev = ends[i];
        }
    }
    static int64_t startOf(const std::vector<int64_t>& ends, int64_t i) { return i > 0 ? ends[size_t(i - 1)] : 0; }
    std::string ragged(const std::vector<char>& bytes, const std::vector<int64_t>& ends, int64_t i) const {
        const int64_t a = startOf(ends, i), b = ends[size_t(i)];
        return std::string(bytes.data() + a, bytes.data() + b);
    }
    void checkIndex(int64_t i) const {
        if (i < 0 || i >= size)
            throw Error(path + ": sample " + std::to_string(i) + " is out of range (the file has " + std::to_string(size) + ")");
    }

    void load();
    void loadLetr();
    void loadClassification();
    void loadFewShot();
};

namespace {

std::string attrOr(const h5::Object& o, const std::string& name, const std::string& dflt = "") {
    return o.hasAttr(name) ? o.attrString(name) : dflt;
}

nlohmann::json jsonAttr(const h5::Object& o, const std::string& name, const std::string& file) {
    if (!o.hasAttr(name)) throw Error(file + ": no '" + name + "' attribute (not a complete results file)");
    try {
        return nlohmann::json::parse(o.attrString(name));
    } catch (const nlohmann::json::exception& e) {
        throw Error(file + ": attribute '" + name + "' is not valid JSON (" + e.what() + ")");
    }
}

std::vector<double> readDoubles(const h5::File& f, const std::string& name) {
    const torch::Tensor t = f.dataset(name).read(torch::kDouble).contiguous();
    return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
}
std::vector<int64_t> readInt64s(const h5::File& f, const std::string& name) {
    const torch::Tensor t = f.dataset(name).read(torch::kLong).contiguous();
    return std::vector<int64_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
}
eval::PrCurve readCurve(const h5::File& f, const std::string& base) {
    eval::PrCurve c;
    if (!f.hasGroup(base)) return c;
    c.precision = readDoubles(f, base + "/precision");
    c.recall = readDoubles(f, base + "/recall");
    c.score = readDoubles(f, base + "/score");
    return c;
}

} // namespace

void ResultsFile::Impl::load() {
    h5::silenceErrors();
    file = std::make_unique<h5::File>(h5::File::open(path, h5::File::Mode::Read));
    const auto h = h5::readHeader(*file);
    if (!h) throw Error(path + " is not a Glimpse file (no 'kind' attribute); expected a results file (" + kKind + ")");
    if (h->kind != kKind) throw Error(path + " is a " + h->kind + ", expected a results file (" + kKind + ")");
    if (h->formatVersion != kFormatVersion)
        throw Error(path + " has results format version " + std::to_string(h->formatVersion) + "; this Glimpse reads version " +
                    std::to_string(kFormatVersion) +
                    (h->formatVersion > kFormatVersion ? " (written by a newer Glimpse)" : ""));
    const h5::File& f = *file;
    header.type = parseType(attrOr(f, "type"), path);
    header.family = attrOr(f, "family");
    header.command = attrOr(f, "command");
    header.checkpoint = attrOr(f, "checkpoint");
    header.createdAt = f.hasAttr("created_at") ? f.attrDouble("created_at") : 0;
    header.source.spec = attrOr(f, "source_spec");
    header.source.root = attrOr(f, "source_root");
    header.source.split = attrOr(f, "source_split");
    originalRoot = header.source.root;
    header.config = jsonAttr(f, "config", path);
    expected = f.hasAttr("expected_samples") ? f.attrInt("expected_samples") : -1;
    if (!f.hasDataset("state")) fail("no dataset 'state' (not a complete results file)");
    const torch::Tensor st = f.dataset("state").read(torch::kLong, {2});
    const int64_t code = st[0].item<int64_t>();
    if (code < 0 || code > 2) fail("state " + std::to_string(code) + " is not 0, 1 or 2 (corrupt)");
    status = code == 2 ? Status::Complete : code == 1 ? Status::Stopped : Status::Running;
    size = st[1].item<int64_t>();
    if (size < 0) fail("negative sample count (corrupt)");
    index = column<int64_t>("samples/index", H5T_NATIVE_INT64);
    nameEnd = column<int64_t>("samples/name_end", H5T_NATIVE_INT64);
    pathEnd = column<int64_t>("samples/path_end", H5T_NATIVE_INT64);
    checkEnds(nameEnd, "samples/name_end");
    checkEnds(pathEnd, "samples/path_end");
    names.resize(size_t(size ? nameEnd.back() : 0));
    paths.resize(size_t(size ? pathEnd.back() : 0));
    replay::readRows(*itemData("samples/name", int64_t(names.size())), H5T_NATIVE_CHAR, 0, int64_t(names.size()), names.data());
    replay::readRows(*itemData("samples/path", int64_t(paths.size())), H5T_NATIVE_CHAR, 0, int64_t(paths.size()), paths.data());
    if (header.type == ResultsType::Letr) loadLetr();
    else if (header.type == ResultsType::Classification) loadClassification();
    else loadFewShot();
}

void ResultsFile::Impl::loadLetr() {
    const h5::File& f = *file;
    const nlohmann::json rj = jsonAttr(f, "rows", path);
    if (!rj.is_array() || rj.empty()) fail("attribute 'rows' is not a list of rows");
    for (const auto& r : rj) {
        if (!r.is_object() || !r.contains("key") || !r["key"].is_string())
            fail("attribute 'rows' has an entry without a key");
        rows.push_back({r["key"].get<std::string>(), r.value("label", r["key"].get<std::string>()), r.value("baseline", false)});
    }
    keepLines = f.hasAttr("keep_lines") ? f.attrInt("keep_lines") : -1;
    if (!f.hasDataset("letr/thresholds")) fail("no dataset 'letr/thresholds'");
    thresholds = readDoubles(f, "letr/thresholds");
    const int64_t T = int64_t(thresholds.size());
    if (T < 1 || T > 8) fail("letr/thresholds has " + std::to_string(T) + " entries, expected 1 to 8");
    width = column<int32_t>("samples/width", H5T_NATIVE_INT32);
    height = column<int32_t>("samples/height", H5T_NATIVE_INT32);
    gtEnd = column<int64_t>("samples/gt_end", H5T_NATIVE_INT64);
    checkEnds(gtEnd, "samples/gt_end");
    gtCount.resize(size_t(size));
    for (int64_t i = 0; i < size; ++i) gtCount[size_t(i)] = int32_t(gtEnd[size_t(i)] - startOf(gtEnd, i));
    gtLines = itemData("gt/lines", size ? gtEnd.back() : 0);
    for (const auto& info : rows) {
        const std::string b = "letr/" + info.key + "/";
        Row row;
        row.predCount = column<int32_t>(b + "pred_count", H5T_NATIVE_INT32);
        const auto tp = column<int32_t>(b + "tp", H5T_NATIVE_INT32, T);
        const auto ap = column<float>(b + "ap", H5T_NATIVE_FLOAT, T);
        row.tp.assign(size_t(T), std::vector<int32_t>(size_t(size)));
        row.ap.assign(size_t(T), std::vector<float>(size_t(size)));
        for (int64_t i = 0; i < size; ++i)
            for (int64_t k = 0; k < T; ++k) {
                row.tp[size_t(k)][size_t(i)] = tp[size_t(i * T + k)];
                row.ap[size_t(k)][size_t(i)] = ap[size_t(i * T + k)];
            }
        row.lineEnd = column<int64_t>(b + "line_end", H5T_NATIVE_INT64);
        checkEnds(row.lineEnd, b + "line_end");
        const int64_t n = size ? row.lineEnd.back() : 0;
        row.lines = itemData(b + "lines", n);
        row.score = itemData(b + "score", n);
        row.tpBits = itemData(b + "tp_bits", n);
        row.gt = itemData(b + "gt", n);
        letr.push_back(std::move(row));
    }
    letrSummary.thresholds = thresholds;
    letrSummary.rows = rows;
    if (status != Status::Running && f.hasGroup("summary")) {
        for (const auto& info : rows) {
            const std::string b = "summary/" + info.key;
            eval::LineMetrics m;
            m.thresholds = thresholds;
            m.sAP = readDoubles(f, b + "/sAP");
            m.sF = readDoubles(f, b + "/sF");
            m.APH = f.dataset(b + "/APH").read(torch::kDouble).item<double>();
            m.FH = f.dataset(b + "/FH").read(torch::kDouble).item<double>();
            const auto counts = readInt64s(f, b + "/counts");
            if (counts.size() != 3 || m.sAP.size() != size_t(T) || m.sF.size() != size_t(T))
                fail("summary of row " + info.key + " has the wrong number of values");
            m.images = counts[0];
            m.gtLines = counts[1];
            m.predLines = counts[2];
            for (double t : thresholds) m.curves.push_back(readCurve(f, b + "/pr" + thresholdName(t)));
            m.heatmapCurve = readCurve(f, b + "/prH");
            letrSummary.metrics.push_back(std::move(m));
        }
    }
}

void ResultsFile::Impl::loadClassification() {
    const h5::File& f = *file;
    const nlohmann::json names = jsonAttr(f, "class_names", path);
    if (!names.is_array() || names.empty()) fail("attribute 'class_names' is not a list of names");
    for (const auto& n : names) classNames.push_back(n.is_string() ? n.get<std::string>() : n.dump());
    const int64_t C = int64_t(classNames.size());
    const auto lab = column<int32_t>("class/label", H5T_NATIVE_INT32);
    top5 = column<int32_t>("class/top5", H5T_NATIVE_INT32, 5);
    top5Prob = column<float>("class/top5_prob", H5T_NATIVE_FLOAT, 5);
    labelProb = column<float>("class/label_prob", H5T_NATIVE_FLOAT);
    labels.assign(lab.begin(), lab.end());
    predicted.resize(size_t(size));
    for (int64_t i = 0; i < size; ++i) {
        predicted[size_t(i)] = top5[size_t(i * 5)];
        if (labels[size_t(i)] < 0 || labels[size_t(i)] >= C || predicted[size_t(i)] < 0 || predicted[size_t(i)] >= C)
            fail("sample " + std::to_string(i) + " has a class outside 0.." + std::to_string(C - 1) + " (corrupt)");
    }
    classSummary.classNames = classNames;
    if (status != Status::Running && f.hasGroup("summary")) {
        classSummary.accuracy = f.dataset("summary/accuracy").read(torch::kDouble).item<double>();
        classSummary.top5Accuracy = f.dataset("summary/top5_accuracy").read(torch::kDouble).item<double>();
        const auto counts = readInt64s(f, "summary/counts");
        if (counts.size() != 3) fail("summary/counts: expected 3 values");
        classSummary.samples = counts[0];
        classSummary.correct = counts[1];
        classSummary.top5Correct = counts[2];
        classSummary.confusion = readInt64s(f, "summary/confusion");
        if (int64_t(classSummary.confusion.size()) != C * C) fail("summary/confusion: expected " + std::to_string(C) + " x " + std::to_string(C));
    } else {
        // A partial file: the summary of the samples it holds.
        classSummary.samples = size;
        classSummary.confusion.assign(size_t(C * C), 0);
        for (int64_t i = 0; i < size; ++i) {
            const int64_t l = labels[size_t(i)], p = predicted[size_t(i)];
            ++classSummary.confusion[size_t(l * C + p)];
            classSummary.correct += l == p;
            for (int k = 0; k < 5; ++k) classSummary.top5Correct += top5[size_t(i * 5 + k)] == l;
        }
        classSummary.accuracy = size ? double(classSummary.correct) / double(size) : 0;
        classSummary.top5Accuracy = size ? double(classSummary.top5Correct) / double(size) : 0;
    }
}

void ResultsFile::Impl::loadFewShot() {
    const h5::File& f = *file;
    const nlohmann::json sj = jsonAttr(f, "settings", path);
    if (!sj.is_array() || sj.empty()) fail("attribute 'settings' is not a list");
    for (const auto& s : sj) {
        FewShotSetting x;
        x.ways = s.value("ways", int64_t(0));
        x.shots = s.value("shots", int64_t(0));
        x.queries = s.value("queries", int64_t(0));
        x.episodes = s.value("episodes", int64_t(0));
        x.seed = s.value("seed", uint64_t(0));
        settings.push_back(x);
    }
    if (f.hasAttr("class_names"))
        for (const auto& n : jsonAttr(f, "class_names", path)) classNames.push_back(n.is_string() ? n.get<std::string>() : n.dump());
    const auto set = column<int32_t>("fewshot/setting", H5T_NATIVE_INT32);
    episodeSetting.assign(set.begin(), set.end());
    for (int64_t s : episodeSetting)
        if (s < 0 || s >= int64_t(settings.size())) fail("fewshot/setting names a setting that does not exist (corrupt)");
    episodeNumber = column<int64_t>("fewshot/episode", H5T_NATIVE_INT64);
    episodeAccuracy = column<double>("fewshot/accuracy", H5T_NATIVE_DOUBLE);
    classEnd = column<int64_t>("fewshot/class_end", H5T_NATIVE_INT64);
    supportEnd = column<int64_t>("fewshot/support_end", H5T_NATIVE_INT64);
    queryEnd = column<int64_t>("fewshot/query_end", H5T_NATIVE_INT64);
    checkEnds(classEnd, "fewshot/class_end");
    checkEnds(supportEnd, "fewshot/support_end");
    checkEnds(queryEnd, "fewshot/query_end");
    fsClasses = itemData("fewshot/classes", size ? classEnd.back() : 0);
    fsSupport = itemData("fewshot/support", size ? supportEnd.back() : 0);
    fsQuery = itemData("fewshot/query", size ? queryEnd.back() : 0);
    fsPredicted = itemData("fewshot/predicted", size ? queryEnd.back() : 0);
    const bool haveSummary = status != Status::Running && f.hasGroup("summary");
    std::vector<double> mean, ci;
    std::vector<int64_t> done;
    if (haveSummary) {
        mean = readDoubles(f, "summary/mean");
        ci = readDoubles(f, "summary/ci95");
        done = readInt64s(f, "summary/episodes");
        if (mean.size() != settings.size() || ci.size() != settings.size() || done.size() != settings.size())
            fail("the summary has a different number of settings than the file");
    }
    for (size_t k = 0; k < settings.size(); ++k) {
        FewShotSummaryRow r;
        r.setting = settings[k];
        if (haveSummary) {
            r.mean = mean[k];
            r.ci95 = ci[k];
            r.episodesDone = done[k];
        } else {   // partial: from the episodes held
            std::vector<double> acc;
            for (int64_t i = 0; i < size; ++i)
                if (episodeSetting[size_t(i)] == int64_t(k)) acc.push_back(episodeAccuracy[size_t(i)]);
            double sum = 0;
            for (double a : acc) sum += a;
            r.episodesDone = int64_t(acc.size());
            r.mean = acc.empty() ? 0 : sum / double(acc.size());
            r.ci95 = data::confidence95(acc);
        }
        fewShotSummary.push_back(r);
    }
}

ResultsFile::ResultsFile(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ResultsFile::~ResultsFile() = default;

std::shared_ptr<ResultsFile> ResultsFile::open(const std::string& path) {
    auto impl = std::make_unique<Impl>();
    impl->path = path;
    impl->load();
    return std::shared_ptr<ResultsFile>(new ResultsFile(std::move(impl)));
}

const std::string& ResultsFile::path() const { return impl_->path; }
const ResultsHeader& ResultsFile::header() const { return impl_->header; }
Status ResultsFile::status() const { return impl_->status; }
int64_t ResultsFile::size() const { return impl_->size; }
int64_t ResultsFile::expectedSamples() const { return impl_->expected; }

std::string ResultsFile::statusLine() const {
    const std::string unit = type() == ResultsType::FewShot ? " episodes" : " samples";
    const std::string n = std::to_string(size());
    switch (status()) {
    case Status::Complete: return "complete: " + n + unit;
    case Status::Stopped:
        return "stopped: " + n + (expectedSamples() > 0 ? " of " + std::to_string(expectedSamples()) : std::string()) +
               unit + " (the eval was stopped; the summary covers these)";
    case Status::Running:
        return "partial: " + n + (expectedSamples() > 0 ? " of " + std::to_string(expectedSamples()) : std::string()) +
               unit + " (the eval did not finish: still running, or killed; no summary was written)";
    }
    return "";
}

const SourceInfo& ResultsFile::source() const { return impl_->header.source; }
int64_t ResultsFile::datasetIndex(int64_t i) const {
    impl_->checkIndex(i);
    return impl_->index[size_t(i)];
}
std::string ResultsFile::sampleName(int64_t i) const {
    impl_->checkIndex(i);
    return impl_->ragged(impl_->names, impl_->nameEnd, i);
}
std::string ResultsFile::samplePath(int64_t i) const {
    impl_->checkIndex(i);
    const std::string p = impl_->ragged(impl_->paths, impl_->pathEnd, i);
    if (p.empty()) return "";
    const fs::path fp(p);
    if (fp.is_absolute() || source().root.empty()) return p;
    return (fs::path(source().root) / fp).string();
}

MissingSources ResultsFile::missingSources() const {
    MissingSources m;
    const std::string sp = specPath(source().spec);
    std::error_code ec;
    if (!sp.empty()) {
        m.datasetPath = sp;
        m.datasetMissing = !fs::exists(sp, ec);
    }
    for (int64_t i = 0; i < size(); ++i) {
        const std::string p = samplePath(i);
        if (p.empty() || fs::exists(p, ec)) continue;
        ++m.missingFiles;
        if (m.examples.size() < 20) m.examples.push_back(i);
    }
    return m;
}

void ResultsFile::remapSourceRoot(const std::string& newRoot) {
    std::error_code ec;
    if (!fs::is_directory(newRoot, ec)) throw Error(newRoot + " is not a folder (remapping the sources of " + path() + ")");
    const std::string nr = fs::absolute(newRoot, ec).lexically_normal().string();
    std::lock_guard<std::mutex> lock(impl_->mutex);
    SourceInfo& s = impl_->header.source;
    const std::string old = s.root;
    if (!old.empty()) {
        // The spec's path under the old root moves with it.
        const std::string sp = specPath(s.spec);
        if (!sp.empty()) {
            const fs::path rel = fs::absolute(sp, ec).lexically_normal().lexically_relative(old);
            if (!rel.empty() && *rel.begin() != "..") {
                const std::string moved = (fs::path(nr) / rel).lexically_normal().string();
                const std::string prefix = s.spec.substr(0, s.spec.size() - sp.size());
                s.spec = prefix + (rel == "." ? nr : moved);
            }
        }
        // Absolute sample paths under the old root too.
        std::vector<char> paths;
        std::vector<int64_t> ends;
        for (int64_t i = 0; i < impl_->size; ++i) {
            std::string p = impl_->ragged(impl_->paths, impl_->pathEnd, i);
            if (!p.empty() && fs::path(p).is_absolute()) {
                const fs::path rel = fs::path(p).lexically_relative(old);
                if (!rel.empty() && *rel.begin() != "..") p = (fs::path(nr) / rel).string();
            }
            paths.insert(paths.end(), p.begin(), p.end());
            ends.push_back(int64_t(paths.size()));
        }
        impl_->paths = std::move(paths);
        impl_->pathEnd = std::move(ends);
    }
    s.root = nr;
    impl_->lineData.reset();
    impl_->classData.reset();
}

cv::Mat ResultsFile::image(int64_t i) const {
    impl_->checkIndex(i);
    const std::string p = samplePath(i);
    if (!p.empty()) return loadImageRGB(p);
    return datasetImage(datasetIndex(i));
}

cv::Mat ResultsFile::datasetImage(int64_t index) const {
    const SourceInfo src = source();
    std::unique_lock<std::mutex> lock(impl_->mutex);
    if (type() == ResultsType::Letr) {
        if (!impl_->lineData) impl_->lineData = data::openLineDataset(src.spec);
        auto ds = impl_->lineData;
        lock.unlock();
        if (index < 0 || index >= ds->size())
            throw Error(path() + ": sample index " + std::to_string(index) + " is outside " + src.spec + " (" +
                        std::to_string(ds->size()) + " images)");
        return ds->get(index).image;
    }
    if (!impl_->classData) {
        if (type() == ResultsType::Classification) {
            auto splits = data::openClassificationDataset(src.spec);
            impl_->classData = std::shared_ptr<const data::ClassificationDataset>(
                src.split == "train" ? std::move(splits.train) : std::move(splits.val));
        } else {
            const int size = impl_->header.config.value("image_size", 32);
            auto splits = data::openFewShotDataset(src.spec, size);
            impl_->classData = src.split == "base" ? splits.base : src.split == "val" ? splits.val : splits.novel;
        }
    }
    auto ds = impl_->classData;
    lock.unlock();
    if (index < 0 || index >= ds->size())
        throw Error(path() + ": sample index " + std::to_string(index) + " is outside " + src.spec + " " + src.split +
                    " (" + std::to_string(ds->size()) + " images)");
    return ds->get(index).image;
}

// ---- LETR ----

const std::vector<LetrRowInfo>& ResultsFile::letrRows() const { return impl_->rows; }
const std::vector<double>& ResultsFile::thresholds() const { return impl_->thresholds; }
const LetrSummary& ResultsFile::letrSummary() const { return impl_->letrSummary; }
int64_t ResultsFile::keepLines() const { return impl_->keepLines; }
int ResultsFile::width(int64_t i) const {
    impl_->checkIndex(i);
    return impl_->width.empty() ? 0 : impl_->width[size_t(i)];
}
int ResultsFile::height(int64_t i) const {
    impl_->checkIndex(i);
    return impl_->height.empty() ? 0 : impl_->height[size_t(i)];
}
const std::vector<int32_t>& ResultsFile::gtCount() const { return impl_->gtCount; }

namespace {
void checkRow(const ResultsFile::Impl& m, size_t row, size_t t) {
    if (row >= m.letr.size())
        throw Error(m.path + ": row " + std::to_string(row) + " is out of range (" + std::to_string(m.letr.size()) + " rows)");
    if (t >= m.thresholds.size())
        throw Error(m.path + ": threshold " + std::to_string(t) + " is out of range (" + std::to_string(m.thresholds.size()) + ")");
}
} // namespace

const std::vector<int32_t>& ResultsFile::predCount(size_t row) const {
    checkRow(*impl_, row, 0);
    return impl_->letr[row].predCount;
}
const std::vector<int32_t>& ResultsFile::tpCount(size_t row, size_t t) const {
    checkRow(*impl_, row, t);
    return impl_->letr[row].tp[t];
}
const std::vector<float>& ResultsFile::sampleAp(size_t row, size_t t) const {
    checkRow(*impl_, row, t);
    return impl_->letr[row].ap[t];
}

std::vector<eval::GtLine> ResultsFile::gtLines(int64_t i) const {
    impl_->checkIndex(i);
    if (type() != ResultsType::Letr) return {};
    const int64_t a = Impl::startOf(impl_->gtEnd, i), n = impl_->gtEnd[size_t(i)] - a;
    std::vector<int16_t> v(static_cast<size_t>(n * 4));
    {
        std::lock_guard<std::mutex> lock(impl_->mutex);
        replay::readRows(*impl_->gtLines, H5T_NATIVE_INT16, a, n, v.data());
    }
    const int W = width(i), H = height(i);
    std::vector<eval::GtLine> out(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k)
        out[size_t(k)] = {fromFixed(v[size_t(4 * k)], W), fromFixed(v[size_t(4 * k + 1)], H),
                          fromFixed(v[size_t(4 * k + 2)], W), fromFixed(v[size_t(4 * k + 3)], H)};
    return out;
}

std::vector<LineRecord> ResultsFile::lines(size_t row, int64_t i) const {
    checkRow(*impl_, row, 0);
    impl_->checkIndex(i);
    const Impl::Row& r = impl_->letr[row];
    const int64_t a = Impl::startOf(r.lineEnd, i), n = r.lineEnd[size_t(i)] - a;
    std::vector<int16_t> xy(static_cast<size_t>(n * 4)), gt(static_cast<size_t>(n));
    std::vector<float> score(static_cast<size_t>(n));
    std::vector<uint8_t> bits(static_cast<size_t>(n));
    {
        std::lock_guard<std::mutex> lock(impl_->mutex);
        replay::readRows(*r.lines, H5T_NATIVE_INT16, a, n, xy.data());
        replay::readRows(*r.score, H5T_NATIVE_FLOAT, a, n, score.data());
        replay::readRows(*r.tpBits, H5T_NATIVE_UINT8, a, n, bits.data());
        replay::readRows(*r.gt, H5T_NATIVE_INT16, a, n, gt.data());
    }
    const int W = width(i), H = height(i);
    std::vector<LineRecord> out(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) {
        LineRecord& l = out[size_t(k)];
        l.x1 = fromFixed(xy[size_t(4 * k)], W);
        l.y1 = fromFixed(xy[size_t(4 * k + 1)], H);
        l.x2 = fromFixed(xy[size_t(4 * k + 2)], W);
        l.y2 = fromFixed(xy[size_t(4 * k + 3)], H);
        l.score = score[size_t(k)];
        l.tp = bits[size_t(k)];
        l.gt = gt[size_t(k)];
    }
    return out;
}

bool ResultsFile::linesComplete(size_t row, int64_t i) const {
    checkRow(*impl_, row, 0);
    impl_->checkIndex(i);
    const Impl::Row& r = impl_->letr[row];
    return r.lineEnd[size_t(i)] - Impl::startOf(r.lineEnd, i) == r.predCount[size_t(i)];
}

ResultsFile::Counts ResultsFile::counts(size_t row, size_t t, int64_t i, float minScore) const {
    checkRow(*impl_, row, t);
    const std::vector<LineRecord> ls = lines(row, i);
    Counts c;
    std::vector<uint8_t> matched(size_t(gtCount()[size_t(i)]), 0);
    for (const auto& l : ls) {
        if (l.score < minScore) continue;
        if (l.isTp(t)) {
            ++c.tp;
            if (l.gt >= 0 && size_t(l.gt) < matched.size()) matched[size_t(l.gt)] = 1;
        } else {
            ++c.fp;
        }
    }
    c.missed = int64_t(matched.size()) - int64_t(std::count(matched.begin(), matched.end(), 1));
    // Lines not stored all score at most the lowest stored one: exact when none reaches minScore.
    c.exact = linesComplete(row, i) || (!ls.empty() && ls.back().score < minScore);
    return c;
}

std::vector<ResultsFile::Counts> ResultsFile::countsAll(size_t row, size_t t, float minScore) const {
    checkRow(*impl_, row, t);
    const Impl::Row& r = impl_->letr[row];
    const int64_t n = impl_->size ? r.lineEnd.back() : 0;
    std::vector<float> score(static_cast<size_t>(n));
    std::vector<uint8_t> bits(static_cast<size_t>(n));
    std::vector<int16_t> gt(static_cast<size_t>(n));
    {
        std::lock_guard<std::mutex> lock(impl_->mutex);
        replay::readRows(*r.score, H5T_NATIVE_FLOAT, 0, n, score.data());
        replay::readRows(*r.tpBits, H5T_NATIVE_UINT8, 0, n, bits.data());
        replay::readRows(*r.gt, H5T_NATIVE_INT16, 0, n, gt.data());
    }
    std::vector<Counts> out(static_cast<size_t>(impl_->size));
    std::vector<uint8_t> matched;
    for (int64_t i = 0; i < impl_->size; ++i) {
        const int64_t a = Impl::startOf(r.lineEnd, i), b = r.lineEnd[size_t(i)];
        Counts& c = out[size_t(i)];
        matched.assign(size_t(impl_->gtCount[size_t(i)]), 0);
        for (int64_t j = a; j < b; ++j) {
            if (score[size_t(j)] < minScore) break;   // stored best first
            if ((bits[size_t(j)] >> t) & 1u) {
                ++c.tp;
                const int16_t g = gt[size_t(j)];
                if (g >= 0 && size_t(g) < matched.size()) matched[size_t(g)] = 1;
            } else {
                ++c.fp;
            }
        }
        c.missed = int64_t(matched.size()) - int64_t(std::count(matched.begin(), matched.end(), 1));
        c.exact = b - a == r.predCount[size_t(i)] || (b > a && score[size_t(b - 1)] < minScore);
    }
    return out;
}

std::vector<double> ResultsFile::letrRecomputedSap(size_t row) const {
    checkRow(*impl_, row, 0);
    const Impl::Row& r = impl_->letr[row];
    const int64_t n = impl_->size ? r.lineEnd.back() : 0;
    std::vector<float> score(static_cast<size_t>(n));
    std::vector<uint8_t> bits(static_cast<size_t>(n));
    {
        std::lock_guard<std::mutex> lock(impl_->mutex);
        replay::readRows(*r.score, H5T_NATIVE_FLOAT, 0, n, score.data());
        replay::readRows(*r.tpBits, H5T_NATIVE_UINT8, 0, n, bits.data());
    }
    int64_t gtTotal = 0;
    for (int32_t g : impl_->gtCount) gtTotal += g;
    // The hits in the order LineEvaluator pooled them: sample by sample, each in score order
    // (as stored), then a stable sort by score.
    std::vector<size_t> ord(static_cast<size_t>(n));
    std::iota(ord.begin(), ord.end(), size_t(0));
    std::stable_sort(ord.begin(), ord.end(), [&](size_t a, size_t b) { return score[a] > score[b]; });
    std::vector<double> out;
    for (size_t k = 0; k < impl_->thresholds.size(); ++k) {
        eval::PrCurve c;
        int64_t tp = 0, seen = 0;
        for (size_t j : ord) {
            tp += (bits[j] >> k) & 1u;
            ++seen;
            c.precision.push_back(double(tp) / double(seen));
            c.recall.push_back(gtTotal > 0 ? double(tp) / double(gtTotal) : 0.0);
            c.score.push_back(score[j]);
        }
        out.push_back(gtTotal > 0 ? eval::averagePrecision(c) : 0.0);
    }
    return out;
}

// ---- classification ----

const std::vector<std::string>& ResultsFile::classNames() const { return impl_->classNames; }
const ClassSummary& ResultsFile::classSummary() const { return impl_->classSummary; }
const std::vector<int64_t>& ResultsFile::labels() const { return impl_->labels; }
const std::vector<int64_t>& ResultsFile::predicted() const { return impl_->predicted; }
const std::vector<float>& ResultsFile::labelProb() const { return impl_->labelProb; }
std::vector<int64_t> ResultsFile::top5(int64_t i) const {
    impl_->checkIndex(i);
    std::vector<int64_t> out;
    for (int k = 0; k < 5 && size_t(i * 5 + k) < impl_->top5.size(); ++k)
        if (impl_->top5[size_t(i * 5 + k)] >= 0) out.push_back(impl_->top5[size_t(i * 5 + k)]);
    return out;
}
std::vector<float> ResultsFile::top5Prob(int64_t i) const {
    impl_->checkIndex(i);
    std::vector<float> out;
    for (int k = 0; k < 5 && size_t(i * 5 + k) < impl_->top5.size(); ++k)
        if (impl_->top5[size_t(i * 5 + k)] >= 0) out.push_back(impl_->top5Prob[size_t(i * 5 + k)]);
    return out;
}

// ---- few-shot ----

const std::vector<FewShotSetting>& ResultsFile::settings() const { return impl_->settings; }
const std::vector<FewShotSummaryRow>& ResultsFile::fewShotSummary() const { return impl_->fewShotSummary; }
const std::vector<int64_t>& ResultsFile::episodeSetting() const { return impl_->episodeSetting; }
const std::vector<double>& ResultsFile::episodeAccuracy() const { return impl_->episodeAccuracy; }

EpisodeIn ResultsFile::episode(int64_t i) const {
    impl_->checkIndex(i);
    if (type() != ResultsType::FewShot) throw Error(path() + " is not a few-shot results file");
    const Impl& m = *impl_;
    EpisodeIn e;
    e.setting = m.episodeSetting[size_t(i)];
    e.episode = m.episodeNumber[size_t(i)];
    e.accuracy = m.episodeAccuracy[size_t(i)];
    auto take = [&](const h5::Dataset& ds, const std::vector<int64_t>& ends, std::vector<int64_t>& out) {
        const int64_t a = Impl::startOf(ends, i), n = ends[size_t(i)] - a;
        out.resize(size_t(n));
        replay::readRows(ds, H5T_NATIVE_INT64, a, n, out.data());
    };
    std::lock_guard<std::mutex> lock(impl_->mutex);
    take(*m.fsClasses, m.classEnd, e.classes);
    take(*m.fsSupport, m.supportEnd, e.support);
    take(*m.fsQuery, m.queryEnd, e.query);
    take(*m.fsPredicted, m.queryEnd, e.predicted);
    return e;
}

// ---- glimpse info ----

std::string describeResults(const std::string& path) {
    const auto r = ResultsFile::open(path);
    std::ostringstream out;
    char buf[256];
    const ResultsHeader& h = r->header();
    out << "  results: " << typeName(h.type) << " (" << h.family << "), " << r->statusLine() << "\n";
    if (!h.command.empty()) out << "  command: " << h.command << "\n";
    if (!h.checkpoint.empty()) out << "  checkpoint: " << h.checkpoint << "\n";
    out << "  source: " << h.source.spec << (h.source.split.empty() ? "" : " (" + h.source.split + ")");
    const std::string sp = specPath(h.source.spec);
    std::error_code ec;
    if (!sp.empty() && !fs::exists(sp, ec)) out << "  [MISSING: the sources moved? the results browser can remap them]";
    out << "\n";
    if (h.type == ResultsType::Letr) {
        out << "  rows: " << r->letrRows().size() << ", lines kept per row and sample: "
            << (r->keepLines() < 0 ? std::string("all") : std::to_string(r->keepLines())) << "\n";
        const LetrSummary& sum = r->letrSummary();
        if (sum.metrics.empty()) {
            out << "  no summary (the eval did not finish); per-sample totals of what the file holds:\n";
        }
        out << "  row       ";
        for (double t : r->thresholds()) {
            std::snprintf(buf, sizeof buf, "%8s", ("sAP" + thresholdName(t)).c_str());
            out << buf;
        }
        out << (sum.metrics.empty() ? "" : "     APH      FH") << "   lines/img      TP10/img\n";
        for (size_t row = 0; row < r->letrRows().size(); ++row) {
            std::snprintf(buf, sizeof buf, "  %-10s", r->letrRows()[row].label.c_str());
            out << buf;
            const std::vector<double> sap = sum.metrics.empty() ? std::vector<double>() : sum.metrics[row].sAP;
            for (size_t k = 0; k < r->thresholds().size(); ++k) {
                if (sap.empty()) std::snprintf(buf, sizeof buf, "%8s", "-");
                else std::snprintf(buf, sizeof buf, "%8.1f", 100 * sap[k]);
                out << buf;
            }
            if (!sum.metrics.empty()) {
                std::snprintf(buf, sizeof buf, "%8.1f%8.1f", 100 * sum.metrics[row].APH, 100 * sum.metrics[row].FH);
                out << buf;
            }
            int64_t preds = 0, tp10 = 0;
            for (int32_t p : r->predCount(row)) preds += p;
            const auto& th = r->thresholds();
            const size_t k10 = size_t(std::find(th.begin(), th.end(), 10.0) - th.begin());
            if (k10 < th.size())
                for (int32_t t : r->tpCount(row, k10)) tp10 += t;
            const double n = double(std::max<int64_t>(1, r->size()));
            std::snprintf(buf, sizeof buf, "%12.1f%14.2f\n", double(preds) / n, double(tp10) / n);
            out << buf;
        }
    } else if (h.type == ResultsType::Classification) {
        const ClassSummary& s = r->classSummary();
        std::snprintf(buf, sizeof buf, "  accuracy %.2f%% (%lld of %lld), top-5 %.2f%%, %zu classes\n", 100 * s.accuracy,
                      (long long)s.correct, (long long)s.samples, 100 * s.top5Accuracy, s.classNames.size());
        out << buf;
        // The most frequent confusions.
        const int64_t C = int64_t(s.classNames.size());
        std::vector<std::pair<int64_t, int64_t>> cells;
        for (int64_t a = 0; a < C; ++a)
            for (int64_t b = 0; b < C; ++b)
                if (a != b && s.confusion[size_t(a * C + b)] > 0) cells.push_back({s.confusion[size_t(a * C + b)], a * C + b});
        std::sort(cells.begin(), cells.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
        if (!cells.empty()) out << "  most confused (label -> predicted):";
        for (size_t k = 0; k < cells.size() && k < 5; ++k)
            out << (k ? ", " : " ") << s.classNames[size_t(cells[k].second / C)] << " -> "
                << s.classNames[size_t(cells[k].second % C)] << " (" << cells[k].first << ")";
        if (!cells.empty()) out << "\n";
    } else {
        for (const auto& row : r->fewShotSummary()) {
            std::snprintf(buf, sizeof buf, "  %lld-way %lld-shot: %.2f%% +- %.2f%% (95%% CI, %lld episodes, %lld queries per class)\n",
                          (long long)row.setting.ways, (long long)row.setting.shots, 100 * row.mean, 100 * row.ci95,
                          (long long)row.episodesDone, (long long)row.setting.queries);
            out << buf;
        }
    }
    return out.str();
}

// ---- table helpers ----

std::vector<int64_t> sortedOrder(const std::vector<double>& key, bool descending) {
    std::vector<int64_t> ord(key.size());
    std::iota(ord.begin(), ord.end(), int64_t(0));
    if (descending)
        std::stable_sort(ord.begin(), ord.end(), [&](int64_t a, int64_t b) { return key[size_t(a)] > key[size_t(b)]; });
    else
        std::stable_sort(ord.begin(), ord.end(), [&](int64_t a, int64_t b) { return key[size_t(a)] < key[size_t(b)]; });
    return ord;
}

std::vector<int64_t> filterRange(const std::vector<double>& key, double lo, double hi) {
    std::vector<int64_t> out;
    for (size_t i = 0; i < key.size(); ++i)
        if (key[i] >= lo && key[i] <= hi) out.push_back(int64_t(i));
    return out;
}

} // namespace glimpse::results
