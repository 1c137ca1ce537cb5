// BlockManager: the paged KV cache's bookkeeping. The runner owns the memory (num_blocks blocks of
// block_size token slots each); this class decides which physical block holds which sequence's
// positions. Position p of a sequence lives in block table[p / block_size], slot p % block_size.
//
// Blocks carry reference counts so that one physical block can be mapped into several sequences'
// tables (share() one more reference, release() one less; the block returns to the free list at
// zero). Without prefix caching every count is 0 or 1.
//
// With prefix caching on (prefix_cache.hpp), full blocks are indexed by their prefix once their K/V
// is computed (register_blocks), match_prefix() maps the longest cached run of a new sequence's
// tokens into its table, and a cached block whose count falls to 0 is not freed but becomes
// *evictable*: it still counts as free (num_free, can_allocate), and allocate() takes one, least
// recently released first, only when no plain free block is left.
//
// Two ways to grow a table: grow_to() appends blocks as a sequence's cached length grows (paged KV,
// the vLLM way), reserve() gives a sequence every block its whole context can need at once
// (contiguous-KV behaviour, what a static-batching server without paging does). Both are
// all-or-nothing: when the free list is too short nothing is allocated and false comes back, so a
// caller never has to undo half a grow.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "serving/prefix_cache.hpp"
#include "serving/runner_api.hpp"

namespace aisp::serving {

class BlockManager {
 public:
  // Throws aisp::UsageError unless num_blocks > 0 and block_size > 0.
  BlockManager(int num_blocks, int block_size = 16, bool prefix_cache = false);

  [[nodiscard]] int num_blocks() const { return static_cast<int>(m_ref_counts.size()); }
  [[nodiscard]] int block_size() const { return m_block_size; }
  // Blocks allocate() can hand out: plain free ones and evictable cached ones.
  [[nodiscard]] int num_free() const { return static_cast<int>(m_free.size()) + num_evictable(); }
  [[nodiscard]] int num_used() const { return num_blocks() - num_free(); }  // referenced blocks
  // Blocks needed to hold `tokens` positions (ceil division).
  [[nodiscard]] int blocks_for_tokens(int tokens) const;
  [[nodiscard]] bool can_allocate(int blocks) const { return blocks <= num_free(); }

  // --- single blocks, with reference counts ---
  // A free block with count 1 (evicting the least recently released cached block when no plain
  // one is left), or nullopt when none is free.
  [[nodiscard]] std::optional<BlockId> allocate();
  // One more reference to a live block, or to an evictable cached one (which is then in use again).
  // Throws std::logic_error on a free or out-of-range block.
  void share(BlockId block);
  // One reference less; at zero the block is free again, or evictable when it is cached. Throws
  // std::logic_error on a free block.
  void release(BlockId block);
  [[nodiscard]] int ref_count(BlockId block) const;

  // --- per-sequence block tables ---
  // Appends blocks until the table covers `tokens` positions. False, with nothing changed, when
  // there are not enough free blocks. Throws std::logic_error past a reservation made by reserve().
  [[nodiscard]] bool grow_to(SequenceId seq, int tokens);
  // Gives `seq` (which must hold no blocks yet) every block for `context_tokens` positions at once,
  // and caps it there. False, with nothing changed, when they are not all free.
  [[nodiscard]] bool reserve(SequenceId seq, int context_tokens);
  // Releases every block of the sequence's table and forgets the table. A sequence without one is
  // fine. Released last block first: the free list hands them out again in table order, and of a
  // cached prefix the tail is evicted before the head (the head is the part other prompts share).
  void free_sequence(SequenceId seq);

  // --- prefix caching (no-ops, returning 0, when it is off) ---
  [[nodiscard]] bool prefix_caching() const { return m_cache.has_value(); }
  // Gives `seq` (which must hold no blocks yet) a table of the longest run of cached full blocks
  // equal to tokens[0, k * block_size) with k * block_size <= max_tokens, one reference each, and
  // returns k * block_size (no table when k == 0). Those positions need no computing.
  [[nodiscard]] int match_prefix(SequenceId seq, const std::vector<TokenId>& tokens,
                                 int max_tokens);
  // Indexes the full blocks of seq's table that hold positions below `computed` and are not indexed
  // yet; `tokens` are the sequence's tokens (at least `computed` of them). Call once their K/V is
  // written (after the step): a lookup may hand them to another sequence from then on.
  void register_blocks(SequenceId seq, const std::vector<TokenId>& tokens, int computed);
  [[nodiscard]] int num_cached() const { return m_cache ? m_cache->num_cached() : 0; }
  [[nodiscard]] int num_evictable() const { return m_cache ? m_cache->num_evictable() : 0; }
  [[nodiscard]] std::int64_t evictions() const { return m_cache ? m_cache->evictions() : 0; }
  // The cache itself (tests: eviction order); null when prefix caching is off.
  [[nodiscard]] const PrefixCache* prefix_cache() const { return m_cache ? &*m_cache : nullptr; }
  [[nodiscard]] bool has_sequence(SequenceId seq) const { return m_tables.count(seq) != 0; }
  // The sequence's table (empty when it holds nothing). The reference is valid until the next
  // change.
  [[nodiscard]] const std::vector<BlockId>& block_table(SequenceId seq) const;
  [[nodiscard]] int num_sequences() const { return static_cast<int>(m_tables.size()); }

  // Empty when the bookkeeping is consistent, else a description of the first violation found:
  // every block is exactly one of free (count 0, in the free list, not cached), evictable (count 0,
  // cached, in the cache's LRU) or referenced (count > 0, neither), the free list holds no block
  // twice, free + used == total, each block's count covers at least the tables that list it (a
  // count may exceed them by external shares), and the cache's own index is consistent.
  [[nodiscard]] std::string check_invariants() const;

 private:
  void check_block(BlockId block, const char* what) const;

  struct Table {
    std::vector<BlockId> blocks;
    int reserved_tokens = -1;  // -1: paged, grows freely; else the cap set by reserve()
    int registered = 0;        // prefix caching: leading full blocks indexed (or found indexed)
    PrefixLink link;           // the chain position after them
  };

  int m_block_size;
  std::vector<int> m_ref_counts;  // per physical block; 0 = free
  std::vector<BlockId> m_free;    // stack: the last freed block is reused first (so a stale
                                  // reference to it shows up at once in tests)
  std::unordered_map<SequenceId, Table> m_tables;
  std::optional<PrefixCache> m_cache;  // engaged when prefix caching is on
};

}  // namespace aisp::serving
