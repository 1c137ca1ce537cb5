// ch04:tensor_parallel_gemm:03_chunked_overlap — 02's all-gather and reduce-scatter cut into `chunks` pieces
// and pipelined with the GEMMs: chunk c + 1's all-gather and chunk c - 1's reduce-scatter run on a
// communication stream while chunk c computes (the decomposition of Wang et al., "Overlap Communication with
// Dependent Computation via Decomposition in Large Deep Learning Models", ASPLOS 2023: a collective feeding
// or fed by a GEMM, split so that its pieces hide behind the GEMM's pieces).
//
// What changed against 02: each rank's tokens are cut into C pieces of P = T / (R C); chunk c gathers piece
// c of every rank (ncclAllGather, rank j's piece at row j P of the chunk), runs GEMM1, the GELU and GEMM2 on
// the chunk's T / C rows, and reduce-scatters the chunk's partial, which hands rank j its piece c of Y
// (reference.hpp's chunk_rows, which the CPU tests replay; the gathered X holds the chunk's tokens rank by
// rank, not in token order, and the reduce-scatter puts each back where it belongs). The collectives move to
// a communication stream per rank (common/comm_streams.hpp), in the order AG(0), AG(1), RS(0), AG(2), RS(1),
// ..., RS(C - 1); events order the two streams: an event recorded right after AG(c) on the communication
// stream is waited for by the compute stream before chunk c's GEMM1, and one recorded after chunk c's GEMM2
// on the compute stream is waited for by the communication stream before RS(c) (cudaStreamWaitEvent: a
// device-side wait, the host never blocks). NCCL runs a communicator's collectives in the order they are
// issued, the same on every rank; each collective's calls for every rank go in one group call.
// Why it should help: only AG(0), before anything can compute, and RS(C - 1), after the last GEMM, are
// exposed; the rest runs while the tensor cores work. Against that: C smaller GEMMs (T / C rows each, a
// little less efficient), C times the collectives' fixed costs, and NCCL's kernels taking SMs and DRAM
// bandwidth from the GEMMs they run beside (a GEMM grid that holds every SM keeps them waiting until it ends).
// In phase 1 the GEMMs run in the same T / C-row pieces, on X in token order (no all-gather to wait for).
// Napkin math (2 x H200, defaults, C = 4; predictions, not measurements): each chunk's GEMMs ~0.2 ms; each
// chunk's all-gather and reduce-scatter move 4 MiB of bus bytes, ~0.012 ms at ~350 GB/s plus ~0.01 ms of
// fixed cost each: the exposed AG(0) and RS(3) ~0.05 ms, against 02's ~0.1 ms; the step ~0.87 ms against
// ~0.92 ms. A small gain on two GPUs, where the communication is ~10% of the step; over 8 GPUs each rank's
// GEMMs shrink by 4 and the bus bytes grow by 1.75, the communication is most of the step, and hiding it
// is worth far more.
// Run: aisp bench run -t ch04:tensor_parallel_gemm:03_chunked_overlap --axis chunks=1,2,4,8 --axis phase=0,1,2
#include "chapters/ch04_multi_gpu/common/comm_streams.hpp"
#include "chapters/ch04_multi_gpu/common/nccl_library.hpp"
#include "chapters/ch04_multi_gpu/tensor_parallel_gemm/problem.hpp"

namespace aisp::ch04::tensor_parallel_gemm::v03 {

class ChunkedOverlap {
 public:
  void setup(const Args& a, cudaStream_t) {
    const auto& api = nccl::api();  // loads NCCL: the step is SKIPPED here when it is missing
    if (api.version < 21000 || !api.all_gather || !api.reduce_scatter) {
      throw VariantUnavailable("NCCL " + nccl::version_string(api) + " (" + api.path +
                               ") lacks bf16 reductions or all-gather/reduce-scatter: ch04:tensor_parallel_gemm "
                               "needs NCCL 2.10 or later");
    }
    m_chunks = a.shape.chunks;
    m_streams.create(a.devices());
    m_comm_streams.create(a.devices(), 2 * static_cast<std::size_t>(m_chunks));  // gathered(c), computed(c)
    m_mlp.create(a, a.shape.chunk_tokens(m_chunks), true);
    m_comms.init(std::vector<int>(a.device.begin(), a.device.begin() + a.ranks()));
  }

  void launch(const Args& a, cudaStream_t stream) {
    m_streams.fork(stream);
    for (int r = 0; r < a.ranks(); ++r) m_comm_streams.fork(r, m_streams.stream(r, stream));
    if (a.comms()) all_gather(a, 0);
    for (int c = 0; c < m_chunks; ++c) {
      if (a.comms() && c + 1 < m_chunks) all_gather(a, c + 1);  // runs while chunk c computes
      if (a.gemms()) compute(a, c, stream);
      if (a.comms()) reduce_scatter(a, c, stream);  // runs while chunk c + 1 computes
    }
    for (int r = 0; r < a.ranks(); ++r) m_comm_streams.join(r, m_streams.stream(r, stream));
    m_streams.join(stream);
  }

  std::vector<Fact> facts(const Args& a) const {
    return {{"nccl", nccl::version_string(nccl::api())},
            {"chunks", std::to_string(m_chunks)},
            {"gemm_tokens", std::to_string(a.shape.chunk_tokens(m_chunks))}};
  }

 private:
  std::size_t gathered(int c) const { return static_cast<std::size_t>(c); }
  std::size_t computed(int c) const { return static_cast<std::size_t>(m_chunks + c); }

  // Chunk c's all-gather on the communication streams; its event recorded right after it, before anything
  // later joins the stream, so that chunk c's GEMMs wait for this all-gather alone.
  void all_gather(const Args& a, int c) {
    const auto& api = nccl::api();
    nccl::check(api.group_start(), "ncclGroupStart");
    for (int r = 0; r < a.ranks(); ++r) {
      const ChunkRows rows = chunk_rows(a.shape, m_chunks, r, c);
      nccl::check(api.all_gather(a.x[r] + a.row(rows.gather_send), m_mlp.gathered(r) + a.row(rows.gather_recv),
                                 a.row(rows.rows), ncclBfloat16, m_comms[r], m_comm_streams.stream(r)),
                  "ncclAllGather");
    }
    nccl::check(api.group_end(), "ncclGroupEnd");
    if (a.gemms()) {  // phase 2 runs no GEMMs: nothing waits
      for (int r = 0; r < a.ranks(); ++r) m_comm_streams.record(r, gathered(c), m_comm_streams.stream(r));
    }
  }

  // Chunk c's GEMM1, GELU and GEMM2 on every rank's compute stream, once its all-gather has landed (phase 0).
  void compute(const Args& a, int c, cudaStream_t stream) {
    for (int r = 0; r < a.ranks(); ++r) {
      const cudaStream_t s = m_streams.stream(r, stream);
      const ChunkRows rows = chunk_rows(a.shape, m_chunks, r, c);
      if (a.comms()) m_comm_streams.wait(r, gathered(c), s);
      // Phase 1 gathers nothing: the same rows of X in token order.
      m_mlp.run(a, r, (a.comms() ? m_mlp.gathered(r) : a.x[r]) + a.row(rows.gather_recv),
                a.part[r] + a.row(rows.scatter_send), s);
    }
  }

  // Chunk c's reduce-scatter on the communication streams, once its GEMM2 is done on each rank (phase 0).
  void reduce_scatter(const Args& a, int c, cudaStream_t stream) {
    const auto& api = nccl::api();
    if (a.gemms()) {
      for (int r = 0; r < a.ranks(); ++r) {
        m_comm_streams.handoff(r, computed(c), m_streams.stream(r, stream), m_comm_streams.stream(r));
      }
    }
    nccl::check(api.group_start(), "ncclGroupStart");
    for (int r = 0; r < a.ranks(); ++r) {
      const ChunkRows rows = chunk_rows(a.shape, m_chunks, r, c);
      nccl::check(api.reduce_scatter(a.part[r] + a.row(rows.scatter_send), a.y[r] + a.row(rows.scatter_recv),
                                     a.row(rows.rows), ncclBfloat16, ncclSum, m_comms[r], m_comm_streams.stream(r)),
                  "ncclReduceScatter");
    }
    nccl::check(api.group_end(), "ncclGroupEnd");
  }

  int m_chunks = 1;
  RankStreams m_streams;  // declared before m_comms: the communicators go first
  CommStreams m_comm_streams;
  RankMlp m_mlp;
  nccl::Communicators m_comms;
};

AISP_REGISTER_STATEFUL_VARIANT(TensorParallelProblem, ChunkedOverlap, .step = 3, .slug = "chunked_overlap",
                               .kind = VariantKind::optimized,
                               .summary = "02 cut into `chunks` pieces: each piece's all-gather and reduce-scatter on "
                                          "a communication stream, ordered by events, beside the other pieces' GEMMs",
                               .features = {"multi_gpu", "all_gpus"});

}  // namespace aisp::ch04::tensor_parallel_gemm::v03
