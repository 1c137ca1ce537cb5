// Verdicts of a variant and the exit codes of the aisp binary (documented in README.md and aisp --help).
#pragma once

#include <optional>
#include <span>
#include <string_view>

namespace aisp {

enum class Verdict { pass, fail, invalid, implausible, noisy, skipped, error };

std::string_view to_string(Verdict v);
std::optional<Verdict> verdict_from_string(std::string_view s);

// A verdict that makes `bench run` exit with ExitCode::verdict_failure.
bool is_failing(Verdict v);

enum class ExitCode : int {
  ok = 0,               // every variant PASS, NOISY or SKIPPED
  verdict_failure = 1,  // at least one FAIL, INVALID, IMPLAUSIBLE or ERROR
  usage = 2,            // bad input: unknown flag or selector, malformed value, unwritable path
  no_cuda_device = 3,   // no usable CUDA device (driver missing, no GPU, CUDA_VISIBLE_DEVICES empty)
  regression = 4,       // `bench check` found a regression
  machine_drift = 5,    // `bench check` found only MACHINE-DRIFT (docs/regression-gating.md)
  internal = 70,        // a bug in aisp itself (EX_SOFTWARE)
};

// The exit code of a run whose variants ended with these verdicts.
ExitCode exit_code_for(std::span<const Verdict> verdicts);

std::string_view exit_code_help();  // the table printed by `aisp --help`

}  // namespace aisp
