// The host emulator's fibers (codegen/host_fibers.hpp, driven through kernel_host.hpp): the
// depth-first schedule the host kernel tests' result checks rely on (each warp runs its stretch
// between block barriers before the next warp starts, in ascending thread order, or descending
// under ATTNFUSE_HOST_COPIES=flipped), lagging threads, and a block whose threads all wait
// reported as a deadlock at once.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "codegen/kernel_host.hpp"

namespace attnfuse {
namespace {

constexpr unsigned kThreads = 64;  // two warps
constexpr int kStretches = 3;

// (stretch, thread) in the order the threads ran: each thread notes itself twice per stretch
// between block barriers, around a warp collective.
std::vector<std::pair<int, unsigned>> trace_block() {
  std::vector<std::pair<int, unsigned>> events;
  attnfuse_host_cuda::launch_on_host(1, kThreads, [&] {
    for (int stretch = 0; stretch < kStretches; ++stretch) {
      events.emplace_back(stretch, threadIdx.x);
      __syncwarp();
      events.emplace_back(stretch, threadIdx.x);
      __syncthreads();
    }
  });
  return events;
}

// Warp `first`'s lanes twice (before and after their collective), then the other warp's, per
// stretch; lanes in `descending` order.
std::vector<std::pair<int, unsigned>> depth_first(unsigned first_warp, bool descending) {
  std::vector<std::pair<int, unsigned>> want;
  for (int stretch = 0; stretch < kStretches; ++stretch)
    for (unsigned w : {first_warp, 1 - first_warp})
      for (int twice = 0; twice < 2; ++twice)
        for (unsigned l = 0; l < 32; ++l) want.emplace_back(stretch, 32 * w + (descending ? 31 - l : l));
  return want;
}

TEST(FibersOnHost, WarpsRunTheirStretchesOneAfterAnother) {
  const bool descending = attnfuse_host_cuda::flipped_schedule();
  EXPECT_EQ(trace_block(), depth_first(descending ? 1 : 0, descending));
}

// Lagging threads run only while no other thread can: warp 0 lags, so warp 1 runs each stretch
// first whatever the order.
TEST(FibersOnHost, LaggingThreadsRunLast) {
  const bool descending = attnfuse_host_cuda::flipped_schedule();
  attnfuse_host_cuda::lag = {0, 32};
  const auto events = trace_block();
  attnfuse_host_cuda::lag = {};
  EXPECT_EQ(events, depth_first(1, descending));
}

// A lane that skips its warp's collective leaves the other 31 waiting for it once the rest of the
// block is done: on the GPU a hang, here a message and an abort.
TEST(FibersOnHost, EveryThreadWaitingIsADeadlock) {
  EXPECT_DEATH(attnfuse_host_cuda::launch_on_host(1, kThreads,
                                                  [] {
                                                    if (threadIdx.x != 5) __syncwarp();
                                                  }),
               "kernel_host: a deadlock: every live thread of the block waits");
}

}  // namespace
}  // namespace attnfuse
