#pragma once
// LetrView: turns a LetrTrace and the inspector's settings (layer position, head, entity,
// threshold, colour map, opacity) into the plain buffers the viewport draws
// (widgets::ViewportScene). No widgets: the inspector panel and `glimpse bench inspector`
// share it. Per-layer predictions are unpacked once per position; the attention map is
// recomputed only when the (layer, head, entity) it depends on changes.
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/models/letr/trace.h"
#include "core/eval/edge_support.h"
#include "core/eval/lsd.h"
#include "renderer/renderer.h"
#include "widgets/viewport.h"

namespace glimpse::app {

// One step of the layer stepper: coarse decoder layers first, then fine ones.
struct LetrPosition {
    letr::Stage stage = letr::Stage::Coarse;
    int layer = 0;   // 0-based
    std::string label() const;   // "coarse 1" (1-based for people)
};
std::vector<LetrPosition> letrPositions(const letr::LetrTrace& trace);

// What an unselected line's colour says: its score, or how much of it lies on an edge of the
// shown image (eval::edgeSupport's measure: green on an edge, yellow partly, red not).
enum class LineColour { Score, EdgeSupport };

struct LetrViewSettings {
    int position = 0;          // index into letrPositions()
    int head = -1;             // -1 = mean over heads
    int entity = -1;           // selected line entity, -1 = none
    float threshold = 0.5f;    // lines with score >= threshold are shown
    render::Colormap colormap = render::Colormap::Viridis;
    float opacity = 0.6f;
    bool showLines = true;
    bool showHeatmap = true;
    LineColour lineColour = LineColour::Score;
};

// One predicted line of a layer, with what the entity table lists.
struct LetrEntityRow {
    int entity = 0;
    float score = 0;
    float x1 = 0, y1 = 0, x2 = 0, y2 = 0;
    float length = 0;    // original-image pixels
    float angle = 0;     // degrees in [0, 180), counter-clockwise from the image's x axis
    // Fraction of its samples on a strong gradient across it in the shown image
    // (eval::lineSupport); NaN until the view has the image's edge field.
    float edge = std::numeric_limits<float>::quiet_NaN();
};

// Colours shared by every LETR view (and checked by tests).
constexpr float kSelectedRgb[3] = {1.0f, 0.1f, 0.1f};   // the selected entity's line
// ... when lines are coloured by edge support (where red means "not on an edge").
constexpr float kSelectedEdgeModeRgb[3] = {1.0f, 0.2f, 1.0f};
constexpr float kLineWidthPx = 2.0f;
constexpr float kSelectedWidthPx = 4.0f;
// Score colour of an unselected line: cyan (low) to yellow (high).
render::LineSegment scoreColoredLine(float x1, float y1, float x2, float y2, float score);
// Edge-support colour (eval::edgeSupportColour) of a line with this support.
render::LineSegment edgeColoredLine(float x1, float y1, float x2, float y2, float support);

class LetrView {
public:
    explicit LetrView(std::shared_ptr<const letr::LetrTrace> trace);
    const letr::LetrTrace& trace() const { return *trace_; }
    std::shared_ptr<const letr::LetrTrace> tracePtr() const { return trace_; }
    const std::vector<LetrPosition>& positions() const { return positions_; }
    // The shown image's gradient field (eval::edgeField, computed off the UI thread): from now
    // on every row carries its edge support, and LineColour::EdgeSupport colours by it. Until
    // then (or with nullptr) rows have NaN and lines keep their score colours.
    void setEdgeField(std::shared_ptr<const eval::EdgeField> field);
    bool hasEdgeField() const { return bool(edgeField_); }

    // Every entity of the position (unsorted, entity order).
    const std::vector<LetrEntityRow>& entities(int position);
    // Entities with score >= threshold, highest score first.
    std::vector<LetrEntityRow> visible(int position, float threshold);
    // [h, w] attention of the settings' entity (mean or one head) at the position; empty
    // when no entity is selected. Cached for the last request; every head of every position
    // visited with the last entity is kept, so a head change, or a layer change back to a
    // layer already shown for that entity, recomputes nothing (a new entity starts afresh).
    const std::vector<float>& attention(int position, int head, int entity, int& h, int& w);
    // How many attention products (one layer, all heads) have been computed: for tests.
    uint64_t attentionComputations() const { return attnComputations_; }
    // How many times the visible lines of a (position, threshold) were built: for tests.
    uint64_t lineBuilds() const { return lineBuilds_; }

    // The scene for the viewport: visible lines coloured by score or edge support (lowest score
    // drawn first), the
    // selected entity's line in red on top (not when the threshold hides it: then the overlay
    // says so and nothing of it is drawn), its attention heatmap
    // (0 .. max of the map), and the overlay rows (layer, head, entity, score, lines, and with
    // edge colours how many of the shown lines are on an edge).
    widgets::ViewportScene scene(const LetrViewSettings& s);

private:
    void checkPosition(int position) const;
    std::shared_ptr<const letr::LetrTrace> trace_;
    std::vector<LetrPosition> positions_;
    std::vector<std::vector<LetrEntityRow>> rows_;   // per position, filled on first use
    int attnPos_ = -1, attnHead_ = -2, attnEntity_ = -1, attnH_ = 0, attnW_ = 0;
    std::vector<float> attn_;
    struct Heads {
        int h = 0, w = 0;
        std::vector<float> maps;   // [nheads, h, w]; empty = not computed yet
    };
    int headsEntity_ = -1;
    std::vector<Heads> heads_;   // per position, of headsEntity_
    uint64_t attnComputations_ = 0;
    // Lines of every visible entity (score >= linesThreshold_) per position, in draw order
    // (lowest score first), with their ids and hover labels; the scene drops the selected one.
    struct Lines {
        bool built = false;
        std::vector<render::LineSegment> lines;
        std::vector<int> ids;
        std::vector<std::string> labels;
        size_t onEdge = 0;   // of them, on an edge (0 until the edge field is there)
    };
    float linesThreshold_ = 0.0f;
    LineColour linesColour_ = LineColour::Score;
    std::shared_ptr<const eval::EdgeField> edgeField_;
    void fillEdges(std::vector<LetrEntityRow>& rows) const;
    std::vector<Lines> lines_;
    uint64_t lineBuilds_ = 0;
    const Lines& visibleLines(int position, float threshold, LineColour colour);
};

// Baseline lines (LSD's, M-LSD's) as a scene (all lines, not pickable), coloured by rank, or
// with LineColour::EdgeSupport and a field by their edge support like LETR's; `name` is the
// overlay's "layer" row.
widgets::ViewportScene lsdScene(const std::vector<eval::ScoredLine>& lines, LineColour colour = LineColour::Score,
                                const eval::EdgeField* field = nullptr, const std::string& name = "LSD (OpenCV)");

// Writes the entity rows as JSON (an object with "layer" and "lines") or CSV (header
// entity,score,x1,y1,x2,y2,length,angle,edge), chosen by the extension (.json / .csv),
// atomically. "edge" is the row's edge support (JSON null / an empty CSV field until known).
// Throws glimpse::Error naming the file for other extensions or write failures.
void writeLines(const std::string& path, const std::string& layerLabel,
                const std::vector<LetrEntityRow>& rows);


} // namespace glimpse::app
