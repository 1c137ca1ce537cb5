// ch04:collectives — what each collective moves, as plain functions: the `op` axis, every rank's buffer
// sizes under nccl-tests' size conventions, and the copies each rank receives. Host-only, no CUDA: the
// problem, step 01 (which issues exactly these copies), the reference kernel and the CPU tests
// (cpu_test_collectives.cpp, which replays the copies on the host against reference.hpp) use the same code.
//
// R ranks; rank r's input in_r and output out_r. With c the count each NCCL call takes (Layout::chunk):
//   all-gather      out_r[j c + i] = in_j[i]                 in: c,    out: R c
//   reduce-scatter  out_r[i] = sum over j of in_j[r c + i]   in: R c,  out: c
//   broadcast       out_r[i] = in_0[i]   (root 0)            in: c,    out: c
//   all-to-all      out_r[j c + i] = in_j[r c + i]           in: R c,  out: R c
//   send/recv       out_r[i] = in_{r-1}[i]   (a ring shift)  in: c,    out: c
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "chapters/ch04_multi_gpu/common/bus_bandwidth.hpp"
#include "core/base/error.hpp"

namespace aisp::ch04::collectives {

// The `op` axis (axes are integers): its values, in order.
inline constexpr std::array<Collective, 5> k_ops = {Collective::all_gather, Collective::reduce_scatter,
                                                    Collective::broadcast, Collective::all_to_all,
                                                    Collective::send_recv};
inline constexpr const char* k_op_help =
    "collective: 0 all-gather, 1 reduce-scatter (sum), 2 broadcast (root 0), 3 all-to-all, 4 send/recv "
    "(rank r to r + 1, a ring shift as nccl-tests' sendrecv_perf)";

constexpr std::string_view op_name(Collective c) {
  switch (c) {
    case Collective::all_reduce: return "all_reduce";
    case Collective::all_gather: return "all_gather";
    case Collective::reduce_scatter: return "reduce_scatter";
    case Collective::broadcast: return "broadcast";
    case Collective::reduce: return "reduce";
    case Collective::all_to_all: return "all_to_all";
    case Collective::send_recv: return "send_recv";
  }
  return "?";
}

// The collective an `op` axis value names; UsageError outside 0..4, listing them.
inline Collective op_from_axis(std::int64_t op) {
  if (op < 0 || op >= static_cast<std::int64_t>(k_ops.size())) {
    throw UsageError("ch04:collectives: unknown op " + std::to_string(op) + "; " + k_op_help);
  }
  return k_ops[static_cast<std::size_t>(op)];
}

// Collectives whose buffers are cut into one chunk per rank.
constexpr bool chunked(Collective c) {
  return c == Collective::all_gather || c == Collective::reduce_scatter || c == Collective::all_to_all;
}

constexpr int left_of(int rank, int ranks) { return (rank + ranks - 1) % ranks; }
constexpr int right_of(int rank, int ranks) { return (rank + 1) % ranks; }

struct Layout {
  Collective op = Collective::all_gather;
  int ranks = 1;
  std::size_t chunk = 0;      // the count each NCCL call takes: per rank (all-gather's send count,
                              // reduce-scatter's receive count), per peer (all-to-all), or the buffer
  std::size_t in_count = 0;   // elements of every rank's input
  std::size_t out_count = 0;  // elements of every rank's output

  // nccl-tests' size S in bytes, whose rate is algbw (common/bus_bandwidth.hpp).
  double size_bytes() const {
    return sizeof(float) * static_cast<double>(chunked(op) ? static_cast<std::size_t>(ranks) * chunk : chunk);
  }
};

// The buffers of `op` over `ranks` ranks at the `n` axis, which is nccl-tests' size (its -b/-e) in fp32
// elements, so that `--axis n=N` runs what `<op>_perf -b 4N -e 4N -d float` runs and prints its busbw:
//   all-gather: the gathered buffer; reduce-scatter: the send buffer; all-to-all: one rank's buffer;
//   broadcast and send/recv: the buffer.
// nccl-tests cuts the chunked ones into R chunks of n / R elements rounded down to 16 bytes (4 fp32;
// GetCollByteCount in src/all_gather.cu, reduce_scatter.cu, alltoall.cu: (count/nranks) & -(16/eltSize))
// and counts S over those R chunks; so does this: n = 2^k over 2, 4 or 8 ranks is used whole, while over
// 3 ranks 2^28 becomes 3 chunks of 89478484 (S = 1073741808 bytes), as nccl-tests prints it. UsageError
// when a chunk would be empty (n < 4 R).
inline Layout make_layout(Collective op, int ranks, std::size_t n) {
  if (!chunked(op) && op != Collective::broadcast && op != Collective::send_recv) {
    throw UsageError("ch04:collectives: " + std::string(op_name(op)) + " is not one of this ladder's ops");
  }
  if (ranks < 1) throw UsageError("ch04:collectives: needs at least one rank");
  if (n == 0) throw UsageError("ch04:collectives: n must be at least 1");
  const auto r = static_cast<std::size_t>(ranks);
  Layout l{.op = op, .ranks = ranks};
  if (!chunked(op)) {
    l.chunk = l.in_count = l.out_count = n;
    return l;
  }
  l.chunk = n / r / 4 * 4;
  if (l.chunk == 0) {
    throw UsageError("ch04:collectives: n=" + std::to_string(n) + " leaves " + std::string(op_name(op)) +
                     " over " + std::to_string(ranks) + " ranks no 16-byte chunk (n >= 4 x ranks = " +
                     std::to_string(4 * r) + ", as nccl-tests rounds)");
  }
  l.in_count = op == Collective::all_gather ? l.chunk : r * l.chunk;
  l.out_count = op == Collective::reduce_scatter ? l.chunk : r * l.chunk;
  return l;
}

// One copy a rank receives: `count` elements from rank `src`'s input at `src_offset` to this rank's
// output at `dst_offset` (for reduce-scatter: to its staging buffer, slot `src`, which a sum then reads).
struct Piece {
  int src = 0;
  std::size_t src_offset = 0;
  std::size_t dst_offset = 0;
  std::size_t count = 0;
};

// The elements of reduce-scatter's staging buffer on each rank (one slot per rank; its own stays unused:
// a rank's own chunk is summed where it lies). 0 for the other ops.
constexpr std::size_t staging_count(const Layout& l) {
  return l.op == Collective::reduce_scatter ? static_cast<std::size_t>(l.ranks) * l.chunk : 0;
}

// What rank `rank` receives, by source rank in order. Its own piece (src == rank) is a local copy; for
// reduce-scatter it is left out (see staging_count).
inline std::vector<Piece> receives(const Layout& l, int rank) {
  const std::size_t c = l.chunk;
  const auto at = [](int r, std::size_t count) { return static_cast<std::size_t>(r) * count; };
  std::vector<Piece> pieces;
  switch (l.op) {
    case Collective::all_gather:
      for (int j = 0; j < l.ranks; ++j) pieces.push_back({j, 0, at(j, c), c});
      break;
    case Collective::reduce_scatter:
      for (int j = 0; j < l.ranks; ++j) {
        if (j != rank) pieces.push_back({j, at(rank, c), at(j, c), c});
      }
      break;
    case Collective::all_to_all:
      for (int j = 0; j < l.ranks; ++j) pieces.push_back({j, at(rank, c), at(j, c), c});
      break;
    case Collective::broadcast:
      pieces.push_back({0, 0, 0, c});
      break;
    case Collective::send_recv:
      pieces.push_back({left_of(rank, l.ranks), 0, 0, c});
      break;
    case Collective::all_reduce:
    case Collective::reduce:
      break;  // not this ladder's (make_layout refuses them)
  }
  return pieces;
}

}  // namespace aisp::ch04::collectives
