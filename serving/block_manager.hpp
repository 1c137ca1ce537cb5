// BlockManager: the paged KV cache's bookkeeping. The runner owns the memory (num_blocks blocks of
// block_size token slots each); this class decides which physical block holds which sequence's
// positions. Position p of a sequence lives in block table[p / block_size], slot p % block_size.
//
// Blocks carry reference counts so that a later prefix cache can map one physical block into
// several sequences' tables (share() one more reference, release() one less; the block returns to
// the free list at zero). Without sharing every count is 0 or 1.
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

#include "serving/runner_api.hpp"

namespace aisp::serving {

using BlockId = std::int32_t;

class BlockManager {
 public:
  // Throws aisp::UsageError unless num_blocks > 0 and block_size > 0.
  BlockManager(int num_blocks, int block_size = 16);

  [[nodiscard]] int num_blocks() const { return static_cast<int>(m_ref_counts.size()); }
  [[nodiscard]] int block_size() const { return m_block_size; }
  [[nodiscard]] int num_free() const { return static_cast<int>(m_free.size()); }
  [[nodiscard]] int num_used() const { return num_blocks() - num_free(); }
  // Blocks needed to hold `tokens` positions (ceil division).
  [[nodiscard]] int blocks_for_tokens(int tokens) const;
  [[nodiscard]] bool can_allocate(int blocks) const { return blocks <= num_free(); }

  // --- single blocks, with reference counts ---
  // A free block with count 1, or nullopt when none is free.
  [[nodiscard]] std::optional<BlockId> allocate();
  // One more reference to a live block. Throws std::logic_error on a free or out-of-range block.
  void share(BlockId block);
  // One reference less; the block is free again at zero. Throws std::logic_error on a free block.
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
  // fine.
  void free_sequence(SequenceId seq);
  [[nodiscard]] bool has_sequence(SequenceId seq) const { return m_tables.count(seq) != 0; }
  // The sequence's table (empty when it holds nothing). The reference is valid until the next
  // change.
  [[nodiscard]] const std::vector<BlockId>& block_table(SequenceId seq) const;
  [[nodiscard]] int num_sequences() const { return static_cast<int>(m_tables.size()); }

  // Empty when the bookkeeping is consistent, else a description of the first violation found:
  // every block is free xor referenced, the free list holds no block twice, free + used == total,
  // and each block's count covers at least the tables that list it (a count may exceed them by
  // external shares).
  [[nodiscard]] std::string check_invariants() const;

 private:
  void check_block(BlockId block, const char* what) const;

  struct Table {
    std::vector<BlockId> blocks;
    int reserved_tokens = -1;  // -1: paged, grows freely; else the cap set by reserve()
  };

  int m_block_size;
  std::vector<int> m_ref_counts;  // per physical block; 0 = free
  std::vector<BlockId> m_free;    // stack: the last freed block is reused first (so a stale
                                  // reference to it shows up at once in tests)
  std::unordered_map<SequenceId, Table> m_tables;
};

}  // namespace aisp::serving
