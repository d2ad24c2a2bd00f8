#include "core/io/demo_image.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include <opencv2/imgproc.hpp>

#include "core/error.h"
#include "core/io/image.h"

namespace glimpse {

namespace {

struct V3 {
    double x, y, z;   // camera frame: x right, y down, z forward; the camera is at the origin
};

// splitmix64: a portable deterministic generator (std distributions differ between libraries).
class Rng {
public:
    explicit Rng(uint64_t seed) : s_(seed) {}
    double uniform(double a, double b) { return a + (b - a) * double(next() >> 11) * 0x1.0p-53; }
    bool coin() { return next() & 1; }

private:
    uint64_t next() {
        uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    uint64_t s_;
};

cv::Scalar shade(const cv::Scalar& c, double k) {
    return {std::min(255.0, c[0] * k), std::min(255.0, c[1] * k), std::min(255.0, c[2] * k)};
}

using Interval = std::pair<double, double>;

// Parameter interval of the segment a->b inside the convex polygon shrunk by `eps` (so that a
// segment on the polygon's boundary is not inside); empty when first >= second.
Interval insideConvex(const std::vector<cv::Point2d>& poly, cv::Point2d a, cv::Point2d b, double eps) {
    double area = 0;
    for (size_t i = 0; i < poly.size(); ++i) area += poly[i].cross(poly[(i + 1) % poly.size()]);
    const double s = area >= 0 ? 1 : -1;
    const cv::Point2d d = b - a;
    double t0 = 0, t1 = 1;
    for (size_t i = 0; i < poly.size(); ++i) {
        const cv::Point2d e = poly[(i + 1) % poly.size()] - poly[i];
        const double len = std::hypot(e.x, e.y);
        if (len < 1e-9) continue;
        const cv::Point2d n(-s * e.y / len, s * e.x / len);   // inward unit normal
        const double num = n.dot(a - poly[i]) - eps, den = n.dot(d);
        if (std::abs(den) < 1e-12) {
            if (num < 0) return {1, 0};
            continue;
        }
        const double t = -num / den;
        if (den > 0) t0 = std::max(t0, t);
        else t1 = std::min(t1, t);
    }
    return {t0, t1};
}

std::vector<Interval> subtract(const std::vector<Interval>& in, Interval cut) {
    if (cut.first >= cut.second) return in;
    std::vector<Interval> out;
    for (const auto& [a, b] : in) {
        if (cut.second <= a || cut.first >= b) {
            out.push_back({a, b});
            continue;
        }
        if (cut.first > a) out.push_back({a, cut.first});
        if (cut.second < b) out.push_back({cut.second, b});
    }
    return out;
}

// Draws projected 3D primitives in painter's order and keeps the ground truth: every recorded
// segment minus the parts covered by occluding polygons drawn after it.
class Canvas {
public:
    Canvas(int w, int h, double f, cv::Point2d c) : img(h, w, CV_8UC3, cv::Scalar::all(0)), f_(f), c_(c) {
        thick_ = std::max(1, int(std::lround(std::min(w, h) / 400.0)));
    }

    cv::Point2d project(const V3& p) const { return {c_.x + f_ * p.x / p.z, c_.y + f_ * p.y / p.z}; }

    // A filled convex planar polygon; `outline` flags which edges (i -> i+1) are drawn as dark
    // lines and recorded (empty: all). Coplanar decoration passes occludes = false.
    void polygon(const std::vector<V3>& pts, const cv::Scalar& fill, std::vector<bool> outline = {},
                 bool occludes = true) {
        std::vector<cv::Point2d> p2;
        for (const auto& p : pts) p2.push_back(project(p));
        std::vector<cv::Point> fixed;
        for (const auto& p : p2) fixed.push_back(toFixed(p));
        cv::fillConvexPoly(img, fixed, fill, cv::LINE_AA, kShift);
        if (outline.empty()) outline.assign(pts.size(), true);
        for (size_t i = 0; i < p2.size(); ++i)
            if (outline[i]) segment(p2[i], p2[(i + 1) % p2.size()], shade(fill, 0.45), thick_);
        if (occludes) occluders_.push_back({std::move(p2), order_});
        ++order_;
    }

    void line(const V3& a, const V3& b, const cv::Scalar& color, int thickness) {
        segment(project(a), project(b), color, thickness);
        ++order_;
    }

    int thickness() const { return thick_; }

    std::vector<std::array<float, 4>> visibleLines(double minLength) const {
        const std::vector<cv::Point2d> frame = {
            {0, 0}, {double(img.cols - 1), 0}, {double(img.cols - 1), double(img.rows - 1)}, {0, double(img.rows - 1)}};
        std::vector<std::array<float, 4>> out;
        for (const auto& s : segs_) {
            std::vector<Interval> keep = {insideConvex(frame, s.a, s.b, 0.0)};
            if (keep[0].first >= keep[0].second) continue;
            for (const auto& o : occluders_)
                if (o.order > s.order) keep = subtract(keep, insideConvex(o.pts, s.a, s.b, 0.75));
            for (const auto& [t0, t1] : keep) {
                const cv::Point2d p = s.a + (s.b - s.a) * t0, q = s.a + (s.b - s.a) * t1;
                if (cv::norm(q - p) < minLength) continue;
                const std::array<float, 4> l = {float(p.x), float(p.y), float(q.x), float(q.y)};
                auto same = [&](const std::array<float, 4>& m) {
                    auto close = [](float a, float b, float c, float d) { return std::hypot(a - c, b - d) < 1.0f; };
                    return (close(l[0], l[1], m[0], m[1]) && close(l[2], l[3], m[2], m[3])) ||
                           (close(l[0], l[1], m[2], m[3]) && close(l[2], l[3], m[0], m[1]));
                };
                if (std::none_of(out.begin(), out.end(), same)) out.push_back(l);
            }
        }
        return out;
    }

    cv::Mat img;

private:
    static constexpr int kShift = 4;
    static cv::Point toFixed(cv::Point2d p) {
        return {int(std::lround(p.x * (1 << kShift))), int(std::lround(p.y * (1 << kShift)))};
    }
    void segment(cv::Point2d a, cv::Point2d b, const cv::Scalar& color, int thickness) {
        cv::line(img, toFixed(a), toFixed(b), color, thickness, cv::LINE_AA, kShift);
        segs_.push_back({a, b, order_});
    }

    struct Seg {
        cv::Point2d a, b;
        int order;
    };
    struct Poly {
        std::vector<cv::Point2d> pts;
        int order;
    };
    double f_;
    cv::Point2d c_;
    int thick_;
    int order_ = 0;
    std::vector<Seg> segs_;
    std::vector<Poly> occluders_;
};

// An axis-aligned box [x0,x1] x [yTop,yBottom] x [z0,z1] (z0 the near face), faces shaded.
void drawBox(Canvas& c, double x0, double x1, double yTop, double yBottom, double z0, double z1,
             const cv::Scalar& color) {
    if (yTop > 0) c.polygon({{x0, yTop, z0}, {x1, yTop, z0}, {x1, yTop, z1}, {x0, yTop, z1}}, shade(color, 1.2));
    if (yBottom < 0)
        c.polygon({{x0, yBottom, z0}, {x1, yBottom, z0}, {x1, yBottom, z1}, {x0, yBottom, z1}}, shade(color, 0.7));
    if (x0 > 0) c.polygon({{x0, yTop, z0}, {x0, yTop, z1}, {x0, yBottom, z1}, {x0, yBottom, z0}}, shade(color, 0.8));
    if (x1 < 0) c.polygon({{x1, yTop, z0}, {x1, yTop, z1}, {x1, yBottom, z1}, {x1, yBottom, z0}}, shade(color, 0.8));
    c.polygon({{x0, yTop, z0}, {x1, yTop, z0}, {x1, yBottom, z0}, {x0, yBottom, z0}}, color);
}

// The room: x in [xL, xR], ceiling yC < 0 < yF floor (camera 1.5 m above it), back wall at D;
// its surfaces start at depth zn, and the side walls leave the image at zVisL / zVisR.
struct Room {
    double xL, xR, yF, yC, D, zn, zVisL, zVisR;
};

Room randomRoom(Rng& rng, double w, double h, double f, cv::Point2d vp) {
    Room r;
    r.xL = -rng.uniform(2.0, 2.5);
    r.xR = rng.uniform(2.0, 2.5);
    r.yF = rng.uniform(1.4, 1.6);
    r.yC = r.yF - rng.uniform(2.6, 2.9);
    r.D = rng.uniform(5.5, 6.5);
    // Near end of the room's surfaces: close enough that their near edges are off-image, no
    // closer (huge off-image polygons only cost drawing time).
    r.zn = std::min({1.0, 0.5 * f * r.yF / (h - vp.y), 0.5 * f * -r.yC / vp.y, 0.5 * f * -r.xL / vp.x,
                     0.5 * f * r.xR / (w - vp.x)});
    // Where the side walls leave the image: doors and pictures go deeper than that.
    r.zVisL = std::max(r.zn, f * -r.xL / std::max(1.0, vp.x));
    r.zVisR = std::max(r.zn, f * r.xR / std::max(1.0, w - 1 - vp.x));
    return r;
}

// Surfaces first (filled only), then the floor boards, then the room's edges as lines on top.
void drawRoomShell(Canvas& c, Rng& rng, const Room& r) {
    const double xL = r.xL, xR = r.xR, yF = r.yF, yC = r.yC, D = r.D, zn = r.zn;
    const cv::Scalar wallBack(222, 212, 190), wallSide(200, 190, 168), ceiling(238, 236, 228),
        floorCol(150, 105, 70);
    const std::vector<bool> none(4, false);
    c.polygon({{xL, yC, D}, {xR, yC, D}, {xR, yC, zn}, {xL, yC, zn}}, ceiling, none);
    c.polygon({{xL, yC, D}, {xL, yF, D}, {xL, yF, zn}, {xL, yC, zn}}, shade(wallSide, 0.95), none);
    c.polygon({{xR, yC, D}, {xR, yC, zn}, {xR, yF, zn}, {xR, yF, D}}, wallSide, none);
    c.polygon({{xL, yC, D}, {xR, yC, D}, {xR, yF, D}, {xL, yF, D}}, wallBack, none);
    c.polygon({{xL, yF, D}, {xR, yF, D}, {xR, yF, zn}, {xL, yF, zn}}, floorCol, none);
    // Floor boards: strips of slightly varying colour, seams converging to the vanishing point.
    const double board = 0.22;
    for (double x = xL; x < xR - 1e-6; x += board) {
        const double x1 = std::min(x + board, xR);
        c.polygon({{x, yF, D}, {x1, yF, D}, {x1, yF, zn}, {x, yF, zn}}, shade(floorCol, rng.uniform(0.85, 1.12)),
                  none, false);
        if (x > xL) c.line({x, yF, D}, {x, yF, zn}, shade(floorCol, 0.55), 1);
    }
    const cv::Scalar edge(70, 62, 52);
    const V3 corners[4] = {{xL, yC, D}, {xR, yC, D}, {xR, yF, D}, {xL, yF, D}};
    for (int i = 0; i < 4; ++i) {
        c.line(corners[i], corners[(i + 1) % 4], edge, c.thickness());
        c.line(corners[i], {corners[i].x, corners[i].y, zn}, edge, c.thickness());
    }
}

// Window on the back wall: frame, glass, a cross of mullions.
void drawWindow(Canvas& c, Rng& rng, const Room& r, bool windowLeft) {
    const double D = r.D;
    const double ww = rng.uniform(1.1, 1.5), wx0 = windowLeft ? r.xL + 0.4 : r.xR - 0.4 - ww;
    const double wy0 = r.yC + rng.uniform(0.6, 0.8), wy1 = r.yF - rng.uniform(1.0, 1.2), fr = 0.07;
    c.polygon({{wx0, wy0, D}, {wx0 + ww, wy0, D}, {wx0 + ww, wy1, D}, {wx0, wy1, D}}, cv::Scalar(245, 245, 240));
    const double gx0 = wx0 + fr, gx1 = wx0 + ww - fr, gy0 = wy0 + fr, gy1 = wy1 - fr;
    c.polygon({{gx0, gy0, D}, {gx1, gy0, D}, {gx1, gy1, D}, {gx0, gy1, D}}, cv::Scalar(150, 190, 225));
    const cv::Scalar mullion(250, 250, 245);
    c.line({(gx0 + gx1) / 2, gy0, D}, {(gx0 + gx1) / 2, gy1, D}, mullion, c.thickness() + 2);
    c.line({gx0, (gy0 + gy1) / 2, D}, {gx1, (gy0 + gy1) / 2, D}, mullion, c.thickness() + 2);
}

// Bookcase against the back wall, on the window's other side, with shelves.
void drawBookcase(Canvas& c, Rng& rng, const Room& r, bool windowLeft) {
    const double yF = r.yF;
    const double bw = rng.uniform(0.9, 1.3), bx0 = windowLeft ? r.xR - 0.3 - bw : r.xL + 0.3;
    const double top = yF - rng.uniform(1.7, 2.0), z0 = r.D - 0.4;
    const cv::Scalar wood(120, 80, 50);
    drawBox(c, bx0, bx0 + bw, top, yF, z0, r.D, wood);
    for (int i = 1; i <= 3; ++i) {
        const double y = top + (yF - top) * i / 4.0;
        c.line({bx0 + 0.05, y, z0}, {bx0 + bw - 0.05, y, z0}, shade(wood, 0.5), c.thickness());
    }
}

// Door on the right wall with an inset panel; picture on the left wall.
void drawDoorAndPicture(Canvas& c, Rng& rng, const Room& r) {
    const double xL = r.xL, xR = r.xR, yF = r.yF, yC = r.yC, D = r.D;
    const double span = D - r.zVisR, dz0 = r.zVisR + 0.2 * span, dz1 = r.zVisR + 0.6 * span;
    const double top = yF - 2.05;
    const cv::Scalar door(160, 110, 70);
    c.polygon({{xR, yF, dz0}, {xR, top, dz0}, {xR, top, dz1}, {xR, yF, dz1}}, door, {true, true, true, false});
    const double pz0 = dz0 + 0.15 * (dz1 - dz0), pz1 = dz1 - 0.15 * (dz1 - dz0);
    c.polygon({{xR, top + 0.2, pz0}, {xR, top + 0.2, pz1}, {xR, top + 0.9, pz1}, {xR, top + 0.9, pz0}},
              shade(door, 0.9));
    const cv::Point2d knob = c.project({xR, top + 1.05, dz0 + 0.08 * (dz1 - dz0)});
    cv::circle(c.img, knob, std::max(1, c.thickness() * 2), cv::Scalar(210, 180, 60), cv::FILLED, cv::LINE_AA);

    const double lspan = D - r.zVisL, pz2 = r.zVisL + 0.3 * lspan, pz3 = r.zVisL + 0.75 * lspan;
    const double py0 = yC + rng.uniform(0.7, 0.9), py1 = py0 + rng.uniform(0.6, 0.8);
    c.polygon({{xL, py0, pz2}, {xL, py0, pz3}, {xL, py1, pz3}, {xL, py1, pz2}}, cv::Scalar(90, 70, 60));
    const double i0 = (pz3 - pz2) * 0.12;
    c.polygon({{xL, py0 + 0.08, pz2 + i0}, {xL, py0 + 0.08, pz3 - i0}, {xL, py1 - 0.08, pz3 - i0},
               {xL, py1 - 0.08, pz2 + i0}},
              cv::Scalar(rng.uniform(60, 200), rng.uniform(90, 180), rng.uniform(100, 200)));
}

// Ceiling light and a rug.
void drawLightAndRug(Canvas& c, Rng& rng, const Room& r) {
    const double yF = r.yF, yC = r.yC;
    const double lz0 = r.D * 0.45, lz1 = lz0 + 0.8;
    c.polygon({{-0.5, yC, lz0}, {0.5, yC, lz0}, {0.5, yC, lz1}, {-0.5, yC, lz1}}, cv::Scalar(255, 252, 235));
    const double rz0 = rng.uniform(1.8, 2.4), rz1 = rz0 + rng.uniform(1.5, 2.0);
    const double rx0 = rng.uniform(r.xL + 0.5, -0.6), rx1 = rng.uniform(0.6, r.xR - 0.5);
    c.polygon({{rx0, yF, rz0}, {rx1, yF, rz0}, {rx1, yF, rz1}, {rx0, yF, rz1}}, cv::Scalar(140, 40, 45));
    const double in = 0.12;
    c.polygon({{rx0 + in, yF, rz0 + in}, {rx1 - in, yF, rz0 + in}, {rx1 - in, yF, rz1 - in}, {rx0 + in, yF, rz1 - in}},
              cv::Scalar(170, 70, 60), {}, false);
}

// Cardboard boxes on the floor, far to near, footprints apart.
void drawFloorBoxes(Canvas& c, Rng& rng, const Room& r) {
    struct Box {
        double x0, x1, top, z0, z1;
    };
    std::vector<Box> boxes;
    for (int tries = 0; tries < 60 && boxes.size() < 4; ++tries) {
        const double bw = rng.uniform(0.4, 0.9), bd = rng.uniform(0.35, 0.7), bh = rng.uniform(0.3, 0.8);
        const double x0 = rng.uniform(r.xL + 0.2, r.xR - 0.2 - bw), z0 = rng.uniform(2.2, r.D - 1.0 - bd);
        Box b{x0, x0 + bw, r.yF - bh, z0, z0 + bd};
        const bool clear = std::none_of(boxes.begin(), boxes.end(), [&](const Box& o) {
            return b.x0 < o.x1 + 0.2 && o.x0 < b.x1 + 0.2 && b.z0 < o.z1 + 0.2 && o.z0 < b.z1 + 0.2;
        });
        if (clear) boxes.push_back(b);
    }
    std::sort(boxes.begin(), boxes.end(), [](const Box& a, const Box& b) { return a.z0 > b.z0; });
    for (const auto& b : boxes)
        drawBox(c, b.x0, b.x1, b.top, r.yF, b.z0, b.z1,
                cv::Scalar(rng.uniform(170, 200), rng.uniform(130, 150), rng.uniform(85, 105)));
}

// Texture: low-frequency shading plus fine grain (one luminance noise field added to all three
// channels), then a slight blur; in place.
void addTexture(cv::Mat& image, uint64_t seed) {
    const int width = image.cols, height = image.rows;
    cv::RNG noise(seed * 0x9E3779B97F4A7C15ull + 1);
    cv::Mat low(std::max(2, height / 64), std::max(2, width / 64), CV_32FC1), field, grain(height, width, CV_32FC1);
    noise.fill(low, cv::RNG::NORMAL, 0.0, 3.5);
    cv::resize(low, field, image.size(), 0, 0, cv::INTER_CUBIC);
    noise.fill(grain, cv::RNG::NORMAL, 0.0, 3.0);
    field += grain;
    for (int y = 0; y < height; ++y) {
        const float* n = field.ptr<float>(y);
        cv::Vec3b* px = image.ptr<cv::Vec3b>(y);
        for (int x = 0; x < width; ++x)
            for (int k = 0; k < 3; ++k) px[x][k] = cv::saturate_cast<uchar>(px[x][k] + n[x]);
    }
    cv::GaussianBlur(image, image, cv::Size(0, 0), 0.7);
}

} // namespace

DemoScene makeDemoScene(int width, int height, uint64_t seed) {
    if (width < 16 || height < 16 || width > kMaxImageSide || height > kMaxImageSide)
        throw Error("demo image size " + std::to_string(width) + " x " + std::to_string(height) +
                    " is out of range (16 to " + std::to_string(kMaxImageSide) + " pixels on a side)");
    Rng rng(seed);
    const double w = width, h = height;
    const double f = 0.75 * w;
    const cv::Point2d vp(w * rng.uniform(0.44, 0.56), h * rng.uniform(0.40, 0.50));
    Canvas c(width, height, f, vp);
    const Room room = randomRoom(rng, w, h, f, vp);
    drawRoomShell(c, rng, room);
    const bool windowLeft = rng.coin();
    drawWindow(c, rng, room, windowLeft);
    drawBookcase(c, rng, room, windowLeft);
    drawDoorAndPicture(c, rng, room);
    drawLightAndRug(c, rng, room);
    drawFloorBoxes(c, rng, room);
    DemoScene scene;
    scene.image = c.img;
    addTexture(scene.image, seed);
    scene.lines = c.visibleLines(std::max(6.0, 0.012 * std::min(w, h)));
    return scene;
}

cv::Mat makeDemoImage(int width, int height, uint64_t seed) { return makeDemoScene(width, height, seed).image; }

} // namespace glimpse
