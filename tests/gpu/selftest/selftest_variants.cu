// The self-test variants. They live in one file because they are fixtures, not a ladder to read.
#include <stdexcept>

#include "device/cuda_check.hpp"
#include "device/kernel_facts.hpp"
#include "tests/gpu/selftest/problem.hpp"

namespace aisp::selftest {

__global__ void copy_kernel(const float* src, float* dst, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) dst[i] = src[i];
}

// Off by one on every 1000th element, starting at index 7.
__global__ void wrong_kernel(const float* src, float* dst, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    dst[i] = i % 1000 == 7 ? src[i] + 1.0f : src[i];
  }
}

// Writes far outside any allocation: an illegal address, which loses the CUDA context (a sticky error).
__global__ void crash_kernel(float* dst) { dst[threadIdx.x + (std::size_t{1} << 40)] = 1.0f; }

// Never ends: the flag it waits for is never set.
__global__ void hang_kernel(volatile int* never) {
  while (*never == 0) {
  }
}

namespace honest {
void launch(const Args& a, cudaStream_t s) {
  copy_kernel<<<128, 256, 0, s>>>(a.src, a.dst, a.n);
  AISP_CHECK_LAUNCH();
}
// Registers, occupancy, ...: the harness stores them in the result (Harness.VariantFactsReachTheResults).
std::vector<Fact> facts(const Args&) { return standard_facts(kernel_facts(reinterpret_cast<const void*>(&copy_kernel), 256)); }
AISP_REGISTER_VARIANT_WITH_FACTS(SelftestCopyProblem, launch, facts, .step = 1, .slug = "honest",
                                 .kind = VariantKind::baseline, .summary = "a correct copy");
}  // namespace honest

namespace wrong {
void launch(const Args& a, cudaStream_t s) {
  wrong_kernel<<<128, 256, 0, s>>>(a.src, a.dst, a.n);
  AISP_CHECK_LAUNCH();
}
// Facts that cannot be read cost a note, never the verdict (which is FAIL here for its values).
std::vector<Fact> facts(const Args&) { throw std::runtime_error("no facts for this one"); }
AISP_REGISTER_VARIANT_WITH_FACTS(SelftestCopyProblem, launch, facts, .step = 2, .slug = "wrong",
                                 .kind = VariantKind::step,
                                 .summary = "wrong value at every 1000th element: must be FAIL");
}  // namespace wrong

namespace crash {
void launch(const Args& a, cudaStream_t s) {
  crash_kernel<<<1, 32, 0, s>>>(a.dst);
  AISP_CHECK_LAUNCH();
}
AISP_REGISTER_VARIANT(SelftestCopyProblem, launch, .step = 3, .slug = "crash", .kind = VariantKind::step,
                      .summary = "illegal address: must be ERROR, and the others must still finish");
}  // namespace crash

namespace hang {
class Hang {
 public:
  void setup(const Args&, cudaStream_t) {
    AISP_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&m_flag), sizeof(int)));
    AISP_CUDA_CHECK(cudaMemset(m_flag, 0, sizeof(int)));
  }
  void launch(const Args&, cudaStream_t s) {
    hang_kernel<<<1, 1, 0, s>>>(m_flag);
    AISP_CHECK_LAUNCH();
  }
  ~Hang() { cudaFree(m_flag); }

 private:
  int* m_flag = nullptr;
};
AISP_REGISTER_STATEFUL_VARIANT(SelftestCopyProblem, Hang, .step = 4, .slug = "hang", .kind = VariantKind::step,
                               .summary = "never finishes: must be ERROR after --timeout");
}  // namespace hang

namespace vec {
__global__ void copy4_kernel(const float4* src, float4* dst, std::size_t n4) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) dst[i] = src[i];
}
void launch(const Args& a, cudaStream_t s) {
  copy4_kernel<<<128, 256, 0, s>>>(reinterpret_cast<const float4*>(a.src), reinterpret_cast<float4*>(a.dst),
                                   a.n / 4);
  AISP_CHECK_LAUNCH();
  copy_kernel<<<1, 32, 0, s>>>(a.src + a.n / 4 * 4, a.dst + a.n / 4 * 4, a.n % 4);
  AISP_CHECK_LAUNCH();
}
AISP_REGISTER_VARIANT(SelftestCopyProblem, launch, .step = 5, .slug = "honest_vec", .kind = VariantKind::optimized,
                      .summary = "a correct float4 copy, after the crash and the hang: must be PASS");
}  // namespace vec

}  // namespace aisp::selftest
