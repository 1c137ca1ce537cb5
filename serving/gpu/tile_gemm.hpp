// The runner's second GEMM candidate: ch10:hgemm's fastest kernel, step 08's (TMA + wgmma, 128 x 256 tiles
// in 2 x 1 clusters with B multicast, persistent, epilogue through TMA stores;
// chapters/ch10_tensor_cores/hgemm/tma_store_gemm.cuh), for the shapes it computes without tails: rows a
// multiple of 256, n of 256, k of 64. gpu::Gemm times it against cuBLASLt's candidates at start-up and
// keeps whichever is faster for each shape.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <memory>

namespace aisp::serving::gpu {

class TileGemm {
 public:
  // Sets up the kernel on the current device (shared memory, the persistent grid's cluster count).
  TileGemm();
  ~TileGemm();
  TileGemm(const TileGemm&) = delete;
  TileGemm& operator=(const TileGemm&) = delete;

  // Whether out[rows][n] (row stride ld_out) = x[rows][k] (row stride ld_x) * w[n][k]^T is a product the
  // kernel takes: its tile multiples, ld_out = n, 16-byte aligned operands and x rows (TMA), and an sm_90
  // device (the kernel is sm_90a code).
  [[nodiscard]] bool supports(const __nv_bfloat16* x, const __nv_bfloat16* w, const __nv_bfloat16* out, int rows,
                              int n, int k, int ld_x, int ld_out) const;
  // Enqueues the product on `stream`; the caller checked supports(). Tensor maps of the operands are
  // encoded on first use of a (pointer, shape) and cached (the runner's buffers and weights are fixed).
  void run(const __nv_bfloat16* x, int ld_x, const __nv_bfloat16* w, __nv_bfloat16* out, int rows, int n, int k,
           cudaStream_t stream);

 private:
  struct Maps;
  std::unique_ptr<Maps> m_maps;
  bool m_hopper = false;
  int m_sm_count = 0;
  int m_clusters = 0;  // resident 2-CTA clusters of the kernel: the persistent grid's size
};

}  // namespace aisp::serving::gpu
