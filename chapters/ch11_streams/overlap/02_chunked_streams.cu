// ch11:overlap:02_chunked_streams — the same copies and kernel, cut into `chunks` pieces issued round-robin
// on 4 streams, so that chunk i's kernel runs while chunk i+1 is copied in and chunk i-1 is copied out.
//
// What changed: one idea, the schedule. The buffer is cut into `chunks` pieces (axis, default 16;
// chunk_range in reference.hpp); each piece gets its own copy in, kernel and copy out, in that order, on
// stream c % 4. The streams are created in setup(); each launch forks them from the harness's stream with
// an event and joins them back with one event each, so all of the work lies between the harness's start
// and end events. Same kernel, same bytes, same pinned buffers as step 01.
// Why it helps: work on different streams may run at the same time, and the three pieces of a chunk use
// three different engines: the host -> device copy engine, the SMs, the device -> host copy engine. PCIe
// is full duplex, so both copies run at full speed at once. In the steady state every engine works on a
// different chunk, and the time falls from copy in + compute + copy out to about the longest of the three.
// Why 4 streams: a chunk passes three stages, so three streams in flight keep every engine busy; the
// fourth leaves slack. Stream order still holds within a stream: chunk c + 4 is copied in only after
// chunk c was copied out, by which time the pipeline has moved on. Chunks touch disjoint bytes of the
// staging buffers, so no two streams race on memory.
// Napkin math (defaults): the pipeline fills and drains one chunk's worth of each stage, then runs at the
// slowest stage: ~9.8 ms of copy per direction + (9.8 + 4) / 16 ms of fill and drain ~ 10.7 ms, against
// ~24 ms serial (~2.2x). More chunks shrink the fill and drain; each chunk adds a few microseconds of
// launch and copy set-up, and a chunk too small to fill the GPU slows its own kernel.
// Run: aisp bench run --targets ch11:overlap:02_chunked_streams
#include <array>
#include <string>
#include <vector>

#include "chapters/ch11_streams/overlap/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch11::overlap::v02 {

constexpr int k_threads = 256;
constexpr int k_streams = 4;

// Step 01's kernel, unchanged.
__global__ void horner_kernel(const float* __restrict__ x, float* __restrict__ y, std::size_t n, int fmas) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * k_threads + threadIdx.x;
  if (i >= n) return;
  const float v = x[i];
  float acc = 1.0f;
#pragma unroll 8
  for (int j = 0; j < fmas; ++j) acc = __fmaf_rn(acc, v, 1.0f);
  y[i] = acc;
}

class ChunkedStreams {
 public:
  ChunkedStreams() = default;
  ChunkedStreams(const ChunkedStreams&) = delete;
  ChunkedStreams& operator=(const ChunkedStreams&) = delete;

  void setup(const Args& /*a*/, cudaStream_t /*stream*/) {
    // Non-blocking: the streams never wait on the legacy default stream, only on what launch() orders.
    for (auto& s : m_streams) AISP_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    // Events only order work here; timing them would cost a timestamp each.
    AISP_CUDA_CHECK(cudaEventCreateWithFlags(&m_fork, cudaEventDisableTiming));
    for (auto& e : m_joins) AISP_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }

  void launch(const Args& a, cudaStream_t stream) {
    // Fork: nothing on the side streams starts before what the harness queued before this launch.
    AISP_CUDA_CHECK(cudaEventRecord(m_fork, stream));
    for (const cudaStream_t s : m_streams) AISP_CUDA_CHECK(cudaStreamWaitEvent(s, m_fork, 0));
    // Depth first: each chunk's copy in, kernel and copy out together. Each stream maps to its own
    // hardware queue, so a chunk's waiting kernel does not hold back the next chunk's copy.
    for (int c = 0; c < a.chunks; ++c) {
      const ChunkRange r = chunk_range(a.n, a.chunks, c);
      if (r.count == 0) continue;
      const cudaStream_t s = m_streams[static_cast<std::size_t>(c % k_streams)];
      const std::size_t bytes = r.count * sizeof(float);
      AISP_CUDA_CHECK(cudaMemcpyAsync(a.dev_in + r.begin, a.host_in + r.begin, bytes, cudaMemcpyHostToDevice, s));
      const auto blocks = static_cast<unsigned>((r.count + k_threads - 1) / k_threads);
      horner_kernel<<<blocks, k_threads, 0, s>>>(a.dev_in + r.begin, a.dev_out + r.begin, r.count, a.fmas);
      AISP_CHECK_LAUNCH();
      AISP_CUDA_CHECK(cudaMemcpyAsync(a.host_out + r.begin, a.dev_out + r.begin, bytes, cudaMemcpyDeviceToHost, s));
    }
    // Join: the harness's stream (and so its end event) waits for the last work of every stream.
    for (std::size_t i = 0; i < m_streams.size(); ++i) {
      AISP_CUDA_CHECK(cudaEventRecord(m_joins[i], m_streams[i]));
      AISP_CUDA_CHECK(cudaStreamWaitEvent(stream, m_joins[i], 0));
    }
  }

  std::vector<Fact> facts(const Args& a) {
    const ChunkRange first = chunk_range(a.n, a.chunks, 0);
    return {{"streams", std::to_string(k_streams)},
            {"chunk_kib", std::to_string(first.count * sizeof(float) / 1024)}};
  }

  ~ChunkedStreams() {
    // Destroying a stream or event with work pending is safe: the driver releases it once the work is done.
    for (const cudaEvent_t e : m_joins) {
      if (e) cudaEventDestroy(e);
    }
    if (m_fork) cudaEventDestroy(m_fork);
    for (const cudaStream_t s : m_streams) {
      if (s) cudaStreamDestroy(s);
    }
  }

 private:
  std::array<cudaStream_t, k_streams> m_streams{};
  std::array<cudaEvent_t, k_streams> m_joins{};
  cudaEvent_t m_fork = nullptr;
};

AISP_REGISTER_STATEFUL_VARIANT(OverlapProblem, ChunkedStreams, .step = 2, .slug = "chunked_streams",
                               .kind = VariantKind::optimized,
                               .summary = "chunks round-robin on 4 streams: copy in, compute, copy out overlap");

}  // namespace aisp::ch11::overlap::v02
