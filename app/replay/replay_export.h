#pragma once
// What the replay viewer writes: the per-step table as CSV and a video clip of the viewport
// (the frame with its heatmap overlay and a caption) over a step range. Both run on worker
// threads (they only use their arguments) and throw glimpse::Error naming the file.
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/replay/episode_reader.h"
#include "widgets/viewport.h"

namespace glimpse::app {

// Frame t of the episode as the viewport's RGB8 image (grey frames become RGB).
widgets::RgbImage frameImage(const replay::Frame& frame);

// The per-step table's columns: step, action, action_name, reward, return, life_lost,
// terminal, then each recorded series (value, value_prefix, root_value, lives) and each
// recorded per-action vector as one column per action (policy_NOOP, visits_NOOP, ...).
std::vector<std::string> stepTableHeader(const replay::EpisodeReader& reader);
std::vector<std::string> stepTableRow(const replay::EpisodeReader& reader, int64_t t);
// Writes the table (atomic: temp file + rename).
void writeStepTableCsv(const replay::EpisodeReader& reader, const std::string& path);

struct VideoExport {
    std::string path;              // .avi (MJPG)
    int64_t first = 0, last = 0;   // steps, inclusive
    int scale = 1;                 // integer nearest-neighbour upscaling of the frames
    double fps = 15;
    // Heatmaps to draw over some steps (saliency computed in the viewer), keyed by step.
    std::map<int64_t, widgets::ViewportScene> scenes;
    bool caption = true;           // step, action, reward and return burnt into the bottom rows
};
// Renders each step's frame with its scene at the frame's resolution (offscreen Vulkan), then
// writes the clip; `progress(done, total)` is called after each frame. Returns false when
// cancelled (the partial file is removed). Writes to a temp file renamed at the end.
bool writeEpisodeVideo(replay::EpisodeReader& reader, const VideoExport& spec, const std::atomic<bool>& cancel,
                       const std::function<void(int64_t, int64_t)>& progress);

} // namespace glimpse::app
