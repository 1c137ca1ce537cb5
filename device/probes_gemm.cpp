// Tensor-core rates per dtype, by two methods that both run and are both validated:
// - a large cuBLASLt GEMM, on random inputs (never zeros: they run faster than real data), its output
//   checked at sampled elements against a float64 reference on the host: "what cuBLASLt reaches";
// - on Hopper (sm_90a), the wgmma probe (device/probes_tensor.cu): wgmma.mma_async from shared memory
//   with no memory traffic in its loop, CTA 0's accumulators checked element by element and every CTA's
//   checksum: what the tensor cores reach.
// The ceiling is the faster of the two, so that no GEMM reads over 100% of it; the method names the
// winner and the note carries the other's number (docs/ceilings.md "Tensor ceilings: the wgmma probe").
#include <cublasLt.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <limits>
#include <stdexcept>

#include "core/measure/stats.hpp"
#include "device/buffer.hpp"
#include "device/cublas_check.hpp"
#include "device/cuda_check.hpp"
#include "device/probe_kernels.hpp"
#include "device/probes_internal.hpp"
#include "device/probes_tensor.hpp"

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

// ---- the wgmma probe (device/probes_tensor.cu) ------------------------------------------------------

constexpr int k_wgmma_timed = 10;          // timed launches: the value is the fastest, the note keeps the median
constexpr int k_wgmma_warmup = 3;          // with the checked launch, ~0.25 s of load before the first sample
constexpr double k_wgmma_launch_s = 0.05;  // one launch at the peak rate and maximum clock; ~55-70 ms as run
constexpr std::uint32_t k_wgmma_seed = 0x2468ACE1u;

// What CTA 0's accumulators and every CTA's checksums must be, from the exact stored operands.
struct WgmmaReference {
  std::vector<double> d, tol;        // warpgroup-major, then row-major 64 x 256
  std::vector<double> sum, sum_tol;  // per warpgroup: sum of weight x D, and the sum of weight x tol
};

WgmmaReference wgmma_reference(const std::vector<unsigned char>& tiles, const GemmSpec& g) {
  const int kn = k_wgmma_row_bytes / g.in_bytes;  // K values in one tile row
  const int rows = k_wgmma_a_rows + k_wgmma_b_rows;
  std::vector<double> v(static_cast<std::size_t>(rows) * kn);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = decode(&tiles[i * g.in_bytes], g.in_type);
  WgmmaReference ref;
  ref.d.resize(k_wgmma_d_floats);
  ref.tol.resize(k_wgmma_d_floats);
  ref.sum.assign(k_wgmma_warpgroups, 0);
  ref.sum_tol.assign(k_wgmma_warpgroups, 0);
  for (int w = 0; w < k_wgmma_warpgroups; ++w) {
    for (int r = 0; r < k_wgmma_m; ++r) {
      const double* a = &v[static_cast<std::size_t>(w * k_wgmma_m + r) * kn];
      for (int c = 0; c < k_wgmma_n; ++c) {
        const double* b = &v[static_cast<std::size_t>(k_wgmma_a_rows + c) * kn];
        double dot = 0, scale2 = 0;
        for (int k = 0; k < kn; ++k) {
          dot += a[k] * b[k];
          scale2 += a[k] * b[k] * a[k] * b[k];
        }
        // The round's K is k_wgmma_passes repetitions of the row. Tolerance as the GEMM probe's: 2^-7 of
        // the value plus 2% of the dot product's scale, which covers tf32's input rounding. FP8 wgmma
        // keeps fewer bits in its accumulator (about 14, per DeepSeek-V3's report, section 3.3.2) and
        // truncates at each of the round's 64 accumulations: measured on an H200, an element 1.1% short
        // of its value. For fp8 the relative part is 2^-5 instead. A missing pass moves an element by 1/16
        // of its value: outside the tolerance for all but the elements near zero; wrong descriptors or
        // layouts, for nearly all.
        const double want = k_wgmma_passes * dot;
        const int rel_exp = g.in_type == CUDA_R_8F_E4M3 ? -5 : -7;
        const double tol = 0.02 * std::sqrt(k_wgmma_passes * scale2) + std::ldexp(std::fabs(want), rel_exp);
        const std::size_t i = (static_cast<std::size_t>(w) * k_wgmma_m + r) * k_wgmma_n + c;
        ref.d[i] = want;
        ref.tol[i] = tol;
        ref.sum[w] += wgmma_checksum_weight(r, c) * want;
        ref.sum_tol[w] += wgmma_checksum_weight(r, c) * tol;
      }
    }
  }
  return ref;
}

std::string check_wgmma(const WgmmaReference& ref, const std::vector<float>& tile, const std::vector<float>& sums) {
  for (std::size_t i = 0; i < ref.d.size(); ++i) {
    if (!(std::fabs(tile[i] - ref.d[i]) <= ref.tol[i])) {
      const std::size_t per_wg = static_cast<std::size_t>(k_wgmma_m) * k_wgmma_n;
      return fmt::format("CTA 0, warpgroup {}: D[{}, {}] = {:.6g}, expected {:.6g} (tolerance {:.3g})", i / per_wg,
                         i % per_wg / k_wgmma_n, i % k_wgmma_n, tile[i], ref.d[i], ref.tol[i]);
    }
  }
  // Every CTA holds the same tiles: each warpgroup's checksum must be the reference's (a CTA that did
  // not run leaves the NaN poison).
  for (std::size_t i = 0; i < sums.size(); ++i) {
    const int w = static_cast<int>(i % k_wgmma_warpgroups);
    if (!(std::fabs(sums[i] - ref.sum[w]) <= ref.sum_tol[w])) {
      return fmt::format("CTA {}, warpgroup {}: checksum {:.8g}, expected {:.8g} (tolerance {:.3g})",
                         i / k_wgmma_warpgroups, w, sums[i], ref.sum[w], ref.sum_tol[w]);
    }
  }
  return "";
}

CeilingEntry wgmma_entry(Context& ctx, const GemmSpec& g) {
  const DeviceFacts& dev = ctx.facts();
  const cudaStream_t s = ctx.stream();
  const WgmmaShape shape = wgmma_shape(g.operand);
  const int ctas = wgmma_probe_ctas(dev);
  // The hardware's bound: dense FLOPs per clock per SM x SMs x the highest SM clock the device reports.
  // A rate above it means the launch did not do the work counted (as the memory probes' bounds).
  const double bound = shape.dense_flop_per_clk_sm * dev.sm_count * dev.sm_clock_khz * 1e3;
  // FLOPs: 2 x M x N x K per wgmma, times the wgmma issued (slices x passes x rounds per warpgroup).
  const double flops_per_round =
      2.0 * k_wgmma_m * k_wgmma_n * shape.k * k_wgmma_slices * k_wgmma_passes * k_wgmma_warpgroups * ctas;
  const int rounds = std::max(1, static_cast<int>(std::lround(k_wgmma_launch_s * bound / flops_per_round)));
  const double flops = flops_per_round * rounds;

  DeviceBuffer<unsigned char> tiles(k_wgmma_tile_bytes);
  launch_fill_operand(tiles.data(), k_wgmma_tile_bytes / g.in_bytes, g.operand, k_wgmma_seed, s);
  std::vector<unsigned char> host_tiles(k_wgmma_tile_bytes);
  AISP_CUDA_CHECK(cudaMemcpyAsync(host_tiles.data(), tiles.data(), tiles.bytes(), cudaMemcpyDeviceToHost, s));
  AISP_CUDA_CHECK(cudaStreamSynchronize(s));
  const WgmmaReference ref = wgmma_reference(host_tiles, g);
  DeviceBuffer<float> sums(static_cast<std::size_t>(ctas) * k_wgmma_warpgroups), tile(k_wgmma_d_floats);

  // Only checked launches store CTA 0's accumulators (128 KiB, once, after the loop).
  const auto launch = [&](bool store) {
    launch_wgmma_probe(g.operand, tiles.data(), rounds, sums.data(), store ? tile.data() : nullptr, ctas, s);
  };
  SampleTimer& timer = ctx.hot();
  const auto timed = [&](bool store) {
    const auto t = timer.time([&] { launch(store); }, 1);
    if (t.blocking_timed_out) throw ProbeError(fmt::format("{} (wgmma probe): the blocking kernel timed out", g.name));
    return flops / t.seconds * 1e-12;
  };
  // Poisoned outputs (NaN), one launch, and the check (docs/ceilings.md "How a probe runs").
  const auto checked = [&](bool time_it) {
    AISP_CUDA_CHECK(cudaMemsetAsync(sums.data(), 0xFF, sums.bytes(), s));
    AISP_CUDA_CHECK(cudaMemsetAsync(tile.data(), 0xFF, tile.bytes(), s));
    AISP_CUDA_CHECK(cudaStreamSynchronize(s));
    double rate = 0;
    if (time_it) {
      rate = timed(true);
    } else {
      launch(true);
    }
    std::vector<float> host_tile(tile.size()), host_sums(sums.size());
    AISP_CUDA_CHECK(cudaMemcpyAsync(host_tile.data(), tile.data(), tile.bytes(), cudaMemcpyDeviceToHost, s));
    AISP_CUDA_CHECK(cudaMemcpyAsync(host_sums.data(), sums.data(), sums.bytes(), cudaMemcpyDeviceToHost, s));
    AISP_CUDA_CHECK(cudaStreamSynchronize(s));
    const std::string wrong = check_wgmma(ref, host_tile, host_sums);
    if (!wrong.empty()) throw ProbeError(fmt::format("{} (wgmma probe): output is wrong: {}", g.name, wrong));
    return rate;
  };

  checked(false);
  // Warm-up: module load, and clocks and power settling under sustained tensor load.
  for (int i = 0; i < k_wgmma_warmup; ++i) timed(false);
  std::vector<double> rates;
  for (int i = 0; i + 1 < k_wgmma_timed; ++i) rates.push_back(timed(false));
  rates.push_back(checked(true));  // the last sample's output is checked too
  const double best = *std::max_element(rates.begin(), rates.end());
  const double median = stats::median(rates);
  if (best * 1e12 > 1.02 * bound) {
    throw ProbeError(fmt::format("{} (wgmma probe): {:.1f} TFLOP/s is above the tensor cores' peak at the device's "
                                 "highest clock ({:.1f} TFLOP/s: {:.0f} FLOP per clock per SM x {} SMs x {} MHz); "
                                 "the launch did not do the work counted",
                                 g.name, best, bound * 1e-12, shape.dense_flop_per_clk_sm, dev.sm_count,
                                 dev.sm_clock_khz / 1000));
  }
  CeilingEntry e = entry(
      g.name, "tensor", k_unit_tflop_s, best,
      fmt::format("wgmma probe: {}, A and B from shared memory (128-byte swizzle), fp32 accumulate; {} CTAs x {} "
                  "warpgroups, {} wgmma per commit group, {} groups in flight, no memory traffic in the loop; "
                  "random operands in [-1, 1); fastest of {} launches of {:.0f} ms",
                  shape.instruction, ctas, k_wgmma_warpgroups, k_wgmma_slices, k_wgmma_groups_in_flight,
                  rates.size(), flops / (median * 1e12) * 1e3),
      rates.size());
  e.note = fmt::format("wgmma probe median {:.1f} TFLOP/s", median);
  return e;
}

const GemmSpec& spec_named(std::string_view name) {
  for (const auto& g : k_specs) {
    if (name == g.name) return g;
  }
  throw std::invalid_argument(fmt::format("no tensor ceiling named {}", name));
}

// The faster of the two methods; the other's number (and its own note) goes into the note.
CeilingEntry faster_of(CeilingEntry a, CeilingEntry b) {
  const bool a_wins = a.value >= b.value;
  CeilingEntry win = a_wins ? std::move(a) : std::move(b);
  const CeilingEntry& lose = a_wins ? b : a;
  const std::string mine = win.note;
  win.note = fmt::format("also measured: {:.1f} TFLOP/s by {}{}; the ceiling is the faster method{}", lose.value,
                         lose.method, lose.note.empty() ? "" : " (" + lose.note + ")", mine.empty() ? "" : "; " + mine);
  return win;
}

}  // namespace

std::string wgmma_unavailable(Context& ctx) {
  const DeviceFacts& d = ctx.facts();
  // wgmma exists on sm_90a only: not on Ada, nor on Blackwell (which has tcgen05 instead).
  if (d.cc() != 90) {
    return fmt::format("wgmma is an sm_90a (Hopper) instruction; this device is compute capability {}.{}",
                       d.cc_major, d.cc_minor);
  }
  if (!wgmma_probe_compiled(ctx.stream())) {
    return "this build has no sm_90a device code (CMAKE_CUDA_ARCHITECTURES lacks 90a)";
  }
  return "";
}

CeilingEntry cublaslt_tensor_entry(Context& ctx, std::string_view name) { return gemm_entry(ctx, spec_named(name)); }

CeilingEntry wgmma_tensor_entry(Context& ctx, std::string_view name) {
  const std::string why = wgmma_unavailable(ctx);
  if (!why.empty()) throw ProbeError(fmt::format("{}: the wgmma probe cannot run here: {}", name, why));
  return wgmma_entry(ctx, spec_named(name));
}

void probe_tensor(Context& ctx, const std::vector<std::string>& wanted, ProbeResults& out) {
  for (const auto& g : k_specs) {
    if (!wants(wanted, g.name)) continue;
    record(out, g.name, [&] {
      // cuBLASLt first, as before this probe existed: its number stays comparable with older caches.
      CeilingEntry lib = gemm_entry(ctx, g);
      if (!lib.measured()) return lib;  // no tensor cores for this type here
      const std::string why = wgmma_unavailable(ctx);
      if (!why.empty()) {
        lib.note = fmt::format("wgmma probe not run: {}; the ceiling is cuBLASLt's GEMM", why);
        return lib;
      }
      return faster_of(wgmma_entry(ctx, g), std::move(lib));
    });
  }
}

}  // namespace aisp::probe
