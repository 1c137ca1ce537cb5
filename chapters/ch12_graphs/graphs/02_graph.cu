// ch12:graphs:02_graph — the same K launches, captured once into a CUDA graph and replayed as one launch.
//
// What changed: setup() records the chain of step 01 by stream capture (cudaStreamBeginCapture ... the same
// K launches ... cudaStreamEndCapture), instantiates it and uploads it to the device; each launch is one
// cudaGraphLaunch of that executable graph. The kernels, their arguments and their order are step 01's.
// Why it helps: the driver validated and encoded all K launches once, at instantiation; replaying them is
// one host call, and the device walks the prepared work list with less per-kernel overhead than separate
// launches (CUDA programming guide, "CUDA Graphs"). The host cost per step drops from K launches to one.
// What it relies on: a captured graph bakes in its kernels' arguments, pointers included. It is right
// here because the problem keeps every buffer at one address for its life and reads the seeded data
// through those pointers (problem.hpp); a caller whose x or out move between steps would get stale
// results. Step 03 removes that restriction.
// Napkin math: the bound is K graph-node launches: K x the measured launch_graph_node (`aisp hw peaks`,
// host wall time per node of a 1,000-node graph of one-thread kernels, around a µs on Hopper), plus the
// kernels' own work, which the tiny buffer makes small.
// Run: aisp bench run --targets ch12:graphs:02_graph
#include "chapters/ch12_graphs/graphs/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch12::graphs::v02 {

__global__ void chain_step_kernel(const float* __restrict__ src, float* __restrict__ dst,
                                  const float* __restrict__ scale, const float* __restrict__ shift, int k,
                                  int n) {
  const int i = static_cast<int>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = fmaf(scale[k], src[i], shift[k]);
}

class CapturedChain {
 public:
  CapturedChain() = default;
  CapturedChain(const CapturedChain&) = delete;
  CapturedChain& operator=(const CapturedChain&) = delete;
  ~CapturedChain() {
    if (m_exec) cudaGraphExecDestroy(m_exec);
    if (m_graph) cudaGraphDestroy(m_graph);
  }

  void setup(const Args& a, cudaStream_t stream) {
    // Thread-local capture: only this thread's unsafe calls (a cudaMalloc, say) would break the capture.
    AISP_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    try {
      const int blocks = (a.n + k_threads - 1) / k_threads;
      for (int k = 0; k < a.kernels; ++k) {
        chain_step_kernel<<<blocks, k_threads, 0, stream>>>(step_src(a, k), step_dst(a, k), a.scale, a.shift, k,
                                                            a.n);
        AISP_CHECK_LAUNCH();
      }
    } catch (...) {
      // Leave the harness's stream out of capture mode whatever failed.
      cudaGraph_t partial = nullptr;
      cudaStreamEndCapture(stream, &partial);
      if (partial) cudaGraphDestroy(partial);
      throw;
    }
    AISP_CUDA_CHECK(cudaStreamEndCapture(stream, &m_graph));
    AISP_CUDA_CHECK(cudaGraphInstantiate(&m_exec, m_graph, 0));
    // Upload now, so that the first launch does not pay for moving the graph to the device.
    AISP_CUDA_CHECK(cudaGraphUpload(m_exec, stream));
  }

  void launch(const Args& /*a*/, cudaStream_t stream) { AISP_CUDA_CHECK(cudaGraphLaunch(m_exec, stream)); }

 private:
  cudaGraph_t m_graph = nullptr;
  cudaGraphExec_t m_exec = nullptr;
};

AISP_REGISTER_STATEFUL_VARIANT(GraphsProblem, CapturedChain, .step = 2, .slug = "graph", .kind = VariantKind::step,
                               .summary = "the K launches captured once into a CUDA graph, one cudaGraphLaunch "
                                          "per step");

}  // namespace aisp::ch12::graphs::v02
