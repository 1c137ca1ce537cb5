// ch14:jit_specialize — what 02_nvrtc_shapes hands NVRTC and what it files the cubin under. Plain C++ (no
// CUDA headers) so that the CPU tests check the string building and the key.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "chapters/ch14_compilers/common/kernel_cache.hpp"
#include "chapters/ch14_compilers/jit_specialize/reference.hpp"

namespace aisp::ch14::jit_specialize {

inline constexpr const char* k_kernel_name = "ch14_permute4_kernel";

// The kernel source with the shape compiled in: a preamble of #defines that permute_kernel.cuh reads
// when AISP_JIT_SHAPE is set, then a #line so that NVRTC's messages point into permute_kernel.cuh.
// Literals carry a 'u' suffix: the kernel's arithmetic stays unsigned 32-bit, as in the generic build.
inline std::string specialized_source(std::string_view kernel_source, const PermuteShape& p) {
  std::string s = "// specialized by ch14:jit_specialize:02_nvrtc_shapes\n#define AISP_JIT_SHAPE 1\n";
  s += "#define AISP_JIT_COUNT " + std::to_string(p.count) + "u\n";
  for (int j = 0; j < 4; ++j) {
    const auto i = static_cast<std::size_t>(j);
    s += "#define AISP_JIT_DIM" + std::to_string(j) + " " + std::to_string(p.dim[i]) + "u\n";
    s += "#define AISP_JIT_STRIDE" + std::to_string(j) + " " + std::to_string(p.in_stride[i]) + "u\n";
  }
  s += "#line 1 \"permute_kernel.cuh\"\n";
  s.append(kernel_source);
  return s;
}

// Everything the cubin depends on: the whole specialized source (so the shape, and any edit of the
// kernel), the options (they name the architecture), the compiler's version and the device.
inline CacheKey cubin_key(std::string_view source, const std::vector<std::string>& options,
                          std::string_view nvrtc_version, std::string_view device_name, int cc) {
  std::string joined;
  for (const auto& o : options) joined += (joined.empty() ? "" : " ") + o;
  CacheKey key;
  key.add("kind", "cubin")
      .add("ladder", "ch14:jit_specialize")
      .add("source_fnv1a", hex64(fnv1a64(source)))
      .add("source_bytes", static_cast<long long>(source.size()))
      .add("options", joined)
      .add("nvrtc", nvrtc_version)
      .add("device", device_name)
      .add("cc", cc);
  return key;
}

}  // namespace aisp::ch14::jit_specialize
