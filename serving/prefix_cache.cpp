#include "serving/prefix_cache.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "core/base/error.hpp"

namespace aisp::serving {

namespace {

// SplitMix64's finalizer: every input bit reaches every output bit, so a chain of them keys the
// index well. Its quality only matters for the map's balance; correctness rests on verification.
std::uint64_t mix(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

}  // namespace

BlockHash hash_block(BlockHash parent, const TokenId* tokens, int count) {
  std::uint64_t h = mix(parent + 0x9e3779b97f4a7c15ULL);
  for (int i = 0; i < count; ++i) h = mix(h ^ static_cast<std::uint32_t>(tokens[i]));
  return h;
}

PrefixCache::PrefixCache(int num_blocks, int block_size) : m_block_size(block_size) {
  if (num_blocks <= 0 || block_size <= 0) {
    throw UsageError(
        fmt::format("prefix cache: num_blocks ({}) and block_size ({}) must be positive",
                    num_blocks, block_size));
  }
  m_entries.resize(static_cast<std::size_t>(num_blocks));
  m_tokens.assign(static_cast<std::size_t>(num_blocks) * static_cast<std::size_t>(block_size), -1);
}

void PrefixCache::check_block(BlockId block, const char* what) const {
  if (block < 0 || static_cast<std::size_t>(block) >= m_entries.size()) {
    throw std::logic_error(fmt::format("prefix cache: {} of block {} outside the pool of {}", what,
                                       block, m_entries.size()));
  }
}

bool PrefixCache::same_tokens(BlockId block, const TokenId* tokens) const {
  const auto at = m_tokens.begin() + static_cast<std::ptrdiff_t>(block) * m_block_size;
  return std::equal(at, at + m_block_size, tokens);
}

std::optional<PrefixCache::Hit> PrefixCache::find(PrefixLink parent, const TokenId* tokens) const {
  const BlockHash h = hash_block(parent.hash, tokens, m_block_size);
  auto it = m_by_hash.find(h);
  if (it == m_by_hash.end()) return std::nullopt;
  const Entry& e = m_entries[static_cast<std::size_t>(it->second)];
  if (e.parent_serial != parent.serial || !same_tokens(it->second, tokens)) return std::nullopt;
  return Hit{it->second, PrefixLink{h, e.serial}};
}

PrefixCache::Inserted PrefixCache::insert(PrefixLink parent, const TokenId* tokens, BlockId block) {
  check_block(block, "insert");
  if (m_entries[static_cast<std::size_t>(block)].cached) {
    throw std::logic_error(fmt::format("prefix cache: block {} is indexed already", block));
  }
  Inserted out;
  const BlockHash h = hash_block(parent.hash, tokens, m_block_size);
  if (auto it = m_by_hash.find(h); it != m_by_hash.end()) {
    const Entry& old = m_entries[static_cast<std::size_t>(it->second)];
    if (old.parent_serial == parent.serial && same_tokens(it->second, tokens)) {
      out.link = {h, old.serial};
      return out;
    }
    // Stale (its parent entry is gone, so nothing can reach it) or a true collision: the newcomer
    // is the one a lookup can reach, so it takes the key.
    out.dropped = it->second;
    out.dropped_evictable = old.in_lru;
    unindex(it->second);
  }
  Entry& e = m_entries[static_cast<std::size_t>(block)];
  e.cached = true;
  e.in_lru = false;
  e.hash = h;
  e.serial = m_next_serial++;
  e.parent_serial = parent.serial;
  std::copy(tokens, tokens + m_block_size,
            m_tokens.begin() + static_cast<std::ptrdiff_t>(block) * m_block_size);
  m_by_hash.emplace(h, block);
  out.link = {h, e.serial};
  out.added = true;
  return out;
}

void PrefixCache::unindex(BlockId block) {
  Entry& e = m_entries[static_cast<std::size_t>(block)];
  if (e.in_lru) m_lru.erase(e.lru_pos);
  m_by_hash.erase(e.hash);
  e = Entry{};
}

bool PrefixCache::is_cached(BlockId block) const {
  check_block(block, "is_cached");
  return m_entries[static_cast<std::size_t>(block)].cached;
}

bool PrefixCache::is_evictable(BlockId block) const {
  check_block(block, "is_evictable");
  return m_entries[static_cast<std::size_t>(block)].in_lru;
}

void PrefixCache::make_evictable(BlockId block) {
  check_block(block, "make_evictable");
  Entry& e = m_entries[static_cast<std::size_t>(block)];
  if (!e.cached || e.in_lru) {
    throw std::logic_error(fmt::format("prefix cache: make_evictable of block {} ({})", block,
                                       e.cached ? "evictable already" : "not cached"));
  }
  e.in_lru = true;
  e.lru_pos = m_lru.insert(m_lru.end(), block);
}

void PrefixCache::make_unevictable(BlockId block) {
  check_block(block, "make_unevictable");
  Entry& e = m_entries[static_cast<std::size_t>(block)];
  if (!e.in_lru) {
    throw std::logic_error(fmt::format("prefix cache: block {} is not evictable", block));
  }
  m_lru.erase(e.lru_pos);
  e.in_lru = false;
}

std::optional<BlockId> PrefixCache::evict() {
  if (m_lru.empty()) return std::nullopt;
  const BlockId block = m_lru.front();
  unindex(block);
  ++m_evictions;
  return block;
}

std::string PrefixCache::check_invariants() const {
  std::size_t cached = 0;
  std::size_t in_lru = 0;
  for (std::size_t b = 0; b < m_entries.size(); ++b) {
    const Entry& e = m_entries[b];
    if (!e.cached) {
      if (e.in_lru) return fmt::format("block {} is evictable but not cached", b);
      continue;
    }
    ++cached;
    in_lru += e.in_lru ? 1 : 0;
    auto it = m_by_hash.find(e.hash);
    if (it == m_by_hash.end() || static_cast<std::size_t>(it->second) != b) {
      return fmt::format("cached block {} is not indexed under its hash", b);
    }
    if (e.serial == 0 || e.serial >= m_next_serial || e.parent_serial >= e.serial) {
      return fmt::format("block {} has serial {} after parent {}", b, e.serial, e.parent_serial);
    }
    if (e.in_lru && *e.lru_pos != static_cast<BlockId>(b)) {
      return fmt::format("block {}'s LRU position holds block {}", b, *e.lru_pos);
    }
  }
  if (cached != m_by_hash.size()) {
    return fmt::format("{} cached blocks but {} index entries", cached, m_by_hash.size());
  }
  if (in_lru != m_lru.size()) {
    return fmt::format("{} blocks marked evictable but {} in the LRU list", in_lru, m_lru.size());
  }
  return {};
}

}  // namespace aisp::serving
