// ch04:collectives — the host references and the tolerance. Host-only: the CPU tests and
// check_reference_on_host use them; the device reference (device_reference.cu) computes the same
// elements, reduce-scatter's sums in the same (rank) order. Written from the definitions in layout.hpp's
// header, not from its copy list (receives()), so that the CPU tests can check one against the other.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "chapters/ch04_multi_gpu/collectives/layout.hpp"
#include "chapters/ch04_multi_gpu/common/sum_tolerance.hpp"

namespace aisp::ch04::collectives {

using Buffers = std::vector<std::vector<float>>;  // [rank][element]

// out_r = in_0 | in_1 | ... | in_{R-1} (every rank's chunk c = |in_j|, in rank order).
inline Buffers host_all_gather(const Buffers& in) {
  std::vector<float> gathered;
  for (const auto& chunk : in) gathered.insert(gathered.end(), chunk.begin(), chunk.end());
  return Buffers(in.size(), gathered);
}

// out_r[i] = in_0[r c + i] + in_1[r c + i] + ... added left to right in fp32 (rank order); c = |in_0| / R.
inline Buffers host_reduce_scatter(const Buffers& in) {
  const std::size_t ranks = in.size();
  if (ranks == 0) return {};
  const std::size_t c = in[0].size() / ranks;
  Buffers out(ranks, std::vector<float>(c));
  for (std::size_t r = 0; r < ranks; ++r) {
    for (std::size_t i = 0; i < c; ++i) {
      float sum = in[0][r * c + i];
      for (std::size_t j = 1; j < ranks; ++j) sum += in[j][r * c + i];
      out[r][i] = sum;
    }
  }
  return out;
}

// out_r = in_root.
inline Buffers host_broadcast(const Buffers& in, std::size_t root = 0) {
  if (in.empty()) return {};
  return Buffers(in.size(), in.at(root));
}

// out_r[j c + i] = in_j[r c + i]: rank r's chunk j goes to rank j's chunk r (a transpose of the chunks);
// c = |in_0| / R.
inline Buffers host_all_to_all(const Buffers& in) {
  const std::size_t ranks = in.size();
  if (ranks == 0) return {};
  const std::size_t c = in[0].size() / ranks;
  Buffers out(ranks, std::vector<float>(ranks * c));
  for (std::size_t r = 0; r < ranks; ++r) {
    for (std::size_t j = 0; j < ranks; ++j) {
      for (std::size_t i = 0; i < c; ++i) out[r][j * c + i] = in[j][r * c + i];
    }
  }
  return out;
}

// out_r = in_{r-1}: every rank sends its buffer to rank + 1 (mod R).
inline Buffers host_send_recv(const Buffers& in) {
  const std::size_t ranks = in.size();
  Buffers out(ranks);
  for (std::size_t r = 0; r < ranks; ++r) out[r] = in[(r + ranks - 1) % ranks];
  return out;
}

inline Buffers host_collective(Collective op, const Buffers& in) {
  switch (op) {
    case Collective::all_gather: return host_all_gather(in);
    case Collective::reduce_scatter: return host_reduce_scatter(in);
    case Collective::broadcast: return host_broadcast(in);
    case Collective::all_to_all: return host_all_to_all(in);
    case Collective::send_recv: return host_send_recv(in);
    case Collective::all_reduce:
    case Collective::reduce:
      break;
  }
  throw std::invalid_argument("host_collective: " + std::string(op_name(op)) + " is not one of ch04:collectives' ops");
}

// Data movement is exact: a copy that changes a bit is wrong. Reduce-scatter's sums may be added in any
// order (NCCL's ring does not add in rank order): fp32_sum_atol's bound for R terms in [-1, 1).
inline double collective_atol(Collective op, int ranks) {
  return op == Collective::reduce_scatter ? fp32_sum_atol(ranks) : 0.0;
}

}  // namespace aisp::ch04::collectives
