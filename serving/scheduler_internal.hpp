// The scheduler's per-sequence state, shared by scheduler.cpp and scheduler_speculative.cpp only
// (not part of the API: scheduler.hpp declares Scheduler::Sequence and nothing else sees its
// fields).
#pragma once

#include <cstdint>
#include <vector>

#include "serving/scheduler.hpp"

namespace aisp::serving {

struct Scheduler::Sequence {
  SequenceId id = 0;
  std::vector<TokenId> tokens;  // prompt, then generated tokens
  int prompt_len = 0;
  int max_tokens = 0;
  std::vector<TokenId> stop_token_ids;
  bool ignore_eos = false;
  int computed = 0;  // tokens whose K/V is in the cache
  bool running = false;
  bool ever_admitted = false;
  bool padding = false;  // static: finished, kept in the batch until it drains
  bool static_member = false;
  bool handed_off = false;  // disaggregation, prefill side: blocks pinned until released
  bool prefilled = false;   // disaggregation, decode side: in m_prefilled, K/V not copied yet
  std::int64_t admitted_at = 0;
  std::vector<TokenId> draft;  // speculative: this step's proposal (scratch of schedule())

  [[nodiscard]] int size() const { return static_cast<int>(tokens.size()); }
  [[nodiscard]] int pending() const { return size() - computed; }
  [[nodiscard]] int generated() const { return size() - prompt_len; }
  [[nodiscard]] bool is_decode() const { return pending() == 1 && generated() > 0; }
};

}  // namespace aisp::serving
