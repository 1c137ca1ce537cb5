// Reading the small JSON files of a model folder (config.json, the shard index) with the project's error
// vocabulary: any failure is one aisp::DataError line naming the file.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace aisp::serving {

// The file parsed; DataError "<path>: cannot be read" or "<path>: not valid JSON: <reason on one line>".
[[nodiscard]] nlohmann::json read_json_file(const std::filesystem::path& path);

// A library message on one line (newlines to spaces), for one-line errors.
[[nodiscard]] std::string one_line(std::string s);

}  // namespace aisp::serving
