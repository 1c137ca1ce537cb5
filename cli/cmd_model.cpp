// `aisp model make` (a random-weight Llama model folder in the Hugging Face layout) and `aisp model
// inspect` (open and validate a model folder, print what the engine would load). docs/serving-models.md.
#include <chrono>
#include <cstdio>
#include <fmt/format.h>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/commands.hpp"
#include "core/base/error.hpp"
#include "core/measure/verdict.hpp"
#include "serving/model_config.hpp"
#include "serving/model_weights.hpp"
#include "serving/model_writer.hpp"

namespace aisp::cli {

namespace {

namespace fs = std::filesystem;
using serving::ModelConfig;

struct MakeCli {
  std::string preset;
  std::string out;
  std::optional<int> layers;
  std::uint64_t seed = 0;
  std::int64_t max_shard_bytes = serving::k_default_max_shard_bytes;
  bool force = false;
};

struct InspectCli {
  std::string dir;
  bool json = false;
};

std::string gb(std::int64_t bytes) {
  const auto b = static_cast<double>(bytes);
  return b >= 1e9 ? fmt::format("{:.2f} GB", b / 1e9) : fmt::format("{:.1f} MB", b / 1e6);
}

int make_model(const MakeCli& c) {
  const ModelConfig config = serving::preset_config(c.preset);  // UsageError on an unknown name
  const fs::path out(c.out);
  if (fs::exists(out) && !fs::is_directory(out))
    throw UsageError(fmt::format("--out {}: exists and is not a folder", c.out));
  if (fs::exists(out) && !fs::is_empty(out) && !c.force)
    throw UsageError(fmt::format("--out {}: not empty (--force replaces the model files in it)", c.out));

  ModelConfig shaped = config;
  if (c.layers) shaped.num_hidden_layers = *c.layers;
  // Progress on stderr for anything that takes more than a moment: every 5%.
  const bool show_progress = serving::weight_bytes(shaped) > (256LL << 20);
  int next_step = 1;
  const auto start = std::chrono::steady_clock::now();
  const auto progress = [&](std::int64_t written, std::int64_t all) {
    if (!show_progress || written * 20 < all * next_step) return;
    while (next_step <= 20 && written * 20 >= all * next_step) ++next_step;
    std::fprintf(stderr, "aisp: model make: %s / %s (%lld%%)\n", gb(written).c_str(), gb(all).c_str(),
                 static_cast<long long>(written * 100 / all));
  };
  const auto written = serving::write_random_model(config, out, c.seed, c.max_shard_bytes, c.layers, progress);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("wrote %s: preset %s, %d layers, %d tensors, %s in %zu file(s), seed %llu, %.1f s\n", c.out.c_str(),
              c.preset.c_str(), written.config.num_hidden_layers, written.tensor_count,
              gb(written.tensor_bytes).c_str(), written.files.size(), static_cast<unsigned long long>(c.seed),
              seconds);
  return static_cast<int>(ExitCode::ok);
}

std::string rope_text(const ModelConfig& m) {
  if (!m.rope_scaling) return "none";
  const auto& s = *m.rope_scaling;
  return fmt::format("llama3 (factor {}, low_freq_factor {}, high_freq_factor {}, original {})", s.factor,
                     s.low_freq_factor, s.high_freq_factor, s.original_max_position_embeddings);
}

int inspect_model(const InspectCli& c) {
  const auto w = serving::ModelWeights::open(c.dir);  // DataError: one line, exit 2 (cli/app.cpp)
  const ModelConfig& m = w.config();
  const std::size_t layout = serving::llama_tensor_layout(m).size();
  if (c.json) {
    nlohmann::ordered_json j;
    j["dir"] = c.dir;
    j["config"] = nlohmann::ordered_json::parse(serving::to_config_json(m));
    j["files"] = nlohmann::ordered_json::array();
    for (const auto& f : w.files()) j["files"].push_back(f.filename().string());
    j["tensor_count"] = w.tensors().size();
    j["layout_tensor_count"] = layout;
    j["total_bytes"] = w.total_bytes();
    j["weight_bytes"] = serving::weight_bytes(m);
    std::puts(j.dump(2).c_str());
    return static_cast<int>(ExitCode::ok);
  }
  std::printf("model %s: valid\n", c.dir.c_str());
  std::printf("  architecture   %s\n", m.architecture.c_str());
  std::printf("  shape          hidden %d, intermediate %d, layers %d, heads %d (kv %d, head_dim %d), vocab %d\n",
              m.hidden_size, m.intermediate_size, m.num_hidden_layers, m.num_attention_heads, m.num_key_value_heads,
              m.head_dim, m.vocab_size);
  std::printf("  positions      max %d, rope theta %g, rope scaling %s\n", m.max_position_embeddings, m.rope_theta,
              rope_text(m).c_str());
  std::printf("  norm           rms eps %g\n", m.rms_norm_eps);
  std::printf("  embeddings     %s\n", m.tie_word_embeddings ? "tied (no lm_head.weight)" : "untied");
  std::printf("  tokens         bos %d, eos %s\n", m.bos_token_id, fmt::format("{}", fmt::join(m.eos_token_ids, ", ")).c_str());
  std::printf("  dtype          %s\n", m.torch_dtype.c_str());
  std::printf("  files          %zu\n", w.files().size());
  std::printf("  tensors        %zu (%zu in the Llama layout)\n", w.tensors().size(), layout);
  std::printf("  total bytes    %lld (%s)\n", static_cast<long long>(w.total_bytes()), gb(w.total_bytes()).c_str());
  std::printf("  weight_bytes   %lld (%s)\n", static_cast<long long>(serving::weight_bytes(m)),
              gb(serving::weight_bytes(m)).c_str());
  return static_cast<int>(ExitCode::ok);
}

}  // namespace

void add_model_commands(CLI::App& app, Context& ctx) {
  auto* model = app.add_subcommand("model", "model folders for the serving engine: make a random one, inspect one");
  model->require_subcommand(1);

  auto make = std::make_shared<MakeCli>();
  auto* m = model->add_subcommand("make", "write a random-weight Llama model (config.json + safetensors) to a folder");
  m->add_option("--preset", make->preset, "llama3.2-1b, llama3-8b or tiny")->required();
  m->add_option("--out", make->out, "folder to write (created if absent)")->required();
  m->add_option("--layers", make->layers, "override num_hidden_layers (e.g. 2 for a quick 8B-shaped check)")
      ->check(CLI::Range(1, 100000));
  m->add_option("--seed", make->seed, "random seed (same seed, same weights)")->capture_default_str();
  m->add_option("--max-shard-bytes", make->max_shard_bytes, "tensor bytes per .safetensors shard")
      ->capture_default_str();
  m->add_flag("--force", make->force, "write into a non-empty folder, replacing its model files");
  m->callback([make, &ctx] { ctx.exit_code = make_model(*make); });

  auto inspect = std::make_shared<InspectCli>();
  auto* i = model->add_subcommand("inspect", "open and validate a model folder, print its summary");
  i->add_option("dir", inspect->dir, "the model folder")->required();
  i->add_flag("--json", inspect->json, "print JSON instead of text");
  i->callback([inspect, &ctx] { ctx.exit_code = inspect_model(*inspect); });
}

}  // namespace aisp::cli
