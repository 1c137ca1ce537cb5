// HF's RoPE frequencies, replaying torch's fp32 operations one by one (see rope.hpp). Each line names the
// Python it mirrors; a Python scalar meeting an fp32 tensor is rounded to fp32 first, and `scalar / t` is
// torch's t.reciprocal() * scalar (Tensor.__rtruediv__).
#include "serving/gpu/rope.hpp"

#include <cmath>
#include <numbers>

namespace aisp::serving::gpu {

std::vector<float> rope_inv_freq(const ModelConfig& config) {
  const int dim = config.head_dim;
  const auto base = static_cast<float>(config.rope_theta);
  std::vector<float> inv_freq(static_cast<std::size_t>(dim / 2));
  for (int i = 0; i < dim / 2; ++i) {
    // inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
    inv_freq[static_cast<std::size_t>(i)] = 1.0f / std::pow(base, exponent);
  }
  if (!config.rope_scaling) return inv_freq;

  const RopeScaling& rs = *config.rope_scaling;
  const auto factor = static_cast<float>(rs.factor);
  const auto low = static_cast<float>(rs.low_freq_factor);
  const auto high = static_cast<float>(rs.high_freq_factor);
  const auto old_context = static_cast<float>(rs.original_max_position_embeddings);
  // low_freq_wavelen = old_context_len / low_freq_factor (Python floats: double, then compared in fp32)
  const auto low_freq_wavelen = static_cast<float>(rs.original_max_position_embeddings / rs.low_freq_factor);
  const auto high_freq_wavelen = static_cast<float>(rs.original_max_position_embeddings / rs.high_freq_factor);
  const auto two_pi = static_cast<float>(2.0 * std::numbers::pi);
  for (float& f : inv_freq) {
    const float wavelen = (1.0f / f) * two_pi;                          // 2 * math.pi / inv_freq
    const float scaled = wavelen > low_freq_wavelen ? f / factor : f;   // torch.where(..., inv_freq / factor, ...)
    const float smooth = ((1.0f / wavelen) * old_context - low) / (high - low);
    const float smoothed = (1.0f - smooth) * scaled / factor + smooth * scaled;
    const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
    f = medium ? smoothed : scaled;
  }
  return inv_freq;
}

}  // namespace aisp::serving::gpu
