#include "core/results/run_folder.hpp"

#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "core/base/error.hpp"

namespace aisp {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::optional<double> percent_of_ceiling(const VariantResult& v) {
  if (!v.roofline || v.roofline->ceiling_value <= 0)
    return std::nullopt;
  return v.roofline->percent;
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw std::runtime_error("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = fmt::format("{}.tmp.{}", path, static_cast<long>(getpid()));
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f)
    throw std::runtime_error("cannot write " + tmp);
  const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size() &&
                       std::fflush(f) == 0 && fsync(fileno(f)) == 0;
  const bool closed = std::fclose(f) == 0;
  std::error_code ec;
  if (!written || !closed) {
    fs::remove(tmp, ec);
    throw std::runtime_error("cannot write " + tmp);
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw std::runtime_error(fmt::format("cannot replace {}: {}", path, ec.message()));
  }
}

RunProvenance provenance_from_manifest(const json& m) {
  RunProvenance p;
  if (!m.is_object())
    return p;
  const auto str = [](const json& obj, const char* key) {
    if (!obj.is_object() || !obj.contains(key))
      return std::string();
    const auto& v = obj.at(key);
    if (v.is_string())
      return v.get<std::string>();
    if (v.is_boolean())
      return std::string(v.get<bool>() ? "true" : "false");
    if (v.is_number())
      return v.dump();
    return std::string();
  };
  const auto num = [](const json& obj, const char* key) {
    return obj.is_object() && obj.contains(key) && obj.at(key).is_number_integer()
               ? obj.at(key).get<int>()
               : 0;
  };
  const json empty = json::object();
  const json& device = m.contains("device") ? m.at("device") : empty;
  const json& build = m.contains("build") ? m.at("build") : empty;
  const json& host = m.contains("host") ? m.at("host") : empty;
  const json& config = m.contains("config") ? m.at("config") : empty;
  p.run_id = str(m, "run_id");
  p.created_utc = str(m, "created_utc");
  p.hardware_key = str(m, "hardware_key");
  p.device_name = str(device, "name");
  p.gpu_uuid = str(device, "uuid");
  p.driver_version = num(device, "cuda_driver_version");
  p.runtime_version = num(device, "cuda_runtime_version");
  p.git_sha = str(build, "git_sha");
  p.git_dirty = str(build, "git_dirty");
  p.build_type = str(build, "build_type");
  p.hostname = str(host, "hostname");
  p.clocks_policy = str(config, "clocks_policy");
  return p;
}

LoadedRun load_run_from_text(const std::string& results_text, const std::string& manifest_text,
                             const std::string& dir) {
  LoadedRun run;
  run.dir = dir;
  json results;
  try {
    results = json::parse(results_text);
  } catch (const json::exception& e) {
    throw DataError(fmt::format("{}: results.json is not valid JSON ({})", dir, e.what()));
  }
  try {
    run.results = run_results_from_json(results);
  } catch (const DataError& e) {
    throw DataError(fmt::format("{}: {}", dir, e.what()));
  }
  if (!manifest_text.empty()) {
    try {
      run.manifest = json::parse(manifest_text);
    } catch (const json::exception& e) {
      throw DataError(fmt::format("{}: manifest.json is not valid JSON ({})", dir, e.what()));
    }
    run.provenance = provenance_from_manifest(run.manifest);
  }
  // The results are the authority on what was measured; the manifest adds where and how.
  if (run.provenance.run_id.empty())
    run.provenance.run_id = run.results.run_id;
  if (run.provenance.created_utc.empty())
    run.provenance.created_utc = run.results.created_utc;
  run.provenance.hardware_key = run.results.hardware_key;

  return run;
}

LoadedRun load_run(const std::string& path) {
  std::error_code ec;
  fs::path results_path = path;
  if (fs::is_directory(results_path, ec))
    results_path /= "results.json";
  if (!fs::exists(results_path, ec)) {
    throw UsageError(fs::exists(path, ec)
                         ? fmt::format("{} holds no results.json (not a run folder?)", path)
                         : fmt::format("no run folder or results file at {}", path));
  }
  const fs::path dir = results_path.parent_path();
  const fs::path manifest_path = dir / "manifest.json";
  std::string manifest_text;
  if (fs::exists(manifest_path, ec))
    manifest_text = read_text_file(manifest_path.string());
  return load_run_from_text(read_text_file(results_path.string()), manifest_text,
                            dir.empty() ? "." : dir.string());
}

std::vector<std::string> split_selectors(const std::vector<std::string>& selectors) {
  std::vector<std::string> out;
  for (const auto& s : selectors) {
    std::size_t start = 0;
    while (start <= s.size()) {
      const auto comma = s.find(',', start);
      const auto piece =
          s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (!piece.empty())
        out.push_back(piece);
      if (comma == std::string::npos)
        break;
      start = comma + 1;
    }
  }
  return out;
}

bool selector_matches(std::string_view name, const std::vector<std::string>& selectors) {
  const auto pieces = split_selectors(selectors);
  if (pieces.empty())
    return true;
  for (const auto& s : pieces) {
    if (name == s)
      return true;
    if (name.size() > s.size() && name.substr(0, s.size()) == s && name[s.size()] == ':')
      return true;
    if (s.size() > name.size() && std::string_view(s).substr(0, name.size()) == name &&
        s[name.size()] == ':') {
      return true;
    }
  }
  return false;
}

std::string utc_now(const char* format) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, format, &tm);
  return buf;
}

std::string sanitize_label(std::string s) {
  for (char& c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '-';
  }
  if (s.size() > 60) s.resize(60);
  return s.empty() ? "all" : s;
}

} // namespace aisp
