// The CUPTI recorder on a real GPU: it records a window's work, detaches CUPTI from the process after it
// (no timed launch runs under CUPTI), and attaches again for the next window with nothing lost.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "device/activity.hpp"
#include "device/buffer.hpp"
#include "device/cuda_check.hpp"

namespace {

using namespace aisp;

std::size_t memsets_on(const std::vector<ActivityRecord>& records, std::uint32_t stream) {
  return static_cast<std::size_t>(std::count_if(records.begin(), records.end(), [&](const ActivityRecord& r) {
    return r.kind == ActivityRecord::Kind::memset && r.stream == stream;
  }));
}

TEST(ActivityRecorder, DetachesBetweenWindowsAndRecordsAfterReattaching) {
  std::string why;
  auto recorder = ActivityRecorder::create(&why);
  if (!recorder) GTEST_SKIP() << why;
  DeviceBuffer<std::uint8_t> buffer(1 << 20);
  cudaStream_t stream = nullptr;
  AISP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  ASSERT_TRUE(recorder->detach(&why)) << why;
  double cycle_ms = 0;
  for (int window = 0; window < 3; ++window) {
    const auto t0 = std::chrono::steady_clock::now();
    recorder->start();
    for (int k = 0; k <= window; ++k) AISP_CUDA_CHECK(cudaMemsetAsync(buffer.data(), k, buffer.size(), stream));
    AISP_CUDA_CHECK(cudaStreamSynchronize(stream));
    const auto records = recorder->stop();
    const std::uint32_t id = recorder->stream_id(stream);
    EXPECT_EQ(memsets_on(records, id), static_cast<std::size_t>(window + 1)) << "window " << window;
    ASSERT_TRUE(recorder->detach(&why)) << "window " << window << ": " << why;
    cycle_ms = std::max(cycle_ms, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  // Work between windows is never recorded: the next window starts empty.
  AISP_CUDA_CHECK(cudaMemsetAsync(buffer.data(), 7, buffer.size(), stream));
  AISP_CUDA_CHECK(cudaStreamSynchronize(stream));
  recorder->start();
  const auto records = recorder->stop();
  EXPECT_EQ(memsets_on(records, recorder->stream_id(stream)), 0u);
  ASSERT_TRUE(recorder->detach(&why)) << why;
  std::printf("attach, record, detach: at most %.1f ms a window\n", cycle_ms);
  AISP_CUDA_CHECK(cudaStreamDestroy(stream));
}

}  // namespace
