// The routing policies of `aisp route` (serving/router.hpp): which backend gets the next
// completion. Pure objects (no sockets, no clocks) so that their decisions are unit-tested on
// scripted sequences; the router calls them under its lock with the loads it tracks itself.
//
//   round-robin   the next backend in rotation
//   least-tokens  the backend with the fewest outstanding tokens (prompt + max_tokens of requests
//                 not finished yet), as the router counts them
//   prefix        prefix locality: the backend that last served the prompt's first
//                 `prefix_tokens` tokens, while its load stays within `load_bound_tokens` of the
//                 least-loaded backend's; otherwise (and for a prefix not seen) least-tokens
// docs/routing.md says why each exists and where it stops paying.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "serving/runner_api.hpp"

namespace aisp::serving {

// One backend as a policy sees it.
struct BackendLoad {
  bool up = true;                      // in rotation: health checks pass, connections succeed
  std::int64_t outstanding_tokens = 0; // prompt + max_tokens of its requests not yet finished
};

// Why a backend was chosen: the label of the router's aisp_router_policy_decisions_total.
enum class RouteReason {
  none,              // no backend is up
  round_robin,       // round-robin's turn
  least_tokens,      // least-tokens' pick
  prefix_hit,        // prefix: the prefix's last backend, within the load bound
  prefix_miss,       // prefix: a prefix not seen (or evicted): least tokens
  prefix_overloaded, // prefix: its backend is beyond the load bound: least tokens
  prefix_down,       // prefix: its backend is out of rotation: least tokens
  prefix_short,      // prefix: a prompt shorter than prefix_tokens (no full block to share)
};
[[nodiscard]] std::string_view route_reason_name(RouteReason reason);

struct RouteDecision {
  int backend = -1; // index into the loads; -1 when none is up
  RouteReason reason = RouteReason::none;
};

class RoutingPolicy {
public:
  virtual ~RoutingPolicy() = default;
  [[nodiscard]] virtual std::string_view name() const = 0;
  // Picks a backend whose load says `up`; loads has one entry per backend, in the router's order.
  [[nodiscard]] virtual RouteDecision choose(std::span<const TokenId> prompt,
                                             std::span<const BackendLoad> loads) = 0;
  // The request was handed to `backend` (its connection succeeded): prefix locality remembers it.
  virtual void routed(std::span<const TokenId> /*prompt*/, int /*backend*/) {}
  // The reasons this policy gives (the metrics list each one, zeros included).
  [[nodiscard]] virtual std::vector<RouteReason> reasons() const = 0;
};

class RoundRobinPolicy final : public RoutingPolicy {
public:
  [[nodiscard]] std::string_view name() const override { return "round-robin"; }
  [[nodiscard]] RouteDecision choose(std::span<const TokenId> prompt,
                                     std::span<const BackendLoad> loads) override;
  [[nodiscard]] std::vector<RouteReason> reasons() const override {
    return {RouteReason::round_robin};
  }

private:
  std::size_t m_next = 0;
};

// The up backend with the fewest outstanding tokens. Ties go to the first one at or after the
// backend following the previous pick, so that equal loads (an idle cluster, or requests that end
// before the next arrives) still spread instead of all landing on backend 0.
class LeastTokensPolicy final : public RoutingPolicy {
public:
  [[nodiscard]] std::string_view name() const override { return "least-tokens"; }
  [[nodiscard]] RouteDecision choose(std::span<const TokenId> prompt,
                                     std::span<const BackendLoad> loads) override;
  [[nodiscard]] std::vector<RouteReason> reasons() const override {
    return {RouteReason::least_tokens};
  }

private:
  std::size_t m_next = 0;
};

struct PrefixPolicyOptions {
  // Tokens hashed: one KV block at the engine's default block size, the smallest unit a prefix
  // cache can share.
  int prefix_tokens = 16;
  // Locality is kept while the prefix's backend has at most this many outstanding tokens more than
  // the least-loaded backend (about 5 requests of 512 + 256 tokens).
  std::int64_t load_bound_tokens = 4096;
  std::size_t max_entries = 65536; // prefixes remembered (LRU): ~100 bytes each
};

class PrefixPolicy final : public RoutingPolicy {
public:
  explicit PrefixPolicy(PrefixPolicyOptions options = {});
  [[nodiscard]] std::string_view name() const override { return "prefix"; }
  [[nodiscard]] RouteDecision choose(std::span<const TokenId> prompt,
                                     std::span<const BackendLoad> loads) override;
  void routed(std::span<const TokenId> prompt, int backend) override;
  [[nodiscard]] std::vector<RouteReason> reasons() const override;

  // FNV-1a over the first prefix_tokens ids; nullopt for a shorter prompt.
  [[nodiscard]] std::optional<std::uint64_t> prefix_key(std::span<const TokenId> prompt) const;
  // The backend remembered for this prompt's prefix (no LRU refresh), for tests.
  [[nodiscard]] std::optional<int> remembered(std::span<const TokenId> prompt) const;
  [[nodiscard]] std::size_t size() const { return m_index.size(); }

private:
  PrefixPolicyOptions m_options;
  // Most recently used first: (prefix key, backend).
  std::list<std::pair<std::uint64_t, int>> m_lru;
  std::unordered_map<std::uint64_t, std::list<std::pair<std::uint64_t, int>>::iterator> m_index;
  LeastTokensPolicy m_fallback;
};

// "round-robin", "least-tokens" or "prefix"; anything else is an aisp::UsageError naming them.
[[nodiscard]] std::unique_ptr<RoutingPolicy>
make_routing_policy(std::string_view name, const PrefixPolicyOptions &prefix = {});

} // namespace aisp::serving
