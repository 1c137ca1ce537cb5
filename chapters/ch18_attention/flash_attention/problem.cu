// ch18:flash_attention — the trusted reference on the device, and the check of it against the host.
//
// Obviously correct before fast: the inputs widened to fp32 (exactly), S = scale * Q K^T and O = P V by
// cuBLAS fp32 GEMMs in pedantic math mode (true fp32: no TF32, no reduced-precision tensor-core path),
// and between them a plain softmax kernel, one block per score row, fp32 exp with an fp64 sum; P stays
// fp32. GQA costs nothing here: the `group` query heads of one K/V head are consecutive in Q, so they are
// one (group * seq) x head_dim matrix multiplied by that head's K^T, and a strided-batched GEMM walks the
// K/V heads. Scores go through DRAM in chunks of K/V heads of at most 1 GiB (at least one head).
#include <cublas_v2.h>

#include <algorithm>

#include "chapters/ch18_attention/flash_attention/problem.hpp"
#include "device/cublas_check.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch18::flash_attention {
namespace {

constexpr int k_ref_threads = 256;
constexpr std::size_t k_chunk_bytes = std::size_t{1} << 30;

__global__ void widen_kernel(const __nv_bfloat16* __restrict__ in, float* __restrict__ out, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x) {
    out[i] = __bfloat162float(in[i]);
  }
}

__global__ void narrow_kernel(const float* __restrict__ in, __nv_bfloat16* __restrict__ out, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x) {
    out[i] = __float2bfloat16(in[i]);
  }
}

// Block-wide reduction through shared memory, a plain tree. is_max: max, else sum.
template <class T, bool is_max>
__device__ T reference_block_reduce(T v, T* scratch) {
  scratch[threadIdx.x] = v;
  __syncthreads();
  for (int half = k_ref_threads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      const T a = scratch[threadIdx.x], b = scratch[threadIdx.x + half];
      scratch[threadIdx.x] = is_max ? (a > b ? a : b) : a + b;
    }
    __syncthreads();
  }
  const T result = scratch[0];
  __syncthreads();  // scratch is reused by the next reduction
  return result;
}

// In place: row `blockIdx.x` of scores becomes its softmax; keys after the row's query are masked.
__global__ void reference_softmax_kernel(float* s, int seq, bool causal) {
  __shared__ float max_scratch[k_ref_threads];
  __shared__ double sum_scratch[k_ref_threads];
  float* row = s + static_cast<std::size_t>(blockIdx.x) * seq;
  const int keys = causal ? static_cast<int>(blockIdx.x % seq) + 1 : seq;  // query index = row % seq
  float m = -INFINITY;
  for (int j = threadIdx.x; j < keys; j += k_ref_threads) m = fmaxf(m, row[j]);
  m = reference_block_reduce<float, true>(m, max_scratch);
  double sum = 0;
  for (int j = threadIdx.x; j < keys; j += k_ref_threads) sum += expf(row[j] - m);
  sum = reference_block_reduce<double, false>(sum, sum_scratch);
  for (int j = threadIdx.x; j < seq; j += k_ref_threads) {
    row[j] = j < keys ? static_cast<float>(expf(row[j] - m) / sum) : 0.0f;
  }
}

unsigned grid_for(std::size_t n) {
  return static_cast<unsigned>(std::min<std::size_t>((n + 255) / 256, 65536));
}

}  // namespace

class ReferenceAttention {
 public:
  explicit ReferenceAttention(const Args& a)
      : m_q(static_cast<std::size_t>(a.batch) * a.heads * a.seq * a.head_dim),
        m_k(static_cast<std::size_t>(a.batch) * a.kv_heads * a.seq * a.head_dim),
        m_v(m_k.size()),
        m_o(m_q.size()) {
    const int group = a.heads / a.kv_heads;
    const std::size_t head_scores = static_cast<std::size_t>(group) * a.seq * a.seq * sizeof(float);
    m_heads_per_chunk = static_cast<int>(std::max<std::size_t>(1, k_chunk_bytes / head_scores));
    m_heads_per_chunk = std::min(m_heads_per_chunk, a.batch * a.kv_heads);
    m_s = DeviceBuffer<float>(head_scores / sizeof(float) * m_heads_per_chunk);
    AISP_CUBLAS_CHECK(cublasCreate(&m_handle));
    AISP_CUBLAS_CHECK(cublasSetMathMode(m_handle, CUBLAS_PEDANTIC_MATH));
  }
  ReferenceAttention(const ReferenceAttention&) = delete;
  ReferenceAttention& operator=(const ReferenceAttention&) = delete;
  ~ReferenceAttention() {
    if (m_handle) cublasDestroy(m_handle);
  }

  void run(const Args& a, __nv_bfloat16* o_ref, cudaStream_t stream) {
    AISP_CUBLAS_CHECK(cublasSetStream(m_handle, stream));
    widen_kernel<<<grid_for(m_q.size()), 256, 0, stream>>>(a.q, m_q.data(), m_q.size());
    AISP_CHECK_LAUNCH();
    widen_kernel<<<grid_for(m_k.size()), 256, 0, stream>>>(a.k, m_k.data(), m_k.size());
    AISP_CHECK_LAUNCH();
    widen_kernel<<<grid_for(m_v.size()), 256, 0, stream>>>(a.v, m_v.data(), m_v.size());
    AISP_CHECK_LAUNCH();
    const int kv_heads_total = a.batch * a.kv_heads;
    for (int first = 0; first < kv_heads_total; first += m_heads_per_chunk) {
      run_chunk(a, first, std::min(m_heads_per_chunk, kv_heads_total - first), stream);
    }
    narrow_kernel<<<grid_for(m_o.size()), 256, 0, stream>>>(m_o.data(), o_ref, m_o.size());
    AISP_CHECK_LAUNCH();
  }

 private:
  // K/V heads first .. first + count - 1 (flattened over batch), with their `group` query heads each.
  // Row-major X (r x c) is column-major X^T (c x r), so cuBLAS computes S^T = K Q^T and O^T = V^T P^T.
  void run_chunk(const Args& a, int first, int count, cudaStream_t stream) {
    const long long s = a.seq, d = a.head_dim, g = a.heads / a.kv_heads;
    const float scale = a.scale, one = 1.0f, zero = 0.0f;
    const float* q = m_q.data() + first * g * s * d;
    const float* k = m_k.data() + first * s * d;
    const float* v = m_v.data() + first * s * d;
    float* o = m_o.data() + first * g * s * d;
    AISP_CUBLAS_CHECK(cublasSgemmStridedBatched(
        m_handle, CUBLAS_OP_T, CUBLAS_OP_N, a.seq, static_cast<int>(g * s), a.head_dim, &scale, k, a.head_dim,
        s * d, q, a.head_dim, g * s * d, &zero, m_s.data(), a.seq, g * s * s, count));
    reference_softmax_kernel<<<static_cast<unsigned>(count * g * s), k_ref_threads, 0, stream>>>(
        m_s.data(), a.seq, a.causal);
    AISP_CHECK_LAUNCH();
    AISP_CUBLAS_CHECK(cublasSgemmStridedBatched(
        m_handle, CUBLAS_OP_N, CUBLAS_OP_N, a.head_dim, static_cast<int>(g * s), a.seq, &one, v, a.head_dim,
        s * d, m_s.data(), a.seq, g * s * s, &zero, o, a.head_dim, g * s * d, count));
  }

  DeviceBuffer<float> m_q, m_k, m_v, m_o, m_s;
  int m_heads_per_chunk = 1;
  cublasHandle_t m_handle = nullptr;
};

FlashAttentionProblem::FlashAttentionProblem() = default;
FlashAttentionProblem::~FlashAttentionProblem() = default;

void FlashAttentionProblem::allocate(const AxisValues& axes, const DeviceFacts& device) {
  Shape shape;
  shape.batch = static_cast<int>(axes.at("batch"));
  shape.heads = static_cast<int>(axes.at("heads"));
  shape.kv_heads = axes.at("kv_heads") == 0 ? shape.heads : static_cast<int>(axes.at("kv_heads"));
  shape.seq = static_cast<int>(axes.at("seq"));
  shape.head_dim = static_cast<int>(axes.at("head_dim"));
  const std::int64_t causal = axes.at("causal");
  const std::string name = "ch18:flash_attention: ";
  if (causal != 0 && causal != 1) throw UsageError(name + "causal is 0 or 1, got " + std::to_string(causal));
  shape.causal = causal == 1;
  if (shape.heads % shape.kv_heads != 0) {
    throw UsageError(name + "kv_heads must divide heads, got heads " + std::to_string(shape.heads) +
                     ", kv_heads " + std::to_string(shape.kv_heads));
  }
  // 16-byte rows (vector loads, cp.async) and what cuDNN's flash attention takes on Hopper.
  if (shape.head_dim % 8 != 0 || shape.head_dim > 256) {
    throw UsageError(name + "head_dim must be a multiple of 8 up to 256, got " +
                     std::to_string(shape.head_dim));
  }
  if (static_cast<double>(shape.seq) * shape.seq * shape.heads / shape.kv_heads > 0x1p31) {
    throw UsageError(name + "seq too long: one K/V head's scores (group * seq^2) must stay under 2^31");
  }
  m_shape = shape;
  m_q = DeviceBuffer<__nv_bfloat16>(shape.q_count());
  m_k = DeviceBuffer<__nv_bfloat16>(shape.kv_count());
  m_v = DeviceBuffer<__nv_bfloat16>(shape.kv_count());
  m_o = DeviceBuffer<__nv_bfloat16>(shape.q_count());
  m_o_ref = DeviceBuffer<__nv_bfloat16>(shape.q_count());
  m_sm_count = device.sm_count;
  m_reference.reset();
}

void FlashAttentionProblem::generate(std::uint64_t seed, cudaStream_t stream) {
  fill_uniform(inputs()[0], seed, -2.5, 2.5, stream);
  fill_uniform(inputs()[1], seed ^ 0x9E3779B97F4A7C15ULL, -2.5, 2.5, stream);
  fill_uniform(inputs()[2], seed ^ 0xC2B2AE3D27D4EB4FULL, -1.0, 1.0, stream);
  if (!m_reference) m_reference = std::make_unique<ReferenceAttention>(args());
  m_reference->run(args(), m_o_ref.data(), stream);
}

Work FlashAttentionProblem::work() const {
  const double b = m_shape.batch, h = m_shape.heads, kvh = m_shape.kv_heads, s = m_shape.seq,
               d = m_shape.head_dim;
  const double pairs = m_shape.causal ? s * (s + 1) / 2 : s * s;  // (query, key) pairs not masked
  const double read = 2.0 * (b * h * s * d + 2 * b * kvh * s * d), written = 2.0 * b * h * s * d;
  return {.bytes = read + written,
          .flops = 4.0 * b * h * d * pairs,
          .bytes_read = read,
          .bytes_written = written,
          .flop_dtype = "bf16"};
}

std::string FlashAttentionProblem::check_reference_on_host(cudaStream_t stream) {
  const std::vector<double> q = to_host(inputs()[0], stream);
  const std::vector<double> k = to_host(inputs()[1], stream);
  const std::vector<double> v = to_host(inputs()[2], stream);
  return compare_on_host("o_ref", to_host(references()[0], stream), attention_forward(q, k, v, m_shape),
                         tolerance());
}

}  // namespace aisp::ch18::flash_attention
