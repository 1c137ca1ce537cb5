// Model folders: the random writer's output opens (single file and shards), its values are deterministic
// and shaped like transformers' init, and every broken folder (missing shard, missing tensor, wrong
// shape or dtype) is a DataError naming the tensor and what was expected.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "core/base/error.hpp"
#include "serving/model_weights.hpp"
#include "serving/model_writer.hpp"
#include "serving/safetensors.hpp"

namespace aisp::serving {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    m_path = fs::temp_directory_path() / ("aisp_model_weights_" + std::to_string(rd()) + std::to_string(rd()));
    fs::create_directories(m_path);
  }
  ~TempDir() { fs::remove_all(m_path); }
  [[nodiscard]] const fs::path& path() const { return m_path; }

 private:
  fs::path m_path;
};

std::string error_of(const fs::path& dir) {
  try {
    (void)ModelWeights::open(dir);
  } catch (const DataError& e) {
    return e.what();
  }
  return "(no error)";
}

// Rewrites `file` with `edit` applied to its tensors (copied out of the mapping first).
void rewrite(const fs::path& file, const std::function<void(std::vector<TensorBytes>&)>& edit) {
  std::vector<TensorBytes> tensors;
  {
    const auto f = SafetensorsFile::open(file);
    for (const auto& [name, t] : f.tensors())
      tensors.push_back({name, t.dtype, t.shape, std::vector<std::byte>(t.bytes.begin(), t.bytes.end())});
  }
  edit(tensors);
  write_safetensors(file, tensors);
}

float bf16_to_float(std::uint16_t v) { return std::bit_cast<float>(static_cast<std::uint32_t>(v) << 16); }

constexpr std::int64_t k_small_shards = 1'000'000;  // the tiny model (4.2 MB) in several shards

TEST(ModelWeights, SingleFileModelOpensWithEveryLayoutTensor) {
  TempDir dir;
  const auto config = preset_config("tiny");
  const auto written = write_random_model(config, dir.path(), 1);
  ASSERT_EQ(written.files.size(), 1u);
  EXPECT_EQ(written.files[0].filename(), "model.safetensors");
  EXPECT_FALSE(fs::exists(dir.path() / "model.safetensors.index.json"));
  EXPECT_TRUE(fs::exists(dir.path() / "generation_config.json"));
  const auto w = ModelWeights::open(dir.path());
  const auto layout = llama_tensor_layout(config);
  EXPECT_EQ(w.tensors().size(), layout.size());
  EXPECT_EQ(written.tensor_count, static_cast<int>(layout.size()));
  std::int64_t sum = 0;
  for (const auto& t : layout) {
    std::int64_t n = 2;
    for (auto d : t.shape) n *= d;
    sum += n;
    EXPECT_EQ(w.at(t.name).shape, t.shape);
    EXPECT_EQ(static_cast<std::int64_t>(w.at(t.name).bytes.size()), n) << t.name;
  }
  EXPECT_EQ(weight_bytes(config), sum);
  EXPECT_EQ(written.tensor_bytes, sum);
  EXPECT_EQ(w.total_bytes(), sum);
  EXPECT_EQ(w.config().num_hidden_layers, config.num_hidden_layers);
  EXPECT_TRUE(w.contains("lm_head.weight"));
  EXPECT_THROW((void)w.at("model.layers.9.mlp.up_proj.weight"), DataError);
}

TEST(ModelWeights, ShardedModelOpensAndMissingPiecesAreNamed) {
  TempDir dir;
  const auto written = write_random_model(preset_config("tiny"), dir.path(), 2, k_small_shards);
  ASSERT_GE(written.files.size(), 3u);
  EXPECT_EQ(written.files[0].filename(), shard_file_name(0, static_cast<int>(written.files.size())));
  EXPECT_TRUE(fs::exists(dir.path() / "model.safetensors.index.json"));
  {
    const auto w = ModelWeights::open(dir.path());
    EXPECT_EQ(w.files().size(), written.files.size());
    EXPECT_NE(w.source_file("model.embed_tokens.weight"), w.source_file("lm_head.weight"));
    EXPECT_EQ(w.total_bytes(), weight_bytes(w.config()));
  }
  // One tensor taken out of its shard: the index still names it there.
  const std::string victim = layer_tensor(1, "mlp.down_proj.weight");
  fs::path holder;
  {
    const auto w = ModelWeights::open(dir.path());
    holder = w.source_file(victim);
  }
  const auto backup = holder.string() + ".bak";
  fs::copy_file(holder, backup);
  rewrite(holder, [&](auto& ts) { std::erase_if(ts, [&](const TensorBytes& t) { return t.name == victim; }); });
  auto err = error_of(dir.path());
  EXPECT_NE(err.find(victim), std::string::npos) << err;
  EXPECT_NE(err.find("does not hold it"), std::string::npos) << err;
  // A whole shard gone.
  fs::remove(holder);
  err = error_of(dir.path());
  EXPECT_NE(err.find(holder.filename().string()), std::string::npos) << err;
  EXPECT_NE(err.find("does not exist"), std::string::npos) << err;
  fs::rename(backup, holder);
  EXPECT_EQ(error_of(dir.path()), "(no error)");
  // The index reaching outside the folder.
  std::ifstream in(dir.path() / "model.safetensors.index.json");
  auto index = nlohmann::json::parse(in);
  in.close();
  index["weight_map"][victim] = "../elsewhere.safetensors";
  std::ofstream(dir.path() / "model.safetensors.index.json") << index.dump();
  err = error_of(dir.path());
  EXPECT_NE(err.find("not a file in the model folder"), std::string::npos) << err;
}

TEST(ModelWeights, WrongShapeDtypeOrMissingTensorIsNamedWithExpectation) {
  TempDir dir;
  write_random_model(preset_config("tiny"), dir.path(), 3);
  const fs::path file = dir.path() / "model.safetensors";
  const std::string q = layer_tensor(0, "self_attn.q_proj.weight");
  rewrite(file, [&](auto& ts) {
    for (auto& t : ts)
      if (t.name == q) t.shape = {256, 512};  // same bytes, transposed
  });
  auto err = error_of(dir.path());
  EXPECT_NE(err.find("'" + q + "' is BF16 [256, 512], expected BF16 [512, 256]"), std::string::npos) << err;

  rewrite(file, [&](auto& ts) {
    for (auto& t : ts)
      if (t.name == q) {
        t.shape = {512, 256};
        t.dtype = "F16";
      }
  });
  err = error_of(dir.path());
  EXPECT_NE(err.find("is F16 [512, 256], expected BF16 [512, 256]"), std::string::npos) << err;

  rewrite(file, [&](auto& ts) {
    std::erase_if(ts, [&](const TensorBytes& t) { return t.name == "model.norm.weight"; });
    for (auto& t : ts)
      if (t.name == q) t.dtype = "BF16";
  });
  err = error_of(dir.path());
  EXPECT_NE(err.find("missing tensor 'model.norm.weight' (expected BF16 [256])"), std::string::npos) << err;
}

TEST(ModelWeights, ExtraTensorsAreToleratedAndTiedModelsNeedNoLmHead) {
  TempDir dir;
  auto config = preset_config("tiny");
  config.tie_word_embeddings = true;
  write_random_model(config, dir.path(), 4);
  rewrite(dir.path() / "model.safetensors", [](auto& ts) {
    ts.push_back({"model.layers.0.self_attn.rotary_emb.inv_freq", "F32", {8}, std::vector<std::byte>(32)});
  });
  const auto w = ModelWeights::open(dir.path());
  EXPECT_FALSE(w.contains("lm_head.weight"));
  EXPECT_TRUE(w.contains("model.layers.0.self_attn.rotary_emb.inv_freq"));
  EXPECT_EQ(w.total_bytes(), weight_bytes(config) + 32);
}

TEST(ModelWeights, MissingConfigOrWeights) {
  TempDir dir;
  EXPECT_NE(error_of(dir.path() / "absent").find("no such directory"), std::string::npos);
  EXPECT_NE(error_of(dir.path()).find("config.json: missing"), std::string::npos);
  write_random_model(preset_config("tiny"), dir.path(), 5);
  fs::remove(dir.path() / "model.safetensors");
  EXPECT_NE(error_of(dir.path()).find("neither model.safetensors"), std::string::npos);
}

TEST(ModelWriter, ValuesAreDeterministicPerSeedAndIndependentOfSharding) {
  TempDir a, b, c;
  const auto config = preset_config("tiny");
  write_random_model(config, a.path(), 42);
  write_random_model(config, b.path(), 42, k_small_shards);
  write_random_model(config, c.path(), 43);
  const auto wa = ModelWeights::open(a.path());
  const auto wb = ModelWeights::open(b.path());
  const auto wc = ModelWeights::open(c.path());
  for (const auto& [name, t] : wa.tensors()) {
    const auto& same = wb.at(name).bytes;
    const auto& other = wc.at(name).bytes;
    ASSERT_EQ(t.bytes.size(), same.size());
    EXPECT_EQ(std::memcmp(t.bytes.data(), same.data(), same.size()), 0) << name;
    EXPECT_NE(std::memcmp(t.bytes.data(), other.data(), other.size()), 0) << name;
  }
  // Two tensors of one file never share values (the name is part of the stream).
  const auto& k = wa.at(layer_tensor(0, "self_attn.k_proj.weight")).bytes;
  const auto& v = wa.at(layer_tensor(0, "self_attn.v_proj.weight")).bytes;
  EXPECT_NE(std::memcmp(k.data(), v.data(), k.size()), 0);
  // The exposed generator reproduces any slice of the files.
  const std::string name = "lm_head.weight";
  std::vector<std::uint16_t> slice(100);
  random_weight_bf16(42, name, 1000, slice);
  EXPECT_EQ(std::memcmp(wa.at(name).bytes.data() + 2000, slice.data(), 200), 0);
}

TEST(ModelWriter, ValuesLookLikeTransformersInit) {
  TempDir dir;
  write_random_model(preset_config("tiny"), dir.path(), 7);
  const auto w = ModelWeights::open(dir.path());
  const auto stats = [&](const std::string& name) {
    const auto& b = w.at(name).bytes;
    const std::size_t n = b.size() / 2;
    double sum = 0, sq = 0;
    for (std::size_t i = 0; i < n; ++i) {
      std::uint16_t u;
      std::memcpy(&u, b.data() + 2 * i, 2);
      const double x = bf16_to_float(u);
      EXPECT_TRUE(std::isfinite(x));
      sum += x;
      sq += x * x;
    }
    const double mean = sum / static_cast<double>(n);
    return std::pair{mean, std::sqrt(sq / static_cast<double>(n) - mean * mean)};
  };
  const auto [emb_mean, emb_std] = stats("model.embed_tokens.weight");  // 262144 values
  EXPECT_NEAR(emb_mean, 0.0, 0.001);
  EXPECT_NEAR(emb_std, 0.02, 0.001);
  const auto [norm_mean, norm_std] = stats(layer_tensor(1, "post_attention_layernorm.weight"));  // 256 values
  EXPECT_NEAR(norm_mean, 1.0, 0.05);
  EXPECT_GT(norm_std, 0.05);  // visibly not all ones
  EXPECT_LT(norm_std, 0.2);
}

TEST(ModelWriter, RewritingAFolderLeavesNoStaleShardsAndHonoursLayers) {
  TempDir dir;
  std::ofstream(dir.path() / "notes.txt") << "kept";
  write_random_model(preset_config("tiny"), dir.path(), 1, k_small_shards);
  const auto written = write_random_model(preset_config("tiny"), dir.path(), 1, k_default_max_shard_bytes, 1);
  EXPECT_EQ(written.config.num_hidden_layers, 1);
  int safetensors_files = 0;
  for (const auto& e : fs::directory_iterator(dir.path()))
    if (e.path().extension() == ".safetensors") ++safetensors_files;
  EXPECT_EQ(safetensors_files, 1);
  EXPECT_FALSE(fs::exists(dir.path() / "model.safetensors.index.json"));
  EXPECT_TRUE(fs::exists(dir.path() / "notes.txt"));
  const auto w = ModelWeights::open(dir.path());
  EXPECT_EQ(w.config().num_hidden_layers, 1);
  EXPECT_FALSE(w.contains(layer_tensor(1, "mlp.up_proj.weight")));
  EXPECT_THROW(write_random_model(preset_config("tiny"), dir.path(), 1, 0), UsageError);
  EXPECT_THROW(write_random_model(preset_config("tiny"), dir.path(), 1, k_default_max_shard_bytes, 0), UsageError);
}

}  // namespace
}  // namespace aisp::serving
