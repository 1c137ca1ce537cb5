// The random-weight model writer. Disk-bound by design: values come from a counter-based generator
// (splitmix64 of the element index), so any chunk can be computed by any thread in any order, and the
// 16 GB 8B preset streams through one 64 MB buffer per file.
#include "serving/model_writer.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "core/base/error.hpp"
#include "serving/model_weights.hpp"
#include "serving/safetensors.hpp"

namespace aisp::serving {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

constexpr std::uint64_t k_golden = 0x9E3779B97F4A7C15ULL;

// splitmix64's output function (Steele, Lea, Flood 2014): a bijective mix with good avalanche, so
// consecutive counters give independent-looking outputs.
std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

std::uint64_t name_hash(const std::string& s) {  // FNV-1a
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

// float -> bf16, round to nearest even (the values here are finite).
std::uint16_t to_bf16(float f) {
  const auto u = std::bit_cast<std::uint32_t>(f);
  return static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

bool is_norm_weight(const std::string& name) {
  constexpr std::string_view suffix = "norm.weight";
  return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) throw UsageError(fmt::format("{}: cannot write", path.string()));
}

// The files a previous model left (see the header): removed so no stale shard or index survives.
void remove_previous_model(const fs::path& dir) {
  static const std::regex shard(R"(model-\d+-of-\d+\.safetensors(\.partial)?)");
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string n = entry.path().filename().string();
    if (n == "config.json" || n == "generation_config.json" || n == "model.safetensors" ||
        n == "model.safetensors.partial" || n == "model.safetensors.index.json" || std::regex_match(n, shard))
      fs::remove(entry.path());
  }
}

struct Shard {
  std::vector<TensorSpec> tensors;
  std::int64_t bytes = 0;
};

std::vector<Shard> plan_shards(const std::vector<ExpectedTensor>& layout, std::int64_t max_shard_bytes) {
  std::vector<Shard> shards(1);
  for (const auto& t : layout) {
    TensorSpec spec{t.name, "BF16", t.shape};
    const std::int64_t bytes = tensor_byte_size(spec);
    if (!shards.back().tensors.empty() && shards.back().bytes + bytes > max_shard_bytes) shards.emplace_back();
    shards.back().tensors.push_back(std::move(spec));
    shards.back().bytes += bytes;
  }
  return shards;
}

}  // namespace

void random_weight_bf16(std::uint64_t seed, const std::string& tensor_name, std::int64_t first,
                        std::span<std::uint16_t> out) {
  const std::uint64_t key = mix64(seed * k_golden ^ name_hash(tensor_name));
  const bool norm = is_norm_weight(tensor_name);
  // Sum of four 16-bit uniforms (Irwin-Hall): bell-shaped, bounded, cheap; mean 4 * 65535 / 2 and
  // standard deviation 65536 / sqrt(3) to within 1e-5.
  constexpr float k_mean = 2.0f * 65535.0f;
  constexpr float k_inv_std = 1.7320508f / 65536.0f;
  const float scale = norm ? 0.1f : 0.02f;
  const float base = norm ? 1.0f : 0.0f;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const std::uint64_t r = mix64(key + static_cast<std::uint64_t>(first + static_cast<std::int64_t>(i)) * k_golden);
    const float sum = static_cast<float>((r & 0xFFFF) + ((r >> 16) & 0xFFFF) + ((r >> 32) & 0xFFFF) + (r >> 48));
    out[i] = to_bf16(base + scale * (sum - k_mean) * k_inv_std);
  }
}

std::string shard_file_name(int index, int count) {
  if (count == 1) return "model.safetensors";
  return fmt::format("model-{:05d}-of-{:05d}.safetensors", index + 1, count);
}

WrittenModel write_random_model(const ModelConfig& config, const fs::path& dir, std::uint64_t seed,
                                std::int64_t max_shard_bytes, std::optional<int> layers,
                                const ModelWriteProgress& progress) {
  if (max_shard_bytes <= 0) throw UsageError(fmt::format("max shard bytes: {} must be positive", max_shard_bytes));
  WrittenModel result;
  result.config = config;
  if (layers) {
    if (*layers <= 0) throw UsageError(fmt::format("layers: {} must be positive", *layers));
    result.config.num_hidden_layers = *layers;
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    throw UsageError(fmt::format("{}: cannot create the model folder: {}", dir.string(), ec.message()));
  remove_previous_model(dir);

  const auto layout = llama_tensor_layout(result.config);
  const auto shards = plan_shards(layout, max_shard_bytes);
  const int count = static_cast<int>(shards.size());
  for (const auto& s : shards) result.tensor_bytes += s.bytes;
  result.tensor_count = static_cast<int>(layout.size());

  const unsigned threads = std::clamp(std::thread::hardware_concurrency(), 1u, 16u);
  std::int64_t done = 0;
  const TensorFiller fill = [&](const TensorSpec& t, std::int64_t offset, std::span<std::byte> out) {
    const std::int64_t elements = static_cast<std::int64_t>(out.size()) / 2;
    const std::int64_t first = offset / 2;
    // Each worker generates a slice into a small local block and copies it into place.
    const auto work = [&](std::int64_t begin, std::int64_t end) {
      std::uint16_t block[4096];
      for (std::int64_t at = begin; at < end; at += 4096) {
        const std::int64_t n = std::min<std::int64_t>(4096, end - at);
        random_weight_bf16(seed, t.name, first + at, std::span(block, static_cast<std::size_t>(n)));
        std::memcpy(out.data() + at * 2, block, static_cast<std::size_t>(n) * 2);
      }
    };
    if (elements < (1 << 20) || threads == 1) {
      work(0, elements);
    } else {
      std::vector<std::thread> pool;
      const std::int64_t per = (elements + threads - 1) / threads;
      for (unsigned k = 0; k < threads; ++k) {
        const std::int64_t b = std::min<std::int64_t>(elements, k * per);
        const std::int64_t e = std::min<std::int64_t>(elements, b + per);
        if (b < e) pool.emplace_back(work, b, e);
      }
      for (auto& th : pool) th.join();
    }
    done += static_cast<std::int64_t>(out.size());
    if (progress) progress(done, result.tensor_bytes);
  };

  json weight_map = json::object();
  for (int i = 0; i < count; ++i) {
    const std::string name = shard_file_name(i, count);
    write_safetensors_streaming(dir / name, shards[i].tensors, fill, {{"format", "pt"}});
    result.files.push_back(dir / name);
    for (const auto& t : shards[i].tensors) weight_map[t.name] = name;
  }
  if (count > 1) {
    const json index = {{"metadata", {{"total_size", result.tensor_bytes}}}, {"weight_map", weight_map}};
    write_text(dir / "model.safetensors.index.json", index.dump(2) + "\n");
  }
  const json generation = {
      {"bos_token_id", result.config.bos_token_id >= 0 ? json(result.config.bos_token_id) : json(nullptr)},
      {"eos_token_id", result.config.eos_token_ids.size() == 1 ? json(result.config.eos_token_ids.front())
                                                               : json(result.config.eos_token_ids)}};
  write_text(dir / "generation_config.json", generation.dump(2) + "\n");
  write_text(dir / "config.json", to_config_json(result.config));
  return result;
}

}  // namespace aisp::serving
