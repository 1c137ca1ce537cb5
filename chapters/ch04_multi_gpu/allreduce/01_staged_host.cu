// ch04:allreduce:01_staged_host — through host memory: every rank's input up to the host, summed on rank
// 0, the sum back down to every rank. What a first attempt looks like on a machine whose GPUs it does not
// know how to connect.
//
// What it does: ranks 1..R-1 copy their input to a pinned host buffer each (device to host, in parallel
// on their own streams); rank 0 copies those up into scratch buffers on its GPU (host to device), adds
// every rank's values in rank order, copies the sum to a pinned host buffer, and ranks 1..R-1 copy it
// down into their outputs. The sum is done by a kernel on rank 0, not by the host: host arithmetic inside
// a launch is what the harness's host-time rule rejects (docs/trust.md), and would only add to the cost.
// Why it is slow: every byte crosses PCIe four times (up, over, back, down), one direction after the
// other, and rank 0's link carries (R - 1) buffers each way: nothing goes over NVLink.
// Napkin math (H200 pair, 1 GiB per rank, ~55 GB/s pinned each way over PCIe Gen5): ~20 ms per crossing,
// four crossings in sequence = ~80 ms against the ring's ~3 ms: a bus bandwidth of ~13 GB/s, ~3% of the
// NVLink ceiling.
// Run: aisp bench run --targets ch04:allreduce:01_staged_host
#include "chapters/ch04_multi_gpu/allreduce/problem.hpp"
#include "chapters/ch04_multi_gpu/common/rank_sum.cuh"

namespace aisp::ch04::allreduce::v01 {

class StagedHost {
 public:
  void setup(const Args& a, cudaStream_t) {
    m_streams.create(a.devices());
    for (int r = 0; r < a.ranks; ++r) {
      m_up.emplace_back(r == 0 ? 0 : a.n, cudaHostAllocPortable);  // copied to and from every GPU
      m_scratch.emplace_back(r == 0 ? 0 : a.n);  // on rank 0's GPU (the current one)
      on_device(a.device[r], a.device[0], [&] {
        cudaEvent_t e = nullptr;
        AISP_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
        m_staged.push_back(e);
      });
    }
    m_down = PinnedBuffer<float>(a.n, cudaHostAllocPortable);
    AISP_CUDA_CHECK(cudaEventCreateWithFlags(&m_sum_ready, cudaEventDisableTiming));
  }

  void launch(const Args& a, cudaStream_t stream) {
    const std::size_t bytes = a.n * sizeof(float);
    m_streams.fork(stream);
    // Up: every other rank's input to the host, each on its own GPU's copy engine.
    for (int r = 1; r < a.ranks; ++r) {
      const cudaStream_t s = m_streams.stream(r, stream);
      AISP_CUDA_CHECK(cudaMemcpyAsync(m_up[r].data(), a.in[r], bytes, cudaMemcpyDefault, s));
      AISP_CUDA_CHECK(cudaEventRecord(m_staged[r], s));
    }
    // Over to rank 0, summed there.
    RankTerms terms;  // rank 0's input, then the staged copies, added in rank order
    terms.term[0] = a.in[0];
    for (int r = 1; r < a.ranks; ++r) {
      AISP_CUDA_CHECK(cudaStreamWaitEvent(stream, m_staged[r], 0));
      AISP_CUDA_CHECK(cudaMemcpyAsync(m_scratch[r].data(), m_up[r].data(), bytes, cudaMemcpyDefault, stream));
      terms.term[r] = m_scratch[r].data();
    }
    launch_rank_sum(terms, a.ranks, a.out[0], a.n, a.sm_count, a.max_threads_per_sm, stream);
    // Back to the host, then down to every other rank.
    AISP_CUDA_CHECK(cudaMemcpyAsync(m_down.data(), a.out[0], bytes, cudaMemcpyDefault, stream));
    AISP_CUDA_CHECK(cudaEventRecord(m_sum_ready, stream));
    for (int r = 1; r < a.ranks; ++r) {
      const cudaStream_t s = m_streams.stream(r, stream);
      AISP_CUDA_CHECK(cudaStreamWaitEvent(s, m_sum_ready, 0));
      AISP_CUDA_CHECK(cudaMemcpyAsync(a.out[r], m_down.data(), bytes, cudaMemcpyDefault, s));
    }
    m_streams.join(stream);
  }

  ~StagedHost() {
    for (cudaEvent_t e : m_staged) {
      if (e) cudaEventDestroy(e);
    }
    if (m_sum_ready) cudaEventDestroy(m_sum_ready);
  }

 private:
  RankStreams m_streams;
  std::vector<PinnedBuffer<float>> m_up;       // [rank], pinned host
  std::vector<DeviceBuffer<float>> m_scratch;  // [rank], on rank 0's GPU
  PinnedBuffer<float> m_down;
  std::vector<cudaEvent_t> m_staged;  // [rank]: its input is on the host
  cudaEvent_t m_sum_ready = nullptr;
};

AISP_REGISTER_STATEFUL_VARIANT(AllreduceProblem, StagedHost, .step = 1, .slug = "staged_host",
                               .kind = VariantKind::baseline,
                               .summary = "every input to the host, summed on rank 0, the sum back down: PCIe "
                                          "four times, NVLink never",
                               .features = {"multi_gpu", "all_gpus"});

}  // namespace aisp::ch04::allreduce::v01
