// ch18:flash_attention — the contract of the attention ladder: the forward pass
// O = softmax(Q K^T / sqrt(head_dim) [+ causal mask]) V, bf16 in, fp32 scores and softmax statistics,
// bf16 out.
//
// Layout: Q and O are [batch][heads][seq][head_dim], K and V [batch][kv_heads][seq][head_dim], bf16,
// row-major with head_dim contiguous (PyTorch's (B, H, S, D) contiguous; what cuDNN calls BHSD).
// Grouped-query attention (GQA): query head h reads K/V head h / (heads / kv_heads); kv_heads = heads is
// plain multi-head attention. Query and key lengths are equal (`seq`); with `causal`, query i sees keys
// 0..i (the top-left-aligned decoder mask).
//
// Declared work, one definition for every variant:
// - FLOPs: two GEMMs per head, Q K^T and P V, each 2 * seq * seq * head_dim, so 4 * b * h * s^2 * d
//   (1.1 TFLOP at the default b4 h32 s4096 d128). Causal: only the s(s+1)/2 (query, key) pairs that are
//   not masked count: 4 * b * h * d * s(s+1)/2, which is FlashAttention's "half" (2 * b * h * s^2 * d)
//   within 1/s (0.02% at s = 4096); softmax and exp are not counted, as FlashAttention's benchmarks do.
//   A variant that computes masked pairs anyway (01) does more work than declared and shows it as a
//   lower rate.
// - Bytes: Q, K, V read once and O written once; the s x s scores never have to touch DRAM.
// With kv_heads = heads that is s/2 FLOP per byte (2048 at s = 4096): compute-bound, the bound is the bf16
// tensor-core rate, and vendor_cudnn (cuDNN's fused flash attention) is the reference to approach.
#pragma once

#include <cuda_bf16.h>

#include <cmath>
#include <memory>
#include <string>

#include "chapters/ch18_attention/flash_attention/reference.hpp"
#include "core/base/error.hpp"
#include "device/buffer.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"

namespace aisp::ch18::flash_attention {

// What every variant's launch receives.
struct Args {
  const __nv_bfloat16* q;  // [batch][heads][seq][head_dim]
  const __nv_bfloat16* k;  // [batch][kv_heads][seq][head_dim]
  const __nv_bfloat16* v;  // [batch][kv_heads][seq][head_dim]
  __nv_bfloat16* o;        // [batch][heads][seq][head_dim]
  int batch, heads, kv_heads, seq, head_dim;
  bool causal;
  float scale;  // 1 / sqrt(head_dim)
  int sm_count;
};

// The trusted path at full size (problem.cu): fp32 copies of the inputs, pure-fp32 cuBLAS GEMMs
// (pedantic math: no TF32, no bf16) and a one-block-per-row softmax with an fp64 sum, the scores in
// DRAM in chunks of at most 1 GiB (at least one K/V head's worth). Checked against attention_forward
// (reference.hpp) at the test size.
class ReferenceAttention;

class FlashAttentionProblem final : public Problem<Args> {
 public:
  FlashAttentionProblem();
  ~FlashAttentionProblem() override;  // problem.cu, where ReferenceAttention is complete

  static TargetInfo target_info() {
    return {.chapter = "ch18",
            .ladder = "flash_attention",
            .summary = "attention forward, bf16 in, fp32 softmax, bf16 out; bound: bf16 tensor cores",
            .axes = {{.name = "batch", .default_value = 4, .help = "sequences", .test_value = 1},
                     {.name = "heads", .default_value = 32, .help = "query heads", .test_value = 4},
                     {.name = "kv_heads",
                      .default_value = 0,
                      .help = "K/V heads, dividing heads (GQA, e.g. 8 for Llama-3's 32); 0 = heads",
                      .min_value = 0,
                      .test_value = 2},
                     // 100 is a multiple of no tile size: partial query and key tiles run.
                     {.name = "seq", .default_value = 4096, .help = "query = key length", .test_value = 100},
                     {.name = "head_dim",
                      .default_value = 128,
                      .help = "a multiple of 8 up to 256; the hand-written steps take 64, 128, 256",
                      .min_value = 8,
                      .test_value = 64},
                     // The test size runs the causal mask: the harder path (diagonal tiles, skipped tiles).
                     // A run measures both settings unless told (--axis causal=0).
                     {.name = "causal",
                      .default_value = 0,
                      .help = "1: query i sees keys 0..i",
                      .min_value = 0,
                      .test_value = 1,
                      .default_sweep = {0, 1}}},
            .clock = ClockKind::gpu,
            .default_mode = CacheMode::cold};
  }

  void allocate(const AxisValues& axes, const DeviceFacts& device) override;

  // Q and K uniform in [-2.5, 2.5): a score q.k / sqrt(d) then has a standard deviation of 2.5^2 / 3 ~
  // 2.1, so softmax rows are peaked (at s = 4096 of the order of 50 keys carry most of the weight), as
  // trained attention is: the max subtraction and the online rescaling both matter, and outputs have a
  // typical size of 0.1 rather than the ~0.01 of a flat average. V uniform in [-1, 1).
  void generate(std::uint64_t seed, cudaStream_t stream) override;

  std::vector<TensorView> inputs() const override {
    return {{"q", m_q.data(), m_q.size(), DType::bf16},
            {"k", m_k.data(), m_k.size(), DType::bf16},
            {"v", m_v.data(), m_v.size(), DType::bf16}};
  }
  std::vector<TensorView> outputs() const override { return {{"o", m_o.data(), m_o.size(), DType::bf16}}; }
  std::vector<TensorView> references() const override {
    return {{"o_ref", m_o_ref.data(), m_o_ref.size(), DType::bf16}};
  }

  // The fast steps round P = exp(s - m) to bf16 before the P V product (the tensor cores take bf16
  // operands), as FlashAttention does; the reference keeps it in fp32. Each rounded weight is off by at
  // most 2^-8 of itself (8 significant bits, round to nearest), so the output row
  // sum_j p_j v_j / sum_j p_j moves by at most 2^-8 * max|v| = 2^-8 (|v| < 1): a worst-case bound, not
  // an estimate. atol is twice that, for what is far smaller: fp32 summation order (tensor-core tiles
  // vs cuBLAS), ex2.approx (~2^-22 relative) and the score's fp32 rounding. The output is rounded to
  // bf16 once by both sides: two values a hair apart can land one ulp (2^-7 of the value) apart; rtol
  // = 2^-7 covers that. A wrong mask, scale, head mapping or rescaling moves outputs by their own size
  // (~0.1), far outside.
  Tolerance tolerance() const override { return {0x1p-7, 0x1p-7}; }

  Work work() const override;

  Args args() const override {
    return {m_q.data(),
            m_k.data(),
            m_v.data(),
            m_o.data(),
            m_shape.batch,
            m_shape.heads,
            m_shape.kv_heads,
            m_shape.seq,
            m_shape.head_dim,
            m_shape.causal,
            static_cast<float>(attention_scale(m_shape.head_dim)),
            m_sm_count};
  }

  bool has_host_reference() const override { return true; }
  std::string check_reference_on_host(cudaStream_t stream) override;  // problem.cu

 private:
  Shape m_shape;
  DeviceBuffer<__nv_bfloat16> m_q, m_k, m_v, m_o, m_o_ref;
  int m_sm_count = 0;
  std::unique_ptr<ReferenceAttention> m_reference;
};

// Throws UsageError naming `variant` unless head_dim is one the variant's kernels are instantiated for.
inline void require_head_dim(int head_dim, const std::string& variant) {
  if (head_dim != 64 && head_dim != 128 && head_dim != 256) {
    throw UsageError(variant + " is instantiated for head_dim 64, 128 and 256 only, got " +
                     std::to_string(head_dim));
  }
}

// Where head (b, h) of a [batch][heads][seq][head_dim] tensor starts, and the K/V head a query head
// reads under grouped-query attention.
__host__ __device__ inline std::size_t head_offset(const Args& a, int b, int h, int heads) {
  return (static_cast<std::size_t>(b) * heads + h) * a.seq * a.head_dim;
}
__host__ __device__ inline int kv_head_of(const Args& a, int h) { return h / (a.heads / a.kv_heads); }

}  // namespace aisp::ch18::flash_attention
