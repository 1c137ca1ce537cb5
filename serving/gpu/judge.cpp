// The serving ladders' gate on the GPU runner (judge.hpp).
#include "serving/gpu/judge.hpp"

namespace aisp::serving::gpu {

std::string judge_generation(LlamaRunner& runner, const std::vector<TokenId>& prompt,
                             std::span<const std::int32_t> generated, int request, JudgeTally& tally) {
  std::vector<TokenId> sequence = prompt;
  sequence.insert(sequence.end(), generated.begin(), generated.end());
  const auto scores = runner.score_tokens(sequence, static_cast<int>(prompt.size()));
  std::vector<ScoredToken> scored(scores.size());
  for (std::size_t j = 0; j < scores.size(); ++j) {
    scored[j] = {generated[j], scores[j].logit, scores[j].best, scores[j].best_logit};
  }
  return judge_request(request, scored, tally);
}

}  // namespace aisp::serving::gpu
