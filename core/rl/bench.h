#pragma once
// `glimpse bench rl`: environment throughput per game and batched MCTS throughput with the
// CPU-sized EfficientZero network, on the current LibTorch thread count.
#include <iosfwd>

namespace glimpse::rl {

void runRlBench(std::ostream& os);

} // namespace glimpse::rl
