// Prefix caching: the hash chain and its verification (PrefixCache), the block manager's matching,
// registration, reference counts and LRU eviction, and the scheduler with the FakeRunner (whose
// tokens hash the whole history read back through the block table, so a wrong shared block changes
// the output): exact tokens with the cache on, what is recomputed when the whole prompt is cached,
// hit counts, preemption and eviction under memory pressure, and the idle state afterwards.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <stdexcept>

#include "core/base/error.hpp"
#include "serving/block_manager.hpp"
#include "serving/fake_runner.hpp"
#include "serving/prefix_cache.hpp"
#include "serving/scheduler.hpp"

using namespace aisp::serving;

namespace {

constexpr int kVocab = 1000;

std::vector<TokenId> ids(int n, int seed) {
  std::vector<TokenId> p(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) p[static_cast<std::size_t>(i)] = (seed * 131 + i * 17 + 3) % kVocab;
  return p;
}

std::vector<TokenId> concat(std::vector<TokenId> a, const std::vector<TokenId>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Allocates a table for `tokens` by hand and registers its full blocks, as the scheduler does once
// their K/V is computed.
void compute(BlockManager& bm, SequenceId seq, const std::vector<TokenId>& tokens) {
  const int cached = bm.match_prefix(seq, tokens, static_cast<int>(tokens.size()));
  ASSERT_TRUE(bm.grow_to(seq, static_cast<int>(tokens.size())));
  (void)cached;
  bm.register_blocks(seq, tokens, static_cast<int>(tokens.size()));
  ASSERT_EQ(bm.check_invariants(), "");
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// PrefixCache

TEST(PrefixCache, TheChainHashDependsOnTheWholePrefix) {
  const auto a = ids(4, 1);
  const auto b = ids(4, 2);
  const BlockHash ha = hash_block(0, a.data(), 4);
  EXPECT_EQ(ha, hash_block(0, a.data(), 4));
  EXPECT_NE(ha, hash_block(0, b.data(), 4));
  // The same block after different prefixes hashes differently.
  EXPECT_NE(hash_block(ha, b.data(), 4), hash_block(hash_block(0, b.data(), 4), b.data(), 4));
  auto swapped = a;
  std::swap(swapped[0], swapped[1]);
  EXPECT_NE(ha, hash_block(0, swapped.data(), 4));
  EXPECT_THROW(PrefixCache(0, 4), aisp::UsageError);
}

TEST(PrefixCache, FindsOnlyVerifiedChainsAndNeverAStaleChild) {
  PrefixCache cache(8, 4);
  const auto a = ids(4, 1);
  const auto b = ids(4, 2);
  const auto ia = cache.insert({}, a.data(), 0);
  ASSERT_TRUE(ia.added);
  const auto ib = cache.insert(ia.link, b.data(), 1);
  ASSERT_TRUE(ib.added);
  EXPECT_EQ(cache.num_cached(), 2);

  auto hit = cache.find({}, a.data());
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->block, 0);
  auto hit2 = cache.find(hit->link, b.data());
  ASSERT_TRUE(hit2);
  EXPECT_EQ(hit2->block, 1);
  EXPECT_FALSE(cache.find({}, b.data()));  // b only after a
  // The right hash with another parent serial is a miss: the key alone is never trusted.
  EXPECT_FALSE(cache.find(PrefixLink{ia.link.hash, ia.link.serial + 100}, b.data()));

  // A twice (same parent, same tokens): not indexed again, the existing entry's link comes back.
  const auto dup = cache.insert({}, a.data(), 2);
  EXPECT_FALSE(dup.added);
  EXPECT_EQ(dup.link.serial, ia.link.serial);
  EXPECT_FALSE(cache.is_cached(2));

  // Evict a (its child b stays indexed, unreachable), index a again in block 3: same hash, new
  // serial. b's entry hashes the same after the new a but was chained to the old one: a miss.
  cache.make_evictable(0);
  ASSERT_EQ(cache.evict(), std::optional<BlockId>(0));
  EXPECT_EQ(cache.evictions(), 1);
  EXPECT_FALSE(cache.find({}, a.data()));
  const auto ia2 = cache.insert({}, a.data(), 3);
  ASSERT_TRUE(ia2.added);
  EXPECT_EQ(ia2.link.hash, ia.link.hash);
  EXPECT_NE(ia2.link.serial, ia.link.serial);
  EXPECT_FALSE(cache.find(ia2.link, b.data()));
  // A new b under the new a takes the key; the stale entry's block (evictable) is handed back.
  cache.make_evictable(1);
  const auto ib2 = cache.insert(ia2.link, b.data(), 4);
  EXPECT_TRUE(ib2.added);
  EXPECT_EQ(ib2.dropped, 1);
  EXPECT_TRUE(ib2.dropped_evictable);
  EXPECT_FALSE(cache.is_cached(1));
  EXPECT_EQ(cache.find(ia2.link, b.data())->block, 4);
  EXPECT_EQ(cache.check_invariants(), "");
  EXPECT_THROW(cache.insert({}, b.data(), 4), std::logic_error);  // indexed already
}

TEST(PrefixCache, EvictsInLeastRecentlyReleasedOrder) {
  PrefixCache cache(8, 2);
  PrefixLink link;
  for (BlockId b = 0; b < 4; ++b) {
    const std::vector<TokenId> t{b, b + 1};
    link = cache.insert(link, t.data(), b).link;
  }
  cache.make_evictable(2);
  cache.make_evictable(0);
  cache.make_evictable(3);
  cache.make_evictable(1);
  cache.make_unevictable(0);  // a hit took it back
  cache.make_evictable(0);    // released again: now the most recent
  EXPECT_EQ(cache.eviction_order(), (std::vector<BlockId>{2, 3, 1, 0}));
  EXPECT_THROW(cache.make_evictable(0), std::logic_error);
  EXPECT_EQ(cache.evict(), std::optional<BlockId>(2));
  EXPECT_EQ(cache.evict(), std::optional<BlockId>(3));
  EXPECT_EQ(cache.num_cached(), 2);
  EXPECT_EQ(cache.num_evictable(), 2);
  EXPECT_EQ(cache.check_invariants(), "");
}

// ------------------------------------------------------------------------------------------------
// BlockManager with prefix caching

TEST(PrefixCacheBlocks, MatchesTheLongestCachedRunAndCountsReferences) {
  BlockManager bm(16, 4, true);
  const auto prompt = ids(14, 1);  // 3 full blocks + 2 tokens
  compute(bm, 1, prompt);
  EXPECT_EQ(bm.num_cached(), 3);  // the partial last block is not indexed
  EXPECT_EQ(bm.num_evictable(), 0);

  // A live sharer: counts go to 2; a prompt that diverges in block 2 matches 2 blocks.
  auto other = prompt;
  other[9] = (other[9] + 1) % kVocab;
  EXPECT_EQ(bm.match_prefix(2, other, static_cast<int>(other.size())), 8);
  const auto& t1 = bm.block_table(1);
  const auto& t2 = bm.block_table(2);
  ASSERT_EQ(t2.size(), 2u);
  EXPECT_EQ(t2[0], t1[0]);
  EXPECT_EQ(t2[1], t1[1]);
  EXPECT_EQ(bm.ref_count(t1[0]), 2);
  EXPECT_EQ(bm.ref_count(t1[2]), 1);
  // max_tokens caps the match at whole blocks below it.
  EXPECT_EQ(bm.match_prefix(3, prompt, 11), 8);
  EXPECT_EQ(bm.match_prefix(4, prompt, 3), 0);
  EXPECT_FALSE(bm.has_sequence(4));
  EXPECT_THROW((void)bm.match_prefix(3, prompt, 14), std::logic_error);  // holds blocks already
  EXPECT_EQ(bm.check_invariants(), "");

  // Everyone leaves: the 3 cached blocks stay evictable (and count as free), the rest is free.
  bm.free_sequence(1);
  bm.free_sequence(2);
  bm.free_sequence(3);
  EXPECT_EQ(bm.num_used(), 0);
  EXPECT_EQ(bm.num_free(), 16);
  EXPECT_EQ(bm.num_cached(), 3);
  EXPECT_EQ(bm.num_evictable(), 3);
  EXPECT_EQ(bm.check_invariants(), "");

  // Matching an evictable block takes it back (count 1, no longer evictable).
  EXPECT_EQ(bm.match_prefix(5, prompt, 13), 12);
  EXPECT_EQ(bm.num_evictable(), 0);
  EXPECT_EQ(bm.num_used(), 3);
  EXPECT_EQ(bm.ref_count(bm.block_table(5)[0]), 1);
  EXPECT_EQ(bm.check_invariants(), "");
}

TEST(PrefixCacheBlocks, AllocationEvictsOnlyWhenNoPlainBlockIsLeftTailFirst) {
  BlockManager bm(6, 2, true);
  const auto a = ids(6, 1);  // 3 full blocks
  compute(bm, 1, a);
  const std::vector<BlockId> table = bm.block_table(1);
  bm.free_sequence(1);  // released last first: the tail is evicted before the head
  ASSERT_EQ(bm.prefix_cache()->eviction_order(),
            (std::vector<BlockId>{table[2], table[1], table[0]}));
  EXPECT_EQ(bm.num_free(), 6);
  // Three plain blocks go first, untouched cache.
  ASSERT_TRUE(bm.grow_to(2, 6));
  EXPECT_EQ(bm.evictions(), 0);
  EXPECT_EQ(bm.num_cached(), 3);
  // The fourth evicts the tail block of `a`; the head still matches.
  ASSERT_TRUE(bm.grow_to(2, 8));
  EXPECT_EQ(bm.evictions(), 1);
  EXPECT_EQ(bm.block_table(2).back(), table[2]);
  EXPECT_EQ(bm.match_prefix(3, a, 6), 4);
  bm.free_sequence(3);
  // All of them: two more evictions, then out of blocks.
  ASSERT_TRUE(bm.grow_to(2, 12));
  EXPECT_EQ(bm.evictions(), 3);
  EXPECT_EQ(bm.num_cached(), 0);
  EXPECT_FALSE(bm.grow_to(2, 14));
  EXPECT_FALSE(bm.allocate().has_value());
  EXPECT_EQ(bm.check_invariants(), "");
  bm.free_sequence(2);
  EXPECT_EQ(bm.num_free(), 6);
  EXPECT_EQ(bm.num_evictable(), 0);
  EXPECT_EQ(bm.check_invariants(), "");
}

TEST(PrefixCacheBlocks, AStaleEntryIsReplacedAndItsBlockFreed) {
  // Sequences 1 ([a b]) and 2 ([a c]) computed together: 2's `a` is a duplicate (left uncached) and
  // its `c` is chained to 1's `a`. Once 1's blocks are evicted, 2's `c` is a stale entry nobody can
  // reach; a fresh [a c] must take its key and hand its (evictable) block back to the free list.
  BlockManager bm(5, 2, true);
  const std::vector<TokenId> a{1, 2}, b{3, 4}, c{5, 6};
  ASSERT_TRUE(bm.grow_to(1, 4));
  ASSERT_TRUE(bm.grow_to(2, 4));
  bm.register_blocks(1, concat(a, b), 4);
  bm.register_blocks(2, concat(a, c), 4);
  EXPECT_EQ(bm.num_cached(), 3);  // a, b, c
  const BlockId stale = bm.block_table(2)[1];
  bm.free_sequence(1);
  ASSERT_TRUE(bm.grow_to(9, 6));  // one plain block, then evicts b and a
  EXPECT_EQ(bm.evictions(), 2);
  bm.free_sequence(9);
  bm.free_sequence(2);  // c: evictable, unreachable
  EXPECT_EQ(bm.num_evictable(), 1);
  EXPECT_EQ(bm.match_prefix(3, concat(a, c), 4), 0);
  ASSERT_TRUE(bm.grow_to(3, 4));
  EXPECT_EQ(bm.evictions(), 2);  // plain blocks were there
  bm.register_blocks(3, concat(a, c), 4);
  EXPECT_FALSE(bm.prefix_cache()->is_cached(stale));
  EXPECT_EQ(bm.num_cached(), 2);
  EXPECT_EQ(bm.num_evictable(), 0);
  EXPECT_EQ(bm.check_invariants(), "");
  bm.free_sequence(3);
  EXPECT_EQ(bm.num_free(), 5);
  EXPECT_EQ(bm.match_prefix(4, concat(a, c), 4), 4);
  EXPECT_EQ(bm.check_invariants(), "");
}

TEST(PrefixCacheBlocks, RandomOperationsKeepTheInvariantsAndFreeEverything) {
  // Prompts drawn from a few prefixes, tables matched, grown, registered at random points, freed
  // in random order, under a pool small enough that eviction happens all along.
  BlockManager bm(24, 4, true);
  std::mt19937 rng(5);
  std::map<SequenceId, std::vector<TokenId>> live;
  SequenceId next = 1;
  for (int op = 0; op < 4000; ++op) {
    if (live.size() < 5 && rng() % 2 == 0) {
      const SequenceId s = next++;
      auto t = concat(ids(4 * static_cast<int>(rng() % 4), static_cast<int>(rng() % 3)),
                      ids(1 + static_cast<int>(rng() % 10), static_cast<int>(s)));
      const int hit = bm.match_prefix(s, t, static_cast<int>(t.size()) - 1);
      ASSERT_EQ(hit % 4, 0);
      if (!bm.grow_to(s, static_cast<int>(t.size()))) {
        bm.free_sequence(s);
        continue;
      }
      bm.register_blocks(s, t, static_cast<int>(t.size()) - static_cast<int>(rng() % 3));
      live.emplace(s, std::move(t));
    } else if (!live.empty()) {
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng() % live.size()));
      bm.free_sequence(it->first);
      live.erase(it);
    }
    ASSERT_EQ(bm.check_invariants(), "") << "after operation " << op;
  }
  for (const auto& [s, t] : live) bm.free_sequence(s);
  EXPECT_EQ(bm.num_used(), 0);
  EXPECT_EQ(bm.num_free(), 24);
  EXPECT_EQ(bm.num_cached(), bm.num_evictable());
  EXPECT_GT(bm.evictions(), 0);
  EXPECT_EQ(bm.check_invariants(), "");
}

TEST(PrefixCacheBlocks, OffChangesNothing) {
  BlockManager bm(8, 4);
  const auto t = ids(8, 1);
  ASSERT_TRUE(bm.grow_to(1, 8));
  bm.register_blocks(1, t, 8);
  EXPECT_FALSE(bm.prefix_caching());
  EXPECT_EQ(bm.num_cached(), 0);
  bm.free_sequence(1);
  EXPECT_EQ(bm.match_prefix(2, t, 8), 0);
  EXPECT_FALSE(bm.has_sequence(2));
  EXPECT_EQ(bm.prefix_cache(), nullptr);
}

// ------------------------------------------------------------------------------------------------
// Scheduler + FakeRunner

namespace {

struct Harness {
  Scheduler sched;
  FakeRunner runner;
  std::map<SequenceId, std::vector<TokenId>> out;
  std::map<SequenceId, FinishReason> reason;

  static FakeRunnerOptions runner_options(const SchedulerConfig& c) {
    FakeRunnerOptions o{c.num_kv_blocks, c.block_size, c.max_batched_tokens, kVocab,
                        c.max_context};
    o.allow_shared_blocks = true;  // the FakeRunner still refuses a slot written and read in a step
    return o;
  }
  explicit Harness(SchedulerConfig c) : sched(c), runner(runner_options(c)) {}

  void add(SequenceId id, std::vector<TokenId> prompt, int max_tokens) {
    GenerationRequest r;
    r.prompt = std::move(prompt);
    r.max_tokens = max_tokens;
    r.ignore_eos = true;
    ASSERT_EQ(sched.add(id, r), AddStatus::accepted);
  }
  StepBatch step() {
    StepBatch b = sched.schedule();
    if (!b.sequences.empty()) sched.on_step_done(runner.step(b));
    for (const auto& e : sched.take_events()) {
      if (e.event.token >= 0) out[e.id].push_back(e.event.token);
      if (e.event.finished) reason[e.id] = e.event.reason;
    }
    EXPECT_EQ(sched.blocks().check_invariants(), "");
    return b;
  }
  void run_all() {
    for (int i = 0; i < 100000 && sched.has_work(); ++i) step();
    ASSERT_FALSE(sched.has_work());
  }
  // Idle: nothing referenced, every block free or cached-evictable.
  void expect_idle() const {
    const BlockManager& bm = sched.blocks();
    EXPECT_EQ(bm.num_used(), 0);
    EXPECT_EQ(bm.num_free(), bm.num_blocks());
    EXPECT_EQ(bm.num_cached(), bm.num_evictable());
    EXPECT_EQ(bm.num_sequences(), 0);
  }
};

std::vector<TokenId> reference(const std::vector<TokenId>& prompt, int max_tokens) {
  GenerationRequest r;
  r.prompt = prompt;
  r.max_tokens = max_tokens;
  return fake_reference(r, kVocab).tokens;
}

SchedulerConfig cache_config() {
  SchedulerConfig c;
  c.max_running = 8;
  c.max_batched_tokens = 32;
  c.num_kv_blocks = 64;
  c.block_size = 4;
  c.max_context = 512;
  c.vocab_size = kVocab;
  c.prefix_cache = true;
  return c;
}

}  // namespace

TEST(PrefixCacheScheduler, NeedsContinuousPagedScheduling) {
  SchedulerConfig c = cache_config();
  c.policy = SchedulingPolicy::static_batch;
  EXPECT_THROW((Scheduler{c}), aisp::UsageError);
  c = cache_config();
  c.kv_mode = KvMode::reserved;
  EXPECT_THROW((Scheduler{c}), aisp::UsageError);
}

TEST(PrefixCacheScheduler, ASharedPrefixStartsAfterTheCachedBlocks) {
  Harness h(cache_config());
  const auto system = ids(10, 7);  // 2 full blocks + 2 tokens
  const auto p1 = concat(system, ids(5, 1));
  const auto p2 = concat(system, ids(6, 2));
  h.add(1, p1, 3);
  h.run_all();
  EXPECT_EQ(h.sched.prefix_cache_stats().hit_tokens, 0);
  EXPECT_EQ(h.sched.prefix_cache_stats().cached_blocks, 4);  // 15 + 2 computed tokens: 4 full

  h.add(2, p2, 3);
  const StepBatch b = h.step();
  ASSERT_EQ(b.sequences.size(), 1u);
  EXPECT_EQ(b.sequences[0].start_position, 8);  // the system prompt's 2 full blocks were cached
  EXPECT_EQ(b.sequences[0].tokens.size(), p2.size() - 8);
  h.run_all();
  EXPECT_EQ(h.out[1], reference(p1, 3));
  EXPECT_EQ(h.out[2], reference(p2, 3));
  const PrefixCacheStats s = h.sched.prefix_cache_stats();
  EXPECT_TRUE(s.enabled);
  EXPECT_EQ(s.hit_tokens, 8);
  EXPECT_EQ(s.queried_tokens, static_cast<std::int64_t>(p1.size() + p2.size()));
  EXPECT_NEAR(s.hit_rate(), 8.0 / 31.0, 1e-12);
  h.expect_idle();
}

TEST(PrefixCacheScheduler, AWhollyCachedPromptRecomputesItsLastBlock) {
  Harness h(cache_config());
  const auto aligned = ids(12, 3);    // 3 full blocks
  const auto unaligned = ids(14, 4);  // 3 full blocks + 2
  h.add(1, aligned, 1);
  h.add(2, unaligned, 1);
  h.run_all();
  // The cached blocks of `aligned`, found by walking its chain.
  std::vector<BlockId> cached;
  PrefixLink link;
  for (int start = 0; start < 12; start += 4) {
    const auto hit = h.sched.blocks().prefix_cache()->find(link, aligned.data() + start);
    ASSERT_TRUE(hit);
    cached.push_back(hit->block);
    link = hit->link;
  }
  h.add(3, aligned, 4);
  h.add(4, unaligned, 4);
  const StepBatch b = h.step();
  ASSERT_EQ(b.sequences.size(), 2u);
  // The last token cannot come from the cache: the last block (4 tokens) is recomputed into a
  // private block, not written into the shared one; of the unaligned prompt only its partial block
  // (2 tokens).
  EXPECT_EQ(b.sequences[0].start_position, 8);
  EXPECT_EQ(b.sequences[0].tokens.size(), 4u);
  ASSERT_EQ(b.sequences[0].blocks.size(), 3u);
  EXPECT_EQ(b.sequences[0].blocks[0], cached[0]);
  EXPECT_EQ(b.sequences[0].blocks[1], cached[1]);
  EXPECT_NE(b.sequences[0].blocks[2], cached[2]);
  EXPECT_EQ(b.sequences[1].start_position, 12);
  EXPECT_EQ(b.sequences[1].tokens.size(), 2u);
  EXPECT_TRUE(b.sequences[0].sample);
  EXPECT_TRUE(b.sequences[1].sample);
  h.run_all();
  EXPECT_EQ(h.out[3], reference(aligned, 4));
  EXPECT_EQ(h.out[4], reference(unaligned, 4));
  EXPECT_EQ(h.sched.prefix_cache_stats().hit_tokens, 8 + 12);
  h.expect_idle();
}

TEST(PrefixCacheScheduler, DistinctPromptsNeverHit) {
  Harness h(cache_config());
  for (int i = 0; i < 20; ++i) h.add(i + 1, ids(9 + i, 100 + i), 5);
  h.run_all();
  for (int i = 0; i < 20; ++i) EXPECT_EQ(h.out[i + 1], reference(ids(9 + i, 100 + i), 5));
  const PrefixCacheStats s = h.sched.prefix_cache_stats();
  EXPECT_EQ(s.hit_tokens, 0);
  EXPECT_EQ(s.hit_rate(), 0.0);
  EXPECT_GT(s.queried_tokens, 0);
  EXPECT_GT(s.cached_blocks, 0);
  h.expect_idle();
}

TEST(PrefixCacheScheduler, PreemptionAndEvictionUnderPressureKeepTheTokensExact) {
  // 16 blocks of 4 for up to 6 sequences of 20-53 tokens sharing three system prompts: sequences
  // are preempted and readmitted (hitting their own blocks), cached blocks are evicted all along.
  SchedulerConfig c = cache_config();
  c.num_kv_blocks = 16;
  c.max_batched_tokens = 16;
  c.max_running = 6;
  Harness h(c);
  std::mt19937 rng(11);
  std::map<SequenceId, std::pair<std::vector<TokenId>, int>> requests;
  for (SequenceId id = 1; id <= 120; ++id) {
    // At most 16 + 12 prompt + 25 generated tokens: 14 blocks, within the pool alone.
    auto prompt = concat(ids(8 + 4 * static_cast<int>(id % 3), static_cast<int>(id % 3)),
                         ids(1 + static_cast<int>(rng() % 12), static_cast<int>(id) + 50));
    const int max_tokens = 10 + static_cast<int>(rng() % 16);
    h.add(id, prompt, max_tokens);
    requests.emplace(id, std::make_pair(prompt, max_tokens));
    if (id % 4 == 0) {
      for (int k = 0; k < 6; ++k) h.step();  // arrivals spread over time, not one burst
    }
  }
  h.run_all();
  for (const auto& [id, r] : requests) {
    ASSERT_EQ(h.out[id], reference(r.first, r.second)) << "request " << id;
    ASSERT_EQ(h.reason[id], FinishReason::length) << "request " << id;
  }
  const PrefixCacheStats s = h.sched.prefix_cache_stats();
  EXPECT_GT(h.sched.preemptions(), 0) << "the pool was meant to force preemption";
  EXPECT_GT(s.evictions, 0) << "the pool was meant to force eviction";
  EXPECT_GT(s.hit_tokens, 0);
  EXPECT_LT(s.hit_tokens, s.queried_tokens);
  h.expect_idle();
}

TEST(PrefixCacheScheduler, OnAndOffProduceTheSameTokensWithFewerComputedOn) {
  // A shared-system-prompt workload stepped by hand with the cache on and off.
  std::map<bool, std::map<SequenceId, std::vector<TokenId>>> outputs;
  std::map<bool, std::int64_t> computed;
  std::map<bool, std::int64_t> hits;
  for (const bool on : {false, true}) {
    SchedulerConfig c = cache_config();
    c.prefix_cache = on;
    c.max_running = 3;
    Harness h(c);
    const auto system = ids(23, 9);
    for (SequenceId id = 1; id <= 30; ++id) {
      h.add(id, concat(system, ids(3, 200 + static_cast<int>(id))), 6);
    }
    for (int i = 0; i < 100000 && h.sched.has_work(); ++i) computed[on] += h.step().token_count();
    outputs[on] = h.out;
    EXPECT_EQ(h.sched.prefix_cache_stats().enabled, on);
    EXPECT_EQ(h.sched.preemptions(), 0);
    hits[on] = h.sched.prefix_cache_stats().hit_tokens;
    h.expect_idle();
  }
  EXPECT_EQ(outputs[true], outputs[false]);
  ASSERT_EQ(outputs[true].size(), 30u);
  EXPECT_EQ(hits[false], 0);
  // Every hit token is a token not computed; at most the first 3 (admitted before the system
  // prompt's blocks were registered) miss its 5 full blocks.
  EXPECT_EQ(computed[false] - computed[true], hits[true]);
  EXPECT_GE(hits[true], 27 * 20);
}
