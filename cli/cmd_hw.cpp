#include <cstdio>
#include <fmt/format.h>
#include <memory>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "core/hardware_key.hpp"
#include "core/verdict.hpp"
#include "device/device_info.hpp"

namespace aisp::cli {

namespace {

int hw_info(const std::string& format) {
  if (format != "table" && format != "json") throw UsageError("unknown --format '" + format + "' (table, json)");
  std::string why;
  const int count = cuda_device_count(&why);
  if (count == 0) {
    std::fprintf(stderr, "aisp: no CUDA device: %s\n", why.c_str());
    return static_cast<int>(ExitCode::no_cuda_device);
  }
  nlohmann::ordered_json all = nlohmann::ordered_json::array();
  for (int i = 0; i < count; ++i) all.push_back(to_json(query_device(i)));
  const DeviceFacts first = query_device(0);
  if (format == "json") {
    nlohmann::ordered_json doc{{"hardware_key", hardware_key(first.name, count)}, {"devices", all}};
    std::puts(doc.dump(2).c_str());
    return 0;
  }
  std::printf("hardware key: %s\n", hardware_key(first.name, count).c_str());
  for (const auto& d : all) {
    std::printf("\n");
    for (const auto& [k, v] : d.items()) {
      std::printf("  %-38s %s\n", k.c_str(), v.is_string() ? v.get<std::string>().c_str() : v.dump().c_str());
    }
  }
  return 0;
}

}  // namespace

void add_hw_commands(CLI::App& app, Context& ctx) {
  auto* hw = app.add_subcommand("hw", "facts about this machine's GPUs");
  hw->require_subcommand(1);
  auto format = std::make_shared<std::string>("table");
  auto* info = hw->add_subcommand("info", "device facts (name, CC, SMs, L2, memory, UUID, versions)");
  info->add_option("--format", *format, "table or json")->capture_default_str();
  info->callback([format, &ctx] { ctx.exit_code = hw_info(*format); });
}

}  // namespace aisp::cli
