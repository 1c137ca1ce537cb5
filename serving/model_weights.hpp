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

 private:
  struct Mapping;                      // one mapped file (defined in model_weights.cpp / safetensors.cpp)
  ModelConfig m_config;
  std::map<std::string, TensorData> m_tensors;
  std::vector<std::shared_ptr<Mapping>> m_files;
};

// Hugging Face tensor names of the Llama layout.
[[nodiscard]] std::string layer_tensor(int layer, const std::string& suffix);  // "model.layers.3." + suffix

}  // namespace aisp::serving
