// ch07:reduction:vendor_cub — cub::DeviceReduce::Sum: the library reference.
//
// CUB sizes its temporary storage with a first call (null storage pointer); that storage is allocated once
// in setup, outside the timed launches, and every launch is one DeviceReduce::Sum call on the stream. CUB
// writes the result itself (no zeroing needed) and sums in fp32 like the hand-written steps.
// Run: aisp bench run --targets ch07:reduction:vendor_cub
#include <cub/device/device_reduce.cuh>

#include <cstddef>
#include <cstdint>

#include "chapters/ch07_memory_access/reduction/problem.hpp"
#include "device/buffer.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch07::reduction::vendor {

class CubSum {
 public:
  void setup(const Args& a, cudaStream_t stream) {
    std::size_t bytes = 0;
    AISP_CUDA_CHECK(cub::DeviceReduce::Sum(nullptr, bytes, a.x, a.out, items(a), stream));
    m_temp = DeviceBuffer<unsigned char>(bytes);
  }

  void launch(const Args& a, cudaStream_t stream) {
    std::size_t bytes = m_temp.bytes();
    AISP_CUDA_CHECK(cub::DeviceReduce::Sum(m_temp.data(), bytes, a.x, a.out, items(a), stream));
  }

 private:
  // A 64-bit count: n may pass 2^31.
  static std::int64_t items(const Args& a) { return static_cast<std::int64_t>(a.n); }

  DeviceBuffer<unsigned char> m_temp;
};

AISP_REGISTER_STATEFUL_VARIANT(ReductionProblem, CubSum, .step = 0, .slug = "cub", .kind = VariantKind::vendor,
                               .summary = "cub::DeviceReduce::Sum, temporary storage allocated in setup");

}  // namespace aisp::ch07::reduction::vendor
