// config.json parsing: presets round-trip through the writer's JSON, transformers' defaults apply, and
// every bad field is a DataError naming the file and the field.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "core/base/error.hpp"
#include "serving/model_config.hpp"

namespace aisp::serving {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    m_path = fs::temp_directory_path() / ("aisp_model_config_" + std::to_string(rd()) + std::to_string(rd()));
    fs::create_directories(m_path);
  }
  ~TempDir() { fs::remove_all(m_path); }
  [[nodiscard]] fs::path write(const std::string& text) const {
    const fs::path p = m_path / "config.json";
    std::ofstream(p) << text;
    return p;
  }

 private:
  fs::path m_path;
};

void expect_same(const ModelConfig& a, const ModelConfig& b) {
  EXPECT_EQ(a.architecture, b.architecture);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.intermediate_size, b.intermediate_size);
  EXPECT_EQ(a.num_hidden_layers, b.num_hidden_layers);
  EXPECT_EQ(a.num_attention_heads, b.num_attention_heads);
  EXPECT_EQ(a.num_key_value_heads, b.num_key_value_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.max_position_embeddings, b.max_position_embeddings);
  EXPECT_DOUBLE_EQ(a.rms_norm_eps, b.rms_norm_eps);
  EXPECT_DOUBLE_EQ(a.rope_theta, b.rope_theta);
  ASSERT_EQ(a.rope_scaling.has_value(), b.rope_scaling.has_value());
  if (a.rope_scaling) {
    EXPECT_DOUBLE_EQ(a.rope_scaling->factor, b.rope_scaling->factor);
    EXPECT_DOUBLE_EQ(a.rope_scaling->low_freq_factor, b.rope_scaling->low_freq_factor);
    EXPECT_DOUBLE_EQ(a.rope_scaling->high_freq_factor, b.rope_scaling->high_freq_factor);
    EXPECT_EQ(a.rope_scaling->original_max_position_embeddings, b.rope_scaling->original_max_position_embeddings);
  }
  EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
  EXPECT_EQ(a.bos_token_id, b.bos_token_id);
  EXPECT_EQ(a.eos_token_ids, b.eos_token_ids);
  EXPECT_EQ(a.torch_dtype, b.torch_dtype);
}

TEST(ModelConfig, PresetsRoundTripThroughConfigJson) {
  TempDir dir;
  for (const auto& name : preset_names()) {
    SCOPED_TRACE(name);
    const ModelConfig preset = preset_config(name);
    const std::string text = to_config_json(preset);
    const json j = json::parse(text);
    EXPECT_EQ(j.at("model_type"), "llama");
    EXPECT_EQ(j.at("architectures"), json::array({"LlamaForCausalLM"}));
    EXPECT_EQ(j.at("torch_dtype"), "bfloat16");
    EXPECT_EQ(j.at("hidden_act"), "silu");
    EXPECT_EQ(j.at("attention_bias"), false);
    EXPECT_EQ(j.at("mlp_bias"), false);
    if (preset.rope_scaling) {
      EXPECT_EQ(j.at("rope_scaling").at("rope_type"), "llama3");
    }
    expect_same(load_model_config(dir.write(text)), preset);
  }
}

TEST(ModelConfig, PresetsMatchThePublishedShapes) {
  const auto small = preset_config("llama3.2-1b");
  EXPECT_EQ(small.hidden_size, 2048);
  EXPECT_EQ(small.num_hidden_layers, 16);
  EXPECT_EQ(small.head_dim, 64);
  EXPECT_TRUE(small.tie_word_embeddings);
  ASSERT_TRUE(small.rope_scaling);
  EXPECT_DOUBLE_EQ(small.rope_scaling->factor, 32.0);
  EXPECT_EQ(small.eos_token_ids, (std::vector<int>{128001, 128008, 128009}));
  // 1.236 B parameters (embedding shared with lm_head), 8.030 B for the 8B: the published counts.
  EXPECT_EQ(weight_bytes(small), 2 * 1'235'814'400LL);
  const auto big = preset_config("llama3-8b");
  EXPECT_FALSE(big.rope_scaling);
  EXPECT_FALSE(big.tie_word_embeddings);
  EXPECT_EQ(big.max_position_embeddings, 8192);
  EXPECT_EQ(weight_bytes(big), 2 * 8'030'261'248LL);
  EXPECT_THROW((void)preset_config("llama2-7b"), UsageError);
}

TEST(ModelConfig, TransformersDefaultsApply) {
  TempDir dir;
  const auto c = load_model_config(dir.write(R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 96,
    "num_hidden_layers": 1, "num_attention_heads": 4, "vocab_size": 100, "max_position_embeddings": 32,
    "eos_token_id": 7, "rope_scaling": null})"));
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_FALSE(c.rope_scaling);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.bos_token_id, -1);
  EXPECT_EQ(c.eos_token_ids, std::vector<int>{7});
  EXPECT_EQ(c.torch_dtype, "bfloat16");
}

TEST(ModelConfig, NewerTransformersSpellingsAreRead) {
  TempDir dir;
  json j = json::parse(to_config_json(preset_config("tiny")));
  j.erase("rope_scaling");
  j.erase("rope_theta");
  j.erase("torch_dtype");
  j["dtype"] = "bfloat16";
  j["rope_parameters"] = {{"rope_type", "llama3"},       {"rope_theta", 250000.0},
                          {"factor", 8.0},              {"low_freq_factor", 1.0},
                          {"high_freq_factor", 4.0},    {"original_max_position_embeddings", 256}};
  const auto c = load_model_config(dir.write(j.dump()));
  EXPECT_DOUBLE_EQ(c.rope_theta, 250000.0);
  ASSERT_TRUE(c.rope_scaling);
  EXPECT_DOUBLE_EQ(c.rope_scaling->factor, 8.0);
}

// Mutates the tiny preset's config.json and expects "<file>: <field>: ..." with `fragment` in it.
void expect_bad(const std::function<void(json&)>& mutate, const std::string& field, const std::string& fragment) {
  TempDir dir;
  json j = json::parse(to_config_json(preset_config("tiny")));
  mutate(j);
  const fs::path p = dir.write(j.dump());
  try {
    (void)load_model_config(p);
    FAIL() << "accepted; expected an error on " << field;
  } catch (const DataError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind(p.string() + ": " + field + ": ", 0), 0u) << what;
    EXPECT_NE(what.find(fragment), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

TEST(ModelConfig, BadFieldsAreNamed) {
  expect_bad([](json& j) { j.erase("hidden_size"); }, "hidden_size", "missing");
  expect_bad([](json& j) { j["hidden_size"] = "64"; }, "hidden_size", "expected an integer, got string");
  expect_bad([](json& j) { j["hidden_size"] = 64.5; }, "hidden_size", "expected an integer");
  expect_bad([](json& j) { j["vocab_size"] = -3; }, "vocab_size", "must be positive");
  expect_bad([](json& j) { j["num_key_value_heads"] = 3; }, "num_key_value_heads", "does not divide");
  expect_bad([](json& j) { j["num_hidden_layers"] = 0; }, "num_hidden_layers", "must be positive");
  expect_bad([](json& j) { j["intermediate_size"] = 1e12; }, "intermediate_size", "expected an integer");
  expect_bad([](json& j) { j["intermediate_size"] = 10000000000LL; }, "intermediate_size", "out of range");
  expect_bad([](json& j) { j["model_type"] = "mistral"; }, "model_type", "not supported");
  expect_bad([](json& j) { j["architectures"] = {"MistralForCausalLM"}; }, "architectures", "LlamaForCausalLM");
  expect_bad([](json& j) { j.erase("architectures"); j.erase("model_type"); }, "model_type", "missing");
  expect_bad([](json& j) { j["hidden_act"] = "gelu"; }, "hidden_act", "not supported");
  expect_bad([](json& j) { j["attention_bias"] = true; }, "attention_bias", "not supported");
  expect_bad([](json& j) { j["tie_word_embeddings"] = "yes"; }, "tie_word_embeddings", "expected true or false");
  expect_bad([](json& j) { j["rope_scaling"]["rope_type"] = "yarn"; }, "rope_scaling.rope_type", "not supported");
  expect_bad([](json& j) { j["rope_scaling"].erase("factor"); }, "rope_scaling.factor", "missing");
  expect_bad([](json& j) { j["rope_scaling"]["high_freq_factor"] = 1.0; }, "rope_scaling.high_freq_factor", "exceed");
  expect_bad([](json& j) { j["rope_scaling"] = 3; }, "rope_scaling", "expected an object");
  expect_bad([](json& j) { j["rms_norm_eps"] = 0; }, "rms_norm_eps", "must be positive");
  expect_bad([](json& j) { j["eos_token_id"] = {2, "x"}; }, "eos_token_id[1]", "expected an integer");
  expect_bad([](json& j) { j["eos_token_id"] = 5000; }, "eos_token_id", "outside the vocabulary");
  expect_bad([](json& j) { j["torch_dtype"] = "int8"; }, "torch_dtype", "not supported");
  expect_bad([](json& j) { j.erase("head_dim"); j["num_attention_heads"] = 3; j["num_key_value_heads"] = 1; },
             "num_attention_heads", "does not divide hidden_size");
}

TEST(ModelConfig, UnreadableOrMalformedFiles) {
  TempDir dir;
  EXPECT_THROW((void)load_model_config(dir.write("{\"hidden_size\": ")), DataError);
  EXPECT_THROW((void)load_model_config(dir.write("[1, 2]")), DataError);
  EXPECT_THROW((void)load_model_config(dir.write("")), DataError);
  EXPECT_THROW((void)load_model_config(fs::temp_directory_path() / "aisp_no_such_dir" / "config.json"), DataError);
}

}  // namespace
}  // namespace aisp::serving
