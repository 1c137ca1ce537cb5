// The ch16:serving ladder's workload and judge (ladder_workload.hpp).
#include "serving/ladder_workload.hpp"

#include <algorithm>
#include <cmath>
#include <random>

#include <fmt/format.h>

#include "core/base/error.hpp"
#include "core/ceilings/disk_read.hpp"
#include "serving/model_config.hpp"
#include "serving/model_writer.hpp"

namespace aisp::serving {

std::vector<GenerationRequest> make_ladder_workload(const LadderWorkloadSpec& spec, std::uint64_t seed) {
  if (spec.requests < 1) throw UsageError("serving workload: at least one request");
  if (spec.prompt_min < 1 || spec.prompt_max < spec.prompt_min) {
    throw UsageError(fmt::format("serving workload: prompt lengths [{}, {}] are not a range of positive lengths",
                                 spec.prompt_min, spec.prompt_max));
  }
  if (spec.output_min < 1 || spec.output_max < spec.output_min) {
    throw UsageError(fmt::format("serving workload: output lengths [{}, {}] are not a range of positive lengths",
                                 spec.output_min, spec.output_max));
  }
  if (spec.first_id < 0 || spec.vocab <= spec.first_id) {
    throw UsageError(fmt::format("serving workload: no token ids in [{}, {})", spec.first_id, spec.vocab));
  }
  // std::mt19937_64 is specified exactly by the standard; the distributions are not, so the draws are
  // mapped to ranges by hand (the same workload from the same seed on every compiler).
  std::mt19937_64 shape(spec.shape_seed), content(seed);
  const auto uniform = [](std::mt19937_64& rng, int lo, int hi) {
    return lo + static_cast<int>(rng() % static_cast<std::uint64_t>(hi - lo + 1));
  };
  std::vector<GenerationRequest> out(static_cast<std::size_t>(spec.requests));
  for (auto& r : out) {
    r.prompt.resize(static_cast<std::size_t>(uniform(shape, spec.prompt_min, spec.prompt_max)));
    r.max_tokens = uniform(shape, spec.output_min, spec.output_max);
    r.ignore_eos = true;
    for (auto& t : r.prompt) t = uniform(content, spec.first_id, spec.vocab - 1);
  }
  return out;
}

double ladder_workload_tokens(const LadderWorkloadSpec& spec) {
  double tokens = 0;
  for (const auto& r : make_ladder_workload(spec, 0)) tokens += static_cast<double>(r.prompt.size()) + r.max_tokens;
  return tokens;
}

float near_tie_tolerance(float best_logit) { return std::max(0.35f, std::abs(best_logit) * 0x1.0p-4f); }

std::string judge_request(int request, const std::vector<ScoredToken>& scored, JudgeTally& tally) {
  for (std::size_t j = 0; j < scored.size(); ++j) {
    const ScoredToken& s = scored[j];
    const float gap = s.best_logit - s.logit;
    tally.tokens++;
    tally.worst_gap = std::max(tally.worst_gap, gap);
    if (s.token == s.best) {
      tally.exact++;
      continue;
    }
    // NaN gaps fail too: the comparison is written so that only a finite gap within tolerance passes.
    if (!(gap <= near_tie_tolerance(s.best_logit))) {
      return fmt::format("request {} generated token {}: the engine chose {} (logit {:.4g}) where the model's "
                         "best is {} (logit {:.4g}): {:.3g} below, more than the near-tie tolerance {:.3g}",
                         request, j, s.token, s.logit, s.best, s.best_logit, gap,
                         near_tie_tolerance(s.best_logit));
    }
    tally.near_ties++;
  }
  return {};
}

std::string judge_totals(const JudgeTally& tally) {
  if (tally.tokens == 0) return "no generated tokens to judge";
  const double exact = static_cast<double>(tally.exact) / static_cast<double>(tally.tokens);
  if (exact < k_min_exact_fraction) {
    return fmt::format("only {:.1f}% of {} generated tokens are the model's best token (at least {:.0f}% "
                       "expected; the rest were near-ties)",
                       100.0 * exact, tally.tokens, 100.0 * k_min_exact_fraction);
  }
  return {};
}

namespace {
constexpr std::uint64_t k_ladder_weight_seed = 7;  // one random model per shape on a machine
}  // namespace

std::string ladder_model_preset(std::int64_t model, const std::string& target) {
  switch (model) {
    case 0: return "tiny";
    case 1: return "llama3.2-1b";
    case 8: return "llama3-8b";
    default:
      throw UsageError(fmt::format("{}: model={} is not a preset (0 = tiny, 1 = Llama-3.2-1B shape, 8 = Llama-3-8B "
                                   "shape)",
                                   target, model));
  }
}

std::filesystem::path cached_ladder_model(const std::string& preset, const std::string& target) {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::path(aisp_cache_dir()) / "models" / fmt::format("{}-random-{}", preset, k_ladder_weight_seed);
  if (fs::exists(dir / "config.json")) return dir;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw UsageError(fmt::format("{}: cannot create {}: {}", target, dir.string(), ec.message()));
  fmt::print(stderr, "{}: writing a random-weight {} model to {} (once per machine)\n", target, preset,
             dir.string());
  (void)write_random_model(preset_config(preset), dir, k_ladder_weight_seed);
  return dir;
}

}  // namespace aisp::serving
