// ch04:collectives:01_peer_copies — every collective as the copies it amounts to, issued with the CUDA
// runtime: what a first attempt looks like once peer access is on.
//
// What it does: each rank pulls what it receives (layout.hpp's receives(): the chunks of an all-gather or
// an all-to-all, the root's buffer, the left neighbour's buffer) with one cudaMemcpyPeerAsync per source
// rank, on its own stream, into its output; its own piece is a local cudaMemcpyAsync. The GPU's copy
// engines move the bytes, over NVLink with peer access on (CUDA C++ Programming Guide, "Peer-to-Peer
// Memory Copy"), with no kernel. Reduce-scatter copies every other rank's chunk r into a staging buffer
// on rank r, then one short kernel adds the R terms in rank order. Ranks run in parallel; a rank's copies
// run one after the other on its stream.
// Why it is not the bound everywhere: the copies are right and cost nothing to write, but they are one
// copy engine's stream per rank, one source at a time, and nothing is pipelined between ranks:
//   - broadcast pulls the whole buffer from the root to each of R - 1 ranks: the root's links carry
//     R - 1 buffers where NCCL's pipelined ring sends one, so busbw falls as 1 / (R - 1) past 2 ranks;
//   - reduce-scatter stages (R - 1) chunks, then reads them again in the sum: the sum's DRAM pass follows
//     the copies instead of overlapping them;
//   - each copy costs a few microseconds of issue and launch: at 4 KiB they are the whole time.
// Napkin math (2 x H200 over NVLink 4, ~390 GB/s per direction measured by `aisp hw peaks`; predictions,
// not measurements; 1 GiB = nccl-tests' size S):
//   all-gather     each rank pulls S/2 over its link (~1.4 ms if one copy engine fills it) and copies its
//                  own S/2 locally on the same stream (~0.25 ms at ~4.3 TB/s of DRAM copy): ~1.65 ms,
//                  busbw = (S/t)(1/2) ~330 GB/s;
//   reduce-scatter the same pull, then a sum reading 2 x 512 MiB and writing 512 MiB (~0.35 ms): ~1.75 ms,
//                  busbw ~300 GB/s;
//   broadcast      rank 1 pulls S: ~2.75 ms, busbw = S/t ~ the link (rank 0's local copy overlaps it);
//   all-to-all     as all-gather: ~1.65 ms, busbw ~330 GB/s;
//   send/recv      each rank pulls S from its left neighbour, both directions at once: ~2.75 ms, busbw ~
//                  the link.
// Run: aisp bench run --targets ch04:collectives:01_peer_copies
#include "chapters/ch04_multi_gpu/collectives/problem.hpp"
#include "chapters/ch04_multi_gpu/common/rank_sum.cuh"

namespace aisp::ch04::collectives::v01 {

class PeerCopies {
 public:
  void setup(const Args& a, cudaStream_t) {
    m_streams.create(a.devices());
    const std::size_t staging = staging_count(a.layout);
    for (int r = 0; r < a.ranks() && staging > 0; ++r) {
      on_device(a.device[r], a.device[0], [&] { m_staging.emplace_back(staging); });
    }
  }

  void launch(const Args& a, cudaStream_t stream) {
    const Layout& l = a.layout;
    const bool reduce = l.op == Collective::reduce_scatter;
    m_streams.fork(stream);
    for (int r = 0; r < l.ranks; ++r) {
      const cudaStream_t s = m_streams.stream(r, stream);
      float* dst = reduce ? m_staging[r].data() : a.out[r];
      on_device(a.device[r], a.device[0], [&] {
        for (const Piece& p : receives(l, r)) copy_piece(a, r, p, dst, s);
        if (reduce) sum_staged(a, r, s);
      });
    }
    m_streams.join(stream);
  }

 private:
  // Rank r's own piece is a copy inside its memory; any other crosses from the source rank's GPU (the
  // runtime's peer copy, which is a plain device copy where the GPU tests put two ranks on one GPU).
  static void copy_piece(const Args& a, int r, const Piece& p, float* dst, cudaStream_t s) {
    const std::size_t bytes = p.count * sizeof(float);
    const float* src = a.in[p.src] + p.src_offset;
    if (p.src == r) {
      AISP_CUDA_CHECK(cudaMemcpyAsync(dst + p.dst_offset, src, bytes, cudaMemcpyDeviceToDevice, s));
    } else {
      AISP_CUDA_CHECK(cudaMemcpyPeerAsync(dst + p.dst_offset, a.device[r], src, a.device[p.src], bytes, s));
    }
  }

  // out_r = the sum of chunk r over every rank, after the copies on the same stream.
  void sum_staged(const Args& a, int r, cudaStream_t s) {
    const Layout& l = a.layout;
    RankTerms t;  // the rank's own chunk where it lies, the others from the staging buffer
    for (int j = 0; j < l.ranks; ++j) {
      t.term[j] = j == r ? a.in[r] + static_cast<std::size_t>(r) * l.chunk
                         : m_staging[r].data() + static_cast<std::size_t>(j) * l.chunk;
    }
    launch_rank_sum(t, l.ranks, a.out[r], l.chunk, a.sm_count, a.max_threads_per_sm, s);
  }

  RankStreams m_streams;
  std::vector<DeviceBuffer<float>> m_staging;  // [rank], on that rank's GPU (reduce-scatter only)
};

AISP_REGISTER_STATEFUL_VARIANT(CollectivesProblem, PeerCopies, .step = 1, .slug = "peer_copies",
                               .kind = VariantKind::baseline,
                               .summary = "each rank pulls what it receives with cudaMemcpyPeerAsync on its own "
                                          "stream (copy engines); reduce-scatter: staged chunks, then a sum kernel",
                               .features = {"multi_gpu", "all_gpus"});

}  // namespace aisp::ch04::collectives::v01
