#include "core/data/procedural.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <sstream>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <torch/torch.h>

#include "core/data/augment.h"
#include "core/error.h"

namespace glimpse::data {

namespace {

using P = cv::Point2d;

uint64_t splitmix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

// A ground-truth segment and the parts of it still visible, as parameter intervals on [0, 1].
struct Segment {
    P a, b;
    std::vector<std::pair<double, double>> visible{{0.0, 1.0}};
};

class Scene {
public:
    void addSegment(P a, P b) {
        if (cv::norm(b - a) > 1e-6) segs_.push_back({a, b});
    }
    void addPolygon(const std::vector<P>& poly) {
        for (size_t i = 0; i < poly.size(); ++i) addSegment(poly[i], poly[(i + 1) % poly.size()]);
    }
    // Removes from every segment added so far the part strictly inside the convex polygon
    // (shrunk by `margin` pixels, so edges lying on the polygon's boundary stay).
    void occlude(const std::vector<P>& poly, double margin = 0.75) {
        if (poly.size() < 3) return;
        P c(0, 0);
        for (const auto& p : poly) c += p;
        c *= 1.0 / poly.size();
        for (auto& s : segs_) {
            double t0 = 0.0, t1 = 1.0;
            bool empty = false;
            const P d = s.b - s.a;
            for (size_t i = 0; i < poly.size() && !empty; ++i) {
                const P v = poly[i], w = poly[(i + 1) % poly.size()];
                P n(-(w.y - v.y), w.x - v.x);
                const double len = cv::norm(n);
                if (len < 1e-9) continue;
                n *= 1.0 / len;
                if (n.dot(c - v) < 0) n = -n;   // inward
                // n . (a + t d - v) >= margin
                const double num = margin - n.dot(s.a - v), den = n.dot(d);
                if (std::abs(den) < 1e-12) {
                    if (num > 0) empty = true;
                } else if (den > 0) {
                    t0 = std::max(t0, num / den);
                } else {
                    t1 = std::min(t1, num / den);
                }
                if (t1 <= t0) empty = true;
            }
            if (empty) continue;
            std::vector<std::pair<double, double>> out;
            for (auto [u0, u1] : s.visible) {
                if (t1 <= u0 || t0 >= u1) {
                    out.push_back({u0, u1});
                    continue;
                }
                if (t0 > u0) out.push_back({u0, t0});
                if (t1 < u1) out.push_back({t1, u1});
            }
            s.visible = std::move(out);
        }
    }
    // Visible pieces after the affine map `m` (2x3), clipped to the image, >= minLength.
    torch::Tensor lines(const cv::Matx23d& m, int w, int h, double minLength) const {
        std::vector<float> out;
        for (const auto& s : segs_) {
            for (auto [u0, u1] : s.visible) {
                P a = s.a + (s.b - s.a) * u0, b = s.a + (s.b - s.a) * u1;
                double ax = m(0, 0) * a.x + m(0, 1) * a.y + m(0, 2);
                double ay = m(1, 0) * a.x + m(1, 1) * a.y + m(1, 2);
                double bx = m(0, 0) * b.x + m(0, 1) * b.y + m(0, 2);
                double by = m(1, 0) * b.x + m(1, 1) * b.y + m(1, 2);
                if (!clipSegment(ax, ay, bx, by, 0, 0, w, h)) continue;
                if (std::hypot(bx - ax, by - ay) < minLength) continue;
                out.insert(out.end(), {float(ax), float(ay), float(bx), float(by)});
            }
        }
        return torch::from_blob(out.data(), {int64_t(out.size() / 4), 4}, torch::kFloat).clone();
    }

private:
    std::vector<Segment> segs_;
};

class Renderer {
public:
    Renderer(int w, int h, uint64_t seed) : w_(w), h_(h), rng_(seed), cvrng_(splitmix(seed ^ 0x51u)) {
        img_ = cv::Mat(h, w, CV_32FC3, cv::Scalar::all(0));
    }
    double uni(double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng_); }
    int uniInt(int a, int b) { return std::uniform_int_distribution<int>(a, b)(rng_); }
    bool chance(double p) { return uni(0, 1) < p; }

    cv::Vec3f randomColor(double lo = 30, double hi = 230) {
        // One draw per statement: the order of draws inside one argument list is unspecified
        // (GCC goes right to left, clang left to right); this is GCC's order, which the golden
        // scenes were recorded with. The same below.
        const float b = float(uni(lo, hi)), g = float(uni(lo, hi)), r = float(uni(lo, hi));
        return cv::Vec3f(r, g, b);
    }
    cv::Vec3f shade(cv::Vec3f c, double f) { return c * float(f); }

    // A full-frame texture: base color, low-frequency blotches, grain, optional grid tiles.
    cv::Mat texture(cv::Vec3f base) {
        cv::Mat t(h_, w_, CV_32FC3, cv::Scalar(base[0], base[1], base[2]));
        const int cells = uniInt(2, 12);
        cv::Mat low(cells, cells, CV_32FC1);
        cvrng_.fill(low, cv::RNG::NORMAL, 0, uni(3, 28));
        cv::resize(low, low, cv::Size(w_, h_), 0, 0, cv::INTER_CUBIC);
        cv::Mat grain(h_, w_, CV_32FC1);
        cvrng_.fill(grain, cv::RNG::NORMAL, 0, uni(0, 10));
        cv::Mat lum = low + grain, lum3;
        cv::cvtColor(lum, lum3, cv::COLOR_GRAY2RGB);
        t += lum3;
        return t;
    }
    // Alpha-blends `tex` into the image inside the polygon (anti-aliased edge).
    void fill(const std::vector<P>& poly, const cv::Mat& tex) {
        cv::Mat mask(h_, w_, CV_8UC1, cv::Scalar(0));
        std::vector<cv::Point> pts;
        for (const auto& p : poly) pts.push_back(fixed(p));
        cv::fillConvexPoly(mask, pts, cv::Scalar(255), cv::LINE_AA, kShift);
        blend(mask, tex);
    }
    void fill(const std::vector<P>& poly, cv::Vec3f color) { fill(poly, texture(color)); }
    void blend(const cv::Mat& mask8, const cv::Mat& tex) {
        cv::Mat a, a3;
        mask8.convertTo(a, CV_32FC1, 1.0 / 255);
        cv::cvtColor(a, a3, cv::COLOR_GRAY2RGB);
        cv::Mat one(h_, w_, CV_32FC3, cv::Scalar::all(1.0));
        img_ = img_.mul(one - a3) + tex.mul(a3);
    }
    void line(P a, P b, cv::Vec3f c, int thickness) {
        cv::line(img_, fixed(a), fixed(b), cv::Scalar(c[0], c[1], c[2]), thickness, cv::LINE_AA, kShift);
    }
    cv::Mat& image() { return img_; }
    cv::RNG& cvrng() { return cvrng_; }
    std::mt19937_64& rng() { return rng_; }

    static constexpr int kShift = 4;
    // Continuous coordinates (pixel centers at +0.5) -> OpenCV's fixed-point drawing ones.
    static cv::Point fixed(P p) {
        return cv::Point(int(std::lround((p.x - 0.5) * (1 << kShift))),
                         int(std::lround((p.y - 0.5) * (1 << kShift))));
    }

private:
    int w_, h_;
    std::mt19937_64 rng_;
    cv::RNG cvrng_;
    cv::Mat img_;
};

// Where the ray from `from` through `through` leaves the rectangle [0,w]x[0,h] (from inside).
P rayExit(P from, P through, double w, double h) {
    const P d = through - from;
    double t = 1e9;
    if (d.x > 1e-12) t = std::min(t, (w - from.x) / d.x);
    if (d.x < -1e-12) t = std::min(t, (0 - from.x) / d.x);
    if (d.y > 1e-12) t = std::min(t, (h - from.y) / d.y);
    if (d.y < -1e-12) t = std::min(t, (0 - from.y) / d.y);
    t = std::max(t, 1.0);
    return from + d * t;
}

// The room: a back wall rectangle [x0, x1] x [y0, y1] and a vanishing point inside it.
// A light wall colour (windows, pictures): one draw per channel, in GCC's order (randomColor).
cv::Vec3f wallLight(Renderer& r) {
    const float b = float(r.uni(190, 255)), g = float(r.uni(170, 250)), red = float(r.uni(150, 250));
    return cv::Vec3f(red, g, b);
}

struct Room {
    double W = 0, H = 0;            // image size
    double x0 = 0, y0 = 0, x1 = 0, y1 = 0, bw = 0, bh = 0;
    P vp, tl, tr, br, bl;           // vanishing point, back wall corners
};

Room randomRoom(Renderer& r, int width, int height) {
    Room room;
    const double W = width, H = height;
    room.W = W;
    room.H = H;
    const double bw = W * r.uni(0.25, 0.75), bh = H * r.uni(0.25, 0.75);
    const double x0 = r.uni(-0.05 * W, W - bw + 0.05 * W), y0 = r.uni(-0.05 * H, H - bh + 0.05 * H);
    const double x1 = x0 + bw, y1 = y0 + bh;
    const double vy = r.uni(y0 + 0.2 * bh, y1 - 0.2 * bh);
    const P vp(r.uni(x0 + 0.2 * bw, x1 - 0.2 * bw), vy);
    room.bw = bw;
    room.bh = bh;
    room.x0 = x0;
    room.y0 = y0;
    room.x1 = x1;
    room.y1 = y1;
    room.vp = vp;
    room.tl = P(x0, y0);
    room.tr = P(x1, y0);
    room.br = P(x1, y1);
    room.bl = P(x0, y1);
    return room;
}

// Region of each pixel: 0 back, 1 ceiling, 2 right wall, 3 floor, 4 left wall.
cv::Mat roomRegions(const Room& room, int width, int height) {
    cv::Mat label(height, width, CV_8UC1);
    auto cross = [](P a, P b) { return a.x * b.y - a.y * b.x; };
    const P vp = room.vp, tl = room.tl, tr = room.tr, br = room.br, bl = room.bl;
    for (int y = 0; y < height; ++y) {
        auto* row = label.ptr<uint8_t>(y);
        for (int x = 0; x < width; ++x) {
            const P p(x + 0.5, y + 0.5);
            if (p.x >= room.x0 && p.x < room.x1 && p.y >= room.y0 && p.y < room.y1) {
                row[x] = 0;
                continue;
            }
            const P d = p - vp;
            // Sectors between the rays vp->tl, vp->tr, vp->br, vp->bl (clockwise in image coords).
            const bool afterTl = cross(tl - vp, d) >= 0, afterTr = cross(tr - vp, d) >= 0;
            const bool afterBr = cross(br - vp, d) >= 0, afterBl = cross(bl - vp, d) >= 0;
            if (afterTl && !afterTr) row[x] = 1;
            else if (afterTr && !afterBr) row[x] = 2;
            else if (afterBr && !afterBl) row[x] = 3;
            else row[x] = 4;
        }
    }
    return label;
}

// Textured walls, floor and ceiling; the room edges (back rectangle and the four corner rays
// out to the border) as ground truth; some of them painted as trim.
void drawRoom(Renderer& r, Scene& scene, const Room& room, int width, int height) {
    const cv::Mat label = roomRegions(room, width, height);
    const cv::Vec3f wallBase = r.randomColor(60, 220);
    std::array<cv::Vec3f, 5> regionColor;
    regionColor[0] = wallBase;
    regionColor[1] = r.shade(wallBase, r.uni(0.75, 1.2));
    regionColor[2] = r.shade(wallBase, r.uni(0.6, 1.1));
    regionColor[3] = r.randomColor(30, 200);
    regionColor[4] = r.shade(wallBase, r.uni(0.6, 1.1));
    for (int k = 0; k < 5; ++k) {
        cv::Mat mask = (label == k);
        cv::GaussianBlur(mask, mask, cv::Size(3, 3), 0.6);   // soft, sub-pixel-ish boundary
        r.blend(mask, r.texture(regionColor[k]));
    }
    const P vp = room.vp, tl = room.tl, tr = room.tr, br = room.br, bl = room.bl;
    scene.addPolygon({tl, tr, br, bl});
    for (P c : {tl, tr, br, bl}) scene.addSegment(c, rayExit(vp, c, room.W, room.H));
    if (r.chance(0.4)) {
        const cv::Vec3f trim = r.randomColor(20, 240);
        for (P c : {tl, tr, br, bl})
            if (r.chance(0.5)) r.line(c, rayExit(vp, c, room.W, room.H), trim, 1);
        if (r.chance(0.5)) r.line(bl, br, trim, 2);
    }
}

// Paints the four edges of the quad a-b-c-d in a random frame colour, which it returns.
cv::Vec3f drawFrame(Renderer& r, P a, P b, P c, P d) {
    const cv::Vec3f frame = r.randomColor(10, 250);
    r.line(a, b, frame, 2);
    r.line(b, c, frame, 2);
    r.line(c, d, frame, 2);
    r.line(d, a, frame, 2);
    return frame;
}

// Windows, a door and picture frames on the back wall.
void drawBackWallItems(Renderer& r, Scene& scene, const Room& room) {
    const double x0 = room.x0, y0 = room.y0, x1 = room.x1, y1 = room.y1, bw = room.bw, bh = room.bh;
    const int backItems = r.uniInt(0, 3);
    for (int i = 0; i < backItems && bw > 40 && bh > 40; ++i) {
        const int kind = r.uniInt(0, 2);   // 0 window, 1 door, 2 frame
        const double iw = bw * r.uni(0.15, 0.4);
        const double ih = kind == 1 ? bh * r.uni(0.5, 0.8) : bh * r.uni(0.15, 0.4);
        const double ix = r.uni(x0 + 4, x1 - iw - 4);
        const double iy = kind == 1 ? y1 - ih : r.uni(y0 + 4, y1 - ih - 4);
        const P a(ix, iy), b(ix + iw, iy), c(ix + iw, iy + ih), d(ix, iy + ih);
        const cv::Vec3f col = kind == 0 ? wallLight(r) : r.randomColor(20, 230);
        r.fill({a, b, c, d}, col);
        if (kind == 1) {
            scene.addSegment(d, a);
            scene.addSegment(a, b);
            scene.addSegment(b, c);
            continue;
        }
        scene.addPolygon({a, b, c, d});
        const cv::Vec3f frame = drawFrame(r, a, b, c, d);
        if (kind == 0 && r.chance(0.7)) {   // mullions
            const P mt(ix + iw / 2, iy), mb(ix + iw / 2, iy + ih);
            const P ml(ix, iy + ih / 2), mr(ix + iw, iy + ih / 2);
            r.line(mt, mb, frame, 1);
            r.line(ml, mr, frame, 1);
            scene.addSegment(mt, mb);
            scene.addSegment(ml, mr);
        }
    }
}

// Windows and doors on the side walls (edges towards the vanishing point).
void drawSideWallItems(Renderer& r, Scene& scene, const Room& room) {
    const double x0 = room.x0, x1 = room.x1, W = room.W;
    const P vp = room.vp;
    for (int side = 0; side < 2; ++side) {
        const bool left = side == 0;
        const double edgeX = left ? x0 : x1;
        const double span = left ? x0 : W - x1;
        if (span < 30 || !r.chance(0.6)) continue;
        const P top = left ? room.tl : room.tr, bot = left ? room.bl : room.br;
        auto yAt = [&](P corner, double x) {
            return vp.y + (x - vp.x) * (corner.y - vp.y) / (corner.x - vp.x);
        };
        double xa = left ? r.uni(std::max(0.0, x0 - span), x0 - 12) : r.uni(x1 + 12, std::min(W, x1 + span));
        double xb = xa + (left ? 1 : -1) * r.uni(8, std::max(9.0, 0.5 * span));
        if (left) xb = std::min(xb, edgeX - 4);
        else xb = std::max(xb, edgeX + 4);
        const bool door = r.chance(0.35);
        const double fa = door ? r.uni(0.2, 0.45) : r.uni(0.15, 0.45);
        const double fb = door ? 1.0 : r.uni(0.55, 0.85);
        auto pt = [&](double x, double f) {
            const double yc = yAt(top, x), yf = yAt(bot, x);
            return P(x, yc + f * (yf - yc));
        };
        const P a = pt(xa, fa), b = pt(xb, fa), c = pt(xb, fb), d = pt(xa, fb);
        const cv::Vec3f col = door ? r.randomColor(20, 200) : wallLight(r);
        r.fill({a, b, c, d}, col);
        scene.addSegment(a, b);
        scene.addSegment(b, c);
        scene.addSegment(d, a);
        if (!door) {
            scene.addSegment(c, d);
            drawFrame(r, a, b, c, d);
        }
    }
}

// A box on the floor: front face [fx0, fx1] x [fy0, fy1], back face pulled towards the
// vanishing point by k.
struct Box {
    double fx0, fy0, fx1, fy1, k;
};

// One box: it hides what is behind its outline, then its visible side faces and its front.
void drawBox(Renderer& r, Scene& scene, const Box& bx, P vp) {
    const std::array<P, 4> f{P(bx.fx0, bx.fy0), P(bx.fx1, bx.fy0), P(bx.fx1, bx.fy1), P(bx.fx0, bx.fy1)};
    std::array<P, 4> g;
    for (int j = 0; j < 4; ++j) g[j] = f[j] + (vp - f[j]) * bx.k;
    std::vector<cv::Point2f> all;
    for (int j = 0; j < 4; ++j) {
        all.emplace_back(float(f[j].x), float(f[j].y));
        all.emplace_back(float(g[j].x), float(g[j].y));
    }
    std::vector<cv::Point2f> hull;
    cv::convexHull(all, hull);
    std::vector<P> hullD;
    for (const auto& h : hull) hullD.emplace_back(h.x, h.y);
    scene.occlude(hullD);
    const cv::Vec3f base = r.randomColor(30, 230);
    // Faces: top (f0 f1 g1 g0), right (f1 f2 g2 g1), bottom (f3 f2 g2 g3), left (f0 f3 g3 g0).
    const bool showTop = vp.y < bx.fy0, showBottom = vp.y > bx.fy1;
    const bool showLeft = vp.x < bx.fx0, showRight = vp.x > bx.fx1;
    auto face = [&](int i0, int i1, double s) {
        std::vector<P> q{f[i0], f[i1], g[i1], g[i0]};
        r.fill(q, r.shade(base, s));
        scene.addSegment(f[i1], g[i1]);
        scene.addSegment(g[i1], g[i0]);
        scene.addSegment(g[i0], f[i0]);
    };
    if (showTop) face(0, 1, r.uni(1.05, 1.3));
    if (showBottom) face(3, 2, r.uni(0.5, 0.8));
    if (showLeft) face(0, 3, r.uni(0.6, 0.9));
    if (showRight) face(1, 2, r.uni(0.6, 0.9));
    r.fill({f[0], f[1], f[2], f[3]}, base);
    scene.addPolygon({f[0], f[1], f[2], f[3]});
}

// Boxes on the floor, drawn far to near. Edges a side face shares with the front face are
// added twice; uniqueLines removes the copies.
void drawBoxes(Renderer& r, Scene& scene, const Room& room) {
    const double W = room.W, H = room.H;
    std::vector<Box> boxes;
    const int nBoxes = r.uniInt(0, 3);
    for (int i = 0; i < nBoxes; ++i) {
        Box bx;
        const double fw = W * r.uni(0.1, 0.35), fh = H * r.uni(0.08, 0.3);
        bx.fy1 = r.uni(std::max(room.y1 + 0.1 * H, room.vp.y + 20), H * 1.05);
        bx.fy0 = bx.fy1 - fh;
        bx.fx0 = r.uni(-0.1 * W, W - 0.6 * fw);
        bx.fx1 = bx.fx0 + fw;
        bx.k = r.uni(0.12, 0.35);   // depth: back face = front pulled towards vp by k
        boxes.push_back(bx);
    }
    std::sort(boxes.begin(), boxes.end(), [](const Box& a, const Box& b) { return a.fy1 < b.fy1; });
    for (const auto& bx : boxes) drawBox(r, scene, bx, room.vp);
}

// Clutter: filled ellipses occlude; curves and text are distractors (no ground truth).
void drawClutter(Renderer& r, Scene& scene, double W, double H) {
    const int nEllipses = r.uniInt(0, 4);
    for (int i = 0; i < nEllipses; ++i) {
        const double cy = r.uni(0, H);
        const cv::Point2d c(r.uni(0, W), cy);
        const double ay = r.uni(4, 0.12 * H);
        const cv::Size2d ax(r.uni(4, 0.12 * W), ay);
        std::vector<cv::Point2d> pts;
        cv::ellipse2Poly(c, ax, int(r.uni(0, 180)), 0, 360, 10, pts);
        scene.occlude(pts, 1.5);   // slightly generous: anti-aliased rim
        r.fill(std::vector<P>(pts.begin(), pts.end()), r.randomColor(10, 245));
    }
    const int nCurves = r.uniInt(1, 5);
    for (int i = 0; i < nCurves; ++i) {
        P p[3];
        for (P& q : p) {
            const double y = r.uni(0, H);
            q = P(r.uni(0, W), y);
        }
        const P p0 = p[0], p1 = p[1], p2 = p[2];
        const cv::Vec3f col = r.randomColor(10, 245);
        P prev = p0;
        for (int s = 1; s <= 24; ++s) {
            const double t = s / 24.0;
            const P q = p0 * ((1 - t) * (1 - t)) + p1 * (2 * t * (1 - t)) + p2 * (t * t);
            r.line(prev, q, col, 1);
            prev = q;
        }
    }
    if (r.chance(0.5)) {
        static const char* kWords[] = {"EXIT", "ROOM 12", "open", "Lab", "no. 7", "B2"};
        const std::string txt = kWords[r.uniInt(0, 5)];
        const cv::Scalar colour = cv::Scalar::all(r.uni(0, 255));
        const double size = r.uni(0.25, 0.6);
        const int ty = int(r.uni(10, H));
        cv::putText(r.image(), txt, cv::Point(int(r.uni(0, W * 0.7)), ty), cv::FONT_HERSHEY_SIMPLEX, size, colour, 1,
                    cv::LINE_AA);
    }
}

// Uneven lighting, then (half the time) a slight rotation about the centre; returns the map
// from scene to image coordinates (continuous ones, pixel centres at +0.5).
cv::Matx23d lightAndRotate(Renderer& r, int width, int height) {
    const double W = width, H = height;
    {
        cv::Mat light(3, 3, CV_32FC1);
        r.cvrng().fill(light, cv::RNG::UNIFORM, 0.65, 1.25);
        cv::resize(light, light, cv::Size(width, height), 0, 0, cv::INTER_CUBIC);
        cv::Mat l3;
        cv::cvtColor(light, l3, cv::COLOR_GRAY2RGB);
        r.image() = r.image().mul(l3);
    }
    cv::Matx23d m(1, 0, 0, 0, 1, 0);
    if (r.chance(0.5)) {
        const double deg = r.uni(-12, 12), th = std::abs(deg) * CV_PI / 180;
        const double scale = 1.01 * (std::cos(th) + std::sin(th) * std::max(W / H, H / W));
        cv::Mat rot = cv::getRotationMatrix2D(cv::Point2f(float(W / 2 - 0.5), float(H / 2 - 0.5)), deg, scale);
        // OpenCV's matrix acts on pixel-center coordinates; convert to continuous ones.
        cv::Matx23d mc;
        for (int i = 0; i < 2; ++i)
            for (int j = 0; j < 3; ++j) mc(i, j) = rot.at<double>(i, j);
        m = mc;
        m(0, 2) += 0.5 - (mc(0, 0) * 0.5 + mc(0, 1) * 0.5);
        m(1, 2) += 0.5 - (mc(1, 0) * 0.5 + mc(1, 1) * 0.5);
        cv::Mat out;
        cv::warpAffine(r.image(), out, rot, r.image().size(), cv::INTER_LINEAR, cv::BORDER_REFLECT101);
        r.image() = out;
    }
    return m;
}

// Blur, sensor noise, 8-bit conversion and (half the time) JPEG compression.
cv::Mat finishImage(Renderer& r, int width, int height) {
    const double sigma = r.uni(0.3, 1.4);
    cv::GaussianBlur(r.image(), r.image(), cv::Size(0, 0), sigma);
    cv::Mat noise(height, width, CV_32FC3);
    r.cvrng().fill(noise, cv::RNG::NORMAL, 0, r.uni(2, 12));
    r.image() += noise;
    cv::Mat image;
    r.image().convertTo(image, CV_8UC3);
    if (r.chance(0.5)) {
        std::vector<uchar> buf;
        cv::imencode(".jpg", image, buf, {cv::IMWRITE_JPEG_QUALITY, r.uniInt(35, 90)});
        image = cv::imdecode(buf, cv::IMREAD_COLOR);   // channel order kept as written
    }
    return image;
}

// `lines` [M, 4] without exact duplicates (shared face edges), in either endpoint order.
torch::Tensor uniqueLines(const torch::Tensor& lines) {
    std::vector<std::array<float, 4>> uniq;
    auto acc = lines.accessor<float, 2>();
    for (int64_t i = 0; i < lines.size(0); ++i) {
        std::array<float, 4> l{acc[i][0], acc[i][1], acc[i][2], acc[i][3]};
        bool dup = false;
        for (const auto& u : uniq) {
            const float d1 = std::abs(u[0] - l[0]) + std::abs(u[1] - l[1]) + std::abs(u[2] - l[2]) + std::abs(u[3] - l[3]);
            const float d2 = std::abs(u[0] - l[2]) + std::abs(u[1] - l[3]) + std::abs(u[2] - l[0]) + std::abs(u[3] - l[1]);
            if (std::min(d1, d2) < 0.5f) dup = true;
        }
        if (!dup) uniq.push_back(l);
    }
    torch::Tensor out = torch::zeros({int64_t(uniq.size()), 4}, torch::kFloat);
    for (size_t i = 0; i < uniq.size(); ++i)
        for (int j = 0; j < 4; ++j) out[int64_t(i)][j] = uniq[i][j];
    return out;
}

// ---- facades: buildings seen from the street -------------------------------------------------
//
// One or two walls of a building in two-point perspective (vertical edges stay vertical, the
// horizontal ones converge to vanishing points on an eye-level horizon), covered with a grid of
// windows, ribbon windows between floor slabs, or pilasters and ledges; sky above, ground
// below, trees and the rooms' clutter in front. Dense, repeated, parallel structure, as in
// photographs of buildings, which the rooms lack. Every straight edge drawn is ground truth
// except the distractors (trees, curves, text).

// A building material's colour: a grey of the given range with a slight tint (concrete,
// stone, plaster and brick are far less saturated than the rooms' paint).
cv::Vec3f muted(Renderer& r, double lo, double hi, double tint) {
    const float g = float(r.uni(lo, hi));
    const float tr = float(r.uni(-tint, tint)), tg = float(r.uni(-tint, tint)), tb = float(r.uni(-tint, tint));
    return cv::Vec3f(g + tr, g + tg, g + tb);
}

// A wall: the unit square (u right, v down) mapped onto the image by a homography.
struct Wall {
    cv::Matx33d h;
    P map(double u, double v) const {
        const cv::Vec3d q = h * cv::Vec3d(u, v, 1.0);
        return P(q[0] / q[2], q[1] / q[2]);
    }
    std::vector<P> quad(double u0, double v0, double u1, double v1) const {
        return {map(u0, v0), map(u1, v0), map(u1, v1), map(u0, v1)};
    }
};

Wall wallBetween(P topLeft, P topRight, P bottomRight, P bottomLeft) {
    const std::vector<cv::Point2f> src{{0, 0}, {1, 0}, {1, 1}, {0, 1}};
    const std::vector<cv::Point2f> dst{cv::Point2f(float(topLeft.x), float(topLeft.y)),
                                       cv::Point2f(float(topRight.x), float(topRight.y)),
                                       cv::Point2f(float(bottomRight.x), float(bottomRight.y)),
                                       cv::Point2f(float(bottomLeft.x), float(bottomLeft.y))};
    const cv::Mat m = cv::getPerspectiveTransform(src, dst);
    Wall w;
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) w.h(i, j) = m.at<double>(i, j);
    return w;
}

// Adds the quad's four edges as ground truth.
void addQuad(Scene& scene, const std::vector<P>& q) { scene.addPolygon(q); }

// The wall's surface: texture, then its pattern (windows, ribbons or pilasters), each edge
// ground truth. `budget` caps the number of windows.
void drawWallPattern(Renderer& r, Scene& scene, const Wall& wall, cv::Vec3f base, double shadeF, int budget) {
    const cv::Vec3f face = r.shade(base, shadeF);
    r.fill(wall.quad(0, 0, 1, 1), face);
    const int style = r.uniInt(0, 2);   // 0 window grid, 1 ribbon windows, 2 pilasters and ledges
    const cv::Vec3f glass = r.chance(0.7) ? muted(r, 20, 90, 15) : muted(r, 120, 210, 25);
    const cv::Vec3f accent = r.chance(0.5) ? r.shade(face, r.uni(0.5, 0.8)) : r.shade(face, r.uni(1.15, 1.4));
    if (style == 0) {
        int floors = r.uniInt(2, 6), cols = r.uniInt(2, 6);
        while (floors * cols > budget && (floors > 1 || cols > 1)) {
            if (cols >= floors) --cols;
            else --floors;
        }
        const double mx = r.uni(0.15, 0.35), my = r.uni(0.2, 0.4);
        const cv::Mat glassTex = r.texture(glass);
        const bool framed = r.chance(0.5);
        for (int f = 0; f < floors; ++f)
            for (int c = 0; c < cols; ++c) {
                const double u0 = (c + mx / 2) / cols, u1 = (c + 1 - mx / 2) / cols;
                const double v0 = (f + my / 2) / floors, v1 = (f + 1 - my / 2) / floors;
                const auto q = wall.quad(u0, v0, u1, v1);
                r.fill(q, glassTex);
                if (framed) {
                    r.line(q[0], q[1], accent, 1);
                    r.line(q[1], q[2], accent, 1);
                    r.line(q[2], q[3], accent, 1);
                    r.line(q[3], q[0], accent, 1);
                }
                addQuad(scene, q);
            }
    } else if (style == 1) {
        const int floors = r.uniInt(2, 7);
        const double band = r.uni(0.3, 0.6), margin = r.chance(0.5) ? 0.0 : r.uni(0.03, 0.1);
        const int mullions = r.chance(0.5) ? 0 : r.uniInt(2, 6);
        const cv::Mat glassTex = r.texture(glass);
        for (int f = 0; f < floors; ++f) {
            const double v0 = (f + (1 - band) / 2) / floors, v1 = (f + (1 + band) / 2) / floors;
            const auto q = wall.quad(margin, v0, 1 - margin, v1);
            r.fill(q, glassTex);
            if (margin > 0) addQuad(scene, q);
            else {
                scene.addSegment(q[0], q[1]);
                scene.addSegment(q[3], q[2]);
            }
            for (int k = 1; k < mullions; ++k) {
                const double u = margin + (1 - 2 * margin) * k / mullions;
                const P a = wall.map(u, v0), b = wall.map(u, v1);
                r.line(a, b, accent, 1);
                scene.addSegment(a, b);
            }
        }
    } else {
        const int pilasters = r.uniInt(2, 6), ledges = r.uniInt(1, 6);
        const double width = r.uni(0.08, 0.25) / pilasters;
        for (int k = 0; k < pilasters; ++k) {
            const double uc = (k + 0.5) / pilasters;
            const auto q = wall.quad(uc - width / 2, 0, uc + width / 2, 1);
            r.fill(q, accent);
            scene.addSegment(q[0], q[3]);
            scene.addSegment(q[1], q[2]);
        }
        for (int k = 1; k <= ledges; ++k) {
            const double v = double(k) / (ledges + 1);
            const P a = wall.map(0, v), b = wall.map(1, v);
            r.line(a, b, accent, 2);
            scene.addSegment(a, b);
        }
    }
}

// Trees: clusters of dark green blobs that hide what is behind them (no ground truth).
void drawTrees(Renderer& r, Scene& scene, double W, double H) {
    const int trees = r.uniInt(0, 3);
    for (int t = 0; t < trees; ++t) {
        const P root(r.uni(-0.1 * W, 1.1 * W), r.uni(0.75 * H, 1.1 * H));
        const double size = r.uni(0.08, 0.3) * H;
        const int blobs = r.uniInt(3, 8);
        for (int b = 0; b < blobs; ++b) {
            const double cy = root.y - r.uni(0.3, 1.6) * size;
            const cv::Point2d c(root.x + r.uni(-0.8, 0.8) * size, cy);
            const double ay = r.uni(0.3, 0.7) * size;
            const cv::Size2d ax(r.uni(0.3, 0.7) * size, ay);
            std::vector<cv::Point2d> pts;
            cv::ellipse2Poly(c, ax, int(r.uni(0, 180)), 0, 360, 10, pts);
            scene.occlude(pts, 1.5);
            const float red = float(r.uni(20, 90)), g = float(r.uni(50, 140)), blue = float(r.uni(15, 70));
            r.fill(std::vector<P>(pts.begin(), pts.end()), cv::Vec3f(red, g, blue));
        }
    }
}

void drawFacade(Renderer& r, Scene& scene, int width, int height) {
    const double W = width, H = height;
    // Sky, ground and the line between them.
    const float skyR = float(r.uni(120, 215)), skyG = float(r.uni(150, 230)), skyB = float(r.uni(180, 255));
    r.fill({P(0, 0), P(W, 0), P(W, H), P(0, H)}, cv::Vec3f(skyR, skyG, skyB));
    const double horizon = r.uni(0.35, 0.8) * H;   // eye level: the vanishing points' height
    const double groundY = horizon + r.uni(0.05, 0.4) * H;
    if (groundY < H - 2) {
        r.fill({P(-1, groundY), P(W + 1, groundY), P(W + 1, H + 1), P(-1, H + 1)}, muted(r, 50, 150, 25));
        scene.addSegment(P(0, groundY), P(W, groundY));
    }
    // The building: a vertical corner edge at xc, walls to its left and right (or one frontal).
    const bool twoWalls = r.chance(0.65);
    const double xc = twoWalls ? r.uni(0.2, 0.8) * W : r.uni(-0.1, 0.3) * W;
    const double top = r.uni(-0.3, 0.35) * H, bottom = std::max(groundY, horizon + 4) + r.uni(-0.02, 0.03) * H;
    const cv::Vec3f base = r.chance(0.8) ? muted(r, 90, 235, 18) : r.randomColor(70, 235);
    const double lightLeft = r.uni(0.55, 1.0), lightRight = r.uni(0.7, 1.15);
    auto yOn = [&](double y0, double x, double vpx) { return y0 + (x - xc) * (horizon - y0) / (vpx - xc); };
    std::vector<Wall> walls;
    if (twoWalls) {
        const double vpl = xc - r.uni(1.2, 4.0) * W, xa = xc - r.uni(0.5, 1.2) * (xc + 0.1 * W);
        walls.push_back(wallBetween(P(xa, yOn(top, xa, vpl)), P(xc, top), P(xc, bottom), P(xa, yOn(bottom, xa, vpl))));
    }
    {
        const double vpr = xc + r.uni(twoWalls ? 1.2 : 4.0, twoWalls ? 4.0 : 30.0) * W;
        const double xb = xc + r.uni(0.5, 1.2) * (W - xc + 0.1 * W);
        walls.push_back(wallBetween(P(xc, top), P(xb, yOn(top, xb, vpr)), P(xb, yOn(bottom, xb, vpr)), P(xc, bottom)));
    }
    const int budget = twoWalls ? 8 : 14;
    for (size_t i = 0; i < walls.size(); ++i) {
        const auto q = walls[i].quad(0, 0, 1, 1);
        scene.occlude(q);
        addQuad(scene, q);
        const double light = (twoWalls && i == 0) ? lightLeft : lightRight;
        drawWallPattern(r, scene, walls[i], base, light, budget);
    }
    drawTrees(r, scene, W, H);
    drawClutter(r, scene, W, H);
}

// What every scene ends with: lighting and rotation, blur, noise and JPEG, and the visible
// ground truth mapped into the image.
LineSample finishScene(Renderer& r, const Scene& scene, std::string name, int width, int height, double minLength) {
    const cv::Matx23d m = lightAndRotate(r, width, height);
    LineSample s;
    s.name = std::move(name);
    s.image = finishImage(r, width, height);
    s.lines = uniqueLines(scene.lines(m, width, height, minLength));
    return s;
}

} // namespace

LineSample renderProceduralScene(uint64_t seed, int64_t index, int width, int height, double minLength) {
    Renderer r(width, height, splitmix(splitmix(seed) ^ uint64_t(index)));
    Scene scene;
    const Room room = randomRoom(r, width, height);
    drawRoom(r, scene, room, width, height);
    drawBackWallItems(r, scene, room);
    drawSideWallItems(r, scene, room);
    drawBoxes(r, scene, room);
    drawClutter(r, scene, room.W, room.H);
    return finishScene(r, scene, "procedural/" + std::to_string(seed) + "/" + std::to_string(index), width, height,
                       minLength);
}

LineSample renderFacadeScene(uint64_t seed, int64_t index, int width, int height, double minLength) {
    // Its own stream of draws: facade i of seed s is not room i of seed s restyled.
    Renderer r(width, height, splitmix(splitmix(seed ^ 0xfacade5eedULL) ^ uint64_t(index)));
    Scene scene;
    drawFacade(r, scene, width, height);
    return finishScene(r, scene, "facades/" + std::to_string(seed) + "/" + std::to_string(index), width, height,
                       minLength);
}

const char* proceduralScenesName(ProceduralScenes scenes) {
    switch (scenes) {
    case ProceduralScenes::Rooms: return "rooms";
    case ProceduralScenes::Facades: return "facades";
    case ProceduralScenes::Mixed: return "mixed";
    }
    return "rooms";
}

bool parseProceduralScenes(const std::string& name, ProceduralScenes& out) {
    for (auto k : {ProceduralScenes::Rooms, ProceduralScenes::Facades, ProceduralScenes::Mixed})
        if (name == proceduralScenesName(k)) {
            out = k;
            return true;
        }
    return false;
}

ProceduralLines::ProceduralLines(const ProceduralOptions& opts) : opts_(opts) {
    if (opts.count < 0 || opts.count > (int64_t(1) << 40))
        throw Error("procedural dataset: bad image count " + std::to_string(opts.count));
    if (opts.width < 32 || opts.height < 32 || opts.width > 4096 || opts.height > 4096)
        throw Error("procedural dataset: image size " + std::to_string(opts.width) + "x" +
                    std::to_string(opts.height) + " is outside 32..4096");
}

LineSample ProceduralLines::get(int64_t index) const {
    if (index < 0 || index >= opts_.count)
        throw Error("procedural dataset: index " + std::to_string(index) + " out of range (" +
                    std::to_string(opts_.count) + " images)");
    const bool facade = opts_.scenes == ProceduralScenes::Facades ||
                        (opts_.scenes == ProceduralScenes::Mixed && index % 2 == 1);
    return facade ? renderFacadeScene(opts_.seed, index, opts_.width, opts_.height, opts_.minLength)
                  : renderProceduralScene(opts_.seed, index, opts_.width, opts_.height, opts_.minLength);
}

std::string ProceduralLines::describe() const {
    std::ostringstream s;
    s << "procedural:" << opts_.count << ":" << opts_.seed << ":" << opts_.width << "x" << opts_.height;
    if (opts_.scenes != ProceduralScenes::Rooms) s << ":" << proceduralScenesName(opts_.scenes);
    s << " (" << opts_.count << " images)";
    return s.str();
}

} // namespace glimpse::data
