// ch16:paged_attention — host side of the ladder: the shape and the paged layout, the page table a
// serving engine's allocator leaves behind, and decode attention in plain C++ double precision (the CPU
// reference at test sizes). No CUDA headers: the CPU tests include this file.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <vector>

namespace aisp::ch16::paged_attention {

// One decode step's attention: every sequence has one query token per query head and `context` cached
// tokens (the same for every sequence in this ladder). Query head h reads KV head h / group().
struct Shape {
  int batch = 0;
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int page_size = 0;
  int context = 0;

  int group() const { return heads / kv_heads; }  // query heads per KV head (grouped-query attention)
  int pages_per_seq() const { return (context + page_size - 1) / page_size; }
  std::int64_t num_pages() const { return static_cast<std::int64_t>(batch) * pages_per_seq(); }

  // The pools' layout, [num_pages][kv_heads][page_size][head_dim]: one (page, KV head) is a contiguous
  // page_size x head_dim block, one token's row of head_dim values is contiguous.
  std::size_t kv_index(std::int64_t page, int kv_head, int slot, int d) const {
    return static_cast<std::size_t>(((page * kv_heads + kv_head) * page_size + slot) * head_dim + d);
  }
  std::size_t kv_count() const { return kv_index(num_pages(), 0, 0, 0); }
  std::size_t q_count() const { return static_cast<std::size_t>(batch) * heads * head_dim; }
};

inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The page table, [batch][pages_per_seq]: sequence b's logical page j lives in physical page
// table[b * pages_per_seq + j]. A seeded random permutation of all pages (Fisher-Yates), which is what a
// block allocator's free list looks like after a while of serving: neighbouring pages of one sequence
// are nowhere near each other in memory.
inline std::vector<std::int32_t> make_page_table(int batch, int pages_per_seq, std::uint64_t seed) {
  std::vector<std::int32_t> table(static_cast<std::size_t>(batch) * pages_per_seq);
  std::iota(table.begin(), table.end(), 0);
  std::uint64_t state = splitmix64(seed ^ 0x70A6E5ull);
  for (std::size_t i = table.size(); i > 1; --i) {
    state = splitmix64(state);
    std::swap(table[i - 1], table[state % i]);
  }
  return table;
}

// out[b][h][:] = sum_t softmax_t(scale * q[b][h] . k_t) v_t over the sequence's `context` tokens, with
// scale = 1 / sqrt(head_dim), in double. Token t of sequence b is slot t % page_size of the physical page
// table[b][t / page_size]; slots past the context in a partial last page are never read. Inputs are the
// tensors' values as doubles (device/gate.hpp to_host), the page table's included.
inline std::vector<double> decode_attention(const Shape& s, const std::vector<double>& q,
                                            const std::vector<double>& k_pool,
                                            const std::vector<double>& v_pool,
                                            const std::vector<double>& page_table) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
  const int pps = s.pages_per_seq();
  std::vector<double> out(s.q_count());
  std::vector<double> w(static_cast<std::size_t>(s.context));
  for (int b = 0; b < s.batch; ++b) {
    for (int h = 0; h < s.heads; ++h) {
      const int kvh = h / s.group();
      const double* qh = q.data() + (static_cast<std::size_t>(b) * s.heads + h) * s.head_dim;
      const auto row = [&](const std::vector<double>& pool, int t) {
        const auto logical = static_cast<std::size_t>(b) * pps + t / s.page_size;
        const auto page = static_cast<std::int64_t>(page_table[logical]);
        return pool.data() + s.kv_index(page, kvh, t % s.page_size, 0);
      };
      double m = -INFINITY;
      for (int t = 0; t < s.context; ++t) {
        const double* k = row(k_pool, t);
        double dot = 0;
        for (int d = 0; d < s.head_dim; ++d) dot += qh[d] * k[d];
        w[t] = scale * dot;
        m = std::max(m, w[t]);
      }
      double sum = 0;
      for (int t = 0; t < s.context; ++t) sum += (w[t] = std::exp(w[t] - m));
      double* o = out.data() + (static_cast<std::size_t>(b) * s.heads + h) * s.head_dim;
      for (int t = 0; t < s.context; ++t) {
        const double* v = row(v_pool, t);
        for (int d = 0; d < s.head_dim; ++d) o[d] += w[t] / sum * v[d];
      }
    }
  }
  return out;
}

}  // namespace aisp::ch16::paged_attention
