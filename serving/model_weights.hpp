// A model folder in the Hugging Face layout (config.json, model.safetensors or shards named by
// model.safetensors.index.json), memory-mapped and validated: every tensor the Llama architecture needs is
// present with the shape the config implies and dtype BF16. The GPU runner copies from these views.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "serving/model_config.hpp"

namespace aisp::serving {

struct TensorData {
  std::string dtype;                   // the safetensors dtype string: "BF16", "F32", ...
  std::vector<std::int64_t> shape;
  std::span<const std::byte> bytes;    // into a mapped file; valid while the ModelWeights lives
};

class ModelWeights {
 public:
  // Throws aisp::DataError (one line: the file and what is wrong) on a missing, truncated or
  // inconsistent folder.
  static ModelWeights open(const std::filesystem::path& dir);
  [[nodiscard]] const ModelConfig& config() const { return m_config; }
  [[nodiscard]] bool contains(const std::string& name) const;
  [[nodiscard]] const TensorData& at(const std::string& name) const;  // DataError when absent
  [[nodiscard]] const std::map<std::string, TensorData>& tensors() const { return m_tensors; }
  [[nodiscard]] const std::filesystem::path& dir() const { return m_dir; }
  // The .safetensors file a tensor comes from (for messages and `aisp model inspect`).
  [[nodiscard]] const std::filesystem::path& source_file(const std::string& name) const;
  [[nodiscard]] const std::vector<std::filesystem::path>& files() const { return m_file_paths; }
  [[nodiscard]] std::int64_t total_bytes() const;  // every tensor's bytes, extras included

 private:
  struct Mapping;                      // one mapped file (defined in model_weights.cpp / safetensors.cpp)
  ModelConfig m_config;
  std::map<std::string, TensorData> m_tensors;
  std::vector<std::shared_ptr<Mapping>> m_files;
  std::filesystem::path m_dir;
  std::vector<std::filesystem::path> m_file_paths;
  std::map<std::string, std::size_t> m_source;  // tensor name -> index in m_file_paths
};

// One tensor of the Llama layout: its Hugging Face name and the shape the config implies (dtype BF16).
struct ExpectedTensor {
  std::string name;
  std::vector<std::int64_t> shape;
};
// Every tensor a Llama model folder must hold, in model order (embedding, layer by layer, final norm,
// lm_head unless the embeddings are tied). The writer writes exactly these; the loader demands them.
[[nodiscard]] std::vector<ExpectedTensor> llama_tensor_layout(const ModelConfig& config);

// Hugging Face tensor names of the Llama layout.
[[nodiscard]] std::string layer_tensor(int layer, const std::string& suffix);  // "model.layers.3." + suffix

}  // namespace aisp::serving
