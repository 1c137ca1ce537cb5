// ch03:pinned_transfer — the host reference of the upload ladder's consuming step and the chunking every
// overlapped step uses. Plain C++ (no CUDA headers) so that the CPU tests can check both.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

namespace aisp::ch03::pinned_transfer {

// The consuming kernel's arithmetic per element: `fma` dependent fused multiply-adds,
// y <- y * k_decay + k_offset, from y = x. A stand-in for whatever a loader does to each batch it
// uploads (decode, normalize, augment) with a knob for how much: fma = 0 is a plain upload. The fixed
// point of the map is 1, and y = decay^fma x + (1 - decay^fma): bounded, and still a function of x
// (decay^1024 ~ 0.90), so that outputs differ between seeds. fma = 0 launches no kernel: a plain upload.
inline constexpr float k_decay = 0.9999f;
inline constexpr float k_offset = 1.0f - k_decay;

// Correctly rounded fmas, like the device's fmaf: the host value is bit-identical to the kernel's.
inline float consume_reference(float x, int fma) {
  float y = x;
  for (int j = 0; j < fma; ++j) y = std::fma(y, k_decay, k_offset);
  return y;
}

// A chunk of the upload: elements [first, first + count).
struct Chunk {
  std::size_t first = 0;
  std::size_t count = 0;
};

// n elements in `chunks` pieces of ceil(n / chunks) elements, the last one shorter; no empty chunk (there
// are fewer chunks than asked when n < chunks). Every element belongs to exactly one chunk.
inline std::vector<Chunk> split_into_chunks(std::size_t n, std::size_t chunks) {
  std::vector<Chunk> out;
  if (n == 0 || chunks == 0) return out;
  const std::size_t per = (n + chunks - 1) / chunks;
  for (std::size_t first = 0; first < n; first += per) out.push_back({first, first + per < n ? per : n - first});
  return out;
}

}  // namespace aisp::ch03::pinned_transfer
