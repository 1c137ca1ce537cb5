#include "core/measure/stopping.hpp"

#include <algorithm>
#include <cmath>

#include "core/measure/stats.hpp"

namespace aisp {

double sampling_budget_s(double run_s, bool run_s_given, double ladder_s) {
  return run_s_given ? run_s : std::max(run_s, ladder_s);
}

StopState evaluate_stop(const StoppingRule& rule, std::span<const double> samples,
                        double measured_s, double spent_s) {
  const bool budget_spent = spent_s >= rule.max_time_s;
  if (samples.empty()) {
    // No sample at all: the variant's launches do not complete within the budget; nothing to extend.
    return budget_spent ? StopState::budget_spent_noisy : StopState::keep_sampling;
  }

  const stats::Summary summary = stats::summarize(samples);
  // An invalid interval (too few samples for 95%) is [min, max] with less than 95% coverage;
  // however narrow it looks, it supports no claim, so it neither converges nor counts as quiet.
  const bool valid = summary.median_ci.valid;
  const bool minimums_met = samples.size() >= rule.min_samples && measured_s >= rule.min_time_s;

  // Convergence wins over an exhausted budget: a run that met its target on its last sample is
  // converged.
  if (minimums_met && valid && summary.rel_ci_half_width <= rule.target_rel_ci) {
    return StopState::converged;
  }
  // Past the budget without an interval: sample on toward the smallest set that gives one, within the
  // extension (StoppingRule::max_extension).
  if (budget_spent && !valid && spent_s < rule.max_time_s * rule.max_extension) return StopState::keep_sampling;
  // Past the budget with a valid interval still wider than noisy_rel_ci: sample on while the interval
  // projected at the extension's end (StoppingRule::max_noisy_extension) is within noisy_rel_ci.
  if (budget_spent && valid && summary.rel_ci_half_width > rule.noisy_rel_ci) {
    const double limit = rule.max_time_s * rule.max_noisy_extension;
    if (spent_s < limit && summary.rel_ci_half_width * std::sqrt(spent_s / limit) <= rule.noisy_rel_ci) {
      return StopState::keep_sampling;
    }
  }
  if (budget_spent) {
    // The minimums are not required here: a slow variant may exhaust the budget before min_samples,
    // and a valid interval within noisy_rel_ci is still an honest result.
    return valid && summary.rel_ci_half_width <= rule.noisy_rel_ci ? StopState::budget_spent_ok
                                                                   : StopState::budget_spent_noisy;
  }
  return StopState::keep_sampling;
}

double warmup_launch_s(std::span<const double> warmup_s) {
  const auto last = warmup_s.last(std::min<std::size_t>(warmup_s.size(), 3));
  if (last.empty() || !std::all_of(last.begin(), last.end(), [](double t) { return std::isfinite(t) && t > 0; })) {
    return 0.0;
  }
  return stats::median(last);
}

int hot_batch(double launch_s, double target_interval_s, int max_batch) {
  if (!(launch_s > 0) || max_batch <= 1 || launch_s >= target_interval_s) return 1;
  const double want = std::ceil(target_interval_s / launch_s);
  return static_cast<int>(std::clamp(want, 1.0, static_cast<double>(max_batch)));
}

}  // namespace aisp
