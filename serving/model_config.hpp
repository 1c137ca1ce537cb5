// The Llama-3 architecture's shape, as Hugging Face's config.json states it, and the presets this project
// knows by name. Parsing and validation live in model_config.cpp.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace aisp::serving {

// rope_scaling {"rope_type": "llama3", "factor", "low_freq_factor", "high_freq_factor",
// "original_max_position_embeddings"}; absent for plain RoPE.
struct RopeScaling {
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int original_max_position_embeddings = 8192;
};

struct ModelConfig {
  std::string architecture = "LlamaForCausalLM";
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_hidden_layers = 0;
  int num_attention_heads = 0;
  int num_key_value_heads = 0;
  int head_dim = 0;                    // hidden_size / num_attention_heads unless config.json says
  int vocab_size = 0;
  int max_position_embeddings = 0;
  double rms_norm_eps = 1e-5;
  double rope_theta = 500000.0;
  std::optional<RopeScaling> rope_scaling;
  bool tie_word_embeddings = false;
  int bos_token_id = -1;
  std::vector<int> eos_token_ids;      // config.json's eos_token_id, an int or a list
  std::string torch_dtype = "bfloat16";
};

// Presets: "llama3.2-1b", "llama3-8b" (the published shapes), and "tiny" (a few MB, for CPU tests).
[[nodiscard]] ModelConfig preset_config(const std::string& name);
[[nodiscard]] std::vector<std::string> preset_names();

// config.json -> ModelConfig; throws aisp::DataError naming the file and the field on anything missing,
// mistyped or inconsistent (heads not dividing hidden_size, kv heads not dividing heads, ...).
[[nodiscard]] ModelConfig load_model_config(const std::filesystem::path& config_json);
[[nodiscard]] std::string to_config_json(const ModelConfig& config);  // what the writer stores

// Bytes of the weights in bf16 (embedding, layers, final norm, lm_head unless tied).
[[nodiscard]] std::int64_t weight_bytes(const ModelConfig& config);

}  // namespace aisp::serving
