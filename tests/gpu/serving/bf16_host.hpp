// bf16 on the host for the serving GPU tests: the bit patterns their operands are uploaded as and their
// outputs read back from.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace aisp::serving::gpu {

inline std::uint16_t to_bf16_bits(float f) {
  std::uint32_t u = 0;
  std::memcpy(&u, &f, sizeof(u));
  if (std::isnan(f)) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return static_cast<std::uint16_t>(u >> 16);
}

inline float from_bf16_bits(std::uint16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f = 0.0f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

}  // namespace aisp::serving::gpu
