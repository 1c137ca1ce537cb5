// Is this process running under a CUDA instrumentation tool (compute-sanitizer, Nsight Compute, Nsight
// Systems, any CUDA injection library)? Decided from the environment alone, which is how these tools
// reach the process they start: they export their own variables and name the library the CUDA driver
// must load (CUDA_INJECTION64_PATH) or the loader must preload (LD_PRELOAD). Ceilings measured under
// such a tool time the tool, not the GPU (docs/ceilings.md "When ceilings are refused"), so the probes
// refuse to run and the cache is never written under one.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace aisp {

using Environment = std::map<std::string, std::string>;

struct Instrumentation {
  std::string tool;      // "compute-sanitizer", "Nsight Compute (ncu)", "Nsight Systems (nsys)", ...
  std::string evidence;  // what showed it: "NV_SANITIZER_INJECTION_PORT_BASE is set"
};

// The tool `env` shows, or nullopt. Pure: tests feed it a map. Only non-empty values count (an
// exported-but-empty variable loads nothing). The rules, tool by tool, are in instrumentation.cpp.
std::optional<Instrumentation> detect_instrumentation(const Environment& env);

// Just the tool's name (detect_instrumentation(env)->tool), or nullopt.
std::optional<std::string> instrumentation_tool(const Environment& env);

// This process's environment as a map (from `environ`).
Environment process_environment();

// One line: "not measured under compute-sanitizer: NV_SANITIZER_INJECTION_PORT_BASE is set; ...".
std::string instrumentation_refusal(const Instrumentation& t);

// Appended to an audit finding (a timing escape) made under a tool: instrumented kernels run slower and
// may be serialized, so the drain and host-time rules can trip on the tool's doing. The finding stands (the
// run is not a measurement either way); the hint names the tool.
std::string instrumentation_audit_hint(const Instrumentation& t);

// What detect_instrumentation looks for, in words, for the cache's provenance record.
std::string_view instrumentation_checked();

}  // namespace aisp
