// ch04:allreduce:02_p2p_ring — a ring all-reduce written by hand over peer access: reduce-scatter, then
// all-gather, each rank reading only its left neighbour.
//
// What changed: no host, no PCIe. With peer access (the problem enables every pair; CUDA C++ Programming
// Guide, "Peer-to-Peer Memory Access") a kernel on rank r reads its left neighbour's buffer over NVLink.
// The buffer is cut into R chunks; in R - 1 reduce-scatter steps each rank adds its own input's chunk to
// the partial sum its left neighbour made one step before, so that rank r ends holding the whole sum of
// chunk r + 1; in R - 1 all-gather steps each rank copies the whole chunk its left neighbour received one
// step before (ring.hpp has the schedule, checked on the host in every order its waits allow).
// Why a ring: every link carries (R - 1) / R of the buffer per phase, in both directions at once, and no
// rank waits for more than one neighbour: the bus bandwidth nccl-tests defines is exactly the per-link
// rate, so this step can reach the link ceiling at any R. Its costs: 2 (R - 1) dependent steps, each a
// kernel launch and a cross-GPU event wait (microseconds), which small messages cannot hide.
// Napkin math (H200 pair, 1 GiB per rank): each rank reads 512 MiB in each of the 2 steps over a link
// of ~390 GB/s per direction (the measured p2p ceiling) = ~2.8 ms, busbw = 1 GiB / 2.8 ms = the link
// rate; expect ~90% of the ceiling at 64 MiB and more, far less at 4 KiB (the step latency).
// Run: aisp bench run --targets ch04:allreduce:02_p2p_ring
#include "chapters/ch04_multi_gpu/allreduce/problem.hpp"

namespace aisp::ch04::allreduce::v02 {

constexpr int k_threads = 256;

// dst[i] = a[i] + b[i] (or a[i] when b is null) for i in [begin, end): a is the left neighbour's buffer,
// read over the link; b and dst are this rank's. 16-byte vectors from `begin` (a multiple of 4 elements,
// ring.hpp's chunk_range), then the last chunk's scalar tail.
__global__ void ring_step_kernel(float* __restrict__ dst, const float* __restrict__ a, const float* __restrict__ b,
                                 std::size_t begin, std::size_t end) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t first = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t quads = (end - begin) / 4;
  const auto* a4 = reinterpret_cast<const float4*>(a + begin);
  const auto* b4 = reinterpret_cast<const float4*>(b ? b + begin : nullptr);
  auto* d4 = reinterpret_cast<float4*>(dst + begin);
  for (std::size_t i = first; i < quads; i += stride) {
    float4 v = a4[i];  // remote load, over the link
    if (b4) {
      const float4 w = b4[i];
      v.x += w.x;
      v.y += w.y;
      v.z += w.z;
      v.w += w.w;
    }
    d4[i] = v;
  }
  for (std::size_t i = begin + 4 * quads + first; i < end; i += stride) dst[i] = b ? a[i] + b[i] : a[i];
}

class P2pRing {
 public:
  void setup(const Args& a, cudaStream_t) {
    m_streams.create(a.devices());
    const int ops = ops_per_rank(a.ranks);
    m_op_done.assign(static_cast<std::size_t>(a.ranks * ops), nullptr);
    for (int r = 0; r < a.ranks; ++r) {
      on_device(a.device[r], a.device[0], [&] {
        for (int op = 0; op < ops; ++op) {
          AISP_CUDA_CHECK(cudaEventCreateWithFlags(&m_op_done[r * ops + op], cudaEventDisableTiming));
        }
      });
    }
  }

  void launch(const Args& a, cudaStream_t stream) {
    const int ops = ops_per_rank(a.ranks);
    // At most a full wave, and no more blocks than a chunk has (4-float) vectors for.
    const auto blocks_for = [&](const Range& c) {
      return wave_grid(a.sm_count, a.max_threads_per_sm, (c.end - c.begin) / 4, k_threads);
    };
    m_streams.fork(stream);
    // Op by op, every rank: each rank's stream runs its ops in order; the waits order them across ranks.
    // The loop must issue op k of every rank before op k + 1 of any: a wait issued before its event is
    // recorded in this launch would wait for the event's previous recording (the last launch's).
    for (int op = 0; op < ops; ++op) {
      for (int r = 0; r < a.ranks; ++r) {
        const cudaStream_t s = m_streams.stream(r, stream);
        for (const Wait& w : ring_waits(r, op, a.ranks)) {
          AISP_CUDA_CHECK(cudaStreamWaitEvent(s, m_op_done[w.rank * ops + w.op], 0));
        }
        const RingOp o = ring_op(r, op, a.ranks);
        const int left = left_of(r, a.ranks);
        const Range c = chunk_range(a.n, a.ranks, o.chunk);
        const float* src = o.reads_left_input ? a.in[left] : a.out[left];
        on_device(a.device[r], a.device[0], [&] {
          if (c.end > c.begin) {
            ring_step_kernel<<<blocks_for(c), k_threads, 0, s>>>(a.out[r], src, o.reduce ? a.in[r] : nullptr, c.begin,
                                                           c.end);
            AISP_CHECK_LAUNCH();
          }
          AISP_CUDA_CHECK(cudaEventRecord(m_op_done[r * ops + op], s));
        });
      }
    }
    m_streams.join(stream);
  }

  ~P2pRing() {
    for (cudaEvent_t e : m_op_done) {
      if (e) cudaEventDestroy(e);
    }
  }

 private:
  RankStreams m_streams;
  std::vector<cudaEvent_t> m_op_done;  // [rank][op]
};

AISP_REGISTER_STATEFUL_VARIANT(AllreduceProblem, P2pRing, .step = 2, .slug = "p2p_ring",
                               .kind = VariantKind::optimized,
                               .summary = "ring reduce-scatter + all-gather by hand: each rank's kernel reads its "
                                          "left neighbour over NVLink",
                               .features = {"multi_gpu", "all_gpus"});

}  // namespace aisp::ch04::allreduce::v02
