// How the CUDA instrumentation tools show themselves in the process they start. Each tool launches its
// target with variables of its own and with its injection library named where the CUDA driver loads
// it at cuInit (CUDA_INJECTION64_PATH) or where the dynamic loader preloads it (LD_PRELOAD). What each
// one exports, as the public projects that detect these tools read it (FlashMLA's and GROMACS's
// profiler checks, a dump of the environment Nsight Compute 2024.3's launcher hands its target, Nsight
// Systems wrappers that forward its session variables); one environment per tool is a fixture under
// tests/cpu/fixtures/ceilings/env/:
//
//   compute-sanitizer  NV_SANITIZER_INJECTION_PORT_BASE (2025.x; NV_SANITIZER_INJECTION_PORT_RANGE_BEGIN
//                      in older releases), NV_SANITIZER_INJECTION_TRANSPORT_TYPE; its injection library
//                      is libsanitizer-collection.so (the one `--injection-path` locates).
//   Nsight Compute     NV_COMPUTE_PROFILER_PERFWORKS_DIR, NV_NSIGHT_INJECTION_PORT_BASE (or the
//                      PORT_RANGE_BEGIN/END pair), NV_NSIGHT_INJECTION_TRANSPORT_TYPE, NV_TPS_LAUNCH_TOKEN,
//                      NV_CUDA_START_SUSPENDED; libcuda-injection.so preloaded into the target.
//   Nsight Systems     NSYS_PROFILING_SESSION_ID (and other NSYS_* session variables);
//                      CUDA_INJECTION64_PATH and NVTX_INJECTION64_PATH naming libToolsInjection64.so,
//                      LD_PRELOAD with libToolsInjectionProxy64.so.
//   nvprof             NVPROF_ID (before Hopper; listed because it costs nothing).
//
// Both Nsight tools and compute-sanitizer launch through the same "tree launcher" libraries
// (libTreeLauncher*.so, libInterceptorInjectionTarget.so): preloaded, they name no tool in particular,
// so they count as "an NVIDIA developer tool". Any other CUDA_INJECTION64_PATH is a CUDA injection
// library all the same (a CUPTI tracer, a site monitor): the driver loads it into every context, and it
// may intercept every launch, so it is refused too. NVTX_INJECTION64_PATH alone only receives
// annotations and counts only when it names one of the tools' libraries.
#include "core/base/instrumentation.hpp"

#include <fmt/format.h>

#include <array>
#include <vector>

extern char** environ;

namespace aisp {

namespace {

constexpr std::string_view k_sanitizer = "compute-sanitizer";
constexpr std::string_view k_ncu = "Nsight Compute (ncu)";
constexpr std::string_view k_nsys = "Nsight Systems (nsys)";
constexpr std::string_view k_nvidia_tool = "an NVIDIA developer tool";

// A variable (or every variable with a prefix) that only the tool sets.
struct VariableRule {
  std::string_view name;
  bool prefix;
  std::string_view tool;
};

// Specific first: a process under nsys may also carry variables that several tools share.
constexpr std::array<VariableRule, 5> k_tool_variables{{
    {"NV_SANITIZER_INJECTION_", true, k_sanitizer},
    {"NSYS_PROFILING_SESSION_ID", false, k_nsys},
    {"NV_COMPUTE_PROFILER_", true, k_ncu},
    {"NV_NSIGHT_INJECTION_", true, k_ncu},
    {"NVPROF_ID", false, "nvprof"},
}};

// A library by the start of its file name.
struct LibraryRule {
  std::string_view prefix;
  std::string_view tool;
};

constexpr std::array<LibraryRule, 3> k_tool_libraries{{
    {"libsanitizer-", k_sanitizer},    // libsanitizer-collection.so, libsanitizer-public.so
    {"libToolsInjection", k_nsys},     // libToolsInjection64.so, libToolsInjectionProxy64.so
    {"libcuda-injection", k_ncu},      // libcuda-injection.so
}};

constexpr std::array<LibraryRule, 2> k_launcher_libraries{{
    {"libTreeLauncher", k_nvidia_tool},
    {"libInterceptorInjectionTarget", k_nvidia_tool},
}};

// Where a library can be named, and how the evidence reads.
struct LibraryVariable {
  std::string_view name;
  std::string_view verb;
};

constexpr std::array<LibraryVariable, 3> k_library_variables{{
    {"CUDA_INJECTION64_PATH", "names"},
    {"LD_PRELOAD", "loads"},
    {"NVTX_INJECTION64_PATH", "names"},
}};

std::string_view base_name(std::string_view path) {
  const auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// LD_PRELOAD separates its entries with ':' or white space; the injection paths hold one library.
std::vector<std::string_view> libraries_in(std::string_view value) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (start < value.size()) {
    const auto end = value.find_first_of(": \t\n", start);
    const auto item = value.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    if (!item.empty()) out.push_back(base_name(item));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return out;
}

const std::string* non_empty(const Environment& env, std::string_view name) {
  const auto it = env.find(std::string(name));
  return it == env.end() || it->second.empty() ? nullptr : &it->second;
}

std::optional<Instrumentation> match_variables(const Environment& env) {
  for (const auto& rule : k_tool_variables) {
    if (!rule.prefix) {
      if (non_empty(env, rule.name)) {
        return Instrumentation{std::string(rule.tool), fmt::format("{} is set", rule.name)};
      }
      continue;
    }
    for (auto it = env.lower_bound(std::string(rule.name)); it != env.end() && it->first.starts_with(rule.name); ++it) {
      if (!it->second.empty()) return Instrumentation{std::string(rule.tool), fmt::format("{} is set", it->first)};
    }
  }
  return std::nullopt;
}

template <std::size_t N>
std::optional<Instrumentation> match_libraries(const Environment& env, const std::array<LibraryRule, N>& rules) {
  for (const auto& where : k_library_variables) {
    const std::string* value = non_empty(env, where.name);
    if (!value) continue;
    for (const auto lib : libraries_in(*value)) {
      for (const auto& rule : rules) {
        if (lib.starts_with(rule.prefix)) {
          return Instrumentation{std::string(rule.tool), fmt::format("{} {} {}", where.name, where.verb, lib)};
        }
      }
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<Instrumentation> detect_instrumentation(const Environment& env) {
  if (auto v = match_variables(env)) return v;
  if (auto l = match_libraries(env, k_tool_libraries)) return l;
  if (auto l = match_libraries(env, k_launcher_libraries)) return l;
  for (auto it = env.lower_bound("NV_TPS_"); it != env.end() && it->first.starts_with("NV_TPS_"); ++it) {
    // Nsight's target process server (NV_TPS_LAUNCH_TOKEN): every Nsight tool starts targets through it.
    if (!it->second.empty()) return Instrumentation{"an Nsight tool", fmt::format("{} is set", it->first)};
  }
  if (const std::string* inj = non_empty(env, "CUDA_INJECTION64_PATH")) {
    const auto libs = libraries_in(*inj);
    const std::string name = libs.empty() ? *inj : std::string(libs.front());
    return Instrumentation{fmt::format("a CUDA injection library ({})", name),
                           fmt::format("CUDA_INJECTION64_PATH names {}", name)};
  }
  return std::nullopt;
}

std::optional<std::string> instrumentation_tool(const Environment& env) {
  if (auto t = detect_instrumentation(env)) return t->tool;
  return std::nullopt;
}

Environment process_environment() {
  Environment env;
  for (char** e = environ; e && *e; ++e) {
    const std::string_view kv(*e);
    const auto eq = kv.find('=');
    if (eq != std::string_view::npos) env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return env;
}

std::string instrumentation_refusal(const Instrumentation& t) {
  return fmt::format("not measured under {}: {}; a tool that intercepts CUDA times itself, not the GPU "
                     "(run aisp hw peaks without it)",
                     t.tool, t.evidence);
}

std::string instrumentation_audit_hint(const Instrumentation& t) {
  return fmt::format("; this run is under {} ({}), which slows kernels: a timing finding may be the tool's "
                     "doing (measure without the tool)",
                     t.tool, t.evidence);
}

std::string_view instrumentation_checked() {
  return "compute-sanitizer, Nsight Compute, Nsight Systems, nvprof and other Nsight tools by their "
         "variables; CUDA_INJECTION64_PATH, LD_PRELOAD and NVTX_INJECTION64_PATH for the tools' libraries; "
         "any CUDA injection library";
}

}  // namespace aisp
