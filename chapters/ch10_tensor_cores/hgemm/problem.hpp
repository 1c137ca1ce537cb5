// ch10:hgemm — the contract of the GEMM ladder: C = A * B^T with bf16 inputs, fp32 accumulation and a
// bf16 output, M = N = K = size.
//
// Both operands are K-major ("TN", as a Linear layer's x * W^T): A is M x K and B is N x K, row-major.
// That is the layout the Hopper tensor-core instructions (wgmma) and the TMA engine read best, and the
// one every step uses. The bound is the tensor cores' bf16 rate: 2 * size^3 FLOPs against
// 2 * (M*K + N*K + M*N) bytes, 2731 FLOP per byte at 8192, far above the ~200 FLOP/byte at which an
// H200 turns compute-bound. The reference is cuBLASLt (bf16 in, fp32 compute, bf16 out), checked on the
// host (reference.hpp) at the test size.
#pragma once

#include <cublasLt.h>
#include <cuda_bf16.h>

#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>

#include "chapters/ch10_tensor_cores/hgemm/reference.hpp"
#include "core/base/error.hpp"
#include "device/buffer.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"

namespace aisp::ch10::hgemm {

// What every variant's launch receives.
struct Args {
  const __nv_bfloat16* a;  // M x K, row-major (K contiguous)
  const __nv_bfloat16* b;  // N x K, row-major (K contiguous): C = A * B^T, both operands K-major ("TN",
                           // as a Linear layer's x * W^T) — the layout wgmma and TMA like best
  __nv_bfloat16* c;        // M x N, row-major; fp32 accumulation, rounded to bf16 once at the end
  int m, n, k;
  int sm_count;
};

// cuBLASLt errors as exceptions. device/cublas_check.hpp's AISP_CUBLAS_CHECK formats with fmt, whose
// header-only build nvcc cannot compile, and this header is included by .cu files.
inline void lt_check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(std::string("ch10:hgemm: ") + what + " failed: " + cublasLtGetStatusString(status));
  }
}
#define AISP_HGEMM_LT_CHECK(expr) ::aisp::ch10::hgemm::lt_check((expr), #expr)

// Every step may tile by 256 in M, N and K without tails: the ladder is about the main loop.
constexpr int k_size_multiple = 256;

// One cuBLASLt plan for C = A * B^T on row-major bf16 data. cuBLAS is column-major, and a row-major
// M x N matrix is a column-major N x M one; so it computes C^T = B * A^T (N x M, leading dimension N),
// where B (row-major N x K) is the column-major K x N matrix used transposed and A (row-major M x K) is
// the column-major K x M matrix A^T used as is: the "TN" GEMM cuBLAS runs fastest.
// Used by the problem's reference and by vendor_cublas.
class LtGemmTn {
 public:
  LtGemmTn(int m, int n, int k) : m_workspace(k_workspace_bytes) {
    AISP_HGEMM_LT_CHECK(cublasLtCreate(&m_handle));
    AISP_HGEMM_LT_CHECK(cublasLtMatmulDescCreate(&m_op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
    AISP_HGEMM_LT_CHECK(cublasLtMatmulDescSetAttribute(m_op, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof trans_a));
    AISP_HGEMM_LT_CHECK(cublasLtMatmulDescSetAttribute(m_op, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof trans_b));
    AISP_HGEMM_LT_CHECK(cublasLtMatrixLayoutCreate(&m_b_layout, CUDA_R_16BF, k, n, k));  // cuBLAS's "A"
    AISP_HGEMM_LT_CHECK(cublasLtMatrixLayoutCreate(&m_a_layout, CUDA_R_16BF, k, m, k));  // cuBLAS's "B"
    AISP_HGEMM_LT_CHECK(cublasLtMatrixLayoutCreate(&m_c_layout, CUDA_R_16BF, n, m, n));
    AISP_HGEMM_LT_CHECK(cublasLtMatmulPreferenceCreate(&m_pref));
    const std::size_t ws = k_workspace_bytes;
    AISP_HGEMM_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(m_pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    int found = 0;
    AISP_HGEMM_LT_CHECK(cublasLtMatmulAlgoGetHeuristic(m_handle, m_op, m_b_layout, m_a_layout, m_c_layout, m_c_layout,
                                                     m_pref, 1, &m_heuristic, &found));
    if (found == 0) throw std::runtime_error("cuBLASLt has no algorithm for this bf16 GEMM");
  }
  LtGemmTn(const LtGemmTn&) = delete;
  LtGemmTn& operator=(const LtGemmTn&) = delete;
  ~LtGemmTn() {
    if (m_pref) cublasLtMatmulPreferenceDestroy(m_pref);
    if (m_c_layout) cublasLtMatrixLayoutDestroy(m_c_layout);
    if (m_a_layout) cublasLtMatrixLayoutDestroy(m_a_layout);
    if (m_b_layout) cublasLtMatrixLayoutDestroy(m_b_layout);
    if (m_op) cublasLtMatmulDescDestroy(m_op);
    if (m_handle) cublasLtDestroy(m_handle);
  }

  void run(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* c, cudaStream_t stream) {
    const float one = 1.0f, zero = 0.0f;
    AISP_HGEMM_LT_CHECK(cublasLtMatmul(m_handle, m_op, &one, b, m_b_layout, a, m_a_layout, &zero, c, m_c_layout, c,
                                     m_c_layout, &m_heuristic.algo, m_workspace.data(), k_workspace_bytes, stream));
  }

 private:
  static constexpr std::size_t k_workspace_bytes = std::size_t{32} << 20;  // cuBLASLt's advice for Hopper
  DeviceBuffer<unsigned char> m_workspace;
  cublasLtHandle_t m_handle = nullptr;
  cublasLtMatmulDesc_t m_op = nullptr;
  cublasLtMatrixLayout_t m_a_layout = nullptr, m_b_layout = nullptr, m_c_layout = nullptr;
  cublasLtMatmulPreference_t m_pref = nullptr;
  cublasLtMatmulHeuristicResult_t m_heuristic{};
};

class HgemmProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "ch10",
            .ladder = "hgemm",
            .summary = "C = A * B^T, bf16 in, fp32 accumulate, bf16 out, M = N = K = size; bound: bf16 tensor cores",
            .axes = {{.name = "size",
                      .default_value = 8192,
                      .help = "M = N = K (a multiple of 256); 2 * size^3 FLOPs",
                      .min_value = k_size_multiple,
                      .test_value = 512,
                      .default_sweep = {4096, 8192}}},
            .clock = ClockKind::gpu,
            .default_mode = CacheMode::cold};
  }

  void allocate(const AxisValues& axes, const DeviceFacts& device) override {
    const std::int64_t size = axes.at("size");
    if (size % k_size_multiple != 0 || size > 32768) {
      throw UsageError("ch10:hgemm: size must be a multiple of " + std::to_string(k_size_multiple) +
                       " up to 32768 (every step tiles without tails), got " + std::to_string(size));
    }
    m_m = m_n = m_k = static_cast<int>(size);
    m_a = DeviceBuffer<__nv_bfloat16>(static_cast<std::size_t>(m_m) * m_k);
    m_b = DeviceBuffer<__nv_bfloat16>(static_cast<std::size_t>(m_n) * m_k);
    m_c = DeviceBuffer<__nv_bfloat16>(static_cast<std::size_t>(m_m) * m_n);
    m_c_ref = DeviceBuffer<__nv_bfloat16>(static_cast<std::size_t>(m_m) * m_n);
    m_sm_count = device.sm_count;
    m_reference.reset();
  }

  void generate(std::uint64_t seed, cudaStream_t stream) override {
    fill_uniform(inputs()[0], seed, -1.0, 1.0, stream);
    fill_uniform(inputs()[1], seed ^ 0x9E3779B97F4A7C15ULL, -1.0, 1.0, stream);
    if (!m_reference) m_reference = std::make_unique<LtGemmTn>(m_m, m_n, m_k);
    m_reference->run(m_a.data(), m_b.data(), m_c_ref.data(), stream);
  }

  std::vector<TensorView> inputs() const override {
    return {{"a", m_a.data(), m_a.size(), DType::bf16}, {"b", m_b.data(), m_b.size(), DType::bf16}};
  }
  std::vector<TensorView> outputs() const override { return {{"c", m_c.data(), m_c.size(), DType::bf16}}; }
  std::vector<TensorView> references() const override {
    return {{"c_ref", m_c_ref.data(), m_c_ref.size(), DType::bf16}};
  }

  // Two sources of difference, both legitimate:
  // - the output is rounded to bf16 (8 significant bits) once: two fp32 sums a hair apart can round to
  //   neighbouring bf16 values, one ulp = up to 2^-7 of the value apart; rtol = 2^-7 covers that.
  // - the fp32 sums themselves differ by summation order (tensor-core tiles, split K). With inputs in
  //   [-1, 1) a dot product over K = 8192 has a typical size of sqrt(K / 9) ~ 30 and fp32 order
  //   differences of order sqrt(K) * 2^-24 * 30 ~ 2e-4; near zero the relative term is no help, so
  //   atol = 2^-5 (a hundred times that, and still far below a wrong element's error of order 30).
  Tolerance tolerance() const override { return {0x1p-5, 0x1p-7}; }

  Work work() const override {
    const double m = m_m, n = m_n, k = m_k;
    const double read = 2.0 * (m * k + n * k), written = 2.0 * m * n;
    return {.bytes = read + written,
            .flops = 2.0 * m * n * k,
            .bytes_read = read,
            .bytes_written = written,
            .flop_dtype = "bf16"};
  }

  Args args() const override { return {m_a.data(), m_b.data(), m_c.data(), m_m, m_n, m_k, m_sm_count}; }

  bool has_host_reference() const override { return true; }
  std::string check_reference_on_host(cudaStream_t stream) override {
    const std::vector<double> a = to_host(inputs()[0], stream);
    const std::vector<double> b = to_host(inputs()[1], stream);
    const std::vector<double> want = gemm_tn(a, b, m_m, m_n, m_k);
    return compare_on_host("c_ref", to_host(references()[0], stream), want, tolerance());
  }

 private:
  int m_m = 0, m_n = 0, m_k = 0;
  DeviceBuffer<__nv_bfloat16> m_a, m_b, m_c, m_c_ref;
  int m_sm_count = 0;
  std::unique_ptr<LtGemmTn> m_reference;
};

}  // namespace aisp::ch10::hgemm
