// Tensor-core rates per dtype: a large cuBLASLt GEMM each, on random inputs (never zeros: they run faster
// than real data), its output checked at sampled elements against a float64 reference on the host.
// What this measures is, by construction, "what cuBLASLt reaches on this GPU", and the method says so.
#include <cublasLt.h>

#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <limits>

#include "device/buffer.hpp"
#include "device/cublas_check.hpp"
#include "device/cuda_check.hpp"
#include "device/probe_kernels.hpp"
#include "device/probes_internal.hpp"

namespace aisp::probe {

namespace {

constexpr int k_size = 8192;  // M = N = K: ~1.1 TFLOP per GEMM, about 1.4 ms at bf16 on an H100
constexpr std::size_t k_workspace = std::size_t{32} << 20;  // what cuBLASLt recommends for Hopper

struct GemmSpec {
  const char* name;
  const char* label;        // for the method
  Operand operand;
  cudaDataType_t in_type;
  cudaDataType_t out_type;  // C and D
  cublasComputeType_t compute;
  int in_bytes, out_bytes;
  int min_cc;               // tensor cores for this type
  bool scales;              // fp8: A and B scale pointers are required
};

constexpr GemmSpec k_specs[] = {
    {"tensor_bf16", "bf16 inputs, fp32 accumulate, bf16 output", Operand::bf16, CUDA_R_16BF, CUDA_R_16BF,
     CUBLAS_COMPUTE_32F, 2, 2, 80, false},
    {"tensor_fp16", "fp16 inputs, fp32 accumulate, fp16 output", Operand::f16, CUDA_R_16F, CUDA_R_16F,
     CUBLAS_COMPUTE_32F, 2, 2, 70, false},
    {"tensor_tf32", "fp32 inputs computed as tf32, fp32 accumulate and output", Operand::f32, CUDA_R_32F,
     CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, 4, 4, 80, false},
    {"tensor_fp8", "fp8 e4m3 inputs (scales 1.0), fp32 accumulate, bf16 output", Operand::e4m3, CUDA_R_8F_E4M3,
     CUDA_R_16BF, CUBLAS_COMPUTE_32F, 1, 2, 89, true},
};

float bits_to_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Host decoders of the stored bits, so that the reference sees exactly the values the GEMM saw.
double decode(const unsigned char* p, cudaDataType_t t) {
  switch (t) {
    case CUDA_R_32F: {
      std::uint32_t u;
      std::memcpy(&u, p, 4);
      return bits_to_float(u);
    }
    case CUDA_R_16BF: {
      std::uint16_t h;
      std::memcpy(&h, p, 2);
      return bits_to_float(static_cast<std::uint32_t>(h) << 16);
    }
    case CUDA_R_16F: {
      std::uint16_t h;
      std::memcpy(&h, p, 2);
      const int sign = h >> 15, e = (h >> 10) & 31, m = h & 1023;
      double v = e == 0 ? std::ldexp(m, -24) : e == 31 ? std::numeric_limits<double>::quiet_NaN()
                                                       : std::ldexp(1024 + m, e - 25);
      return sign ? -v : v;
    }
    case CUDA_R_8F_E4M3: {
      const int sign = p[0] >> 7, e = (p[0] >> 3) & 15, m = p[0] & 7;
      double v = (e == 15 && m == 7) ? std::numeric_limits<double>::quiet_NaN()
                 : e == 0           ? std::ldexp(m, -9)
                                    : std::ldexp(8 + m, e - 10);
      return sign ? -v : v;
    }
    default:
      return std::numeric_limits<double>::quiet_NaN();
  }
}

// cuBLASLt objects, released in reverse order.
struct Lt {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~Lt() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
    if (handle) cublasLtDestroy(handle);
  }
};

CeilingEntry gemm_entry(Context& ctx, const GemmSpec& g) {
  const DeviceFacts& dev = ctx.facts();
  const cudaStream_t s = ctx.stream();
  if (dev.cc() < g.min_cc) {
    return skipped_entry(g.name, "tensor", k_unit_tflop_s,
                         fmt::format("needs compute capability {}.{} for these tensor-core types, device has {}.{}",
                                     g.min_cc / 10, g.min_cc % 10, dev.cc_major, dev.cc_minor));
  }
  const std::size_t m = k_size, n = k_size, k = k_size;
  // Column-major, "TN": A is stored K x M and used transposed (op(A) is M x K), B is K x N, D is M x N.
  // FP8 requires exactly this layout on Hopper; the other types use it too, so that all four compare.
  DeviceBuffer<unsigned char> a(k * m * g.in_bytes), b(k * n * g.in_bytes), d(m * n * g.out_bytes);
  DeviceBuffer<unsigned char> workspace(k_workspace);
  DeviceBuffer<float> scale(1);
  launch_fill_operand(a.data(), k * m, g.operand, 0x1234u, s);
  launch_fill_operand(b.data(), k * n, g.operand, 0x5678u, s);
  const float one = 1.0f, zero = 0.0f;
  AISP_CUDA_CHECK(cudaMemcpyAsync(scale.data(), &one, sizeof one, cudaMemcpyHostToDevice, s));

  Lt lt;
  AISP_CUBLAS_CHECK(cublasLtCreate(&lt.handle));
  AISP_CUBLAS_CHECK(cublasLtMatmulDescCreate(&lt.op, g.compute, CUDA_R_32F));
  const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  AISP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(lt.op, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof trans_a));
  AISP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(lt.op, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof trans_b));
  if (g.scales) {
    const float* p = scale.data();
    AISP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(lt.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &p, sizeof p));
    AISP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(lt.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &p, sizeof p));
  }
  AISP_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lt.a, g.in_type, k, m, k));
  AISP_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lt.b, g.in_type, k, n, k));
  AISP_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lt.d, g.out_type, m, n, m));
  AISP_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&lt.pref));
  AISP_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(lt.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                         &k_workspace, sizeof k_workspace));
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  AISP_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(lt.handle, lt.op, lt.a, lt.b, lt.d, lt.d, lt.pref, 1, &heuristic,
                                                   &found));
  if (found == 0) throw ProbeError(fmt::format("{}: cuBLASLt has no algorithm for this GEMM", g.name));

  Steps st;
  st.launch = [&] {
    AISP_CUBLAS_CHECK(cublasLtMatmul(lt.handle, lt.op, &one, a.data(), lt.a, b.data(), lt.b, &zero, d.data(), lt.d,
                                     d.data(), lt.d, &heuristic.algo, workspace.data(), k_workspace, s));
  };
  st.prepare = [&] { AISP_CUDA_CHECK(cudaMemsetAsync(d.data(), 0xFF, d.bytes(), s)); };  // NaN everywhere
  st.check = [&]() -> std::string {
    std::vector<unsigned char> ha(a.bytes()), hb(b.bytes()), hd(d.bytes());
    AISP_CUDA_CHECK(cudaMemcpyAsync(ha.data(), a.data(), a.bytes(), cudaMemcpyDeviceToHost, s));
    AISP_CUDA_CHECK(cudaMemcpyAsync(hb.data(), b.data(), b.bytes(), cudaMemcpyDeviceToHost, s));
    AISP_CUDA_CHECK(cudaMemcpyAsync(hd.data(), d.data(), d.bytes(), cudaMemcpyDeviceToHost, s));
    AISP_CUDA_CHECK(cudaStreamSynchronize(s));
    // The four corners and 252 pseudo-random elements against float64 dot products of the exact inputs.
    // Tolerance: output rounding (2^-7 of |ref|, above bf16's 2^-9) plus 2% of the dot product's scale
    // sqrt(sum (a_k b_k)^2), which covers tf32's input rounding; a wrong element is off by about that scale.
    std::uint64_t lcg = 0x9E3779B97F4A7C15ULL;
    for (int sample = 0; sample < 256; ++sample) {
      std::size_t i, j;
      if (sample < 4) {
        i = (sample & 1) ? m - 1 : 0;
        j = (sample & 2) ? n - 1 : 0;
      } else {
        lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
        i = (lcg >> 33) % m;
        j = (lcg >> 13) % n;
      }
      double ref = 0, scale2 = 0;
      for (std::size_t kk = 0; kk < k; ++kk) {
        const double t = decode(&ha[(kk + i * k) * g.in_bytes], g.in_type) *
                         decode(&hb[(kk + j * k) * g.in_bytes], g.in_type);
        ref += t;
        scale2 += t * t;
      }
      const double got = decode(&hd[(i + j * m) * g.out_bytes], g.out_type);
      const double tol = 0.02 * std::sqrt(scale2) + std::ldexp(std::fabs(ref), -7);
      if (!(std::fabs(got - ref) <= tol)) {
        return fmt::format("D[{}, {}] = {:.6g}, expected {:.6g} (tolerance {:.3g})", i, j, got, ref, tol);
      }
    }
    return "";
  };
  const Timing t = run_steps(ctx.hot(), s, st, g.name);
  const double flops = 2.0 * m * n * k;
  return entry(g.name, "tensor", k_unit_tflop_s, flops / t.median_s * 1e-12,
               fmt::format("cuBLASLt GEMM {}x{}x{} ({}; A transposed), the heuristic's first algorithm, 32 MiB "
                           "workspace; random inputs in [-1, 1)",
                           m, n, k, g.label),
               t.samples);
}

}  // namespace

void probe_tensor(Context& ctx, const std::vector<std::string>& wanted, ProbeResults& out) {
  for (const auto& g : k_specs) {
    if (wants(wanted, g.name)) record(out, g.name, [&] { return gemm_entry(ctx, g); });
  }
}

}  // namespace aisp::probe
