// Every matrix product of the runner goes through this one class: out = x * w^T with bf16 x, w and out,
// fp32 accumulation (a Linear layer: w is [n][k] row-major as Hugging Face stores it), one plan per shape,
// cached. Two kernels compete: cuBLASLt and ch10:hgemm step 08's (TileGemm, for shapes without tails).
// The runner tunes the shapes it knows at start-up (tune(): cuBLASLt's first k_candidates algorithms and
// the tile kernel timed on real operands, the fastest kept; at batch 1 the heuristic's first choice for
// the 8B shape's QKV and output projections reads the weights at 1.3-2 TB/s, docs/serving-runner.md).
// Every other shape takes cuBLASLt's heuristic's first answer when first seen: tuning synchronizes and
// launches timing kernels, which must never happen inside a step (or a measurement).
#pragma once

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "device/buffer.hpp"
#include "device/timer.hpp"
#include "serving/gpu/tile_gemm.hpp"

namespace aisp::serving::gpu {

// Where ch10:hgemm's kernel may run: where tune() timed it faster than cuBLASLt (compete), nowhere
// (never), or in every shape it takes, tuned or not, win or lose (always: for tests and measurements).
enum class TilePolicy { compete, never, always };

class Gemm {
 public:
  explicit Gemm(std::size_t workspace_bytes = std::size_t{32} << 20);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  static constexpr int k_candidates = 8;

  // What tune() measured for a shape, in ms (cold, mean of 3); < 0: not run (the tile kernel does not
  // take the shape) or failed.
  struct Tuning {
    float first_ms = -1;  // cuBLASLt's heuristic's first algorithm: what an untuned shape runs
    float lt_ms = -1;     // the fastest of cuBLASLt's candidates
    float tile_ms = -1;   // ch10:hgemm step 08's kernel (TileGemm)
    bool tile = false;    // the tile kernel won
    [[nodiscard]] float chosen_ms() const { return tile ? tile_ms : lt_ms; }
  };

  // Plans the shape of run(x, ld_x, w, out, ld_out, rows, n, k) with the fastest candidate, timed cold on
  // these operands (out, which must not overlap x or w, is computed several times).
  Tuning tune(const __nv_bfloat16* x, int ld_x, const __nv_bfloat16* w, __nv_bfloat16* out, int ld_out, int rows,
              int n, int k, cudaStream_t stream);
  void set_tile_policy(TilePolicy policy) { m_policy = policy; }
  // Frees the tuning timer's buffers (twice the L2) once the caller has tuned what it wanted.
  void finish_tuning() { m_timer.reset(); }

  // out[rows][n] (row stride ld_out) = x[rows][k] (row stride ld_x) * w[n][k]^T.
  void run(const __nv_bfloat16* x, int ld_x, const __nv_bfloat16* w, __nv_bfloat16* out, int ld_out, int rows,
           int n, int k, cudaStream_t stream);

 private:
  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algo{};
    bool tile = false;  // run by m_tile instead of cuBLASLt
  };
  using Key = std::tuple<int, int, int, int, int>;  // rows, n, k, ld_x, ld_out
  static void destroy(Plan& p);  // its cuBLASLt descriptors
  // The shape's plan; made with the heuristic's first algorithm when new.
  const Plan& plan_for(const Key& key);
  // A new plan and the heuristic's candidates for it (at least one; throws otherwise).
  Plan make_plan(const Key& key, std::vector<cublasLtMatmulHeuristicResult_t>& candidates);
  // Times `launch` (returns false if its launch failed) on `stream`: one warm-up, then the mean of 3 cold
  // samples of m_timer, in ms; < 0: it failed.
  float time_launch(const std::function<bool()>& launch, cudaStream_t stream);
  bool launch_lt(const Plan& p, const cublasLtMatmulAlgo_t& algo, const __nv_bfloat16* x, const __nv_bfloat16* w,
                 __nv_bfloat16* out, cudaStream_t stream);

  cublasLtHandle_t m_handle = nullptr;
  DeviceBuffer<std::byte> m_workspace;
  std::map<Key, Plan> m_plans;
  TileGemm m_tile;
  TilePolicy m_policy = TilePolicy::compete;
  // The harness's timer (device/timer.hpp), cold: each candidate's sample starts after a read of twice
  // the L2, as in a decode step, where the weights stream from DRAM (a 33 MB matrix timed hot would sit
  // in the 50 MB L2 and pick the kernel best at reading the L2). Made on the first tuning.
  std::unique_ptr<SampleTimer> m_timer;
  cudaStream_t m_timer_stream = nullptr;
};

}  // namespace aisp::serving::gpu
