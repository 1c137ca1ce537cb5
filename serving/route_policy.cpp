#include "serving/route_policy.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <limits>

#include "core/base/error.hpp"

namespace aisp::serving {

std::string_view route_reason_name(RouteReason reason) {
  switch (reason) {
  case RouteReason::none:
    return "none";
  case RouteReason::round_robin:
    return "round_robin";
  case RouteReason::least_tokens:
    return "least_tokens";
  case RouteReason::prefix_hit:
    return "prefix_hit";
  case RouteReason::prefix_miss:
    return "prefix_miss";
  case RouteReason::prefix_overloaded:
    return "prefix_overloaded";
  case RouteReason::prefix_down:
    return "prefix_down";
  case RouteReason::prefix_short:
    return "prefix_short";
  }
  return "none";
}

RouteDecision RoundRobinPolicy::choose(std::span<const TokenId>,
                                       std::span<const BackendLoad> loads) {
  const std::size_t n = loads.size();
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t i = (m_next + k) % n;
    if (loads[i].up) {
      m_next = (i + 1) % n;
      return {static_cast<int>(i), RouteReason::round_robin};
    }
  }
  return {};
}

RouteDecision LeastTokensPolicy::choose(std::span<const TokenId>,
                                        std::span<const BackendLoad> loads) {
  const std::size_t n = loads.size();
  int best = -1;
  std::int64_t best_load = std::numeric_limits<std::int64_t>::max();
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t i = (m_next + k) % n;
    // Strictly less: the first of equals in rotation order wins.
    if (loads[i].up && loads[i].outstanding_tokens < best_load) {
      best = static_cast<int>(i);
      best_load = loads[i].outstanding_tokens;
    }
  }
  if (best < 0)
    return {};
  m_next = (static_cast<std::size_t>(best) + 1) % n;
  return {best, RouteReason::least_tokens};
}

PrefixPolicy::PrefixPolicy(PrefixPolicyOptions options) : m_options(options) {
  if (m_options.prefix_tokens < 1)
    throw UsageError(
        fmt::format("prefix tokens must be at least 1 (got {})", m_options.prefix_tokens));
  if (m_options.load_bound_tokens < 0)
    throw UsageError(fmt::format("prefix load bound must be at least 0 tokens (got {})",
                                 m_options.load_bound_tokens));
  if (m_options.max_entries < 1)
    throw UsageError("the prefix map needs room for at least 1 entry");
}

std::optional<std::uint64_t> PrefixPolicy::prefix_key(std::span<const TokenId> prompt) const {
  const auto n = static_cast<std::size_t>(m_options.prefix_tokens);
  if (prompt.size() < n)
    return std::nullopt;
  // FNV-1a, 64 bits, over the ids' bytes: a collision only costs a cache miss on the backend.
  std::uint64_t h = 14695981039346656037ULL;
  for (std::size_t i = 0; i < n; ++i) {
    auto v = static_cast<std::uint32_t>(prompt[i]);
    for (int b = 0; b < 4; ++b) {
      h ^= v & 0xffu;
      h *= 1099511628211ULL;
      v >>= 8;
    }
  }
  return h;
}

std::optional<int> PrefixPolicy::remembered(std::span<const TokenId> prompt) const {
  const auto key = prefix_key(prompt);
  if (!key)
    return std::nullopt;
  const auto it = m_index.find(*key);
  if (it == m_index.end())
    return std::nullopt;
  return it->second->second;
}

RouteDecision PrefixPolicy::choose(std::span<const TokenId> prompt,
                                   std::span<const BackendLoad> loads) {
  const auto fallback = [&](RouteReason why) {
    auto d = m_fallback.choose(prompt, loads);
    if (d.backend >= 0)
      d.reason = why;
    return d;
  };
  const auto key = prefix_key(prompt);
  if (!key)
    return fallback(RouteReason::prefix_short);
  const auto it = m_index.find(*key);
  if (it == m_index.end())
    return fallback(RouteReason::prefix_miss);
  const int preferred = it->second->second;
  if (preferred < 0 || static_cast<std::size_t>(preferred) >= loads.size() ||
      !loads[static_cast<std::size_t>(preferred)].up)
    return fallback(RouteReason::prefix_down);
  std::int64_t least = std::numeric_limits<std::int64_t>::max();
  for (const auto &l : loads)
    if (l.up)
      least = std::min(least, l.outstanding_tokens);
  if (loads[static_cast<std::size_t>(preferred)].outstanding_tokens - least >
      m_options.load_bound_tokens)
    return fallback(RouteReason::prefix_overloaded);
  return {preferred, RouteReason::prefix_hit};
}

void PrefixPolicy::routed(std::span<const TokenId> prompt, int backend) {
  const auto key = prefix_key(prompt);
  if (!key)
    return;
  if (const auto it = m_index.find(*key); it != m_index.end()) {
    it->second->second = backend; // the backend that served it last holds its blocks now
    m_lru.splice(m_lru.begin(), m_lru, it->second);
    return;
  }
  if (m_index.size() >= m_options.max_entries) {
    m_index.erase(m_lru.back().first);
    m_lru.pop_back();
  }
  m_lru.emplace_front(*key, backend);
  m_index.emplace(*key, m_lru.begin());
}

std::vector<RouteReason> PrefixPolicy::reasons() const {
  return {RouteReason::prefix_hit, RouteReason::prefix_miss, RouteReason::prefix_overloaded,
          RouteReason::prefix_down, RouteReason::prefix_short};
}

std::unique_ptr<RoutingPolicy> make_routing_policy(std::string_view name,
                                                   const PrefixPolicyOptions &prefix) {
  if (name == "round-robin")
    return std::make_unique<RoundRobinPolicy>();
  if (name == "least-tokens")
    return std::make_unique<LeastTokensPolicy>();
  if (name == "prefix")
    return std::make_unique<PrefixPolicy>(prefix);
  throw UsageError(fmt::format("--policy '{}': choose round-robin, least-tokens or prefix", name));
}

} // namespace aisp::serving
