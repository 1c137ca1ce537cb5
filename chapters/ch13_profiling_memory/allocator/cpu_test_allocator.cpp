// ch13:allocator on the host: the caching allocator's policy (size classes, reuse, accounting, giving
// memory back) with a fake backing allocator, and the step's host reference and schedule.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "chapters/ch13_profiling_memory/allocator/caching_allocator.hpp"
#include "chapters/ch13_profiling_memory/allocator/reference.hpp"

namespace {

using namespace aisp::ch13::allocator;

constexpr std::size_t k_mib = std::size_t{1} << 20;

// Hands out distinct fake addresses (never dereferenced) and remembers what is outstanding; with a
// capacity, answers nullptr (out of memory) past it, as cudaMalloc would.
class FakeBacking final : public BackingAllocator {
 public:
  explicit FakeBacking(std::size_t capacity = SIZE_MAX) : m_capacity(capacity) {}
  void* allocate(std::size_t bytes) override {
    if (bytes > m_capacity - m_outstanding) return nullptr;
    void* p = reinterpret_cast<void*>(m_next);
    m_next += bytes + 4096;  // a gap, so that no two blocks touch
    m_blocks[p] = bytes;
    m_outstanding += bytes;
    ++m_calls;
    return p;
  }
  void release(void* ptr, std::size_t bytes) override {
    const auto it = m_blocks.find(ptr);
    ASSERT_NE(it, m_blocks.end()) << "released a block never allocated (or twice)";
    EXPECT_EQ(it->second, bytes) << "released with a different size than allocated";
    m_outstanding -= it->second;
    m_blocks.erase(it);
  }
  std::size_t outstanding() const { return m_outstanding; }
  std::size_t blocks() const { return m_blocks.size(); }
  std::size_t calls() const { return m_calls; }

 private:
  std::size_t m_capacity;
  std::uintptr_t m_next = 1 << 16;
  std::map<void*, std::size_t> m_blocks;
  std::size_t m_outstanding = 0;
  std::size_t m_calls = 0;
};

TEST(AllocatorSizeClass, RoundsTo512BytesUpTo1MiB) {
  EXPECT_EQ(size_class(0), 512u);
  EXPECT_EQ(size_class(1), 512u);
  EXPECT_EQ(size_class(512), 512u);
  EXPECT_EQ(size_class(513), 1024u);
  EXPECT_EQ(size_class(4000), 4096u);
  EXPECT_EQ(size_class(k_mib - 1), k_mib);
  EXPECT_EQ(size_class(k_mib), k_mib);
}

TEST(AllocatorSizeClass, FourClassesPerPowerOfTwoAbove1MiB) {
  EXPECT_EQ(size_class(k_mib + 1), k_mib + k_mib / 4);
  EXPECT_EQ(size_class(3 * k_mib / 2), 3 * k_mib / 2);
  EXPECT_EQ(size_class(2 * k_mib), 2 * k_mib);
  EXPECT_EQ(size_class(2 * k_mib + 1), 2 * k_mib + k_mib / 2);
  EXPECT_EQ(size_class(3 * k_mib + 1), 3 * k_mib + k_mib / 2);
  EXPECT_EQ(size_class((std::size_t{1} << 30) + 1), (std::size_t{5} << 30) / 4);
}

TEST(AllocatorSizeClass, NeverSmallerAndWastesLittle) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) {
    const std::size_t bytes = std::size_t{1} + rng() % (std::size_t{1} << 31);
    const std::size_t cls = size_class(bytes);
    ASSERT_GE(cls, bytes);
    EXPECT_EQ(cls % 512, 0u) << bytes;
    if (bytes > k_mib) {
      EXPECT_LT(static_cast<double>(cls - bytes), 0.25 * static_cast<double>(bytes)) << bytes;
    } else {
      EXPECT_LT(cls - bytes, 512u) << bytes;
    }
    EXPECT_EQ(size_class(cls), cls) << "a class is its own class";
  }
}

TEST(CachingAllocator, ReusesAFreedBlockOfTheSameClass) {
  FakeBacking backing;
  CachingAllocator cache(backing);
  void* a = cache.allocate(1000);
  cache.release(a);
  void* b = cache.allocate(900);  // the same 1024-byte class
  EXPECT_EQ(b, a);
  EXPECT_EQ(backing.calls(), 1u);
  EXPECT_EQ(cache.stats().cache_hits, 1u);
  void* c = cache.allocate(2000);  // another class: new memory even though nothing else is free
  EXPECT_NE(c, a);
  EXPECT_EQ(backing.calls(), 2u);
}

TEST(CachingAllocator, AFreedBlockNeverServesAnotherClass) {
  FakeBacking backing;
  CachingAllocator cache(backing);
  void* big = cache.allocate(4 * k_mib);
  cache.release(big);
  void* small = cache.allocate(512 * 1024);  // would fit in the free 4 MiB block: no splitting
  EXPECT_NE(small, big);
  EXPECT_EQ(backing.calls(), 2u);
  EXPECT_EQ(cache.free_blocks(), 1u);
}

TEST(CachingAllocator, HandsOutTheMostRecentlyFreedBlockFirst) {
  FakeBacking backing;
  CachingAllocator cache(backing);
  void* a = cache.allocate(5000);
  void* b = cache.allocate(5000);
  EXPECT_NE(a, b);
  cache.release(a);
  cache.release(b);
  EXPECT_EQ(cache.allocate(5000), b);
  EXPECT_EQ(cache.allocate(5000), a);
  EXPECT_EQ(backing.calls(), 2u);
}

TEST(CachingAllocator, AccountsRequestedAllocatedAndReservedBytes) {
  FakeBacking backing;
  CachingAllocator cache(backing);
  void* a = cache.allocate(1000);         // class 1024
  void* b = cache.allocate(k_mib + 1);    // class 1.25 MiB
  const CacheStats& s = cache.stats();
  EXPECT_EQ(s.requested_bytes, 1000 + k_mib + 1);
  EXPECT_EQ(s.allocated_bytes, 1024 + k_mib + k_mib / 4);
  EXPECT_EQ(s.reserved_bytes, s.allocated_bytes);
  cache.release(b);
  EXPECT_EQ(s.requested_bytes, 1000u);
  EXPECT_EQ(s.allocated_bytes, 1024u);
  EXPECT_EQ(s.reserved_bytes, 1024 + k_mib + k_mib / 4) << "a freed block stays reserved";
  EXPECT_EQ(s.peak_requested_bytes, 1000 + k_mib + 1);
  EXPECT_EQ(s.peak_allocated_bytes, 1024 + k_mib + k_mib / 4);
  void* c = cache.allocate(600);  // class 1024 again, but a is live: new memory
  EXPECT_EQ(s.reserved_bytes, 2048 + k_mib + k_mib / 4);
  EXPECT_EQ(s.peak_reserved_bytes, s.reserved_bytes);
  EXPECT_EQ(s.peak_allocated_bytes, 1024 + k_mib + k_mib / 4) << "the peak was with b live";
  EXPECT_EQ(backing.outstanding(), s.reserved_bytes);
  cache.release(a);
  cache.release(c);
  EXPECT_EQ(s.requested_bytes, 0u);
  EXPECT_EQ(s.allocated_bytes, 0u);
}

TEST(CachingAllocator, ReleaseCachedGivesEveryFreeBlockBackAndKeepsLiveOnes) {
  FakeBacking backing;
  {
    CachingAllocator cache(backing);
    void* a = cache.allocate(3 * k_mib);
    void* b = cache.allocate(700);
    void* c = cache.allocate(700);
    cache.release(a);
    cache.release(b);
    cache.release_cached();
    EXPECT_EQ(backing.blocks(), 1u);
    EXPECT_EQ(backing.outstanding(), 1024u);
    EXPECT_EQ(cache.stats().reserved_bytes, 1024u);
    EXPECT_EQ(cache.stats().backing_releases, 2u);
    EXPECT_EQ(cache.free_blocks(), 0u);
    (void)c;  // still live: the destructor gives it back
  }
  EXPECT_EQ(backing.blocks(), 0u);
  EXPECT_EQ(backing.outstanding(), 0u);
}

TEST(CachingAllocator, OutOfMemoryGivesTheCacheBackAndRetries) {
  FakeBacking backing(4 * k_mib);
  CachingAllocator cache(backing);
  void* a = cache.allocate(3 * k_mib);
  cache.release(a);  // 3 MiB idle in the cache, 1 MiB left in the backing
  void* b = cache.allocate(2 * k_mib);
  EXPECT_NE(b, nullptr);
  EXPECT_EQ(cache.stats().backing_releases, 1u);
  EXPECT_EQ(backing.outstanding(), 2 * k_mib);
  EXPECT_THROW(cache.allocate(3 * k_mib), std::bad_alloc) << "nothing left to give back";
  EXPECT_EQ(cache.stats().requested_bytes, 2 * k_mib) << "a failed request changes no accounting";
}

TEST(CachingAllocator, RejectsForeignAndDoubleFrees) {
  FakeBacking backing;
  CachingAllocator cache(backing);
  int not_ours = 0;
  EXPECT_THROW(cache.release(&not_ours), std::invalid_argument);
  void* a = cache.allocate(100);
  cache.release(a);
  EXPECT_THROW(cache.release(a), std::invalid_argument);
  EXPECT_EQ(cache.free_blocks(), 1u);
}

// run_step's Ops over the cache: memory only, no arithmetic.
struct CacheOps {
  CachingAllocator& cache;
  float* allocate(std::size_t count) { return static_cast<float*>(cache.allocate(count * sizeof(float))); }
  void release(float* p) { cache.release(p); }
  void forward(std::size_t, float*, const float*, std::size_t) {}
  void backward(std::size_t, float*, const float*, std::size_t, const float*) {}
  void output(const float*, std::size_t) {}
};

TEST(CachingAllocator, TrainingStepsAfterTheFirstNeedNoNewMemory) {
  const StepPlan plan = make_plan(1000, 64, std::size_t{1} << 21);
  FakeBacking backing;
  CachingAllocator cache(backing);
  CacheOps ops{cache};
  run_step(plan, nullptr, ops);
  const CacheStats first = cache.stats();
  EXPECT_EQ(first.requested_bytes, 0u) << "a step frees everything it allocates";
  EXPECT_EQ(first.allocations, 2 * plan.counts.size());
  for (int step = 0; step < 3; ++step) run_step(plan, nullptr, ops);
  const CacheStats& later = cache.stats();
  EXPECT_EQ(later.backing_allocations, first.backing_allocations);
  EXPECT_EQ(later.cache_hits - first.cache_hits, 3 * 2 * plan.counts.size()) << "every later request a hit";
  EXPECT_EQ(later.peak_reserved_bytes, first.peak_reserved_bytes);
  // The accounting against the schedule: what was asked for at the peak, what rounding added, and what the
  // cache holds because a free block serves only its own class.
  EXPECT_EQ(later.peak_requested_bytes, peak_live_bytes(plan));
  EXPECT_GE(later.peak_allocated_bytes, later.peak_requested_bytes);
  EXPECT_LT(static_cast<double>(later.peak_allocated_bytes), 1.25 * static_cast<double>(later.peak_requested_bytes));
  EXPECT_GE(later.peak_reserved_bytes, later.peak_allocated_bytes);
  EXPECT_LE(later.peak_reserved_bytes, 2 * later.peak_allocated_bytes);
  EXPECT_EQ(backing.outstanding(), later.reserved_bytes);
}

TEST(AllocatorPlan, IsDeterministicAndWithinBounds) {
  const StepPlan a = make_plan(10, 200, 1 << 20);
  const StepPlan b = make_plan(10, 200, 1 << 20);
  EXPECT_EQ(a.counts, b.counts);
  EXPECT_NE(make_plan(10, 200, 1 << 20, 99).counts, a.counts);
  std::set<std::size_t> distinct(a.counts.begin(), a.counts.end());
  EXPECT_GT(distinct.size(), 150u) << "varied sizes";
  for (const std::size_t c : a.counts) {
    EXPECT_GE(c, (std::size_t{1} << 20) / 512);
    EXPECT_LE(c, std::size_t{1} << 20);
  }
  EXPECT_EQ(make_plan(10, 3, 1).counts, (std::vector<std::size_t>{1, 1, 1}));
}

TEST(AllocatorSchedule, PeakLiveBytesOfATinyPlan) {
  // Three layers of 10, 20, 30 floats: after the forward pass 60 live; the top gradient (30) makes 90;
  // then act_2 goes, g_1 (20) makes 80, g_2 and act_1 go; g_0 (10) makes 10 + 20 + 10 = 40.
  StepPlan plan;
  plan.n = 5;
  plan.counts = {10, 20, 30};
  EXPECT_EQ(peak_live_bytes(plan), 90 * sizeof(float));
  plan.counts = {30, 20, 10};  // 60, +10 = 70; then g_1: 30 + 20 + 10 + 20 = 80 before the frees
  EXPECT_EQ(peak_live_bytes(plan), 80 * sizeof(float));
}

std::vector<float> uniform_inputs(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = dist(rng);
  return x;
}

TEST(AllocatorReference, LayeredStepAgreesWithThePerElementChain) {
  for (const auto& [n, layers, max_count] : {std::tuple{1003u, 12u, 6000u}, std::tuple{7u, 5u, 40u},
                                             std::tuple{5000u, 30u, 700u}, std::tuple{64u, 1u, 100u}}) {
    const StepPlan plan = make_plan(n, layers, max_count);
    const std::vector<float> x = uniform_inputs(n, n + layers);
    const std::vector<float> out = step_reference(plan, x);
    ASSERT_EQ(out.size(), n);
    for (std::size_t k = 0; k < n; ++k) {
      ASSERT_EQ(out[k], output_element(plan, x, k)) << "n " << n << " layers " << layers << " k " << k;
      ASSERT_LE(std::fabs(out[k]), 1.75f);
    }
  }
}

TEST(AllocatorReference, HandComputedSingleLayer) {
  // One layer of 2 values over x = {0.5, -1, 0.25}: act = 0.5 x[j] + bias_0 (-3/8) = {-0.125, -0.875};
  // g = 1.5 act = {-0.1875, -1.3125}; out[k] = g[k mod 2].
  StepPlan plan;
  plan.n = 3;
  plan.counts = {2};
  const std::vector<float> out = step_reference(plan, {0.5f, -1.0f, 0.25f});
  EXPECT_EQ(out, (std::vector<float>{-0.1875f, -1.3125f, -0.1875f}));
}

TEST(AllocatorReference, OutputDependsOnTheInputAndFreesEverything) {
  const StepPlan plan = make_plan(500, 10, 3000);
  EXPECT_NE(step_reference(plan, uniform_inputs(500, 1)), step_reference(plan, uniform_inputs(500, 2)));
  std::vector<float> out;
  HostStepOps ops(plan, out);
  const std::vector<float> x = uniform_inputs(500, 3);
  run_step(plan, x.data(), ops);
  EXPECT_EQ(ops.live_blocks(), 0u);
}

}  // namespace
