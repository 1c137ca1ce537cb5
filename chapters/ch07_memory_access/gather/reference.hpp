// ch07:gather — host side of the ladder: how the lookup indices are drawn, and the gather itself in plain
// C++ (the CPU reference at test sizes). No CUDA headers: the CPU tests include this file.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <vector>

namespace aisp::ch07::gather {

inline std::uint64_t mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The popularity rank of lookup `l`: log-uniform over [0, vocab), i.e. P(rank r) ~ 1/(r+1), a Zipf law
// with exponent 1, the shape of token frequencies in text. Rank 0 is the most frequent row. The ranks do
// not depend on the seed, so the number of distinct rows (and the declared bytes) is fixed by the axes.
inline std::int64_t skewed_rank(std::int64_t l, std::int64_t vocab) {
  const double u = static_cast<double>(mix64(static_cast<std::uint64_t>(l)) >> 11) * 0x1.0p-53;
  const auto r = static_cast<std::int64_t>(std::floor(std::exp(u * std::log(static_cast<double>(vocab) + 1.0)))) - 1;
  return r < 0 ? 0 : (r >= vocab ? vocab - 1 : r);
}

// Which table row has rank `rank` under `seed`: an affine bijection rank -> (a * rank + b) mod vocab with
// a coprime to vocab, so that popular rows are scattered over the table and move with the seed.
struct RowMap {
  std::uint64_t a = 1, b = 0, vocab = 1;
  RowMap(std::uint64_t seed, std::int64_t v) : vocab(static_cast<std::uint64_t>(v)) {
    a = (mix64(seed) % vocab) | 1;
    while (std::gcd(a, vocab) != 1) a += 2;
    b = mix64(seed + 1) % vocab;
  }
  std::int64_t operator()(std::int64_t rank) const {
    return static_cast<std::int64_t>((a * static_cast<std::uint64_t>(rank) + b) % vocab);
  }
};

// The indices of one input: lookup l reads row RowMap(seed)(skewed_rank(l)).
inline std::vector<std::int32_t> make_indices(std::int64_t lookups, std::int64_t vocab, std::uint64_t seed) {
  const RowMap map(seed, vocab);
  std::vector<std::int32_t> idx(static_cast<std::size_t>(lookups));
  for (std::int64_t l = 0; l < lookups; ++l) idx[l] = static_cast<std::int32_t>(map(skewed_rank(l, vocab)));
  return idx;
}

// How many distinct rows the lookups read (the same for every seed: the row map is a bijection).
inline std::int64_t distinct_rows(std::int64_t lookups, std::int64_t vocab) {
  std::vector<bool> seen(static_cast<std::size_t>(vocab), false);
  std::int64_t count = 0;
  for (std::int64_t l = 0; l < lookups; ++l) {
    const auto r = static_cast<std::size_t>(skewed_rank(l, vocab));
    if (!seen[r]) {
      seen[r] = true;
      ++count;
    }
  }
  return count;
}

// out[l][c] = table[idx[l]][c]: the gather, on values already on the host.
inline std::vector<double> gather_rows(const std::vector<double>& table, const std::vector<double>& idx,
                                       std::int64_t dim) {
  std::vector<double> out(idx.size() * static_cast<std::size_t>(dim));
  for (std::size_t l = 0; l < idx.size(); ++l) {
    const auto row = static_cast<std::size_t>(idx[l]);
    for (std::int64_t c = 0; c < dim; ++c) out[l * dim + c] = table[row * dim + c];
  }
  return out;
}

}  // namespace aisp::ch07::gather
