// ch04 — nccl-tests' bandwidth definitions (NVIDIA/nccl-tests, doc/PERFORMANCE.md), so that a number
// printed here reads like the one nccl-tests prints for the same collective, size and GPU count.
//
// algbw = S / t, with S the collective's size in bytes as nccl-tests counts it (its GetBw functions):
//   all-reduce, broadcast, reduce: one rank's buffer;  send/recv: the buffer each rank sends;
//   all-gather: the gathered (output) buffer, R x the per-rank count;  reduce-scatter: the send buffer,
//   R x the per-rank output;  all-to-all: one rank's send buffer, R x the per-peer count.
// busbw = algbw x factor(n): the factor turns the algorithm's rate into the rate each GPU's busiest link
// runs at under the optimal (ring) algorithm, a number comparable with the link's own bandwidth whatever n
// is. For all-reduce, 2 (n - 1) / n: a ring reduce-scatter then all-gather moves (n - 1) / n of the buffer
// over each rank's link twice. PERFORMANCE.md's summary lists every factor below but send/recv's, which is
// 1 in nccl-tests' src/sendrecv.cu (SendRecvGetBw: each rank's link carries the whole buffer).
// Host-only, no CUDA: the CPU tests check it.
#pragma once

namespace aisp::ch04 {

enum class Collective { all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all, send_recv };

// busbw / algbw for `ranks` GPUs (ranks >= 1; one rank moves nothing over a link, factor 0 where n - 1
// appears).
constexpr double bus_factor(Collective c, int ranks) {
  const double n = ranks;
  switch (c) {
    case Collective::all_reduce:
      return 2.0 * (n - 1.0) / n;
    case Collective::all_gather:
    case Collective::reduce_scatter:
    case Collective::all_to_all:
      return (n - 1.0) / n;
    case Collective::broadcast:
    case Collective::reduce:
    case Collective::send_recv:
      return 1.0;
  }
  return 0.0;
}

// The bytes whose rate is busbw: what a ladder declares as its work, so that the throughput column is
// the bus bandwidth and "% of ceiling" compares it with the link (bytes = S x factor).
constexpr double bus_bytes(Collective c, int ranks, double size_bytes) { return size_bytes * bus_factor(c, ranks); }

}  // namespace aisp::ch04
