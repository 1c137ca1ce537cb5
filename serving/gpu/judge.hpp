// The serving ladders' gate on the GPU runner (ch16:serving, ch17:prefix_cache, ch18:speculative): a
// generation's tokens teacher-forced through the runner's prefill path and judged by
// serving/ladder_workload.hpp's rule (each the best token given the generation's own prefix, or within a
// bf16 near-tie of it).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "serving/gpu/llama_runner.hpp"
#include "serving/ladder_workload.hpp"

namespace aisp::serving::gpu {

// Scores `generated` after `prompt` (LlamaRunner::score_tokens: KV blocks 0, 1, ... as scratch, so never
// while an engine owns the runner's cache) and adds it to `tally`; "" or the first token out of tolerance,
// named by `request` and position (judge_request).
std::string judge_generation(LlamaRunner& runner, const std::vector<TokenId>& prompt,
                             std::span<const std::int32_t> generated, int request, JudgeTally& tally);

}  // namespace aisp::serving::gpu
