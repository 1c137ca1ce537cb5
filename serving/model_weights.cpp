// Opening a Hugging Face model folder: config.json, then the single model.safetensors or the shards the
// index names, each memory-mapped and validated, then the Llama layout checked tensor by tensor so that
// the GPU runner never meets a missing or mis-shaped weight halfway through a load.
#include "serving/model_weights.hpp"

#include "serving/json_file.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/base/error.hpp"
#include "serving/safetensors.hpp"

namespace aisp::serving {

struct ModelWeights::Mapping {
  SafetensorsFile file;
};

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string shape_string(const std::vector<std::int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

// model.safetensors.index.json -> {tensor name: file name}.
std::map<std::string, std::string> read_index(const fs::path& index_path) {
  const std::string name = index_path.string();
  const json root = read_json_file(index_path);
  if (!root.is_object() || !root.contains("weight_map") || !root["weight_map"].is_object())
    throw DataError(fmt::format("{}: weight_map: missing or not an object", name));
  std::map<std::string, std::string> map;
  for (const auto& [tensor, file] : root["weight_map"].items()) {
    if (!file.is_string())
      throw DataError(fmt::format("{}: weight_map: '{}' does not name a file", name, tensor));
    auto f = file.get<std::string>();
    // Only files beside the index: a weight map must not reach elsewhere on the disk.
    if (f.empty() || f == "." || f == ".." || f.find('/') != std::string::npos || f.find('\\') != std::string::npos)
      throw DataError(fmt::format("{}: weight_map: '{}' names '{}', not a file in the model folder", name, tensor, f));
    map.emplace(tensor, std::move(f));
  }
  if (map.empty()) throw DataError(fmt::format("{}: weight_map: empty", name));
  return map;
}

}  // namespace

std::string layer_tensor(int layer, const std::string& suffix) {
  return fmt::format("model.layers.{}.{}", layer, suffix);
}

std::vector<ExpectedTensor> llama_tensor_layout(const ModelConfig& c) {
  const std::int64_t hidden = c.hidden_size;
  const std::int64_t q = static_cast<std::int64_t>(c.num_attention_heads) * c.head_dim;
  const std::int64_t kv = static_cast<std::int64_t>(c.num_key_value_heads) * c.head_dim;
  const std::int64_t inter = c.intermediate_size;
  std::vector<ExpectedTensor> out;
  out.push_back({"model.embed_tokens.weight", {c.vocab_size, hidden}});
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    out.push_back({layer_tensor(i, "input_layernorm.weight"), {hidden}});
    out.push_back({layer_tensor(i, "self_attn.q_proj.weight"), {q, hidden}});
    out.push_back({layer_tensor(i, "self_attn.k_proj.weight"), {kv, hidden}});
    out.push_back({layer_tensor(i, "self_attn.v_proj.weight"), {kv, hidden}});
    out.push_back({layer_tensor(i, "self_attn.o_proj.weight"), {hidden, q}});
    out.push_back({layer_tensor(i, "post_attention_layernorm.weight"), {hidden}});
    out.push_back({layer_tensor(i, "mlp.gate_proj.weight"), {inter, hidden}});
    out.push_back({layer_tensor(i, "mlp.up_proj.weight"), {inter, hidden}});
    out.push_back({layer_tensor(i, "mlp.down_proj.weight"), {hidden, inter}});
  }
  out.push_back({"model.norm.weight", {hidden}});
  if (!c.tie_word_embeddings) out.push_back({"lm_head.weight", {c.vocab_size, hidden}});
  return out;
}

ModelWeights ModelWeights::open(const fs::path& dir) {
  if (!fs::is_directory(dir)) throw DataError(fmt::format("{}: not a model folder (no such directory)", dir.string()));
  ModelWeights w;
  w.m_dir = dir;
  const fs::path config_path = dir / "config.json";
  if (!fs::exists(config_path)) throw DataError(fmt::format("{}: missing (not a Hugging Face model folder?)", config_path.string()));
  w.m_config = load_model_config(config_path);

  const auto add_file = [&w](const fs::path& path) -> const SafetensorsFile& {
    auto m = std::make_shared<Mapping>(Mapping{SafetensorsFile::open(path)});
    w.m_files.push_back(std::move(m));
    w.m_file_paths.push_back(path);
    return w.m_files.back()->file;
  };
  // Transformers looks for the single file first, then the index: the same order here.
  const fs::path single = dir / "model.safetensors";
  const fs::path index = dir / "model.safetensors.index.json";
  if (fs::exists(single)) {
    const auto& file = add_file(single);
    for (const auto& [name, t] : file.tensors()) {
      w.m_tensors.emplace(name, t);
      w.m_source.emplace(name, 0);
    }
  } else if (fs::exists(index)) {
    const auto map = read_index(index);
    std::map<std::string, std::size_t> file_ids;
    for (const auto& [tensor, file] : map) {
      if (file_ids.contains(file)) continue;
      const fs::path path = dir / file;
      if (!fs::exists(path))
        throw DataError(fmt::format("{}: weight_map names '{}' (for '{}'), which does not exist", index.string(), file,
                                    tensor));
      add_file(path);
      file_ids.emplace(file, w.m_files.size() - 1);
    }
    // The index is the truth: a tensor it places in a file must be there; other tensors a shard might
    // hold are not part of the model.
    for (const auto& [tensor, file] : map) {
      const std::size_t id = file_ids.at(file);
      const auto& tensors = w.m_files[id]->file.tensors();
      const auto it = tensors.find(tensor);
      if (it == tensors.end())
        throw DataError(fmt::format("{}: weight_map places '{}' in {}, which does not hold it", index.string(), tensor,
                                    file));
      w.m_tensors.emplace(tensor, it->second);
      w.m_source.emplace(tensor, id);
    }
  } else {
    throw DataError(fmt::format("{}: neither model.safetensors nor model.safetensors.index.json", dir.string()));
  }

  for (const auto& expected : llama_tensor_layout(w.m_config)) {
    const auto it = w.m_tensors.find(expected.name);
    if (it == w.m_tensors.end())
      throw DataError(fmt::format("{}: missing tensor '{}' (expected BF16 {})", dir.string(), expected.name,
                                  shape_string(expected.shape)));
    const TensorData& t = it->second;
    if (t.shape != expected.shape || t.dtype != "BF16")
      throw DataError(fmt::format("{}: tensor '{}' is {} {}, expected BF16 {} (from config.json)",
                                  w.source_file(expected.name).string(), expected.name, t.dtype,
                                  shape_string(t.shape), shape_string(expected.shape)));
  }
  return w;
}

bool ModelWeights::contains(const std::string& name) const { return m_tensors.contains(name); }

const TensorData& ModelWeights::at(const std::string& name) const {
  const auto it = m_tensors.find(name);
  if (it == m_tensors.end()) throw DataError(fmt::format("{}: no tensor '{}'", m_dir.string(), name));
  return it->second;
}

const fs::path& ModelWeights::source_file(const std::string& name) const {
  const auto it = m_source.find(name);
  if (it == m_source.end()) throw DataError(fmt::format("{}: no tensor '{}'", m_dir.string(), name));
  return m_file_paths.at(it->second);
}

std::int64_t ModelWeights::total_bytes() const {
  std::int64_t total = 0;
  for (const auto& [name, t] : m_tensors) total += static_cast<std::int64_t>(t.bytes.size());
  return total;
}

}  // namespace aisp::serving
