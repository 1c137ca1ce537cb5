// GPU test main: skips (exit 77, CTest's SKIP_RETURN_CODE) with the reason when there is no usable
// device, and doubles as the aisp worker so that the orchestrator can re-execute this binary.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "cli/commands.hpp"
#include "device/device_info.hpp"

int main(int argc, char** argv) {
  if (argc > 1 && (std::strcmp(argv[1], "__worker") == 0 || std::strcmp(argv[1], "__profile-worker") == 0)) {
    return aisp::cli::run(argc, argv);
  }
  std::string why;
  if (aisp::cuda_device_count(&why) == 0) {
    std::printf("SKIPPED: no CUDA device: %s\n", why.c_str());
    return 77;
  }
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
