// ch12:pdl:01_stream_order — producer then consumer, two plain launches on one stream (the baseline).
//
// What: the producer (y = silu(x), float4 grid-stride loop) and the consumer (out = y * w + b, each thread
// loading its 4 columns' w and b once and then walking rows) launched one after the other with <<<>>>.
// Stream order is the dependency: the consumer starts after the producer has completed.
// Why it leaves time on the table: "completed" means the last producer block has exited and its writes
// are flushed; only then is the consumer's grid launched, its blocks distributed to the SMs and its
// prologue (the w and b loads, a DRAM round trip on a cold L2) run. For that whole gap the SMs hold no
// work, and at a few µs per kernel the gap is a visible share of the pair's time.
// Napkin math: each kernel moves ~8 MiB at the default 256 x 4096 (x in, y out; y in, out out): ~2 µs
// each at a Hopper's ~4 TB/s DRAM rate, about as long as the gap between them (launch latency plus
// drain and ramp-up, of the order of a few µs; `aisp hw peaks` measures an empty kernel's event time).
// Run: aisp bench run --targets ch12:pdl:01_stream_order
#include "chapters/ch12_graphs/pdl/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch12::pdl::v01 {

__device__ __forceinline__ float silu(float v) { return v / (1.0f + expf(-v)); }

__global__ void silu_kernel(const float4* __restrict__ x, float4* __restrict__ y, std::size_t n4) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n4; i += stride) {
    const float4 v = x[i];
    y[i] = make_float4(silu(v.x), silu(v.y), silu(v.z), silu(v.w));
  }
}

// y carries no __restrict__: it is the other kernel's output (step 02 reads it while that kernel may
// still be running, and keeps the loads on the coherent path; the same code here keeps the diff to the
// one idea).
__global__ void scale_bias_kernel(const float4* y, const float4* __restrict__ w, const float4* __restrict__ b,
                                  float4* __restrict__ out, int rows, int groups) {
  const int g = static_cast<int>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (g >= groups) return;
  // Prologue: this thread's 4 columns of scale and bias, independent of the producer.
  const float4 wv = w[g];
  const float4 bv = b[g];
  for (int r = static_cast<int>(blockIdx.y); r < rows; r += static_cast<int>(gridDim.y)) {
    const std::size_t i = static_cast<std::size_t>(r) * groups + g;
    const float4 v = y[i];
    out[i] = make_float4(fmaf(v.x, wv.x, bv.x), fmaf(v.y, wv.y, bv.y), fmaf(v.z, wv.z, bv.z),
                         fmaf(v.w, wv.w, bv.w));
  }
}

void launch(const Args& a, cudaStream_t stream) {
  const std::size_t n4 = static_cast<std::size_t>(a.rows) * static_cast<std::size_t>(a.cols) / 4;
  silu_kernel<<<producer_blocks(a), k_threads, 0, stream>>>(reinterpret_cast<const float4*>(a.x),
                                                           reinterpret_cast<float4*>(a.y), n4);
  AISP_CHECK_LAUNCH();
  scale_bias_kernel<<<consumer_grid(a), k_threads, 0, stream>>>(
      reinterpret_cast<const float4*>(a.y), reinterpret_cast<const float4*>(a.w),
      reinterpret_cast<const float4*>(a.b), reinterpret_cast<float4*>(a.out), a.rows, a.cols / 4);
  AISP_CHECK_LAUNCH();
}

AISP_REGISTER_VARIANT(PdlProblem, launch, .step = 1, .slug = "stream_order", .kind = VariantKind::baseline,
                      .summary = "producer and consumer as two plain launches: the consumer starts after the "
                                 "producer completes");

}  // namespace aisp::ch12::pdl::v01
