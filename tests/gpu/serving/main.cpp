// The serving GPU tests' main. Without a usable CUDA device it still runs the host-only tests (the step
// metadata: StepMetadata.*), then exits 77 (CTest's SKIP_RETURN_CODE) naming why the rest did not run.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdio>

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    const char* why = status != cudaSuccess ? cudaGetErrorString(status) : "no device";
    testing::GTEST_FLAG(filter) = "StepMetadata.*";
    if (RUN_ALL_TESTS() != 0) return 1;
    std::printf("SKIPPED: no CUDA device (%s): only the host-only StepMetadata tests ran\n", why);
    return 77;
  }
  return RUN_ALL_TESTS();
}
