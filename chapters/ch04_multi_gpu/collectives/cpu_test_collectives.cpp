// ch04:collectives — checked on the host: the references on small cases worked out by hand, for 2, 3 and
// 4 ranks; the buffer sizes and bus bytes against nccl-tests' formulas (its GetCollByteCount and GetBw
// per op); the `op` and `ranks` axes' validation; and step 01's copy list (receives()), replayed on host
// buffers, against the references, which are written from the definitions and not from that list.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "chapters/ch04_multi_gpu/collectives/layout.hpp"
#include "chapters/ch04_multi_gpu/collectives/reference.hpp"
#include "chapters/ch04_multi_gpu/common/bus_bandwidth.hpp"
#include "chapters/ch04_multi_gpu/common/ranks.hpp"
#include "chapters/ch04_multi_gpu/common/sum_order_gap.hpp"
#include "core/base/error.hpp"

namespace aisp::ch04::collectives {
namespace {

// Rank r's input: r * 100 + i (distinct everywhere, so a misplaced element cannot go unnoticed).
Buffers numbered(int ranks, std::size_t count) {
  Buffers in(ranks, std::vector<float>(count));
  for (int r = 0; r < ranks; ++r) {
    for (std::size_t i = 0; i < count; ++i) in[r][i] = static_cast<float>(r * 100 + static_cast<int>(i));
  }
  return in;
}

TEST(Ch04CollectivesReference, AllGatherConcatenatesInRankOrder) {
  EXPECT_EQ(host_all_gather({{1, 2}, {3, 4}}), (Buffers{{1, 2, 3, 4}, {1, 2, 3, 4}}));
  EXPECT_EQ(host_all_gather({{1}, {2}, {3}}), (Buffers{{1, 2, 3}, {1, 2, 3}, {1, 2, 3}}));
  const Buffers four = host_all_gather(numbered(4, 2));
  ASSERT_EQ(four.size(), 4u);
  for (const auto& out : four) EXPECT_EQ(out, (std::vector<float>{0, 1, 100, 101, 200, 201, 300, 301}));
}

TEST(Ch04CollectivesReference, ReduceScatterSumsChunkRIntoRankR) {
  // 2 ranks, chunks of 2: rank 0 gets in0[0..2) + in1[0..2), rank 1 the second halves.
  EXPECT_EQ(host_reduce_scatter({{1, 2, 3, 4}, {10, 20, 30, 40}}), (Buffers{{11, 22}, {33, 44}}));
  // 3 ranks, chunks of 1.
  EXPECT_EQ(host_reduce_scatter({{1, 2, 3}, {10, 20, 30}, {100, 200, 300}}), (Buffers{{111}, {222}, {333}}));
  // 4 ranks, chunks of 1: rank r gets 0 + 100 + 200 + 300 + 4 r.
  EXPECT_EQ(host_reduce_scatter(numbered(4, 4)), (Buffers{{600}, {604}, {608}, {612}}));
  // Rank order, in fp32: (1 + 1e-8) + (-1) is 0, where (1 + -1) + 1e-8 would be 1e-8.
  EXPECT_EQ(host_reduce_scatter({{1.0f, 0, 0}, {1e-8f, 0, 0}, {-1.0f, 0, 0}})[0][0], 0.0f);
}

TEST(Ch04CollectivesReference, BroadcastCopiesTheRootEverywhere) {
  EXPECT_EQ(host_broadcast({{1, 2}, {3, 4}}), (Buffers{{1, 2}, {1, 2}}));
  EXPECT_EQ(host_broadcast({{5}, {6}, {7}}), (Buffers{{5}, {5}, {5}}));
  EXPECT_EQ(host_broadcast(numbered(4, 2)), Buffers(4, std::vector<float>{0, 1}));
}

TEST(Ch04CollectivesReference, AllToAllTransposesTheChunks) {
  // Rank r's chunk j goes to rank j's chunk r.
  EXPECT_EQ(host_all_to_all({{1, 2}, {3, 4}}), (Buffers{{1, 3}, {2, 4}}));
  EXPECT_EQ(host_all_to_all({{1, 2, 3}, {4, 5, 6}, {7, 8, 9}}), (Buffers{{1, 4, 7}, {2, 5, 8}, {3, 6, 9}}));
  // 4 ranks, chunks of 2: rank 1 receives chunk 1 (elements 2, 3) of every rank.
  const Buffers four = host_all_to_all(numbered(4, 8));
  EXPECT_EQ(four[1], (std::vector<float>{2, 3, 102, 103, 202, 203, 302, 303}));
  EXPECT_EQ(four[3], (std::vector<float>{6, 7, 106, 107, 206, 207, 306, 307}));
}

TEST(Ch04CollectivesReference, SendRecvShiftsTheRingByOne) {
  EXPECT_EQ(host_send_recv({{1, 2}, {3, 4}}), (Buffers{{3, 4}, {1, 2}}));
  EXPECT_EQ(host_send_recv({{1}, {2}, {3}}), (Buffers{{3}, {1}, {2}}));
  EXPECT_EQ(host_send_recv({{1}, {2}, {3}, {4}}), (Buffers{{4}, {1}, {2}, {3}}));
}

TEST(Ch04CollectivesReference, HostCollectiveDispatchesAndRefusesOtherOps) {
  const Buffers in = numbered(3, 6);
  EXPECT_EQ(host_collective(Collective::all_gather, in), host_all_gather(in));
  EXPECT_EQ(host_collective(Collective::reduce_scatter, in), host_reduce_scatter(in));
  EXPECT_EQ(host_collective(Collective::broadcast, in), host_broadcast(in));
  EXPECT_EQ(host_collective(Collective::all_to_all, in), host_all_to_all(in));
  EXPECT_EQ(host_collective(Collective::send_recv, in), host_send_recv(in));
  EXPECT_THROW(host_collective(Collective::all_reduce, in), std::invalid_argument);
}

TEST(Ch04CollectivesReference, ToleranceIsExactForMovesAndCoversAnyOrderOfTheSum) {
  for (int ranks = 1; ranks <= 8; ++ranks) {
    for (const Collective op : {Collective::all_gather, Collective::broadcast, Collective::all_to_all,
                                Collective::send_recv}) {
      EXPECT_EQ(collective_atol(op, ranks), 0.0) << op_name(op);
    }
  }
  EXPECT_EQ(collective_atol(Collective::reduce_scatter, 1), 0.0);
  EXPECT_DOUBLE_EQ(collective_atol(Collective::reduce_scatter, 2), std::ldexp(1.0, -23));
  EXPECT_DOUBLE_EQ(collective_atol(Collective::reduce_scatter, 8), 7 * std::ldexp(1.0, -21));
  // Inputs in [-1, 1): a forward and a backward fp32 sum differ by no more than the bound.
  for (int ranks = 2; ranks <= 8; ++ranks) {
    EXPECT_LE(worst_sum_order_gap(ranks, 1.0f), collective_atol(Collective::reduce_scatter, ranks)) << ranks;
  }
}

// nccl-tests (src/*.cu, GetCollByteCount and GetBw; doc/PERFORMANCE.md) for `bytes` = its -b, fp32: the
// per-call count, and algbw's numerator S.
struct NcclTests {
  std::size_t paramcount = 0;
  double size_bytes = 0;
};
NcclTests nccl_tests(Collective op, int nranks, std::size_t bytes) {
  const std::size_t count = bytes / 4;
  const std::size_t base = (count / nranks) & ~std::size_t{16 / 4 - 1};
  switch (op) {
    case Collective::all_gather:      // AllGatherGetBw: count * typesize * nranks
    case Collective::reduce_scatter:  // ReduceScatterGetBw: the same
    case Collective::all_to_all:      // AlltoAllGetBw: count * nranks * typesize
      return {base, 4.0 * base * nranks};
    default:  // BroadcastGetBw, SendRecvGetBw: count * typesize
      return {count, 4.0 * count};
  }
}

TEST(Ch04CollectivesLayout, SizesAndBusBytesAreNcclTests) {
  for (const Collective op : k_ops) {
    for (const int ranks : {1, 2, 3, 4, 5, 6, 7, 8}) {
      for (const std::size_t n : {std::size_t{1} << 10, std::size_t{1} << 16, std::size_t{1} << 22,
                                  std::size_t{1} << 28, std::size_t{(1 << 16) + 3}, std::size_t{1000}}) {
        const Layout l = make_layout(op, ranks, n);
        const NcclTests want = nccl_tests(op, ranks, 4 * n);
        const std::string at = std::string(op_name(op)) + " ranks " + std::to_string(ranks) + " n " + std::to_string(n);
        EXPECT_EQ(l.chunk, want.paramcount) << at;
        EXPECT_DOUBLE_EQ(l.size_bytes(), want.size_bytes) << at;
        // busbw = algbw x factor, and the declared bytes are S x factor: bytes / t is busbw.
        EXPECT_DOUBLE_EQ(bus_bytes(op, ranks, l.size_bytes()), want.size_bytes * bus_factor(op, ranks)) << at;
      }
    }
  }
}

TEST(Ch04CollectivesLayout, BuffersPerOp) {
  const std::size_t n = std::size_t{1} << 20;
  const auto check = [&](Collective op, std::size_t chunk, std::size_t in, std::size_t out) {
    const Layout l = make_layout(op, 4, n);
    EXPECT_EQ(l.chunk, chunk) << op_name(op);
    EXPECT_EQ(l.in_count, in) << op_name(op);
    EXPECT_EQ(l.out_count, out) << op_name(op);
  };
  check(Collective::all_gather, n / 4, n / 4, n);      // each sends a quarter, gathers all
  check(Collective::reduce_scatter, n / 4, n, n / 4);  // each sends all, keeps a quarter's sum
  check(Collective::all_to_all, n / 4, n, n);          // a quarter to and from each rank
  check(Collective::broadcast, n, n, n);
  check(Collective::send_recv, n, n, n);
  EXPECT_EQ(staging_count(make_layout(Collective::reduce_scatter, 4, n)), n);
  EXPECT_EQ(staging_count(make_layout(Collective::all_gather, 4, n)), 0u);
}

TEST(Ch04CollectivesLayout, NcclTestsWorkedExamples) {
  const double gib = 1024.0 * 1024 * 1024;
  // All-gather of 1 GiB over 8 ranks in 10 ms: algbw = S / t = 107.37 GB/s, busbw = algbw x 7/8.
  const Layout ag = make_layout(Collective::all_gather, 8, std::size_t{1} << 28);
  EXPECT_DOUBLE_EQ(ag.size_bytes(), gib);
  EXPECT_NEAR(ag.size_bytes() / 10e-3 / 1e9, 107.374, 1e-3);
  EXPECT_NEAR(bus_bytes(ag.op, 8, ag.size_bytes()) / 10e-3 / 1e9, 107.374 * 7 / 8, 1e-3);
  // Broadcast and send/recv: busbw = algbw at any rank count.
  EXPECT_DOUBLE_EQ(bus_bytes(Collective::broadcast, 8, gib), gib);
  EXPECT_DOUBLE_EQ(bus_bytes(Collective::send_recv, 2, gib), gib);
  // Reduce-scatter and all-to-all over 2 ranks: half of S crosses each link.
  EXPECT_DOUBLE_EQ(bus_bytes(Collective::reduce_scatter, 2, gib), gib / 2);
  EXPECT_DOUBLE_EQ(bus_bytes(Collective::all_to_all, 4, gib), gib * 3 / 4);
  // 2^28 over 3 ranks: nccl-tests prints size 1073741808 (3 chunks of 89478484 floats).
  const Layout odd = make_layout(Collective::all_gather, 3, std::size_t{1} << 28);
  EXPECT_EQ(odd.chunk, 89478484u);
  EXPECT_DOUBLE_EQ(odd.size_bytes(), 1073741808.0);
}

TEST(Ch04CollectivesLayout, RefusesEmptyChunksAndForeignOps) {
  EXPECT_THROW(make_layout(Collective::all_gather, 8, 31), UsageError);  // 31 / 8 = 3 floats < 16 bytes
  EXPECT_NO_THROW(make_layout(Collective::all_gather, 8, 32));
  EXPECT_THROW(make_layout(Collective::all_to_all, 2, 7), UsageError);
  EXPECT_NO_THROW(make_layout(Collective::broadcast, 8, 1));  // not chunked: any n >= 1
  EXPECT_THROW(make_layout(Collective::send_recv, 2, 0), UsageError);
  EXPECT_THROW(make_layout(Collective::all_reduce, 2, 1024), UsageError);
  EXPECT_THROW(make_layout(Collective::reduce, 2, 1024), UsageError);
}

TEST(Ch04CollectivesAxes, OpAxisNamesTheFiveCollectives) {
  EXPECT_EQ(op_from_axis(0), Collective::all_gather);
  EXPECT_EQ(op_from_axis(1), Collective::reduce_scatter);
  EXPECT_EQ(op_from_axis(2), Collective::broadcast);
  EXPECT_EQ(op_from_axis(3), Collective::all_to_all);
  EXPECT_EQ(op_from_axis(4), Collective::send_recv);
  EXPECT_THROW(op_from_axis(5), UsageError);
  EXPECT_THROW(op_from_axis(-1), UsageError);
  try {
    op_from_axis(7);
    ADD_FAILURE() << "op 7 accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("3 all-to-all"), std::string::npos) << e.what();  // lists the values
  }
}

TEST(Ch04CollectivesAxes, RanksAxisPicksGpusFromTheHarnessOn) {
  EXPECT_EQ(rank_devices(0, 8, 0, "t"), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(rank_devices(0, 4, 2, "t"), (std::vector<int>{2, 3, 0, 1}));
  EXPECT_EQ(rank_devices(2, 4, 3, "t"), (std::vector<int>{3, 0}));
  EXPECT_EQ(rank_devices(0, 16, 0, "t").size(), 8u);  // one NVLink domain at most
  EXPECT_EQ(rank_devices(0, 1, 0, "t"), (std::vector<int>{0}));  // one GPU: variants SKIPPED, pass allocates
  EXPECT_THROW(rank_devices(1, 8, 0, "t"), UsageError);
  EXPECT_THROW(rank_devices(3, 2, 0, "t"), UsageError);
  EXPECT_THROW(rank_devices(9, 16, 0, "t"), UsageError);
}

// Replays receives() on host buffers as step 01 issues it: copies into the output (or, for
// reduce-scatter, into the staging slots, then the rank-order sum with the rank's own chunk in place).
Buffers replay_copies(const Layout& l, const Buffers& in) {
  Buffers out(l.ranks, std::vector<float>(l.out_count, std::nanf("")));
  for (int r = 0; r < l.ranks; ++r) {
    const bool reduce = l.op == Collective::reduce_scatter;
    std::vector<float> staging(staging_count(l), std::nanf(""));
    std::vector<float>& dst = reduce ? staging : out[r];
    for (const Piece& p : receives(l, r)) {
      EXPECT_LE(p.src_offset + p.count, in[p.src].size());
      EXPECT_LE(p.dst_offset + p.count, dst.size());
      for (std::size_t i = 0; i < p.count; ++i) dst[p.dst_offset + i] = in[p.src][p.src_offset + i];
    }
    if (reduce) {
      for (std::size_t i = 0; i < l.chunk; ++i) {
        const auto term = [&](int j) { return j == r ? in[r][r * l.chunk + i] : staging[j * l.chunk + i]; };
        float sum = term(0);
        for (int j = 1; j < l.ranks; ++j) sum += term(j);
        out[r][i] = sum;
      }
    }
  }
  return out;
}

TEST(Ch04CollectivesPeerCopies, TheCopyListIsTheCollective) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (const Collective op : k_ops) {
    for (int ranks = 1; ranks <= 8; ++ranks) {
      for (const std::size_t n : {std::size_t{64}, std::size_t{1003}}) {
        const Layout l = make_layout(op, ranks, n);
        Buffers in(ranks, std::vector<float>(l.in_count));
        for (auto& b : in) {
          for (auto& x : b) x = u(rng);
        }
        EXPECT_EQ(replay_copies(l, in), host_collective(op, in))
            << op_name(op) << " ranks " << ranks << " n " << n;  // NaN (an unwritten element) never equals
      }
    }
  }
}

TEST(Ch04CollectivesPeerCopies, EachRankReceivesWhatNcclTestsCounts) {
  // Off-rank bytes into each rank: all-gather and all-to-all (R - 1) chunks, reduce-scatter the same,
  // broadcast the whole buffer into every rank but the root, send/recv the whole buffer into every rank.
  const std::size_t n = std::size_t{1} << 12;
  for (const Collective op : k_ops) {
    for (int ranks = 2; ranks <= 8; ++ranks) {
      const Layout l = make_layout(op, ranks, n);
      for (int r = 0; r < ranks; ++r) {
        std::size_t off_rank = 0;
        for (const Piece& p : receives(l, r)) off_rank += p.src == r ? 0 : p.count;
        std::size_t want = 0;
        if (chunked(op)) want = (ranks - 1) * l.chunk;
        if (op == Collective::broadcast) want = r == 0 ? 0 : n;
        if (op == Collective::send_recv) want = n;
        EXPECT_EQ(off_rank, want) << op_name(op) << " ranks " << ranks << " rank " << r;
      }
    }
  }
}

}  // namespace
}  // namespace aisp::ch04::collectives
