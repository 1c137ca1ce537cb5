// ch14:jit_specialize — the shape arithmetic and the host reference of the permute ladder. Plain C++ (no
// CUDA headers) so that the CPU tests check them; problem.hpp and the variants use them.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace aisp::ch14::jit_specialize {

// A 4-D permute as the kernel sees it: the output dims (outermost first) and, for each output dim, how
// many input elements apart two neighbours along it are.
struct PermuteShape {
  std::array<std::uint32_t, 4> dim{};
  std::array<std::uint32_t, 4> in_stride{};
  std::uint32_t count = 0;
};

// The largest element count the kernel's 32-bit indexing takes (permute_kernel.cuh).
inline constexpr std::uint64_t k_max_count = (std::uint64_t{1} << 31) - 1;

// "" when a tensor of these dims fits the kernel's 32-bit indexing, else why not.
inline std::string check_dims(const std::array<std::uint64_t, 4>& dims) {
  std::uint64_t count = 1;
  for (const std::uint64_t d : dims) {
    if (d == 0) return "every dim must be at least 1";
    if (d > k_max_count) return "a dim of " + std::to_string(d) + " passes 2^31 - 1";
    count *= d;  // no overflow: each factor < 2^31 and the product is checked after every step
    if (count > k_max_count) return "more than 2^31 - 1 elements (the kernel indexes in 32 bits)";
  }
  return {};
}

// Output dim j is input dim perm[j]; the input is row-major (last dim contiguous). `in_dims` must pass
// check_dims and `perm` must be a permutation of 0..3.
inline PermuteShape make_permute(const std::array<std::uint32_t, 4>& in_dims, const std::array<int, 4>& perm) {
  std::array<std::uint32_t, 4> in_strides{};
  std::uint32_t stride = 1;
  for (int j = 3; j >= 0; --j) {
    in_strides[static_cast<std::size_t>(j)] = stride;
    stride *= in_dims[static_cast<std::size_t>(j)];
  }
  PermuteShape p;
  p.count = stride;
  for (std::size_t j = 0; j < 4; ++j) {
    const auto from = static_cast<std::size_t>(perm[j]);
    p.dim[j] = in_dims[from];
    p.in_stride[j] = in_strides[from];
  }
  return p;
}

// The ladder's permute: attention's head split, [batch, seq, heads, head_dim] -> [batch, heads, seq,
// head_dim] (what a q/k/v projection's output goes through before a per-head kernel).
inline PermuteShape head_split(std::uint32_t batch, std::uint32_t seq, std::uint32_t heads, std::uint32_t head_dim) {
  return make_permute({batch, seq, heads, head_dim}, {0, 2, 1, 3});
}

// The host reference: nested loops over the output coordinates, no divisions; `in` has p.count elements.
template <class T>
std::vector<T> permute_reference(const std::vector<T>& in, const PermuteShape& p) {
  std::vector<T> out;
  out.reserve(p.count);
  for (std::uint64_t i0 = 0; i0 < p.dim[0]; ++i0) {
    for (std::uint64_t i1 = 0; i1 < p.dim[1]; ++i1) {
      for (std::uint64_t i2 = 0; i2 < p.dim[2]; ++i2) {
        for (std::uint64_t i3 = 0; i3 < p.dim[3]; ++i3) {
          out.push_back(in[i0 * p.in_stride[0] + i1 * p.in_stride[1] + i2 * p.in_stride[2] + i3 * p.in_stride[3]]);
        }
      }
    }
  }
  return out;
}

}  // namespace aisp::ch14::jit_specialize
