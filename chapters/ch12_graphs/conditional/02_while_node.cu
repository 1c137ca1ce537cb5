// ch12:conditional:02_while_node — the loop moves into a CUDA graph: a conditional WHILE node whose body
// decides on the device whether to run again.
//
// What changed: setup() builds a graph of one conditional WHILE node (cudaGraphConditionalHandleCreate
// with default value 1, so the body runs at least once per launch; cudaGraphAddNode with
// cudaGraphCondTypeWhile) and captures its body: step 01's iteration kernel, then a one-thread decide
// kernel that reads the flag, zeroes it for the next iteration and calls cudaGraphSetConditional(handle,
// moved && iterations < max_iters). Per launch: the same three memsets as step 01, then one
// cudaGraphLaunch. The predicate, its evaluation after every iteration and the iterations done are step
// 01's; the flag's zeroing moved from a host-issued memset into the decide kernel.
// References: CUDA C++ Programming Guide, "CUDA Graphs", "Conditional Graph Nodes" ("Conditional WHILE
// Nodes"); needs CUDA 12.4 or later.
// Why it helps: no iteration waits for the host. The device runs body after body, deciding in a kernel,
// so each iteration costs two graph kernel nodes instead of a launch, a PCIe round trip and a host
// wake-up; the host makes one call and synchronizes once.
// Napkin math: per iteration about two graph-node costs (`aisp hw peaks`, launch_graph_node, around a µs)
// plus the iteration kernel's few µs, against step 01's round trip per iteration.
// Run: aisp bench run --targets ch12:conditional:02_while_node
#include "chapters/ch12_graphs/conditional/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch12::conditional::v02 {

__global__ void iterate_kernel(const float* __restrict__ c, float* __restrict__ x, int n,
                               unsigned* __restrict__ moving, std::int32_t* __restrict__ iterations) {
  const int i = static_cast<int>(blockIdx.x) * blockDim.x + threadIdx.x;
  int moved = 0;
  if (i < n) {
    const float old = x[i];
    const float next = c[i] / (1.0f + old);
    moved = fabsf(next - old) > k_rel_tol * fabsf(next) ? 1 : 0;
    x[i] = next;
  }
  if (__syncthreads_or(moved) != 0 && threadIdx.x == 0) atomicOr(moving, 1u);
  if (blockIdx.x == 0 && threadIdx.x == 0) *iterations += 1;
}

// The host's test of step 01, on the device: one thread, after the iteration kernel has completed (graph
// edge), so it sees every block's flag write.
__global__ void decide_kernel(cudaGraphConditionalHandle loop, unsigned* moving, const std::int32_t* iterations,
                              int max_iters) {
  const bool again = *moving != 0 && *iterations < max_iters;
  *moving = 0;
  cudaGraphSetConditional(loop, again ? 1u : 0u);
}

class WhileLoop {
 public:
  WhileLoop() = default;
  WhileLoop(const WhileLoop&) = delete;
  WhileLoop& operator=(const WhileLoop&) = delete;
  ~WhileLoop() {
    if (m_exec) cudaGraphExecDestroy(m_exec);
    if (m_graph) cudaGraphDestroy(m_graph);  // the body graph belongs to the conditional node
  }

  void setup(const Args& a, cudaStream_t stream) {
    AISP_CUDA_CHECK(cudaGraphCreate(&m_graph, 0));
    cudaGraphConditionalHandle loop{};
    // Default 1, applied at every launch of the graph: the WHILE node's first test passes.
    AISP_CUDA_CHECK(cudaGraphConditionalHandleCreate(&loop, m_graph, 1, cudaGraphCondAssignDefault));
    cudaGraphNodeParams params{};
    params.type = cudaGraphNodeTypeConditional;
    params.conditional.handle = loop;
    params.conditional.type = cudaGraphCondTypeWhile;
    params.conditional.size = 1;
    cudaGraphNode_t node = nullptr;
    AISP_CUDA_CHECK(cudaGraphAddNode(&node, m_graph, nullptr, nullptr, 0, &params));
    cudaGraph_t body = params.conditional.phGraph_out[0];

    // The body: the same launches step 01 makes per iteration, recorded into the node's body graph.
    AISP_CUDA_CHECK(
        cudaStreamBeginCaptureToGraph(stream, body, nullptr, nullptr, 0, cudaStreamCaptureModeThreadLocal));
    try {
      const int blocks = (a.n + k_threads - 1) / k_threads;
      iterate_kernel<<<blocks, k_threads, 0, stream>>>(a.c, a.x, a.n, a.moving, a.iterations);
      AISP_CHECK_LAUNCH();
      decide_kernel<<<1, 1, 0, stream>>>(loop, a.moving, a.iterations, a.max_iters);
      AISP_CHECK_LAUNCH();
    } catch (...) {
      cudaGraph_t ignored = nullptr;
      cudaStreamEndCapture(stream, &ignored);  // leave the harness's stream out of capture mode
      throw;
    }
    cudaGraph_t captured = nullptr;  // the body graph itself, still owned by the conditional node
    AISP_CUDA_CHECK(cudaStreamEndCapture(stream, &captured));
    AISP_CUDA_CHECK(cudaGraphInstantiate(&m_exec, m_graph, 0));
    AISP_CUDA_CHECK(cudaGraphUpload(m_exec, stream));
  }

  void launch(const Args& a, cudaStream_t stream) {
    AISP_CUDA_CHECK(cudaMemsetAsync(a.x, 0, sizeof(float) * static_cast<std::size_t>(a.n), stream));
    AISP_CUDA_CHECK(cudaMemsetAsync(a.moving, 0, sizeof(unsigned), stream));
    AISP_CUDA_CHECK(cudaMemsetAsync(a.iterations, 0, sizeof(std::int32_t), stream));
    AISP_CUDA_CHECK(cudaGraphLaunch(m_exec, stream));
  }

 private:
  cudaGraph_t m_graph = nullptr;
  cudaGraphExec_t m_exec = nullptr;
};

AISP_REGISTER_STATEFUL_VARIANT(ConditionalProblem, WhileLoop, .step = 2, .slug = "while_node",
                               .kind = VariantKind::optimized,
                               .summary = "a conditional WHILE graph node; a device kernel sets the condition "
                                          "after every iteration");

}  // namespace aisp::ch12::conditional::v02
