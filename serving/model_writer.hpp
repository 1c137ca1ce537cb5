// A random-weight Llama model in the Hugging Face folder layout (config.json, generation_config.json,
// model.safetensors or model-0000i-of-0000N.safetensors + model.safetensors.index.json), loadable by
// transformers' LlamaForCausalLM.from_pretrained and by ModelWeights::open. No real weights exist on our
// machines: these stand in for them, with transformers-like magnitudes so activations stay in range.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "serving/model_config.hpp"

namespace aisp::serving {

// transformers' save_pretrained default ("5GB" = 5e9 bytes per shard).
inline constexpr std::int64_t k_default_max_shard_bytes = 5'000'000'000;

struct WrittenModel {
  ModelConfig config;                          // as written (layers override applied)
  std::vector<std::filesystem::path> files;    // the .safetensors files, in shard order
  std::int64_t tensor_bytes = 0;               // == weight_bytes(config)
  int tensor_count = 0;
};

// Tensor-data bytes written so far and the total, after each chunk (for a progress line).
using ModelWriteProgress = std::function<void(std::int64_t written, std::int64_t total)>;

// Writes the model into `dir` (created if absent). Files of a previous model in `dir` (config.json,
// generation_config.json, model.safetensors, model.safetensors.index.json, model-*-of-*.safetensors)
// are removed first so that no stale shard survives; anything else in `dir` is left alone. Shards
// follow the model order (embedding, layers, norm, lm_head) and each holds at most `max_shard_bytes`
// of tensor data unless one tensor alone is larger. `layers` overrides num_hidden_layers (a 2-layer
// 8B-shaped model for quick GPU checks). config.json is written last: a folder with one is complete.
// Values: every element is a pure function of (seed, tensor name, element index), so the output does not
// depend on chunking or thread count. Linear and embedding weights ~ N(0, 0.02) (transformers'
// initializer_range); RMSNorm weights ~ 1 + N(0, 0.1), so a kernel that ignores the norm weight fails.
// Throws aisp::UsageError on bad arguments or an unwritable folder.
WrittenModel write_random_model(const ModelConfig& config, const std::filesystem::path& dir, std::uint64_t seed,
                                std::int64_t max_shard_bytes = k_default_max_shard_bytes,
                                std::optional<int> layers = std::nullopt, const ModelWriteProgress& progress = {});

// The BF16 values write_random_model stores for `tensor_name`, elements [first, first + out.size()):
// exposed so tests (and a future reference) can recompute any slice without reading the files.
void random_weight_bf16(std::uint64_t seed, const std::string& tensor_name, std::int64_t first,
                        std::span<std::uint16_t> out);

// File name of shard `index` (0-based) of `count`: "model.safetensors" when count == 1, else
// "model-00001-of-00003.safetensors" (transformers' naming).
[[nodiscard]] std::string shard_file_name(int index, int count);

}  // namespace aisp::serving
