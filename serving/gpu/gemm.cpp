// cuBLASLt for the runner's Linear layers. cuBLASLt is column-major: a row-major [rows][n] output is a
// column-major n x rows matrix, so out^T = w * x^T with A = w (stored k x n column-major, transposed by the
// op: CUBLAS_OP_T), B = x^T (k x rows column-major, leading dimension ld_x), D = out^T (n x rows, ld_out).
// The heuristic is asked once per shape; decode-sized shapes time its first answers (gemm.hpp).
#include "serving/gpu/gemm.hpp"

#include <string>
#include <vector>

#include "device/cublas_check.hpp"
#include "device/device_info.hpp"
#include "device/cuda_check.hpp"

namespace aisp::serving::gpu {

Gemm::Gemm(std::size_t workspace_bytes) : m_workspace(workspace_bytes) {
  AISP_CUBLAS_CHECK(cublasLtCreate(&m_handle));
}

Gemm::~Gemm() {
  for (auto& [key, plan] : m_plans) {
    destroy(plan);
  }
  if (m_handle) cublasLtDestroy(m_handle);
}

void Gemm::destroy(Plan& p) {
  cublasLtMatrixLayoutDestroy(p.a);
  cublasLtMatrixLayoutDestroy(p.b);
  cublasLtMatrixLayoutDestroy(p.d);
  cublasLtMatmulDescDestroy(p.op);
}

bool Gemm::launch_lt(const Plan& p, const cublasLtMatmulAlgo_t& algo, const __nv_bfloat16* x,
                     const __nv_bfloat16* w, __nv_bfloat16* out, cudaStream_t stream) {
  const float alpha = 1.0f, beta = 0.0f;
  return cublasLtMatmul(m_handle, p.op, &alpha, w, p.a, x, p.b, &beta, out, p.d, out, p.d, &algo,
                        m_workspace.data(), m_workspace.bytes(), stream) == CUBLAS_STATUS_SUCCESS;
}

float Gemm::time_launch(const std::function<bool()>& launch, cudaStream_t stream) {
  constexpr int reps = 3;
  bool ok = launch();  // warm-up, and whether this candidate runs at all
  if (!ok) return -1.0f;
  if (!m_timer || m_timer_stream != stream) {
    int device = 0;
    AISP_CUDA_CHECK(cudaGetDevice(&device));
    m_timer = std::make_unique<SampleTimer>(query_device(device), stream, ClockKind::gpu, CacheMode::cold);
    m_timer_stream = stream;
  }
  double seconds = 0;
  for (int r = 0; r < reps; ++r) seconds += m_timer->time([&] { ok = launch() && ok; }, 1).seconds;
  AISP_CUDA_CHECK(cudaStreamSynchronize(stream));
  return ok ? static_cast<float>(1e3 * seconds / reps) : -1.0f;
}

Gemm::Plan Gemm::make_plan(const Key& key, std::vector<cublasLtMatmulHeuristicResult_t>& candidates) {
  const auto [rows, n, k, ld_x, ld_out] = key;
  Plan p;
  AISP_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  AISP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof(trans_a)));
  AISP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof(trans_b)));
  AISP_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16BF, k, n, k));
  AISP_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_16BF, k, rows, ld_x));
  AISP_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.d, CUDA_R_16BF, n, rows, ld_out));

  cublasLtMatmulPreference_t pref = nullptr;
  AISP_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const std::size_t workspace = m_workspace.bytes();
  AISP_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                         &workspace, sizeof(workspace)));
  candidates.resize(k_candidates);
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(m_handle, p.op, p.a, p.b, p.d, p.d, pref,
                                                               k_candidates, candidates.data(), &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (status != CUBLAS_STATUS_SUCCESS || found == 0) {
    destroy(p);
    AISP_CUBLAS_CHECK(status);
    throw CublasError(CUBLAS_STATUS_NOT_SUPPORTED,
                      "cuBLASLt has no algorithm for the bf16 GEMM rows=" + std::to_string(rows) +
                          " n=" + std::to_string(n) + " k=" + std::to_string(k));
  }
  candidates.resize(static_cast<std::size_t>(found));
  p.algo = candidates[0].algo;
  return p;
}

const Gemm::Plan& Gemm::plan_for(const Key& key) {
  if (const auto it = m_plans.find(key); it != m_plans.end()) return it->second;
  std::vector<cublasLtMatmulHeuristicResult_t> candidates;
  return m_plans.emplace(key, make_plan(key, candidates)).first->second;
}

Gemm::Tuning Gemm::tune(const __nv_bfloat16* x, int ld_x, const __nv_bfloat16* w, __nv_bfloat16* out, int ld_out,
                        int rows, int n, int k, cudaStream_t stream) {
  const Key key{rows, n, k, ld_x, ld_out};
  std::vector<cublasLtMatmulHeuristicResult_t> candidates;
  Plan p = make_plan(key, candidates);
  Tuning t;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const float ms = time_launch([&] { return launch_lt(p, candidates[i].algo, x, w, out, stream); }, stream);
    if (i == 0) t.first_ms = ms;
    if (ms > 0.0f && (t.lt_ms < 0.0f || ms < t.lt_ms)) {
      t.lt_ms = ms;
      p.algo = candidates[i].algo;
    }
  }
  if (m_policy != TilePolicy::never && m_tile.supports(x, w, out, rows, n, k, ld_x, ld_out)) {
    // The tile kernel reports launch errors by throwing (AISP_CUDA_CHECK); a shape it cannot run must
    // not end the runner, so a failure here only rules it out.
    t.tile_ms = time_launch(
        [&] {
          try {
            m_tile.run(x, ld_x, w, out, rows, n, k, stream);
            return true;
          } catch (const CudaError&) {
            return false;
          }
        },
        stream);
    t.tile = t.tile_ms > 0.0f && (m_policy == TilePolicy::always || t.lt_ms < 0.0f || t.tile_ms < t.lt_ms);
    p.tile = t.tile;
  }
  if (const auto it = m_plans.find(key); it != m_plans.end()) {  // replace a heuristic plan of the shape
    destroy(it->second);
    m_plans.erase(it);
  }
  m_plans.emplace(key, p);
  return t;
}

void Gemm::run(const __nv_bfloat16* x, int ld_x, const __nv_bfloat16* w, __nv_bfloat16* out, int ld_out, int rows,
               int n, int k, cudaStream_t stream) {
  if (rows == 0) return;
  const Plan& p = plan_for({rows, n, k, ld_x, ld_out});
  // The plan is per shape; the operands' alignment (TMA needs 16 bytes) is checked per call, and a call
  // the tile kernel cannot take runs on the plan's cuBLASLt algorithm.
  if ((p.tile || m_policy == TilePolicy::always) && m_tile.supports(x, w, out, rows, n, k, ld_x, ld_out)) {
    m_tile.run(x, ld_x, w, out, rows, n, k, stream);
    return;
  }
  const float alpha = 1.0f, beta = 0.0f;
  AISP_CUBLAS_CHECK(cublasLtMatmul(m_handle, p.op, &alpha, w, p.a, x, p.b, &beta, out, p.d, out, p.d, &p.algo,
                                   m_workspace.data(), m_workspace.bytes(), stream));
}

}  // namespace aisp::serving::gpu
