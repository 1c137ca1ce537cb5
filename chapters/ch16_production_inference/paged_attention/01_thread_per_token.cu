// ch16:paged_attention:01_thread_per_token — one block per (sequence, query head), one thread per token
// (the baseline).
//
// What: 128 threads walk the context in chunks of 128 tokens. Each thread scores one token of the chunk:
// it looks the token's page up in the page table and takes the dot product of q (in shared memory, with
// the softmax scale folded in) with the token's K row, one bf16 at a time. The block then updates a running
// softmax: the chunk's max (a block reduction) rescales the running sum and the output accumulator
// (online softmax, Milakov & Gimelshein 2018), and the chunk's V rows are summed into the accumulator
// with threads across head_dim: a warp reads 64 contiguous bytes of one V row at a time. This is the
// structure of the classic paged-attention kernel written from the formula, with no limit on the context
// (nothing is sized by it) and every K/V byte read once per query head.
// Why it is slow: (1) the K reads are thread-per-row: a warp's load touches 32 different rows, 32 sectors
// for 64 useful bytes, and only L1 turns the rest of those sectors into later hits; (2) every byte moves
// as a 2-byte load, too few bytes in flight per SM to cover DRAM latency; (3) two barriers per chunk of
// 128 tokens; (4) the four query heads of a KV group each read the group's K and V (from L2, mostly).
// Napkin math: 2.15 GB of K/V from DRAM at the defaults (~0.5 ms at ~4.4 TB/s), but 8.6 GB through L2
// (4 query heads per KV head) and 2-byte loads: expect well under half of the DRAM read ceiling.
// Run: aisp bench run --targets ch16:paged_attention:01_thread_per_token
#include "chapters/ch16_production_inference/paged_attention/problem.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch16::paged_attention::v01 {

constexpr int k_threads = 128;  // also the chunk: one token per thread
constexpr unsigned k_full_mask = 0xffffffffu;

__device__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(k_full_mask, v, offset));
  return v;
}

__device__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(k_full_mask, v, offset);
  return v;
}

// Block-wide max or sum, the result in every thread. `partial` holds one value per warp.
template <bool is_max>
__device__ float block_reduce(float v, float* partial) {
  v = is_max ? warp_max(v) : warp_sum(v);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  float r = partial[0];
  for (int w = 1; w < k_threads / 32; ++w) r = is_max ? fmaxf(r, partial[w]) : r + partial[w];
  __syncthreads();  // `partial` is rewritten by the next call
  return r;
}

// Element offset of token t's row for KV head kvh: the page table maps the sequence's logical page
// t / page_size to a physical page; the token is slot t % page_size of it.
__device__ std::int64_t row_offset(const Args& a, int b, int kvh, int t) {
  const std::int64_t page = a.page_table[static_cast<std::int64_t>(b) * a.pages_per_seq + t / a.page_size];
  return ((page * a.kv_heads + kvh) * a.page_size + t % a.page_size) * a.head_dim;
}

// q . k over one K row, a bf16 at a time (q is already scaled by scale * log2 e).
template <int D>
__device__ float dot_row(const float* q, const __nv_bfloat16* __restrict__ k) {
  float s = 0.0f;
#pragma unroll 16
  for (int d = 0; d < D; ++d) s += q[d] * __bfloat162float(k[d]);
  return s;
}

template <int D>
__global__ void __launch_bounds__(k_threads) thread_per_token_kernel(const Args a) {
  constexpr int k_groups = k_threads / D;  // thread groups sharing a chunk's V rows (1 at D=128, 2 at 64)
  __shared__ float q_s[D];
  __shared__ float p_s[k_threads];          // the chunk's softmax weights
  __shared__ std::int64_t row_s[k_threads];  // the chunk's row offsets, found once by the scoring thread
  __shared__ float partial[k_threads / 32];
  __shared__ float acc_s[k_groups][D];

  const int b = blockIdx.x / a.heads, h = blockIdx.x % a.heads;
  const int kvh = h / (a.heads / a.kv_heads);
  const std::int64_t qo = static_cast<std::int64_t>(blockIdx.x) * D;  // q and out: [b][h][:] = blockIdx.x
  for (int d = threadIdx.x; d < D; d += k_threads) q_s[d] = __bfloat162float(a.q[qo + d]) * a.scale * k_log2e;
  __syncthreads();

  const int d = threadIdx.x % D, group = threadIdx.x / D;
  float m = -INFINITY;  // running max of the scores so far (the same in every thread)
  float l = 0.0f;       // this thread's tokens' share of the running sum of exp2(s - m)
  float acc = 0.0f;     // sum over this group's tokens of exp2(s - m) * v[d]
  for (int start = 0; start < a.context; start += k_threads) {
    const int t = start + threadIdx.x;
    float s = -INFINITY;  // tokens past the context weigh exp2(-inf) = 0 and are never read
    if (t < a.context) {
      row_s[threadIdx.x] = row_offset(a, b, kvh, t);
      s = dot_row<D>(q_s, a.k_pool + row_s[threadIdx.x]);
    }
    const float m_new = fmaxf(m, block_reduce<true>(s, partial));  // finite: token `start` exists
    const float alpha = exp2f(m - m_new);                           // 0 on the first chunk (m = -inf)
    const float p = exp2f(s - m_new);
    p_s[threadIdx.x] = p;
    l = l * alpha + p;
    acc *= alpha;
    m = m_new;
    __syncthreads();
    const int n = min(k_threads, a.context - start);
    for (int j = group; j < n; j += k_groups) acc += p_s[j] * __bfloat162float(a.v_pool[row_s[j] + d]);
    __syncthreads();  // p_s and row_s are rewritten by the next chunk
  }
  l = block_reduce<false>(l, partial);
  acc_s[group][d] = acc;  // the groups saw different tokens under the same running max: they add up
  __syncthreads();
  if (threadIdx.x < D) {
    float o = 0.0f;
    for (int g = 0; g < k_groups; ++g) o += acc_s[g][d];
    a.out[qo + d] = __float2bfloat16(o / l);
  }
}

void launch(const Args& a, cudaStream_t stream) {
  with_shape(a, [&]<int D, int P>() {
    thread_per_token_kernel<D><<<a.batch * a.heads, k_threads, 0, stream>>>(a);
    AISP_CHECK_LAUNCH();
  });
}

std::vector<Fact> facts(const Args& a) {
  std::vector<Fact> out;
  with_shape(a, [&]<int D, int P>() {
    out = standard_facts(kernel_facts(reinterpret_cast<const void*>(thread_per_token_kernel<D>), k_threads));
  });
  return out;
}

AISP_REGISTER_VARIANT_WITH_FACTS(PagedAttentionProblem, launch, facts, .step = 1, .slug = "thread_per_token",
                                 .kind = VariantKind::baseline,
                                 .summary = "block per (sequence, head), thread per token: page lookup, "
                                            "scalar K dot, online block softmax, V summed across head_dim");

}  // namespace aisp::ch16::paged_attention::v01
