// PrefixCache: the index behind automatic prefix caching (vLLM's design, docs/serving.md "Prefix
// caching"). A *full* KV block of a sequence is known by a chain hash: hash(hash of the previous
// block, the block's token ids), so equal hashes stand for equal whole prefixes, and a request
// whose prompt starts with a prefix some earlier sequence computed can map those blocks into its
// own table instead of computing them again.
//
// The 64-bit hash is only the map key: it is never trusted alone. Each entry keeps the block's
// token ids and the serial number of the entry it was chained to (its parent), and a lookup accepts
// an entry only when both match what the query has already verified. Serials are never reused, so
// by induction from the root a verified chain of k entries holds exactly the query's first k
// blocks: a hash collision, or an entry whose parent was evicted (and perhaps replaced by another
// one with the same hash), is a miss, never a wrong block. Verification costs one compare of
// block_size ids per block.
//
// The cache does not count references; BlockManager does. A cached block whose reference count fell
// to 0 is *evictable*: it stays indexed (a later request may still hit it) but the allocator may
// take it, least recently released first, once the plain free list is empty. This class keeps the
// index, the LRU order of the evictable blocks and the eviction count; BlockManager decides when a
// block enters or leaves the LRU.
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "serving/runner_api.hpp"

namespace aisp::serving {

using BlockId = std::int32_t;
using BlockHash = std::uint64_t;

// A position in a chain of cached blocks: the hash of the prefix up to and including a block, and
// the serial of the cache entry that holds that block. The root (no block yet) is {0, 0}.
struct PrefixLink {
  BlockHash hash = 0;
  std::uint64_t serial = 0;
};

// The chain hash of `count` token ids following the prefix hashed as `parent`.
[[nodiscard]] BlockHash hash_block(BlockHash parent, const TokenId* tokens, int count);

class PrefixCache {
 public:
  // Throws aisp::UsageError unless both are positive.
  PrefixCache(int num_blocks, int block_size);

  [[nodiscard]] int block_size() const { return m_block_size; }

  struct Hit {
    BlockId block = -1;
    PrefixLink link;  // the chain position after this block: the parent of the next lookup
  };
  // The cached block holding `tokens` (block_size ids) right after `parent`, or nullopt.
  [[nodiscard]] std::optional<Hit> find(PrefixLink parent, const TokenId* tokens) const;

  struct Inserted {
    PrefixLink link;          // the chain position of these tokens after `parent`
    bool added = false;       // false: an entry with the same parent and tokens was there already
                              // (computed twice, e.g. by two sequences admitted together); `block`
                              // stays uncached and `link` is that entry's
    BlockId dropped = -1;     // an entry under the same hash with another parent or other tokens
                              // (stale, or a collision) was replaced: its block, now uncached
    bool dropped_evictable = false;  // ... and it was evictable: the caller must free it
  };
  // Indexes `block` (uncached, in use) as holding `tokens` right after `parent`.
  Inserted insert(PrefixLink parent, const TokenId* tokens, BlockId block);

  [[nodiscard]] bool is_cached(BlockId block) const;
  [[nodiscard]] bool is_evictable(BlockId block) const;
  // A cached block lost its last reference: it joins the LRU order as the most recent.
  void make_evictable(BlockId block);
  // A hit took an evictable block back into a table.
  void make_unevictable(BlockId block);
  // Unindexes the least recently released evictable block and returns it (nullopt when none).
  [[nodiscard]] std::optional<BlockId> evict();

  [[nodiscard]] int num_cached() const { return static_cast<int>(m_by_hash.size()); }
  [[nodiscard]] int num_evictable() const { return static_cast<int>(m_lru.size()); }
  [[nodiscard]] std::int64_t evictions() const { return m_evictions; }
  // The evictable blocks, next to be evicted first (for tests).
  [[nodiscard]] std::vector<BlockId> eviction_order() const { return {m_lru.begin(), m_lru.end()}; }

  // "" when the index, the per-block entries and the LRU list agree, else the first violation.
  [[nodiscard]] std::string check_invariants() const;

 private:
  struct Entry {
    bool cached = false;
    bool in_lru = false;
    BlockHash hash = 0;
    std::uint64_t serial = 0;
    std::uint64_t parent_serial = 0;
    std::list<BlockId>::iterator lru_pos;
  };
  void check_block(BlockId block, const char* what) const;
  [[nodiscard]] bool same_tokens(BlockId block, const TokenId* tokens) const;
  void unindex(BlockId block);

  int m_block_size;
  std::vector<Entry> m_entries;                   // per physical block
  std::vector<TokenId> m_tokens;                  // per block, block_size ids: for verification
  std::unordered_map<BlockHash, BlockId> m_by_hash;
  std::list<BlockId> m_lru;                       // evictable blocks, least recently released first
  std::uint64_t m_next_serial = 1;                // 0 is the root
  std::int64_t m_evictions = 0;
};

}  // namespace aisp::serving
