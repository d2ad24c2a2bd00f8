#include "app/replay/replay_export.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <opencv2/imgproc.hpp>
#include <opencv2/videoio.hpp>

#include "core/error.h"
#include "core/io/atomic_file.h"

namespace glimpse::app {

namespace {

std::string number(double v) {
    if (!std::isfinite(v)) return "";
    std::ostringstream s;
    s.precision(9);
    s << v;
    return s.str();
}

// CSV field quoting (RFC 4180): quotes when the text has a comma, quote or newline.
std::string csvField(const std::string& s) {
    if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
    std::string out = "\"";
    for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
    return out + "\"";
}

constexpr replay::Series kTableSeries[] = {replay::Series::Value, replay::Series::ValuePrefix,
                                           replay::Series::RootValue, replay::Series::Lives};
constexpr replay::PerAction kTablePerAction[] = {replay::PerAction::Policy, replay::PerAction::Visits,
                                                 replay::PerAction::ChildQ, replay::PerAction::ChildPrior};

cv::Mat captionBar(const replay::EpisodeReader& reader, int64_t t, int width) {
    cv::Mat bar(18, width, CV_8UC3, cv::Scalar(20, 20, 20));
    char text[256];
    std::snprintf(text, sizeof text, "t %lld  %s  r %g  R %g", static_cast<long long>(t), reader.actionName(t).c_str(),
                  double(reader.reward(t)), reader.cumulativeReturn(t));
    cv::putText(bar, text, {4, 13}, cv::FONT_HERSHEY_SIMPLEX, 0.4, cv::Scalar(235, 235, 235), 1, cv::LINE_AA);
    return bar;
}

// One output frame (RGB): the step's frame upscaled, with its scene drawn over it, and the caption.
cv::Mat renderStep(replay::EpisodeReader& reader, const VideoExport& spec, int64_t t) {
    widgets::RgbImage img = frameImage(*reader.frame(t));
    cv::Mat rgb(img.height, img.width, CV_8UC3, img.rgb.data());
    cv::Mat up;
    cv::resize(rgb, up, {img.width * spec.scale, img.height * spec.scale}, 0, 0, cv::INTER_NEAREST);
    auto it = spec.scenes.find(t);
    if (it != spec.scenes.end()) {
        widgets::RgbImage big;
        big.width = up.cols;
        big.height = up.rows;
        big.rgb.assign(up.data, up.data + up.total() * 3);
        widgets::RgbImage drawn = widgets::renderSceneAtImageResolution(big, it->second);
        up = cv::Mat(drawn.height, drawn.width, CV_8UC3, drawn.rgb.data()).clone();
    }
    if (!spec.caption) return up;
    cv::Mat out;
    cv::vconcat(up, captionBar(reader, t, up.cols), out);
    return out;
}

} // namespace

widgets::RgbImage frameImage(const replay::Frame& frame) {
    widgets::RgbImage img;
    img.width = int(frame.width);
    img.height = int(frame.height);
    const size_t n = size_t(frame.width * frame.height);
    if (frame.channels == 3) {
        img.rgb = frame.pixels;
    } else {
        img.rgb.resize(n * 3);
        for (size_t i = 0; i < n; ++i) {
            const uint8_t g = frame.pixels[i * frame.channels];
            img.rgb[i * 3] = img.rgb[i * 3 + 1] = img.rgb[i * 3 + 2] = g;
        }
    }
    return img;
}

std::vector<std::string> stepTableHeader(const replay::EpisodeReader& reader) {
    std::vector<std::string> h = {"step", "action", "action_name", "reward", "return", "life_lost", "terminal"};
    for (replay::Series s : kTableSeries)
        if (reader.has(s)) h.push_back(replay::seriesName(s));
    for (replay::PerAction p : kTablePerAction)
        if (reader.has(p))
            for (const std::string& a : reader.actionNames()) h.push_back(std::string(replay::perActionName(p)) + "_" + a);
    return h;
}

std::vector<std::string> stepTableRow(const replay::EpisodeReader& reader, int64_t t) {
    std::vector<std::string> r = {std::to_string(t), std::to_string(reader.action(t)), reader.actionName(t),
                                  number(reader.reward(t)), number(reader.cumulativeReturn(t)),
                                  reader.lifeLost(t) ? "1" : "0", reader.isTerminal(t) ? "1" : "0"};
    for (replay::Series s : kTableSeries)
        if (reader.has(s)) r.push_back(number(reader.series(s)[size_t(t)]));
    for (replay::PerAction p : kTablePerAction)
        if (reader.has(p))
            for (float v : reader.perAction(p, t)) r.push_back(number(v));
    return r;
}

void writeStepTableCsv(const replay::EpisodeReader& reader, const std::string& path) {
    writeFileAtomically(path, [&](const std::string& tmp) {
        std::ofstream out(tmp, std::ios::binary);
        if (!out) throw Error("cannot write " + path);
        auto line = [&out](const std::vector<std::string>& fields) {
            for (size_t i = 0; i < fields.size(); ++i) out << (i ? "," : "") << csvField(fields[i]);
            out << "\n";
        };
        line(stepTableHeader(reader));
        for (int64_t t = 0; t < reader.length(); ++t) line(stepTableRow(reader, t));
        out.flush();
        if (!out) throw Error("cannot write " + path + " (disk full?)");
    });
}

bool writeEpisodeVideo(replay::EpisodeReader& reader, const VideoExport& spec, const std::atomic<bool>& cancel,
                       const std::function<void(int64_t, int64_t)>& progress) {
    const int64_t first = std::max<int64_t>(0, spec.first), last = std::min(spec.last, reader.length() - 1);
    if (last < first)
        throw Error("cannot export " + spec.path + ": the step range " + std::to_string(spec.first) + ".." +
                    std::to_string(spec.last) + " is empty (the episode has " + std::to_string(reader.length()) +
                    " steps)");
    const std::filesystem::path target(spec.path);
    const std::string tmp = (target.parent_path() / ("." + target.filename().string() + ".part.avi")).string();
    cv::VideoWriter writer;
    const int64_t total = last - first + 1;
    try {
        for (int64_t t = first; t <= last; ++t) {
            if (cancel.load()) {
                writer.release();
                std::filesystem::remove(tmp);
                return false;
            }
            cv::Mat rgb = renderStep(reader, spec, t), bgr;
            cv::cvtColor(rgb, bgr, cv::COLOR_RGB2BGR);
            if (!writer.isOpened() &&
                !writer.open(tmp, cv::VideoWriter::fourcc('M', 'J', 'P', 'G'), std::max(1.0, spec.fps), bgr.size()))
                throw Error("cannot write the video " + spec.path + " (OpenCV has no MJPG writer for it)");
            writer.write(bgr);
            if (progress) progress(t - first + 1, total);
        }
        writer.release();
        std::filesystem::rename(tmp, spec.path);
    } catch (const std::filesystem::filesystem_error& e) {
        std::error_code ec;
        std::filesystem::remove(tmp, ec);
        throw Error("cannot write the video " + spec.path + ": " + e.what());
    } catch (...) {
        writer.release();
        std::error_code ec;
        std::filesystem::remove(tmp, ec);
        throw;
    }
    return true;
}

} // namespace glimpse::app
