// Entry point of the GPU suite: one clear line and the skip code (77) where there is no device.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "runtime/cuda_driver.hpp"

int main(int argc, char** argv) {
  std::string why;
  if (!attnfuse::runtime::cuda_available(&why)) {
    std::printf("attnfuse GPU tests skipped: no usable CUDA device (%s)\n", why.c_str());
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
