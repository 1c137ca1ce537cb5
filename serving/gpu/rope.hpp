// RoPE's inverse frequencies exactly as Hugging Face computes them (modeling_rope_utils.py: the default
// rule, and "llama3" scaling when config.json has rope_scaling), in fp32 with torch's order of operations,
// so that cos(position * inv_freq) rounds to the same bf16 values as in HF. Plain C++, no CUDA.
#pragma once

#include <vector>

#include "serving/model_config.hpp"

namespace aisp::serving::gpu {

// head_dim / 2 values: dims i and i + head_dim / 2 rotate by position * inv_freq[i].
[[nodiscard]] std::vector<float> rope_inv_freq(const ModelConfig& config);

}  // namespace aisp::serving::gpu
