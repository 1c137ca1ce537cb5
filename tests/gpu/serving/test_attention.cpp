// The runner's attention kernels on a ragged batch over a scrambled paged cache: the clear kernel against an
// fp64 host reference, then the fast kernels (split-KV decode, tensor-core prefill) against the clear
// kernel. Slots past each sequence's context hold NaN: a kernel that reads one fails.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "device/buffer.hpp"
#include "device/cuda_check.hpp"
#include "serving/gpu/attention.hpp"
#include "serving/gpu/step_metadata.hpp"
#include "tests/gpu/serving/bf16_host.hpp"

namespace aisp::serving::gpu {
namespace {

struct Shape {
  int head_dim, heads, kv_heads, block_size;
};

std::string name_of(const testing::TestParamInfo<Shape>& info) {
  const Shape& s = info.param;
  return "d" + std::to_string(s.head_dim) + "_h" + std::to_string(s.heads) + "_kv" + std::to_string(s.kv_heads) +
         "_p" + std::to_string(s.block_size);
}

class AttentionKernels : public testing::TestWithParam<Shape> {};

// (start_position, new tokens) of each sequence: decodes at several context lengths (one page, a partial
// page, many pages for the split path), prefills from 0 and after a cached prefix, one longer than a
// 64-row tile and not a multiple of it.
const std::vector<std::pair<int, int>> k_sequences = {{0, 1},  {16, 1}, {200, 1}, {999, 1}, {0, 100},
                                                      {37, 70}, {5, 2},  {0, 150}, {300, 20}};

TEST_P(AttentionKernels, MatchTheReferenceOnARaggedBatch) {
  const Shape sh = GetParam();
  const int D = sh.head_dim, bs = sh.block_size;
  std::mt19937 rng(1234);

  // Blocks: every sequence's table drawn from one shuffled pool.
  int total_blocks = 0;
  for (const auto& [start, n] : k_sequences) total_blocks += (start + n + bs - 1) / bs;
  std::vector<std::int32_t> ids(static_cast<std::size_t>(total_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  StepBatch batch{{}, bs};
  int used = 0;
  for (const auto& [start, n] : k_sequences) {
    ScheduledSequence s;
    s.tokens.assign(static_cast<std::size_t>(n), 0);
    s.start_position = start;
    const int need = (start + n + bs - 1) / bs;
    s.blocks.assign(ids.begin() + used, ids.begin() + used + need);
    used += need;
    batch.sequences.push_back(s);
  }
  const StepLimits limits{bs, total_blocks, 1 << 20, 1 << 20, 1};
  const StepMetadata md = build_step_metadata(batch, limits, false);

  // q in [-6, 6) and k, v in [-1, 1): scores of standard deviation ~2, neither flat nor one-hot.
  const int qkv_stride = (sh.heads + 2 * sh.kv_heads) * D;
  std::uniform_real_distribution<float> uq(-6.0f, 6.0f), ukv(-1.0f, 1.0f);
  std::vector<std::uint16_t> qkv(static_cast<std::size_t>(md.num_tokens) * qkv_stride);
  for (auto& v : qkv) v = to_bf16_bits(uq(rng));
  const std::size_t pool = static_cast<std::size_t>(total_blocks) * sh.kv_heads * bs * D;
  std::vector<std::uint16_t> k(pool, to_bf16_bits(NAN)), v(pool, to_bf16_bits(NAN));
  const auto at = [&](const ScheduledSequence& s, int pos, int kvh, int d) {
    const std::size_t page = static_cast<std::size_t>(s.blocks[static_cast<std::size_t>(pos / bs)]);
    return ((page * sh.kv_heads + kvh) * bs + pos % bs) * D + d;
  };
  for (const auto& s : batch.sequences) {
    for (int pos = 0; pos < s.start_position + static_cast<int>(s.tokens.size()); ++pos) {
      for (int kvh = 0; kvh < sh.kv_heads; ++kvh) {
        for (int d = 0; d < D; ++d) {
          k[at(s, pos, kvh, d)] = to_bf16_bits(ukv(rng));
          v[at(s, pos, kvh, d)] = to_bf16_bits(ukv(rng));
        }
      }
    }
  }

  DeviceBuffer<std::uint16_t> d_qkv(qkv.size()), d_k(pool), d_v(pool);
  DeviceBuffer<std::int32_t> d_meta(md.data.size());
  const std::size_t out_count = static_cast<std::size_t>(md.num_tokens) * sh.heads * D;
  DeviceBuffer<std::uint16_t> d_ref(out_count), d_fast(out_count);
  AISP_CUDA_CHECK(cudaMemcpy(d_qkv.data(), qkv.data(), d_qkv.bytes(), cudaMemcpyHostToDevice));
  AISP_CUDA_CHECK(cudaMemcpy(d_k.data(), k.data(), d_k.bytes(), cudaMemcpyHostToDevice));
  AISP_CUDA_CHECK(cudaMemcpy(d_v.data(), v.data(), d_v.bytes(), cudaMemcpyHostToDevice));
  AISP_CUDA_CHECK(cudaMemcpy(d_meta.data(), md.data.data(), d_meta.bytes(), cudaMemcpyHostToDevice));
  AISP_CUDA_CHECK(cudaMemset(d_ref.data(), 0xff, d_ref.bytes()));  // NaN: an unwritten output fails
  AISP_CUDA_CHECK(cudaMemset(d_fast.data(), 0xff, d_fast.bytes()));

  AttentionArgs a;
  a.qkv = reinterpret_cast<const __nv_bfloat16*>(d_qkv.data());
  a.qkv_stride = qkv_stride;
  a.k_cache = reinterpret_cast<const __nv_bfloat16*>(d_k.data());
  a.v_cache = reinterpret_cast<const __nv_bfloat16*>(d_v.data());
  const std::int32_t* m = d_meta.data();
  a.query_start = m + md.query_start;
  a.context_len = m + md.context_len;
  a.block_table = m + md.block_table;
  a.table_stride = md.table_stride;
  a.token_seq = m + md.token_seq;
  a.decode_seqs = m + md.decode_seqs;
  a.prefill_tiles = m + md.prefill_tiles;
  a.num_seqs = md.num_seqs;
  a.num_tokens = md.num_tokens;
  a.num_decode = md.num_decode;
  a.num_prefill_tiles = md.num_prefill_tiles;
  a.heads = sh.heads;
  a.kv_heads = sh.kv_heads;
  a.head_dim = D;
  a.block_size = bs;
  a.scale = 1.0f / std::sqrt(static_cast<float>(D));
  ASSERT_TRUE(attention_supports(D, bs, sh.heads / sh.kv_heads));

  a.out = reinterpret_cast<__nv_bfloat16*>(d_ref.data());
  launch_attention_reference(a, nullptr);
  std::vector<std::uint16_t> ref(out_count), fast(out_count);
  AISP_CUDA_CHECK(cudaMemcpy(ref.data(), d_ref.data(), d_ref.bytes(), cudaMemcpyDeviceToHost));

  // 1. The clear kernel against fp64 on the host, every (token, head).
  int token = 0;
  double worst = 0.0;
  for (const auto& s : batch.sequences) {
    for (std::size_t t = 0; t < s.tokens.size(); ++t, ++token) {
      const int pos = s.start_position + static_cast<int>(t);
      for (int h = 0; h < sh.heads; ++h) {
        const int kvh = h / (sh.heads / sh.kv_heads);
        std::vector<double> score(static_cast<std::size_t>(pos + 1));
        for (int j = 0; j <= pos; ++j) {
          double dot = 0.0;
          for (int d = 0; d < D; ++d) {
            dot += from_bf16_bits(qkv[static_cast<std::size_t>(token) * qkv_stride + h * D + d]) *
                   static_cast<double>(from_bf16_bits(k[at(s, j, kvh, d)]));
          }
          score[static_cast<std::size_t>(j)] = dot / std::sqrt(static_cast<double>(D));
        }
        const double mx = *std::max_element(score.begin(), score.end());
        double sum = 0.0;
        for (double& e : score) sum += (e = std::exp(e - mx));
        for (int d = 0; d < D; ++d) {
          double o = 0.0;
          for (int j = 0; j <= pos; ++j) o += score[static_cast<std::size_t>(j)] * from_bf16_bits(v[at(s, j, kvh, d)]);
          o /= sum;
          const double got = from_bf16_bits(ref[(static_cast<std::size_t>(token) * sh.heads + h) * D + d]);
          const double err = std::abs(got - o);
          worst = std::max(worst, err);
          ASSERT_LE(err, 1e-3 + 0x1.0p-8 * std::abs(o)) << "reference kernel, token " << token << " head " << h
                                                         << " dim " << d << ": " << got << " vs fp64 " << o;
        }
      }
    }
  }
  std::printf("clear kernel vs fp64: max abs error %.3g\n", worst);

  // 2. The fast kernels against the clear one: the planned split, and forced uneven splits.
  // A plan must cover the longest decode's pages: 5 splits, the last one shorter.
  const int max_pages = (md.max_decode_context + bs - 1) / bs, per_split = (max_pages + 4) / 5;
  const DecodePlan five{(max_pages + per_split - 1) / per_split, per_split};
  for (const DecodePlan plan : {plan_decode(a, md.max_decode_context, 132), DecodePlan{1, max_pages}, five}) {
    DeviceBuffer<float> scratch(static_cast<std::size_t>(std::max<std::int64_t>(1, decode_scratch_floats(a, plan))));
    a.out = reinterpret_cast<__nv_bfloat16*>(d_fast.data());
    launch_attention_decode(a, plan, scratch.data(), nullptr);
    launch_attention_prefill(a, nullptr);
    AISP_CUDA_CHECK(cudaDeviceSynchronize());
    AISP_CUDA_CHECK(cudaMemcpy(fast.data(), d_fast.data(), d_fast.bytes(), cudaMemcpyDeviceToHost));
    double worst_fast = 0.0;
    for (std::size_t i = 0; i < out_count; ++i) {
      const double want = from_bf16_bits(ref[i]), got = from_bf16_bits(fast[i]);
      const double err = std::abs(got - want);
      worst_fast = std::max(worst_fast, std::isnan(err) ? INFINITY : err);
      // P is rounded to bf16 before the tensor-core P V product: a relative error of 2^-9 per weight.
      ASSERT_LE(err, 1e-2 + 0x1.0p-7 * std::abs(want))
          << "fast kernels (splits " << plan.splits << "), token " << i / (sh.heads * D) << " head "
          << i / D % sh.heads << " dim " << i % D << ": " << got << " vs " << want;
    }
    std::printf("fast vs clear kernel (splits %d x %d pages): max abs error %.3g\n", plan.splits,
                plan.pages_per_split, worst_fast);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionKernels,
                         testing::Values(Shape{64, 32, 8, 16},   // Llama-3.2-1B
                                         Shape{128, 32, 8, 16},  // Llama-3-8B
                                         Shape{128, 24, 8, 16},  // Llama-3.2-3B: a group of 3
                                         Shape{64, 4, 4, 8},     // no GQA, small pages
                                         Shape{128, 16, 2, 32}), // a group of 8, big pages
                         name_of);

}  // namespace
}  // namespace aisp::serving::gpu
