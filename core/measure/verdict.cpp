#include "core/measure/verdict.hpp"

#include <algorithm>
#include <array>
#include <utility>

namespace aisp {

namespace {
constexpr std::array<std::pair<Verdict, std::string_view>, 7> k_names{{
    {Verdict::pass, "PASS"},
    {Verdict::fail, "FAIL"},
    {Verdict::invalid, "INVALID"},
    {Verdict::implausible, "IMPLAUSIBLE"},
    {Verdict::noisy, "NOISY"},
    {Verdict::skipped, "SKIPPED"},
    {Verdict::error, "ERROR"},
}};
}  // namespace

std::string_view to_string(Verdict v) {
  for (const auto& [verdict, name] : k_names) {
    if (verdict == v) return name;
  }
  return "ERROR";
}

std::optional<Verdict> verdict_from_string(std::string_view s) {
  for (const auto& [verdict, name] : k_names) {
    if (name == s) return verdict;
  }
  return std::nullopt;
}

bool is_failing(Verdict v) {
  return v == Verdict::fail || v == Verdict::invalid || v == Verdict::implausible ||
         v == Verdict::error;
}

ExitCode exit_code_for(std::span<const Verdict> verdicts) {
  return std::any_of(verdicts.begin(), verdicts.end(), is_failing) ? ExitCode::verdict_failure
                                                                    : ExitCode::ok;
}

std::string_view exit_code_help() {
  return "Exit codes:\n"
         "  0   every variant PASS, NOISY or SKIPPED (or the command succeeded)\n"
         "  1   at least one variant FAIL, INVALID, IMPLAUSIBLE or ERROR\n"
         "  2   bad input: unknown flag, selector or axis, malformed value, unwritable path\n"
         "  3   no CUDA device usable by this process\n"
         "  4   bench check found a regression\n"
         "  5   bench check found only MACHINE-DRIFT: the vendor reference moved, so the machine\n"
         "      differs; variants were judged relative to it and none regressed (1 and 4 outrank 5)\n"
         "  70  internal error in aisp (please report it)\n";
}

}  // namespace aisp
