// ch13:allocator — the caching allocator of step 02, as policy only: size classes, a free list per class,
// reuse, and the accounting of requested, handed-out and reserved bytes. Plain C++: where the memory comes
// from is a BackingAllocator (cudaMalloc/cudaFree in 02_caching_allocator.cu, a fake in the CPU tests), so
// every rule here is tested without a GPU.
//
// The design is the core of PyTorch's CUDA caching allocator without its refinements: a freed block is not
// returned to the driver but kept on the free list of its size class and handed to the next request of
// that class. No splitting of large blocks and no merging of neighbours (PyTorch does both): a freed block
// serves only requests of its own class, which keeps the code short and the steady state provable — a
// step that repeats the previous step's sequence of sizes never needs new memory — and costs memory when
// the sizes freed differ from the sizes requested next (README, "Peak memory").
//
// Not thread-safe and not stream-aware: one host thread, one CUDA stream. Reusing a block on the host as
// soon as it is freed is safe only because the stream runs its work in order: the new owner's kernels are
// queued after the old owner's, so they cannot start before the old ones are done with the bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <new>
#include <stdexcept>
#include <unordered_map>
#include <vector>

namespace aisp::ch13::allocator {

// Where the cache gets memory it does not have. allocate returns nullptr when the memory is exhausted
// (then the cache gives back what it holds and asks once more); other failures throw.
class BackingAllocator {
 public:
  virtual ~BackingAllocator() = default;
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void release(void* ptr, std::size_t bytes) = 0;
};

// Byte counts of the cache's life. "requested" is what callers asked for, "allocated" the size-class
// bytes handed out (requested plus rounding), "reserved" what the cache holds from the backing allocator
// (allocated plus the free lists). peak_* are high-water marks.
struct CacheStats {
  std::size_t requested_bytes = 0, peak_requested_bytes = 0;
  std::size_t allocated_bytes = 0, peak_allocated_bytes = 0;
  std::size_t reserved_bytes = 0, peak_reserved_bytes = 0;
  std::uint64_t allocations = 0;          // requests served
  std::uint64_t cache_hits = 0;           // of those, served from a free list
  std::uint64_t backing_allocations = 0;  // blocks obtained from the backing allocator
  std::uint64_t backing_releases = 0;     // blocks given back to it
};

inline constexpr std::size_t k_min_block = 512;                   // the smallest class; also the alignment
inline constexpr std::size_t k_small_limit = std::size_t{1} << 20;  // up to 1 MiB: classes 512 B apart
inline constexpr std::size_t k_divisions = 4;                     // above: 4 classes per power of two

// The size class of a request: a multiple of 512 B up to 1 MiB (at most 511 B of rounding), and above
// 1 MiB one of 4 classes per power of two, 2^k * {1.25, 1.5, 1.75, 2} (under 25% of rounding; PyTorch's
// "roundup_power2_divisions" option). Plain powers of two would waste up to half of each large block; 512 B
// steps at large sizes would make every large tensor its own class, and nothing could be shared.
inline std::size_t size_class(std::size_t bytes) {
  if (bytes <= k_min_block) return k_min_block;
  if (bytes <= k_small_limit) return (bytes + k_min_block - 1) / k_min_block * k_min_block;
  std::size_t power = k_small_limit;  // the largest power of two below bytes
  while (power * 2 < bytes) power *= 2;
  const std::size_t step = power / k_divisions;
  return (bytes + step - 1) / step * step;
}

class CachingAllocator {
 public:
  explicit CachingAllocator(BackingAllocator& backing) : m_backing(backing) {}
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;
  // Gives every block back, the ones still handed out included: the owner is done with all of them.
  ~CachingAllocator() {
    release_cached();
    for (const auto& [ptr, block] : m_live) m_backing.release(ptr, block.size_class);
  }

  void* allocate(std::size_t bytes) {
    const std::size_t cls = size_class(bytes);
    void* ptr = nullptr;
    auto it = m_free.find(cls);
    if (it != m_free.end() && !it->second.empty()) {
      ptr = it->second.back();  // the most recently freed block: the likeliest to be still in L2
      it->second.pop_back();
      ++m_stats.cache_hits;
    } else {
      ptr = m_backing.allocate(cls);
      if (ptr == nullptr) {  // out of memory: what sits on the free lists of other classes may make room
        release_cached();
        ptr = m_backing.allocate(cls);
        if (ptr == nullptr) throw std::bad_alloc();
      }
      ++m_stats.backing_allocations;
      m_stats.reserved_bytes += cls;
      raise(m_stats.peak_reserved_bytes, m_stats.reserved_bytes);
    }
    m_live.emplace(ptr, Block{cls, bytes});
    ++m_stats.allocations;
    m_stats.requested_bytes += bytes;
    m_stats.allocated_bytes += cls;
    raise(m_stats.peak_requested_bytes, m_stats.requested_bytes);
    raise(m_stats.peak_allocated_bytes, m_stats.allocated_bytes);
    return ptr;
  }

  // The block goes to its class's free list, not to the backing allocator. Freeing a pointer this cache
  // did not hand out (or freeing one twice) is the caller's bug: it throws rather than corrupt the lists.
  void release(void* ptr) {
    const auto it = m_live.find(ptr);
    if (it == m_live.end()) throw std::invalid_argument("caching allocator: release of a block it does not own");
    const Block block = it->second;
    m_live.erase(it);
    m_stats.requested_bytes -= block.requested;
    m_stats.allocated_bytes -= block.size_class;
    m_free[block.size_class].push_back(ptr);
  }

  // Gives every free block back to the backing allocator (PyTorch's torch.cuda.empty_cache()).
  void release_cached() {
    for (auto& [cls, blocks] : m_free) {
      for (void* ptr : blocks) {
        m_backing.release(ptr, cls);
        m_stats.reserved_bytes -= cls;
        ++m_stats.backing_releases;
      }
      blocks.clear();
    }
  }

  const CacheStats& stats() const { return m_stats; }
  std::size_t free_blocks() const {
    std::size_t count = 0;
    for (const auto& [cls, blocks] : m_free) count += blocks.size();
    return count;
  }

 private:
  struct Block {
    std::size_t size_class;
    std::size_t requested;
  };
  static void raise(std::size_t& peak, std::size_t value) {
    if (value > peak) peak = value;
  }

  BackingAllocator& m_backing;
  std::map<std::size_t, std::vector<void*>> m_free;  // size class -> free blocks, most recently freed last
  std::unordered_map<void*, Block> m_live;           // handed-out block -> its class and request
  CacheStats m_stats;
};

}  // namespace aisp::ch13::allocator
