// ch04:allreduce — the bus-bandwidth arithmetic, the chunking and the ring schedule of step 02, checked on
// the host: the schedule is run in many random orders that its waits allow, each chunk's value being the
// set of ranks summed into it, so that a missing wait shows up as a chunk counted twice or left short.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "chapters/ch04_multi_gpu/allreduce/reference.hpp"
#include "chapters/ch04_multi_gpu/allreduce/ring.hpp"
#include "chapters/ch04_multi_gpu/common/bus_bandwidth.hpp"
#include "chapters/ch04_multi_gpu/common/sum_order_gap.hpp"

namespace aisp::ch04::allreduce {
namespace {

TEST(Ch04BusBandwidth, NcclTestsFactors) {
  // nccl-tests doc/PERFORMANCE.md: all-reduce 2(n-1)/n; all-gather, reduce-scatter, all-to-all (n-1)/n;
  // broadcast, reduce, send/recv 1.
  EXPECT_DOUBLE_EQ(bus_factor(Collective::all_reduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::all_reduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::all_reduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::all_reduce, 1), 0.0);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::all_gather, 8), 0.875);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::reduce_scatter, 2), 0.5);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::all_to_all, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::broadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::send_recv, 2), 1.0);
  // 1 GiB all-reduced over 8 GPUs in 10 ms: algbw 107.4 GB/s, busbw 1.75x that.
  const double s = 1024.0 * 1024 * 1024;
  EXPECT_NEAR(bus_bytes(Collective::all_reduce, 8, s) / 10e-3 / 1e9, 1.75 * s / 10e-3 / 1e9, 1e-9);
  EXPECT_NEAR(s / 10e-3 / 1e9, 107.374, 1e-3);
}

TEST(Ch04AllreduceRing, ChunksTileTheBufferOn16ByteBoundaries) {
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{64}, (std::size_t{1} << 16) + 3,
                        std::size_t{1000003}}) {
    for (int ranks = 1; ranks <= 8; ++ranks) {
      std::size_t next = 0;
      for (int c = 0; c < ranks; ++c) {
        const Range r = chunk_range(n, ranks, c);
        EXPECT_EQ(r.begin, next) << n << " " << ranks << " " << c;
        EXPECT_LE(r.begin, r.end);
        EXPECT_EQ(r.begin % 4, 0u);
        if (c + 1 < ranks) {
          EXPECT_EQ(r.end % 4, 0u);
        }
        next = r.end;
      }
      EXPECT_EQ(next, n) << n << " " << ranks;
    }
  }
  // Even chunks where n allows: 2^20 over 8 ranks is 8 x 131072.
  EXPECT_EQ(chunk_range(1 << 20, 8, 3).begin, 3u * 131072);
  EXPECT_EQ(chunk_range(1 << 20, 8, 3).end, 4u * 131072);
}

TEST(Ch04AllreduceRing, EveryRankReadsOnlyItsLeftNeighbourAndEachChunkOncePerPhase) {
  for (int ranks = 2; ranks <= 8; ++ranks) {
    for (int r = 0; r < ranks; ++r) {
      const auto rank_chunk = [](int rank) { return rank; };
      std::vector<int> rs(ranks, 0), ag(ranks, 0);
      for (int op = 0; op < ops_per_rank(ranks); ++op) {
        const RingOp o = ring_op(r, op, ranks);
        (o.reduce ? rs : ag)[o.chunk]++;
      }
      for (int c = 0; c < ranks; ++c) {
        // Reduce-scatter writes every chunk but chunk r once (R - 1 ops); the all-gather receives every
        // chunk but the one the rank owns.
        EXPECT_EQ(rs[c], c == rank_chunk(r) ? 0 : 1) << ranks << " " << r << " " << c;
        EXPECT_EQ(ag[c], c == owned_chunk(r, ranks) ? 0 : 1) << ranks << " " << r << " " << c;
      }
    }
  }
}

// The state of the simulated ring: out[rank][chunk] and in[rank][chunk] as sets of ranks (bit masks).
struct Sim {
  int ranks;
  std::vector<std::vector<std::uint32_t>> in, out;
  std::string error;
};

// Runs op (rank, op) on the simulated buffers with ring_op's semantics.
void run_op(Sim& s, int rank, int op) {
  const RingOp o = ring_op(rank, op, s.ranks);
  const int left = left_of(rank, s.ranks);
  const std::uint32_t src = o.reads_left_input ? s.in[left][o.chunk] : s.out[left][o.chunk];
  if (o.reduce) {
    if (src & s.in[rank][o.chunk]) s.error = "rank " + std::to_string(rank) + " counted itself twice";
    s.out[rank][o.chunk] = src | s.in[rank][o.chunk];
  } else {
    s.out[rank][o.chunk] = src;
  }
}

using WaitsFn = std::function<std::vector<Wait>(int, int, int)>;

// Runs the whole schedule in one random order its waits (and each rank's stream order) allow; returns ""
// when every rank ends with every chunk summed over all ranks exactly once.
std::string run_in_random_order(int ranks, const WaitsFn& waits, std::mt19937& rng) {
  Sim s{ranks, {}, {}, {}};
  s.in.assign(ranks, std::vector<std::uint32_t>(ranks));
  s.out.assign(ranks, std::vector<std::uint32_t>(ranks, 0));
  for (int r = 0; r < ranks; ++r) {
    for (int c = 0; c < ranks; ++c) s.in[r][c] = 1u << r;
  }
  std::vector<int> next(ranks, 0);  // each rank's next op
  const int per_rank = ops_per_rank(ranks);
  for (int done = 0; done < ranks * per_rank; ++done) {
    std::vector<int> ready;
    for (int r = 0; r < ranks; ++r) {
      if (next[r] == per_rank) continue;
      bool ok = true;
      for (const Wait& w : waits(r, next[r], ranks)) ok = ok && next[w.rank] > w.op;
      if (ok) ready.push_back(r);
    }
    if (ready.empty()) return "deadlock";
    const int r = ready[std::uniform_int_distribution<std::size_t>(0, ready.size() - 1)(rng)];
    run_op(s, r, next[r]++);
    if (!s.error.empty()) return s.error;
  }
  const std::uint32_t all = (1u << ranks) - 1u;  // ranks <= 8
  for (int r = 0; r < ranks; ++r) {
    for (int c = 0; c < ranks; ++c) {
      if (s.out[r][c] != all) return "rank " + std::to_string(r) + " chunk " + std::to_string(c) + " incomplete";
    }
  }
  return {};
}

TEST(Ch04AllreduceRing, TheScheduleIsAnAllReduceInEveryOrderItsWaitsAllow) {
  std::mt19937 rng(12345);
  for (int ranks = 2; ranks <= 8; ++ranks) {
    for (int trial = 0; trial < 2000; ++trial) {
      ASSERT_EQ(run_in_random_order(ranks, ring_waits, rng), "") << ranks << " ranks, trial " << trial;
    }
  }
}

TEST(Ch04AllreduceRing, WithoutItsWaitsTheScheduleGoesWrong) {
  // Without the read-after-write waits a rank reads a chunk its left neighbour has not written yet; the
  // random orders find it at every ring size (so the test above is not vacuous).
  const WaitsFn none = [](int, int, int) { return std::vector<Wait>{}; };
  std::mt19937 rng(6789);
  for (int ranks = 2; ranks <= 8; ++ranks) {
    bool broke = false;
    for (int trial = 0; trial < 2000 && !broke; ++trial) broke = !run_in_random_order(ranks, none, rng).empty();
    EXPECT_TRUE(broke) << "without waits, " << ranks << " ranks never went wrong";
  }
}

TEST(Ch04AllreduceReference, SumsInRankOrder) {
  const std::vector<std::vector<float>> in = {{1.0f, 0.5f, -2.0f}, {2.0f, 0.25f, 2.0f}, {4.0f, 1e-8f, 3.0f}};
  const std::vector<float> out = host_allreduce(in);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0], 7.0f);
  EXPECT_EQ(out[1], (0.5f + 0.25f) + 1e-8f);
  EXPECT_EQ(out[2], 3.0f);
  EXPECT_TRUE(host_allreduce({}).empty());
}

TEST(Ch04AllreduceReference, ToleranceCoversAnyOrderOfTheSum) {
  // Inputs in [-1, 1): partial sums stay below R in magnitude, each addition rounds by at most half an
  // ulp of R, and two orders differ by at most the sum of both error bounds.
  for (int ranks = 2; ranks <= 8; ++ranks) {
    const double atol = allreduce_atol(ranks);
    EXPECT_LE(worst_sum_order_gap(ranks, 1.0f), atol) << ranks;
    EXPECT_GT(atol, 0.0);
  }
  EXPECT_DOUBLE_EQ(allreduce_atol(1), 0.0);
}

}  // namespace
}  // namespace aisp::ch04::allreduce
