#include "core/rl/envs/game.h"

#include <deque>

namespace glimpse::rl {

std::vector<int> bfsDistances(int h, int w, const std::vector<Pos>& sources, const Passable& passable) {
    std::vector<int> dist(size_t(h) * w, -1);
    std::deque<Pos> queue;
    for (Pos s : sources) {
        if (s.y < 0 || s.y >= h || s.x < 0 || s.x >= w || dist[s.y * w + s.x] == 0) continue;
        dist[s.y * w + s.x] = 0;
        queue.push_back(s);
    }
    while (!queue.empty()) {
        Pos p = queue.front();
        queue.pop_front();
        for (Pos d : kDirs) {
            Pos q = p + d;
            if (q.y < 0 || q.y >= h || q.x < 0 || q.x >= w || dist[q.y * w + q.x] >= 0 || !passable(q))
                continue;
            dist[q.y * w + q.x] = dist[p.y * w + p.x] + 1;
            queue.push_back(q);
        }
    }
    return dist;
}

int bfsFirstStep(int h, int w, Pos from, const Passable& passable, const Passable& goal) {
    std::vector<int> first(size_t(h) * w, -2);  // -2 unvisited; else the first move taken
    std::deque<Pos> queue;
    first[from.y * w + from.x] = -1;
    queue.push_back(from);
    while (!queue.empty()) {
        Pos p = queue.front();
        queue.pop_front();
        for (int d = 0; d < 4; ++d) {
            Pos q = p + kDirs[d];
            if (q.y < 0 || q.y >= h || q.x < 0 || q.x >= w || first[q.y * w + q.x] != -2 || !passable(q))
                continue;
            int move = p == from ? d : first[p.y * w + p.x];
            if (goal(q)) return move;
            first[q.y * w + q.x] = move;
            queue.push_back(q);
        }
    }
    return -1;
}

std::vector<uint8_t> parseMaze(const std::vector<std::string>& rows) {
    std::vector<uint8_t> wall;
    for (const auto& row : rows)
        for (char c : row) wall.push_back(c == '#' ? 1 : 0);
    return wall;
}

} // namespace glimpse::rl
