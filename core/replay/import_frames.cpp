// Import of a folder of PNG frames with a CSV of actions and rewards (the layout of human Atari
// gameplay datasets such as Atari-HEAD) into a Glimpse episode file.
#include <torch/torch.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <map>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "core/error.h"
#include "core/replay/import.h"

namespace fs = std::filesystem;

namespace glimpse::replay {

namespace {

std::string trim(const std::string& s) {
    size_t a = 0, b = s.size();
    while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
    while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
    return s.substr(a, b - a);
}

std::vector<std::string> splitCsv(const std::string& line) {
    std::vector<std::string> out;
    std::string cur;
    for (char c : line) {
        if (c == ',') {
            out.push_back(trim(cur));
            cur.clear();
        } else if (c != '\r') {
            cur += c;
        }
    }
    out.push_back(trim(cur));
    return out;
}

std::string upper(std::string s) {
    for (auto& c : s) c = char(std::toupper(static_cast<unsigned char>(c)));
    return s;
}

std::string findCsv(const std::string& dir) {
    for (const char* ext : {".csv", ".txt"}) {
        std::vector<std::string> found;
        for (const auto& entry : fs::directory_iterator(dir))
            if (entry.is_regular_file() && entry.path().extension() == ext) found.push_back(entry.path().string());
        if (found.size() == 1) return found.front();
        if (found.size() > 1)
            throw Error(dir + ": " + std::to_string(found.size()) + " " + ext + " files; name the one to read (--csv)");
    }
    throw Error(dir + ": no .csv or .txt file of actions and rewards in the folder; name it (--csv)");
}

int findColumn(const std::vector<std::string>& header, std::initializer_list<const char*> names) {
    for (const char* n : names)
        for (size_t i = 0; i < header.size(); ++i)
            if (header[i] == n) return int(i);
    return -1;
}

bool parseInt(const std::string& s, int64_t& v) {
    if (s.empty()) return false;
    size_t pos = 0;
    try {
        v = std::stoll(s, &pos);
    } catch (const std::exception&) {
        return false;
    }
    return pos == s.size();
}

struct Row {
    std::string frame;
    int64_t action = 0;
    float reward = 0;
    int64_t episodeId = -1;
    int terminal = -1;   // -1: no column
    int64_t lives = -1;
};

// Reads a PNG as uint8 H x W x C (C = 3 RGB, or 1 grey).
cv::Mat readImage(const std::string& file) {
    std::error_code ec;   // the non-throwing form: a CSV can name anything (fuzz finding: a name too long)
    if (!fs::exists(file, ec))
        throw Error(file + ": frame file does not exist" + (ec ? " (" + ec.message() + ")" : std::string()));
    cv::Mat m = cv::imread(file, cv::IMREAD_UNCHANGED);
    if (m.empty()) throw Error(file + ": cannot decode the image (not a PNG, or truncated)");
    if (m.depth() != CV_8U) throw Error(file + ": " + std::to_string(m.elemSize1() * 8) + "-bit image, expected 8-bit");
    if (m.channels() == 4) cv::cvtColor(m, m, cv::COLOR_BGRA2RGB);
    else if (m.channels() == 3) cv::cvtColor(m, m, cv::COLOR_BGR2RGB);
    else if (m.channels() != 1) throw Error(file + ": " + std::to_string(m.channels()) + " channels, expected 1, 3 or 4");
    return m.isContinuous() ? m : m.clone();
}

std::string describe(const cv::Mat& m) {
    return std::to_string(m.cols) + "x" + std::to_string(m.rows) + (m.channels() == 1 ? " grey" : " RGB");
}

// The columns importFrames reads (index into a row's fields, -1 when absent).
struct Columns {
    int frame = -1, action = -1, reward = -1, episode = -1, terminal = -1, lives = -1;
    int needed = 0;   // fields a row must have
};

// Reads the header (the first non-empty line) and finds the columns; errors name the CSV.
Columns readHeader(std::istream& in, const std::string& csv, const FramesImportOptions& options, int& lineNo) {
    std::string line;
    std::vector<std::string> header;
    while (header.empty() && std::getline(in, line)) {
        ++lineNo;
        if (!trim(line).empty()) header = splitCsv(line);
    }
    if (header.empty()) throw Error(csv + ": empty CSV file (expected a header line)");
    Columns c;
    c.frame = findColumn(header, {"frame_id", "frame", "filename"});
    c.action = findColumn(header, {"action"});
    c.reward = findColumn(header, {"reward", "unclipped_reward"});
    c.episode = findColumn(header, {"episode_id"});
    c.terminal = findColumn(header, {"terminal"});
    c.lives = findColumn(header, {"lives"});
    std::string missing;
    if (c.frame < 0) missing += " frame_id (or frame, filename)";
    if (c.action < 0) missing += " action";
    if (c.reward < 0) missing += " reward (or unclipped_reward)";
    if (!missing.empty()) throw Error(csv + ": the header line has no column" + missing);
    if (options.episodeId >= 0 && c.episode < 0)
        throw Error(csv + ": an episode id was asked for but the CSV has no episode_id column");
    c.needed = std::max({c.frame, c.action, c.reward, c.episode, c.terminal, c.lives}) + 1;
    return c;
}

// An action given as an id or a name; errors name the CSV line (`at`).
int64_t parseAction(const std::string& a, const std::vector<std::string>& names, const std::string& at) {
    const int64_t A = int64_t(names.size());
    int64_t action = -1;
    if (!parseInt(a, action)) {
        const auto it = std::find_if(names.begin(), names.end(), [&](const std::string& n) { return upper(n) == upper(a); });
        if (it == names.end())
            throw Error(at + ": unknown action '" + a + "' (expected an id 0.." + std::to_string(A - 1) + " or an action name)");
        action = int64_t(it - names.begin());
    }
    if (action < 0 || action >= A)
        throw Error(at + ": unknown action id " + std::to_string(action) + ", outside the " + std::to_string(A) + " actions");
    return action;
}

// One data row, or nullopt for a row of another episode than options.episodeId (not checked
// further); `at` names the CSV line in errors.
std::optional<Row> parseRow(const std::vector<std::string>& f, const Columns& c, const std::vector<std::string>& names,
                            const FramesImportOptions& options, const std::string& at) {
    if (int(f.size()) < c.needed)
        throw Error(at + ": " + std::to_string(f.size()) + " fields, expected at least " + std::to_string(c.needed) +
                    " (the columns of the header)");
    Row r;
    if (c.episode >= 0) {
        const std::string& s = f[size_t(c.episode)];
        if (s == "null" || s.empty()) r.episodeId = -1;
        else if (!parseInt(s, r.episodeId)) throw Error(at + ": episode_id '" + s + "' is not an integer");
        if (options.episodeId >= 0 && r.episodeId != options.episodeId) return std::nullopt;
    }
    r.frame = f[size_t(c.frame)];
    if (r.frame.empty()) throw Error(at + ": empty frame name");
    r.action = parseAction(f[size_t(c.action)], names, at);
    const std::string& rw = f[size_t(c.reward)];
    if (!(rw.empty() || rw == "null")) {
        size_t pos = 0;
        try {
            r.reward = std::stof(rw, &pos);
        } catch (const std::exception&) {
            pos = 0;
        }
        if (pos != rw.size()) throw Error(at + ": reward '" + rw + "' is not a number");
    }
    if (c.terminal >= 0) {
        int64_t v = 0;
        if (!parseInt(f[size_t(c.terminal)], v) || (v != 0 && v != 1))
            throw Error(at + ": terminal '" + f[size_t(c.terminal)] + "' is not 0 or 1");
        r.terminal = int(v);
    }
    if (c.lives >= 0 && !parseInt(f[size_t(c.lives)], r.lives))
        throw Error(at + ": lives '" + f[size_t(c.lives)] + "' is not an integer");
    return r;
}

// The per-step arrays of the episode from its rows.
void fillSteps(rl::Episode& e, const std::vector<Row>& rows, const Columns& c) {
    const int64_t T = int64_t(rows.size());
    std::vector<int64_t> actions(static_cast<size_t>(T));
    std::vector<float> rewards(static_cast<size_t>(T));
    std::vector<uint8_t> terminals(static_cast<size_t>(T), 0);
    std::vector<int32_t> lives(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t) {
        const Row& r = rows[size_t(t)];
        actions[size_t(t)] = r.action;
        rewards[size_t(t)] = r.reward;
        lives[size_t(t)] = int32_t(r.lives);
        if (c.terminal >= 0) terminals[size_t(t)] = uint8_t(r.terminal);
        else if (c.episode >= 0 && t + 1 < T && rows[size_t(t + 1)].episodeId != r.episodeId) terminals[size_t(t)] = 1;
    }
    e.actions = torch::tensor(actions, torch::kInt64);
    e.rewards = torch::tensor(rewards, torch::kFloat32);
    e.terminals = torch::from_blob(terminals.data(), {T}, torch::kUInt8).ne(0);
    e.terminal = c.terminal >= 0 && rows.back().terminal == 1;
    if (c.lives >= 0) e.lives = torch::from_blob(lives.data(), {T}, torch::kInt32).clone();
    e.episodeReturn = e.rewards.sum().item<double>();
}

} // namespace

rl::Episode importFrames(const std::string& dirArg, const std::string& out, const FramesImportOptions& options) {
    const fs::path dir(dirArg);
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) throw Error(dirArg + ": not a folder of frames");
    const std::string csv = options.csv.empty() ? findCsv(dirArg) : options.csv;
    std::ifstream in(csv);
    if (!in) throw Error(csv + ": cannot open the CSV file");
    const std::vector<std::string> names = options.actionNames.empty() ? aleActionNames() : options.actionNames;

    int lineNo = 0;
    const Columns cols = readHeader(in, csv, options, lineNo);
    std::vector<Row> rows;
    std::string line;
    while (std::getline(in, line)) {
        ++lineNo;
        if (trim(line).empty()) continue;
        auto r = parseRow(splitCsv(line), cols, names, options, csv + " line " + std::to_string(lineNo));
        if (r) rows.push_back(std::move(*r));
    }
    if (rows.empty())
        throw Error(csv + (options.episodeId >= 0 ? ": no rows with episode_id " + std::to_string(options.episodeId)
                                                   : std::string(": no data rows")));

    auto frameFile = [&](const Row& r) {
        fs::path p = dir / r.frame;
        if (!p.has_extension()) p += ".png";
        return p.string();
    };
    const cv::Mat first = readImage(frameFile(rows.front()));

    rl::Episode e;
    e.env = options.game.empty() ? fs::absolute(dir).lexically_normal().filename().string() : options.game;
    if (e.env.empty()) e.env = fs::absolute(dir).lexically_normal().parent_path().filename().string();
    e.source = "frames:" + dirArg + " csv:" + csv;
    e.actionNames = names;
    fillSteps(e, rows, cols);

    rl::FrameSource src;
    src.height = first.rows;
    src.width = first.cols;
    src.channels = first.channels();
    src.batch = 64;
    src.frames = [&](int64_t start, int64_t n) {
        torch::Tensor t = torch::empty({n, src.height, src.width, src.channels}, torch::kUInt8);
        for (int64_t i = 0; i < n; ++i) {
            const std::string file = frameFile(rows[size_t(start + i)]);
            const cv::Mat m = start + i == 0 ? first : readImage(file);
            if (m.rows != first.rows || m.cols != first.cols || m.channels() != first.channels())
                throw Error(file + ": " + describe(m) + ", the first frame is " + describe(first) + " (frames of the wrong shape)");
            std::memcpy(t[i].data_ptr<uint8_t>(), m.data, size_t(m.total() * m.elemSize()));
        }
        return t;
    };
    rl::writeEpisode(out, e, src);
    return e;
}

} // namespace glimpse::replay
