// Nsight Compute's Source page, per SASS instruction (`aisp profile --source N`, docs/profiling.md): where a
// kernel's warps stall, instruction by instruction, and what it executes. The kernel-level stall reasons of
// the comparison table say *that* warps wait on, say, long scoreboard; this says *which* instruction they
// wait at (ch19:weight_only_gemv's README: 259 of 268 long-scoreboard samples on one instruction of the
// prologue, none in the main loop). Pure C++: device/profiler.cpp runs the export, this file reads it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace aisp::profile {

// `ncu --import REPORT --csv --page source --print-source sass`: one block per kernel, each a
// "Kernel Name" line, a header row ("Address", "Source", the sampling and execution columns, one
// "stall_<reason>" column per reason and the same "(Not Issued)"), then one row per SASS instruction.
// The report must hold the SourceCounters section (the `full` set has it).
std::vector<std::string> source_export_command(const std::string& ncu, const std::string& report);

struct HotInstruction {
  std::string kernel;   // which kernel of the launch
  std::string address;  // as ncu prints it ("0x7f91b97ab840")
  std::string sass;     // "PRMT R11, R5, 0x7632, R7"
  double samples = 0;   // stall samples at it (all: issued or not)
  std::vector<std::pair<std::string, double>> reasons;  // its largest reasons (name, samples), largest first
};

struct SourceSummary {
  std::vector<std::string> kernels;  // kernel names, in the export's order
  std::size_t instructions = 0;      // SASS instructions listed
  double samples = 0;                // stall samples over all of them
  double executed = 0;               // warp-level instructions executed
  std::vector<std::pair<std::string, double>> reasons;  // stall reason (without "stall_"), samples; largest first
  std::vector<HotInstruction> hottest;                  // the `top` instructions with the most samples
  std::vector<std::pair<std::string, double>> mix;      // opcode with modifiers, instructions executed; largest first
};

// Reads the export of source_export_command() (several kernels add up: a launch is what one variant ran).
// Keeps the `top` hottest instructions and the `top` most executed opcodes. Lines before the first
// "Kernel Name" (ncu's ==PROF== chatter) are skipped. Throws DataError with one line when there is no
// kernel block, no header, or a header without the sampling and execution columns.
SourceSummary summarize_source_page(std::string_view csv, std::size_t top);

// The text `aisp profile --source` prints under the comparison table for one variant.
std::string render_source_summary(const SourceSummary& s, const std::string& variant);

// profile.json's "source" object of a variant.
nlohmann::ordered_json to_json(const SourceSummary& s);

}  // namespace aisp::profile
