// ch16:paged_attention — the trusted device reference and the input poisoning. Deliberately plain: one
// thread per score, fp64 throughout, the probabilities in global memory. Right, not fast; the host
// reference (reference.hpp) checks it at the test size.
#include <cmath>

#include "chapters/ch16_production_inference/paged_attention/problem.hpp"

namespace aisp::ch16::paged_attention {
namespace {

constexpr int k_ref_threads = 256;

// The element offset of token t's row of KV head kvh in a pool, through the page table.
__device__ std::int64_t reference_row(const Args& a, int b, int kvh, int t) {
  const std::int64_t page = a.page_table[static_cast<std::int64_t>(b) * a.pages_per_seq + t / a.page_size];
  return ((page * a.kv_heads + kvh) * a.page_size + t % a.page_size) * a.head_dim;
}

__global__ void poison_unused_slots_kernel(const Args a, __nv_bfloat16* k, __nv_bfloat16* v, int used) {
  const int unused = a.page_size - used;
  const std::int64_t n = static_cast<std::int64_t>(a.batch) * a.kv_heads * unused * a.head_dim;
  const __nv_bfloat16 nan = __ushort_as_bfloat16(0x7fc0);  // a quiet NaN
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int d = static_cast<int>(i % a.head_dim);
    const int slot = used + static_cast<int>(i / a.head_dim % unused);
    const int kvh = static_cast<int>(i / (static_cast<std::int64_t>(a.head_dim) * unused) % a.kv_heads);
    const int b = static_cast<int>(i / (static_cast<std::int64_t>(a.head_dim) * unused * a.kv_heads));
    // The sequence's last page: the only one with unused slots.
    const std::int64_t page = a.page_table[(static_cast<std::int64_t>(b) + 1) * a.pages_per_seq - 1];
    const std::int64_t at = ((page * a.kv_heads + kvh) * a.page_size + slot) * a.head_dim + d;
    k[at] = nan;
    v[at] = nan;
  }
}

// scores[(b * heads + h) * context + t] = q[b][h] . k_t / sqrt(head_dim), one thread per score.
__global__ void reference_scores_kernel(const Args a, double* scores) {
  const std::int64_t n = static_cast<std::int64_t>(a.batch) * a.heads * a.context;
  const double scale = 1.0 / sqrt(static_cast<double>(a.head_dim));
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int t = static_cast<int>(i % a.context);
    const std::int64_t bh = i / a.context;
    const int h = static_cast<int>(bh % a.heads);
    const int b = static_cast<int>(bh / a.heads);
    const __nv_bfloat16* q = a.q + bh * a.head_dim;
    const __nv_bfloat16* k = a.k_pool + reference_row(a, b, h / (a.heads / a.kv_heads), t);
    double dot = 0;
    for (int d = 0; d < a.head_dim; ++d) {
      dot += static_cast<double>(__bfloat162float(q[d])) * static_cast<double>(__bfloat162float(k[d]));
    }
    scores[i] = dot * scale;
  }
}

// Block-wide reduction through shared memory, plain tree. op: 0 = max, 1 = sum.
__device__ double reference_block_reduce(double v, double* scratch, int op) {
  scratch[threadIdx.x] = v;
  __syncthreads();
  for (int half = k_ref_threads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      const double x = scratch[threadIdx.x], y = scratch[threadIdx.x + half];
      scratch[threadIdx.x] = op == 0 ? fmax(x, y) : x + y;
    }
    __syncthreads();
  }
  const double result = scratch[0];
  __syncthreads();  // scratch is reused by the next reduction
  return result;
}

// One block per (sequence, head): its row of scores becomes its row of probabilities, in place.
__global__ void reference_softmax_kernel(const Args a, double* scores) {
  __shared__ double scratch[k_ref_threads];
  double* row = scores + static_cast<std::int64_t>(blockIdx.x) * a.context;
  double m = -INFINITY;
  for (int t = threadIdx.x; t < a.context; t += k_ref_threads) m = fmax(m, row[t]);
  m = reference_block_reduce(m, scratch, 0);
  double sum = 0;
  for (int t = threadIdx.x; t < a.context; t += k_ref_threads) sum += exp(row[t] - m);
  sum = reference_block_reduce(sum, scratch, 1);
  for (int t = threadIdx.x; t < a.context; t += k_ref_threads) row[t] = exp(row[t] - m) / sum;
}

// One block per (sequence, head), one thread per output value: sum_t p_t v_t[d], rounded to bf16 once.
__global__ void reference_output_kernel(const Args a, const double* probs, __nv_bfloat16* ref) {
  const int b = blockIdx.x / a.heads, h = blockIdx.x % a.heads, d = threadIdx.x;
  const int kvh = h / (a.heads / a.kv_heads);
  const double* p = probs + static_cast<std::int64_t>(blockIdx.x) * a.context;
  double o = 0;
  for (int t = 0; t < a.context; ++t) {
    o += p[t] * static_cast<double>(__bfloat162float(a.v_pool[reference_row(a, b, kvh, t) + d]));
  }
  ref[static_cast<std::int64_t>(blockIdx.x) * a.head_dim + d] = __double2bfloat16(o);
}

}  // namespace

void poison_unused_slots(const Args& a, __nv_bfloat16* k_pool, __nv_bfloat16* v_pool, cudaStream_t stream) {
  const int used = a.context % a.page_size;
  if (used == 0) return;  // every page is full: nothing to poison
  poison_unused_slots_kernel<<<a.sm_count * 4, 256, 0, stream>>>(a, k_pool, v_pool, used);
  AISP_CHECK_LAUNCH();
}

void launch_reference(const Args& a, double* scores, __nv_bfloat16* ref, cudaStream_t stream) {
  const int pairs = a.batch * a.heads;
  reference_scores_kernel<<<a.sm_count * 8, 256, 0, stream>>>(a, scores);
  AISP_CHECK_LAUNCH();
  reference_softmax_kernel<<<pairs, k_ref_threads, 0, stream>>>(a, scores);
  AISP_CHECK_LAUNCH();
  reference_output_kernel<<<pairs, a.head_dim, 0, stream>>>(a, scores, ref);
  AISP_CHECK_LAUNCH();
}

}  // namespace aisp::ch16::paged_attention
