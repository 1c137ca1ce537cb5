// config.json <-> ModelConfig, the presets, and the weight byte count. The rules follow what Hugging Face's
// LlamaConfig accepts (defaults included), narrowed to what the engine runs: the Llama-3 architecture
// with SiLU, no biases, plain or "llama3"-scaled RoPE.
#include "serving/model_config.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/base/error.hpp"
#include "serving/json_file.hpp"
#include "serving/model_weights.hpp"

namespace aisp::serving {

namespace {

using nlohmann::json;

std::string json_type(const json& v) {
  if (v.is_number_integer()) return fmt::format("integer {}", v.dump());
  if (v.is_number()) return fmt::format("number {}", v.dump());
  return std::string(v.type_name());
}

// Reads config.json's fields with one message shape: "<file>: <field>: <problem>".
class Reader {
 public:
  Reader(const std::filesystem::path& path, const json& root) : m_path(path.string()), m_root(root) {}

  [[noreturn]] void fail(const std::string& field, const std::string& problem) const {
    throw DataError(fmt::format("{}: {}: {}", m_path, field, problem));
  }

  // nullptr when absent or null: HF writes null for "not set".
  [[nodiscard]] const json* find(const json& obj, const std::string& key) const {
    const auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return nullptr;
    return &*it;
  }

  [[nodiscard]] int integer(const json& obj, const std::string& key, const std::string& field,
                            std::optional<int> fallback = std::nullopt) const {
    const json* v = find(obj, key);
    if (v == nullptr) {
      if (fallback) return *fallback;
      fail(field, "missing");
    }
    if (!v->is_number_integer()) fail(field, fmt::format("expected an integer, got {}", json_type(*v)));
    const auto n = v->get<std::int64_t>();
    if (n < INT32_MIN || n > INT32_MAX) fail(field, fmt::format("{} is out of range", n));
    return static_cast<int>(n);
  }

  [[nodiscard]] double number(const json& obj, const std::string& key, const std::string& field,
                              std::optional<double> fallback = std::nullopt) const {
    const json* v = find(obj, key);
    if (v == nullptr) {
      if (fallback) return *fallback;
      fail(field, "missing");
    }
    if (!v->is_number()) fail(field, fmt::format("expected a number, got {}", json_type(*v)));
    return v->get<double>();
  }

  [[nodiscard]] bool boolean(const json& obj, const std::string& key, bool fallback) const {
    const json* v = find(obj, key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) fail(key, fmt::format("expected true or false, got {}", json_type(*v)));
    return v->get<bool>();
  }

  [[nodiscard]] std::optional<std::string> string(const json& obj, const std::string& key,
                                                  const std::string& field) const {
    const json* v = find(obj, key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_string()) fail(field, fmt::format("expected a string, got {}", json_type(*v)));
    return v->get<std::string>();
  }

  [[nodiscard]] const json& root() const { return m_root; }

 private:
  std::string m_path;
  const json& m_root;
};

void check_architecture(const Reader& r, ModelConfig& c) {
  const json& root = r.root();
  const auto model_type = r.string(root, "model_type", "model_type");
  if (model_type && *model_type != "llama")
    r.fail("model_type", fmt::format("'{}' is not supported (only \"llama\")", *model_type));
  bool llama_listed = false;
  if (const json* archs = r.find(root, "architectures")) {
    if (!archs->is_array()) r.fail("architectures", fmt::format("expected a list, got {}", json_type(*archs)));
    for (const auto& a : *archs)
      if (a.is_string() && a.get<std::string>() == "LlamaForCausalLM") llama_listed = true;
    if (!llama_listed)
      r.fail("architectures", fmt::format("{} does not list LlamaForCausalLM", archs->dump()));
  }
  if (!model_type && !llama_listed)
    r.fail("model_type", "missing (and no \"architectures\" naming LlamaForCausalLM)");
  c.architecture = "LlamaForCausalLM";
  // What the engine computes: SwiGLU MLP, no biases. Anything else would load and then compute wrong.
  if (const auto act = r.string(root, "hidden_act", "hidden_act"); act && *act != "silu")
    r.fail("hidden_act", fmt::format("'{}' is not supported (only \"silu\")", *act));
  if (r.boolean(root, "attention_bias", false)) r.fail("attention_bias", "true is not supported");
  if (r.boolean(root, "mlp_bias", false)) r.fail("mlp_bias", "true is not supported");
}

void read_token_ids(const Reader& r, ModelConfig& c) {
  const json& root = r.root();
  c.bos_token_id = r.integer(root, "bos_token_id", "bos_token_id", -1);
  c.eos_token_ids.clear();
  if (const json* eos = r.find(root, "eos_token_id")) {
    if (eos->is_array()) {
      for (std::size_t i = 0; i < eos->size(); ++i) {
        const auto& e = (*eos)[i];
        if (!e.is_number_integer())
          r.fail(fmt::format("eos_token_id[{}]", i), fmt::format("expected an integer, got {}", json_type(e)));
        c.eos_token_ids.push_back(e.get<int>());
      }
    } else {
      c.eos_token_ids.push_back(r.integer(root, "eos_token_id", "eos_token_id"));
    }
  }
}

// Transformers 4.x writes "rope_theta" and "rope_scaling"; 5.x folds both into "rope_parameters".
void read_rope(const Reader& r, ModelConfig& c) {
  const json& root = r.root();
  const json* params = r.find(root, "rope_parameters");
  if (params != nullptr && !params->is_object())
    r.fail("rope_parameters", fmt::format("expected an object, got {}", json_type(*params)));
  const json* scaling = r.find(root, "rope_scaling");
  std::string field = "rope_scaling";
  if (scaling == nullptr && params != nullptr) {
    scaling = params;
    field = "rope_parameters";
  }
  c.rope_theta = r.number(root, "rope_theta", "rope_theta",
                          params != nullptr ? r.number(*params, "rope_theta", "rope_parameters.rope_theta", 10000.0)
                                            : 10000.0);  // LlamaConfig's default
  c.rope_scaling.reset();
  if (scaling == nullptr) return;
  if (!scaling->is_object()) r.fail(field, fmt::format("expected an object, got {}", json_type(*scaling)));
  auto type = r.string(*scaling, "rope_type", field + ".rope_type");
  if (!type) type = r.string(*scaling, "type", field + ".type");  // the older key
  if (!type || *type == "default") return;
  if (*type != "llama3")
    r.fail(field + ".rope_type", fmt::format("'{}' is not supported (\"llama3\" or \"default\")", *type));
  RopeScaling s;
  s.factor = r.number(*scaling, "factor", field + ".factor");
  s.low_freq_factor = r.number(*scaling, "low_freq_factor", field + ".low_freq_factor");
  s.high_freq_factor = r.number(*scaling, "high_freq_factor", field + ".high_freq_factor");
  s.original_max_position_embeddings =
      r.integer(*scaling, "original_max_position_embeddings", field + ".original_max_position_embeddings");
  if (!(s.factor >= 1.0)) r.fail(field + ".factor", fmt::format("{} must be >= 1", s.factor));
  if (!(s.low_freq_factor > 0.0)) r.fail(field + ".low_freq_factor", "must be positive");
  // The llama3 rule interpolates between the two wavelengths: equal factors would divide by zero.
  if (!(s.high_freq_factor > s.low_freq_factor))
    r.fail(field + ".high_freq_factor", fmt::format("{} must exceed low_freq_factor {}", s.high_freq_factor,
                                                    s.low_freq_factor));
  if (s.original_max_position_embeddings <= 0)
    r.fail(field + ".original_max_position_embeddings", "must be positive");
  c.rope_scaling = s;
}

void validate(const Reader& r, const ModelConfig& c) {
  const std::pair<const char*, int> sizes[] = {
      {"hidden_size", c.hidden_size},
      {"intermediate_size", c.intermediate_size},
      {"num_hidden_layers", c.num_hidden_layers},
      {"num_attention_heads", c.num_attention_heads},
      {"num_key_value_heads", c.num_key_value_heads},
      {"head_dim", c.head_dim},
      {"vocab_size", c.vocab_size},
      {"max_position_embeddings", c.max_position_embeddings},
  };
  for (const auto& [name, v] : sizes)
    if (v <= 0) r.fail(name, fmt::format("{} must be positive", v));
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    r.fail("num_key_value_heads", fmt::format("{} does not divide num_attention_heads {}", c.num_key_value_heads,
                                              c.num_attention_heads));
  // The kernels index q rows as heads*head_dim: keep it (and every weight's size) well inside int range.
  if (static_cast<std::int64_t>(c.num_attention_heads) * c.head_dim > (1 << 20))
    r.fail("head_dim", fmt::format("num_attention_heads {} x head_dim {} is absurd", c.num_attention_heads, c.head_dim));
  if (!(c.rms_norm_eps > 0.0)) r.fail("rms_norm_eps", fmt::format("{} must be positive", c.rms_norm_eps));
  if (!(c.rope_theta > 0.0)) r.fail("rope_theta", fmt::format("{} must be positive", c.rope_theta));
  if (c.bos_token_id >= c.vocab_size)
    r.fail("bos_token_id", fmt::format("{} is outside the vocabulary ({} tokens)", c.bos_token_id, c.vocab_size));
  for (int e : c.eos_token_ids)
    if (e < 0 || e >= c.vocab_size)
      r.fail("eos_token_id", fmt::format("{} is outside the vocabulary ({} tokens)", e, c.vocab_size));
}

}  // namespace

ModelConfig load_model_config(const std::filesystem::path& config_json) {
  const json root = read_json_file(config_json);
  if (!root.is_object())
    throw DataError(fmt::format("{}: expected a JSON object, got {}", config_json.string(), json_type(root)));
  const Reader r(config_json, root);
  ModelConfig c;
  check_architecture(r, c);
  c.hidden_size = r.integer(root, "hidden_size", "hidden_size");
  c.intermediate_size = r.integer(root, "intermediate_size", "intermediate_size");
  c.num_hidden_layers = r.integer(root, "num_hidden_layers", "num_hidden_layers");
  c.num_attention_heads = r.integer(root, "num_attention_heads", "num_attention_heads");
  if (c.num_attention_heads <= 0) r.fail("num_attention_heads", fmt::format("{} must be positive", c.num_attention_heads));
  // LlamaConfig: no num_key_value_heads means multi-head attention; no head_dim means hidden/heads.
  c.num_key_value_heads = r.integer(root, "num_key_value_heads", "num_key_value_heads", c.num_attention_heads);
  if (r.find(root, "head_dim") != nullptr) {
    c.head_dim = r.integer(root, "head_dim", "head_dim");
  } else {
    if (c.hidden_size % c.num_attention_heads != 0)
      r.fail("num_attention_heads", fmt::format("{} does not divide hidden_size {} (and no head_dim is given)",
                                                c.num_attention_heads, c.hidden_size));
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  c.vocab_size = r.integer(root, "vocab_size", "vocab_size");
  c.max_position_embeddings = r.integer(root, "max_position_embeddings", "max_position_embeddings");
  c.rms_norm_eps = r.number(root, "rms_norm_eps", "rms_norm_eps", 1e-6);  // LlamaConfig's default
  read_rope(r, c);
  c.tie_word_embeddings = r.boolean(root, "tie_word_embeddings", false);
  read_token_ids(r, c);
  // Transformers 4.56+ says "dtype" where older versions said "torch_dtype". The tensors themselves
  // must be BF16 (checked by ModelWeights); the declaration only has to be a float type.
  auto dtype = r.string(root, "torch_dtype", "torch_dtype");
  if (!dtype) dtype = r.string(root, "dtype", "dtype");
  c.torch_dtype = dtype.value_or("bfloat16");
  if (c.torch_dtype != "bfloat16" && c.torch_dtype != "float16" && c.torch_dtype != "float32")
    r.fail("torch_dtype", fmt::format("'{}' is not supported (bfloat16, float16 or float32)", c.torch_dtype));
  validate(r, c);
  return c;
}

std::string to_config_json(const ModelConfig& c) {
  json j = json::object();
  j["architectures"] = json::array({c.architecture});
  j["model_type"] = "llama";
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["head_dim"] = c.head_dim;
  j["vocab_size"] = c.vocab_size;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["rope_theta"] = c.rope_theta;
  if (c.rope_scaling) {
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", c.rope_scaling->factor},
                         {"low_freq_factor", c.rope_scaling->low_freq_factor},
                         {"high_freq_factor", c.rope_scaling->high_freq_factor},
                         {"original_max_position_embeddings", c.rope_scaling->original_max_position_embeddings}};
  } else {
    j["rope_scaling"] = nullptr;
  }
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["bos_token_id"] = c.bos_token_id >= 0 ? json(c.bos_token_id) : json(nullptr);
  if (c.eos_token_ids.empty())
    j["eos_token_id"] = nullptr;
  else if (c.eos_token_ids.size() == 1)
    j["eos_token_id"] = c.eos_token_ids.front();
  else
    j["eos_token_id"] = c.eos_token_ids;
  j["torch_dtype"] = c.torch_dtype;
  j["hidden_act"] = "silu";
  j["attention_bias"] = false;
  j["mlp_bias"] = false;
  j["attention_dropout"] = 0.0;
  j["initializer_range"] = 0.02;
  j["pretraining_tp"] = 1;
  j["use_cache"] = true;
  return j.dump(2) + "\n";
}

ModelConfig preset_config(const std::string& name) {
  ModelConfig c;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 500000.0;
  c.vocab_size = 128256;
  c.bos_token_id = 128000;
  c.torch_dtype = "bfloat16";
  if (name == "llama3.2-1b") {
    // meta-llama/Llama-3.2-1B-Instruct's config.json (the base model lists only 128001 as eos).
    c.hidden_size = 2048;
    c.intermediate_size = 8192;
    c.num_hidden_layers = 16;
    c.num_attention_heads = 32;
    c.num_key_value_heads = 8;
    c.head_dim = 64;
    c.max_position_embeddings = 131072;
    c.rope_scaling = RopeScaling{.factor = 32.0, .low_freq_factor = 1.0, .high_freq_factor = 4.0,
                                 .original_max_position_embeddings = 8192};
    c.tie_word_embeddings = true;
    c.eos_token_ids = {128001, 128008, 128009};
  } else if (name == "llama3-8b") {
    // meta-llama/Meta-Llama-3-8B's config.json: 8K context, plain RoPE (3.1 added the llama3 scaling).
    c.hidden_size = 4096;
    c.intermediate_size = 14336;
    c.num_hidden_layers = 32;
    c.num_attention_heads = 32;
    c.num_key_value_heads = 8;
    c.head_dim = 128;
    c.max_position_embeddings = 8192;
    c.tie_word_embeddings = false;
    c.eos_token_ids = {128001};
  } else if (name == "tiny") {
    // A few MB, for CPU tests and quick GPU checks against transformers: GQA (2 query heads per kv head),
    // head_dim 128 (a size the GPU kernels have) so heads * head_dim != hidden, llama3 RoPE scaling whose
    // wavelength thresholds (64, 256) fall inside its frequencies, untied. The same shape as
    // scripts/llama_reference.py's "tiny".
    c.hidden_size = 256;
    c.intermediate_size = 512;
    c.num_hidden_layers = 2;
    c.num_attention_heads = 4;
    c.num_key_value_heads = 2;
    c.head_dim = 128;
    c.vocab_size = 1024;
    c.max_position_embeddings = 4096;
    c.rope_scaling = RopeScaling{.factor = 8.0, .low_freq_factor = 1.0, .high_freq_factor = 4.0,
                                 .original_max_position_embeddings = 256};
    c.tie_word_embeddings = false;
    c.bos_token_id = 1;
    c.eos_token_ids = {2};
  } else {
    throw UsageError(fmt::format("unknown model preset '{}' (known: {})", name, fmt::join(preset_names(), ", ")));
  }
  return c;
}

std::vector<std::string> preset_names() { return {"llama3.2-1b", "llama3-8b", "tiny"}; }

std::int64_t weight_bytes(const ModelConfig& config) {
  std::int64_t elements = 0;
  for (const auto& t : llama_tensor_layout(config)) {
    std::int64_t n = 1;
    for (auto d : t.shape) n *= d;
    elements += n;
  }
  return elements * 2;  // bf16
}

}  // namespace aisp::serving
