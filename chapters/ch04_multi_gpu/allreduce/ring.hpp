// ch04:allreduce — the ring schedule of step 02, as plain functions: which chunk each rank touches at
// each step, where it reads, and which other ranks' steps it must wait for. Host-only, no CUDA: the
// launcher (02_p2p_ring.cu) and the CPU tests (cpu_test_allreduce.cpp, which replays the schedule and
// checks every read against every write under these waits) use the same code.
//
// n elements, R ranks in a ring; rank r's left neighbour is r - 1, its right r + 1 (mod R). The buffer is
// cut into R chunks. Each rank runs 2 (R - 1) operations ("ops") in order on its own stream:
//   reduce-scatter, op k = s in [0, R-1):   out_r[c] = src[c] + in_r[c], c = r - s - 1,
//       src = in_left at s = 0, out_left after (the partial sum the left neighbour made one step before);
//       after it rank r holds the whole sum of chunk r + 1 (its "owned" chunk).
//   all-gather, op k = R - 1 + s, s in [0, R-1): out_r[c] = out_left[c], c = r - s
//       (the left neighbour owned chunk r, then passes on what it received one step before).
// Every rank reads only its left neighbour, over one link: (R - 1) / R of the buffer per phase, the
// bytes nccl-tests' bus bandwidth counts (common/bus_bandwidth.hpp).
#pragma once

#include <cstddef>
#include <vector>

namespace aisp::ch04::allreduce {

constexpr int wrap(int i, int ranks) { return ((i % ranks) + ranks) % ranks; }
constexpr int left_of(int rank, int ranks) { return wrap(rank - 1, ranks); }
constexpr int right_of(int rank, int ranks) { return wrap(rank + 1, ranks); }

// Chunk c of n elements over `ranks` chunks: [begin, end). Cut at multiples of 4 elements so that every
// chunk but the last starts and ends on a 16-byte boundary (float4 loads); the last takes the remainder.
struct Range {
  std::size_t begin = 0;
  std::size_t end = 0;
};
constexpr Range chunk_range(std::size_t n, int ranks, int chunk) {
  const std::size_t quads = n / 4;
  const auto r = static_cast<std::size_t>(ranks);
  const auto c = static_cast<std::size_t>(chunk);
  return {4 * (quads * c / r), chunk + 1 == ranks ? n : 4 * (quads * (c + 1) / r)};
}

constexpr int ops_per_rank(int ranks) { return 2 * (ranks - 1); }

struct RingOp {
  int chunk = 0;
  bool reduce = false;           // reduce-scatter (adds this rank's input) or all-gather (copies)
  bool reads_left_input = false;  // src is the left neighbour's input (the first op), else its output
};

constexpr RingOp ring_op(int rank, int op, int ranks) {
  if (op < ranks - 1) return {.chunk = wrap(rank - op - 1, ranks), .reduce = true, .reads_left_input = op == 0};
  return {.chunk = wrap(rank - (op - (ranks - 1)), ranks), .reduce = false, .reads_left_input = false};
}

// The chunk whose whole sum rank r holds after the reduce-scatter.
constexpr int owned_chunk(int rank, int ranks) { return right_of(rank, ranks); }

// Another rank's op this op must follow (its stream waits for that op's event); ops of the same rank
// follow each other in stream order.
struct Wait {
  int rank = 0;
  int op = 0;
};

// Read after write: each op after the first reads what the left neighbour wrote in its previous op, so
// it waits for that op. The first op waits for nothing but the launch's fork (it reads inputs only).
// No write-after-read wait is needed: rank r's all-gather op R - 1 + s (s >= 1) overwrites chunk r - s,
// which its right neighbour's reduce-scatter op s reads as a partial sum; but that all-gather op waits,
// through the chain of left-neighbour waits around the ring, for op s of rank r + 1 itself (op k of the
// chain runs on rank r + k), and the first all-gather op writes chunk r, which the right neighbour never
// reads as a partial. The CPU tests run the schedule in random orders these waits allow and find no race.
inline std::vector<Wait> ring_waits(int rank, int op, int ranks) {
  if (op == 0) return {};
  return {{left_of(rank, ranks), op - 1}};
}

}  // namespace aisp::ch04::allreduce
