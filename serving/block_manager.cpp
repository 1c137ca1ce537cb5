#include "serving/block_manager.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "core/base/error.hpp"

namespace aisp::serving {

BlockManager::BlockManager(int num_blocks, int block_size, bool prefix_cache)
    : m_block_size(block_size) {
  if (num_blocks <= 0 || block_size <= 0) {
    throw UsageError(
        fmt::format("block manager: num_blocks ({}) and block_size ({}) must be positive",
                    num_blocks, block_size));
  }
  m_ref_counts.assign(static_cast<std::size_t>(num_blocks), 0);
  m_free.reserve(static_cast<std::size_t>(num_blocks));
  // Pushed in reverse so that the first allocations hand out 0, 1, 2...: easier to read in a dump.
  for (int b = num_blocks - 1; b >= 0; --b) m_free.push_back(b);
  if (prefix_cache) m_cache.emplace(num_blocks, block_size);
}

int BlockManager::blocks_for_tokens(int tokens) const {
  if (tokens <= 0) return 0;
  return (tokens + m_block_size - 1) / m_block_size;
}

void BlockManager::check_block(BlockId block, const char* what) const {
  if (block < 0 || block >= num_blocks()) {
    throw std::logic_error(fmt::format("block manager: {} of block {} outside the pool of {}", what,
                                       block, num_blocks()));
  }
  if (m_ref_counts[static_cast<std::size_t>(block)] == 0) {
    throw std::logic_error(fmt::format("block manager: {} of free block {}", what, block));
  }
}

std::optional<BlockId> BlockManager::allocate() {
  BlockId block = -1;
  if (!m_free.empty()) {
    // Plain free blocks first: evicting a cached one throws away K/V a later prompt might reuse.
    block = m_free.back();
    m_free.pop_back();
  } else if (auto evicted = m_cache ? m_cache->evict() : std::nullopt) {
    block = *evicted;
  } else {
    return std::nullopt;
  }
  m_ref_counts[static_cast<std::size_t>(block)] = 1;
  return block;
}

void BlockManager::share(BlockId block) {
  if (m_cache && block >= 0 && block < num_blocks() && m_cache->is_evictable(block)) {
    m_cache->make_unevictable(block);
    m_ref_counts[static_cast<std::size_t>(block)] = 1;
    return;
  }
  check_block(block, "share");
  ++m_ref_counts[static_cast<std::size_t>(block)];
}

void BlockManager::release(BlockId block) {
  check_block(block, "release");
  if (--m_ref_counts[static_cast<std::size_t>(block)] > 0) return;
  if (m_cache && m_cache->is_cached(block)) {
    m_cache->make_evictable(block);  // stays indexed: the most recently released
  } else {
    m_free.push_back(block);
  }
}

int BlockManager::ref_count(BlockId block) const {
  if (block < 0 || block >= num_blocks()) {
    throw std::logic_error(fmt::format("block manager: block {} outside the pool", block));
  }
  return m_ref_counts[static_cast<std::size_t>(block)];
}

bool BlockManager::grow_to(SequenceId seq, int tokens) {
  Table& table = m_tables[seq];
  if (table.reserved_tokens >= 0 && tokens > table.reserved_tokens) {
    throw std::logic_error(
        fmt::format("block manager: sequence {} grows to {} tokens past its "
                    "reservation of {}",
                    seq, tokens, table.reserved_tokens));
  }
  const int missing = blocks_for_tokens(tokens) - static_cast<int>(table.blocks.size());
  if (missing <= 0) return true;
  if (!can_allocate(missing)) {
    if (table.blocks.empty())
      m_tables.erase(seq);  // leave no empty table behind a failed first grow
    return false;
  }
  for (int i = 0; i < missing; ++i) table.blocks.push_back(*allocate());
  return true;
}

bool BlockManager::reserve(SequenceId seq, int context_tokens) {
  if (has_sequence(seq)) {
    throw std::logic_error(
        fmt::format("block manager: reserve for sequence {} which holds blocks", seq));
  }
  const int needed = blocks_for_tokens(context_tokens);
  if (!can_allocate(needed)) return false;
  Table& table = m_tables[seq];
  for (int i = 0; i < needed; ++i) table.blocks.push_back(*allocate());
  table.reserved_tokens = context_tokens;
  return true;
}

void BlockManager::free_sequence(SequenceId seq) {
  auto it = m_tables.find(seq);
  if (it == m_tables.end()) return;
  for (auto b = it->second.blocks.rbegin(); b != it->second.blocks.rend(); ++b) release(*b);
  m_tables.erase(it);
}

int BlockManager::match_prefix(SequenceId seq, const std::vector<TokenId>& tokens, int max_tokens) {
  if (!m_cache) return 0;
  if (has_sequence(seq)) {
    throw std::logic_error(
        fmt::format("block manager: match_prefix for sequence {} which holds blocks", seq));
  }
  const int limit = std::min(max_tokens, static_cast<int>(tokens.size()));
  Table table;
  for (int start = 0; start + m_block_size <= limit; start += m_block_size) {
    const auto hit = m_cache->find(table.link, tokens.data() + start);
    if (!hit) break;
    share(hit->block);
    table.blocks.push_back(hit->block);
    table.link = hit->link;
  }
  const int matched = static_cast<int>(table.blocks.size());
  if (matched == 0) return 0;
  table.registered = matched;
  m_tables.emplace(seq, std::move(table));
  return matched * m_block_size;
}

void BlockManager::register_blocks(SequenceId seq, const std::vector<TokenId>& tokens,
                                   int computed) {
  if (!m_cache) return;
  auto it = m_tables.find(seq);
  if (it == m_tables.end()) return;
  Table& table = it->second;
  const int full = std::min({computed, static_cast<int>(tokens.size()),
                             static_cast<int>(table.blocks.size()) * m_block_size}) /
                   m_block_size;
  for (; table.registered < full; ++table.registered) {
    const BlockId block = table.blocks[static_cast<std::size_t>(table.registered)];
    const auto r = m_cache->insert(
        table.link, tokens.data() + static_cast<std::ptrdiff_t>(table.registered) * m_block_size,
        block);
    // A replaced entry whose block nobody references goes back to the plain free list.
    if (r.dropped >= 0 && r.dropped_evictable) m_free.push_back(r.dropped);
    table.link = r.link;
  }
}

const std::vector<BlockId>& BlockManager::block_table(SequenceId seq) const {
  static const std::vector<BlockId> empty;
  auto it = m_tables.find(seq);
  return it == m_tables.end() ? empty : it->second.blocks;
}

std::string BlockManager::check_invariants() const {
  const auto n = static_cast<std::size_t>(num_blocks());
  std::vector<int> in_free(n, 0);
  for (BlockId b : m_free) {
    if (b < 0 || static_cast<std::size_t>(b) >= n)
      return fmt::format("free list holds block {}", b);
    if (++in_free[static_cast<std::size_t>(b)] > 1)
      return fmt::format("block {} twice in the free list", b);
  }
  std::vector<int> table_refs(n, 0);
  for (const auto& [seq, table] : m_tables) {
    for (BlockId b : table.blocks) {
      if (b < 0 || static_cast<std::size_t>(b) >= n) {
        return fmt::format("sequence {} lists block {} outside the pool", seq, b);
      }
      ++table_refs[static_cast<std::size_t>(b)];
    }
    if (table.reserved_tokens >= 0 &&
        static_cast<int>(table.blocks.size()) != blocks_for_tokens(table.reserved_tokens)) {
      return fmt::format("sequence {} holds {} blocks for a reservation of {} tokens", seq,
                         table.blocks.size(), table.reserved_tokens);
    }
  }
  if (m_cache) {
    if (std::string why = m_cache->check_invariants(); !why.empty()) return "prefix cache: " + why;
  }
  int used = 0;
  for (std::size_t b = 0; b < n; ++b) {
    const int count = m_ref_counts[b];
    const auto block = static_cast<BlockId>(b);
    const bool cached = m_cache && m_cache->is_cached(block);
    const bool evictable = m_cache && m_cache->is_evictable(block);
    if (count < 0) return fmt::format("block {} has count {}", b, count);
    if (in_free[b] == 1 && cached) return fmt::format("cached block {} is in the free list", b);
    if ((count == 0) != (in_free[b] == 1 || evictable)) {
      return fmt::format("block {} has count {} but is {}free{}", b, count,
                         in_free[b] || evictable ? "" : "not ", evictable ? " (evictable)" : "");
    }
    if (count < table_refs[b]) {
      return fmt::format("block {} has count {} but {} tables list it", b, count, table_refs[b]);
    }
    if (count > 0) ++used;
  }
  if (used + num_free() != num_blocks()) {
    return fmt::format("{} used + {} free != {} blocks", used, num_free(), num_blocks());
  }
  return {};
}

}  // namespace aisp::serving
