// ch16:paged_attention — the contract of the decode-attention ladder: one new query token per sequence
// attends to that sequence's whole KV cache, which lives in fixed-size pages scattered through a pool.
//
//   out[b][h][:] = sum_t softmax_t(q[b][h] . k[b][t] / sqrt(head_dim)) v[b][t],   t < context,
//
// with grouped-query attention: query head h reads KV head h / (heads / kv_heads). Inputs are bf16,
// arithmetic and softmax statistics fp32, the output bf16. Every sequence has the same context length
// here (a batch of equal-length decodes); ragged batches are the serving engine's business, not this
// ladder's.
//
// Layout (the choice of FlashInfer's "HND" paged layout, simpler than vLLM's; see README):
//   q, out      [batch][heads][head_dim]
//   k_pool,
//   v_pool      [num_pages][kv_heads][page_size][head_dim], num_pages = batch * pages_per_seq
//   page_table  [batch][pages_per_seq] int32, pages_per_seq = ceil(context / page_size)
// Token t of sequence b is slot t % page_size of physical page page_table[b][t / page_size]. One
// (page, KV head) is a contiguous page_size x head_dim block (4 KiB at 16 x 128), so a warp reads a
// page in long coalesced runs whatever the page table says. The page table is a seeded random
// permutation of all pages (reference.hpp), as an allocator leaves it after a while of serving. When
// context is not a multiple of page_size, the unused slots at the end of each sequence's last page
// hold NaN (generate()): a kernel that reads past the context, even to multiply by a zero weight,
// produces NaN and fails.
//
// Bound: the DRAM read ceiling. K and V are read once each; at the defaults (64 sequences x 8192 tokens x
// 8 KV heads x 128 x 2 B x 2) that is 2.15 GB per launch, ~40x the L2.
#pragma once

#include <cuda_bf16.h>

#include <string>
#include <vector>

#include "chapters/ch16_production_inference/paged_attention/reference.hpp"
#include "core/base/error.hpp"
#include "device/buffer.hpp"
#include "device/cuda_check.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"

namespace aisp::ch16::paged_attention {

struct Args {
  const __nv_bfloat16* q;            // [batch][heads][head_dim]
  const __nv_bfloat16* k_pool;       // [num_pages][kv_heads][page_size][head_dim]
  const __nv_bfloat16* v_pool;       // same layout as k_pool
  const std::int32_t* page_table;    // [batch][pages_per_seq]
  __nv_bfloat16* out;                // [batch][heads][head_dim]
  int batch, heads, kv_heads, head_dim, page_size, context, pages_per_seq;
  float scale;                       // 1 / sqrt(head_dim)
  int sm_count;                      // from the device: launch geometry never hard-codes a GPU
  int max_threads_per_sm;
};

// The trusted device reference (device_reference.cu): scores for every (sequence, head, token) in fp64
// into `scores` (batch x heads x context doubles), then a softmax and a weighted sum of V rows in fp64.
// Slow and obviously right; check_reference_on_host checks it against reference.hpp at the test size.
void launch_reference(const Args& a, double* scores, __nv_bfloat16* ref, cudaStream_t stream);

// Writes NaN into the slots past the context of each sequence's last page, in K and in V.
void poison_unused_slots(const Args& a, __nv_bfloat16* k_pool, __nv_bfloat16* v_pool, cudaStream_t stream);

class PagedAttentionProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "ch16",
            .ladder = "paged_attention",
            .summary = "decode attention over a paged bf16 KV cache (GQA, fp32 softmax); bound: DRAM read",
            .axes = {{.name = "batch", .default_value = 64, .help = "sequences, one query token each",
                      .test_value = 3},
                     {.name = "heads", .default_value = 32, .help = "query heads", .test_value = 6},
                     {.name = "kv_heads", .default_value = 8,
                      .help = "KV heads; heads / kv_heads query heads share one (at most 8)",
                      // A group of 3: not a power of two, so step 04's unused group slots are exercised.
                      .test_value = 2},
                     {.name = "head_dim", .default_value = 128, .help = "values per head: 64 or 128",
                      .min_value = 64,
                      // The default runs 128 at every bench run's validation; the GPU tests cover 64.
                      .test_value = 64},
                     {.name = "context", .default_value = 8192,
                      .help = "cached tokens per sequence (every sequence the same)",
                      // 12.5 pages of 16: the last page is partial; 13 pages split 4 + 4 + 4 + 1.
                      .test_value = 200},
                     {.name = "page_size", .default_value = 16, .help = "tokens per KV page: 8, 16 or 32",
                      .min_value = 8}},
            .clock = ClockKind::gpu,
            .default_mode = CacheMode::cold};
  }

  void allocate(const AxisValues& axes, const DeviceFacts& device) override {
    m_shape = {.batch = static_cast<int>(axes.at("batch")),
               .heads = static_cast<int>(axes.at("heads")),
               .kv_heads = static_cast<int>(axes.at("kv_heads")),
               .head_dim = static_cast<int>(axes.at("head_dim")),
               .page_size = static_cast<int>(axes.at("page_size")),
               .context = static_cast<int>(axes.at("context"))};
    check_shape(m_shape);
    m_q = DeviceBuffer<__nv_bfloat16>(m_shape.q_count());
    m_k = DeviceBuffer<__nv_bfloat16>(m_shape.kv_count());
    m_v = DeviceBuffer<__nv_bfloat16>(m_shape.kv_count());
    m_table = DeviceBuffer<std::int32_t>(static_cast<std::size_t>(m_shape.num_pages()));
    m_out = DeviceBuffer<__nv_bfloat16>(m_shape.q_count());
    m_ref = DeviceBuffer<__nv_bfloat16>(m_shape.q_count());
    m_scores =
        DeviceBuffer<double>(static_cast<std::size_t>(m_shape.batch) * m_shape.heads * m_shape.context);
    m_sm_count = device.sm_count;
    m_max_threads_per_sm = device.max_threads_per_sm;
  }

  // q in [-6, 6), k and v in [-1, 1): a score q.k / sqrt(d) then has a standard deviation of 6/3 = 2
  // whatever head_dim is, so the softmax is neither flat (an output near the mean of V, which hides
  // mistakes) nor one-hot: at 8192 tokens about 8192 / e^4 ~ 150 tokens carry the weight.
  void generate(std::uint64_t seed, cudaStream_t stream) override {
    const auto ins = inputs();
    fill_uniform(ins[0], seed, -6.0, 6.0, stream);
    fill_uniform(ins[1], seed ^ 0x4b4b4b4bull, -1.0, 1.0, stream);
    fill_uniform(ins[2], seed ^ 0x56565656ull, -1.0, 1.0, stream);
    m_host_table = make_page_table(m_shape.batch, m_shape.pages_per_seq(), seed);
    AISP_CUDA_CHECK(cudaMemcpyAsync(m_table.data(), m_host_table.data(), m_table.bytes(),
                                    cudaMemcpyHostToDevice, stream));
    poison_unused_slots(args(), m_k.data(), m_v.data(), stream);
    launch_reference(args(), m_scores.data(), m_ref.data(), stream);
    AISP_CUDA_CHECK(cudaStreamSynchronize(stream));  // m_host_table is rewritten by the next generate()
  }

  std::vector<TensorView> inputs() const override {
    return {{"q", m_q.data(), m_q.size(), DType::bf16},
            {"k_pool", m_k.data(), m_k.size(), DType::bf16},
            {"v_pool", m_v.data(), m_v.size(), DType::bf16},
            {"page_table", m_table.data(), m_table.size(), DType::i32}};
  }
  std::vector<TensorView> outputs() const override {
    return {{"out", m_out.data(), m_out.size(), DType::bf16}};
  }
  std::vector<TensorView> references() const override {
    return {{"out_ref", m_ref.data(), m_ref.size(), DType::bf16}};
  }

  // rtol 2^-7: the reference rounds its fp64 result to bf16 once, a variant its fp32 result once; two
  // values a hair apart can round to neighbouring bf16 values, one ulp apart, and one bf16 ulp is at most
  // 2^-7 of the value (8 significant bits; the rounding itself is within 2^-8).
  // atol 1e-3, for the fp32 arithmetic before that rounding. Its sources: the q.k dot products (128
  // products of bf16 values are exact in fp32; the sums round), exp2f (2 ulp), and the running sums over
  // `context` tokens in an order that differs between steps. Each is a relative error of a few fp32 ulp
  // per operation, growing like sqrt(n) for n operations in practice (~1e-5 of max|v| = 1 at 8192 tokens);
  // the worst-case bound n * 2^-24 is 5e-4 at 8192 tokens, and a score error e moves the output by at most
  // 2e (|v - out| <= 2). 1e-3 covers the worst case at the default sizes with ~100x to spare on the
  // typical error, and is still ~2% of a typical |out| (~0.05 at 8192 tokens, ~0.3 at the test size).
  Tolerance tolerance() const override { return {1e-3, 0x1.0p-7}; }

  // Minimum traffic: the K and V rows of the `context` tokens, once each (the unused slots of a partial
  // last page are not read), plus q and the page table; out written once. FLOPs (fp32): 2 per q.k
  // multiply-add and 2 per p*v multiply-add, 4 * batch * heads * context * head_dim; exp and the
  // rescaling are left out (per token, not per token x dim). 8.6 GFLOP at the defaults: ~0.13 ms at
  // ~65 TFLOP/s against ~0.49 ms for the bytes, so memory-bound by ~4x.
  Work work() const override {
    const double kv = 2.0 * 2.0 * m_shape.batch * static_cast<double>(m_shape.context) * m_shape.kv_heads *
                      m_shape.head_dim;
    const double qo = 2.0 * static_cast<double>(m_shape.q_count());
    const double read = kv + qo + 4.0 * static_cast<double>(m_shape.num_pages());
    return {.bytes = read + qo,
            .flops = 4.0 * m_shape.batch * static_cast<double>(m_shape.heads) * m_shape.context *
                     m_shape.head_dim,
            .bytes_read = read,
            .bytes_written = qo,
            .flop_dtype = "fp32"};
  }

  Args args() const override {
    return {m_q.data(), m_k.data(), m_v.data(), m_table.data(), m_out.data(),
            m_shape.batch, m_shape.heads, m_shape.kv_heads, m_shape.head_dim, m_shape.page_size,
            m_shape.context, m_shape.pages_per_seq(),
            1.0f / std::sqrt(static_cast<float>(m_shape.head_dim)), m_sm_count, m_max_threads_per_sm};
  }

  bool has_host_reference() const override { return true; }
  std::string check_reference_on_host(cudaStream_t stream) override {
    const auto ins = inputs();
    const auto want = decode_attention(m_shape, to_host(ins[0], stream), to_host(ins[1], stream),
                                       to_host(ins[2], stream), to_host(ins[3], stream));
    return compare_on_host("out_ref", to_host(references()[0], stream), want, tolerance());
  }

 private:
  // What every step assumes, refused here once with a clear message (std::to_string, not fmt: nvcc's
  // front end rejects fmt's consteval format strings).
  static void check_shape(const Shape& s) {
    const auto fail = [](const std::string& why) { throw UsageError("ch16:paged_attention: " + why); };
    if (s.head_dim != 64 && s.head_dim != 128) {
      fail("head_dim must be 64 or 128 (whole 16-byte vectors per lane), got " + std::to_string(s.head_dim));
    }
    if (s.page_size != 8 && s.page_size != 16 && s.page_size != 32) {
      fail("page_size must be 8, 16 or 32, got " + std::to_string(s.page_size));
    }
    if (s.heads % s.kv_heads != 0 || s.group() > 8) {
      fail("heads must be 1 to 8 times kv_heads (step 04 keeps a group's queries in registers), got heads=" +
           std::to_string(s.heads) + " kv_heads=" + std::to_string(s.kv_heads));
    }
    if (s.num_pages() > 0x7fffffff) fail("batch * pages per sequence must fit the int32 page table");
  }

  Shape m_shape;
  DeviceBuffer<__nv_bfloat16> m_q, m_k, m_v, m_out, m_ref;
  DeviceBuffer<std::int32_t> m_table;
  DeviceBuffer<double> m_scores;
  std::vector<std::int32_t> m_host_table;
  int m_sm_count = 0;
  int m_max_threads_per_sm = 0;
};

// Calls f.template operator()<D, P>() with the run's head_dim and page_size as compile-time constants, so
// that each step's per-lane register arrays have fixed sizes. check_shape allowed exactly these values.
template <class F>
void with_shape(const Args& a, F&& f) {
  const auto with_page = [&]<int D>() {
    if (a.page_size == 8) {
      f.template operator()<D, 8>();
    } else if (a.page_size == 16) {
      f.template operator()<D, 16>();
    } else {
      f.template operator()<D, 32>();
    }
  };
  if (a.head_dim == 64) {
    with_page.template operator()<64>();
  } else {
    with_page.template operator()<128>();
  }
}

// log2(e): every step folds scale * log2(e) into q once and takes exp2f of the scores, one ex2 per
// token (CUDA C++ Programming Guide, "Mathematical Functions": exp2f, 2 ulp).
constexpr float k_log2e = 1.4426950408889634f;

}  // namespace aisp::ch16::paged_attention
