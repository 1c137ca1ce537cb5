// Copies that leave the GPU: host <-> device (pinned and pageable, both directions) and GPU <-> GPU for
// every pair with this device, first without peer access (staged by the driver), then with it.
#include <algorithm>
#include <cstring>
#include <fmt/format.h>
#include <map>
#include <memory>
#include <stdexcept>

#include "device/buffer.hpp"
#include "device/cuda_check.hpp"
#include "device/peer_access.hpp"
#include "device/probe_kernels.hpp"
#include "device/probes_internal.hpp"

namespace aisp::probe {

namespace {

constexpr std::size_t k_bytes = std::size_t{256} << 20;  // ~5 ms at PCIe Gen5 speed: overheads are noise
constexpr std::size_t k_words = k_bytes / 4;
// GPU <-> GPU: 1 GiB, what ch02:p2p_copy moves by default (at 256 MiB a peer copy ran 2% slower than the
// ladder's on an H200 pair, which the physics check's 3% would barely have let through).
constexpr std::size_t k_peer_bytes = std::size_t{1} << 30;
constexpr std::size_t k_peer_words = k_peer_bytes / 4;

std::string mismatch(std::uint64_t got, std::uint64_t want) {
  return got == want ? "" : fmt::format("checksum {:#018x}, expected {:#018x}", got, want);
}

// Host memory of either kind, freed the right way.
class HostBuffer {
 public:
  explicit HostBuffer(bool pinned) : m_pinned(pinned) {
    if (pinned) {
      void* p = nullptr;
      AISP_CUDA_CHECK(cudaHostAlloc(&p, k_bytes, cudaHostAllocDefault));
      m_data = static_cast<std::uint32_t*>(p);
    } else {
      m_owned = std::make_unique<std::uint32_t[]>(k_words);  // value-initialized: every page touched
      m_data = m_owned.get();
    }
  }
  ~HostBuffer() {
    if (m_pinned && m_data) cudaFreeHost(m_data);
  }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  std::uint32_t* data() const { return m_data; }

 private:
  bool m_pinned;
  std::uint32_t* m_data = nullptr;
  std::unique_ptr<std::uint32_t[]> m_owned;
};

}  // namespace

void probe_host(Context& ctx, const std::vector<std::string>& wanted, ProbeResults& out) {
  const DeviceFacts& d = ctx.facts();
  const cudaStream_t s = ctx.stream();
  DeviceBuffer<std::uint32_t> dev(k_words);
  DeviceBuffer<unsigned long long> partials(static_cast<std::size_t>(checksum_blocks(d)));
  const auto device_checksum = [&] {
    launch_checksum(dev.data(), k_words, partials.data(), d, s);
    return read_partials(partials.data(), checksum_blocks(d), s);
  };
  constexpr std::uint32_t k_host_seed = 0x1B873593u, k_dev_seed = 0xCC9E2D51u;
  const std::uint64_t want_host = expected_checksum(k_words, k_host_seed);
  const std::uint64_t want_dev = expected_checksum(k_words, k_dev_seed);
  for (const bool pinned : {true, false}) {
    const char* kind = pinned ? "pinned" : "pageable";
    const std::string h2d = fmt::format("h2d_{}", kind), d2h = fmt::format("d2h_{}", kind);
    if (!wants(wanted, h2d) && !wants(wanted, d2h)) continue;
    HostBuffer host(pinned);
    // A pageable copy may block the calling thread until the stream reaches it: no blocking kernel then.
    const bool blocking = pinned;
    const std::string how = pinned ? "cudaHostAlloc" : "malloc'd, pages touched beforehand";
    if (wants(wanted, h2d)) {
      record(out, h2d, [&] {
        for (std::size_t i = 0; i < k_words; ++i) host.data()[i] = pattern_word(i, k_host_seed);
        Steps st;
        st.launch = [&] {
          AISP_CUDA_CHECK(cudaMemcpyAsync(dev.data(), host.data(), k_bytes, cudaMemcpyHostToDevice, s));
        };
        st.prepare = [&] { AISP_CUDA_CHECK(cudaMemsetAsync(dev.data(), 0xFF, k_bytes, s)); };
        st.check = [&] { return mismatch(device_checksum(), want_host); };
        st.blocking = blocking;
        const Timing t = run_steps(ctx.hot(), s, st, h2d);
        return entry(h2d, "host", k_unit_gb_s, static_cast<double>(k_bytes) / t.median_s * 1e-9,
                     fmt::format("cudaMemcpyAsync host to device, {} from {} host memory ({})", gib(k_bytes), kind,
                                 how),
                     t.samples);
      });
    }
    if (wants(wanted, d2h)) {
      record(out, d2h, [&] {
        launch_pattern(dev.data(), k_words, k_dev_seed, d, s);
        AISP_CUDA_CHECK(cudaStreamSynchronize(s));
        Steps st;
        st.launch = [&] {
          AISP_CUDA_CHECK(cudaMemcpyAsync(host.data(), dev.data(), k_bytes, cudaMemcpyDeviceToHost, s));
        };
        st.prepare = [&] { std::memset(host.data(), 0xFF, k_bytes); };
        st.check = [&] { return mismatch(host_checksum(host.data(), k_words), want_dev); };
        st.blocking = blocking;
        const Timing t = run_steps(ctx.hot(), s, st, d2h);
        return entry(d2h, "host", k_unit_gb_s, static_cast<double>(k_bytes) / t.median_s * 1e-9,
                     fmt::format("cudaMemcpyAsync device to host, {} into {} host memory ({})", gib(k_bytes), kind,
                                 how),
                     t.samples);
      });
    }
  }
}

namespace {

// One GPU's side of the pair probes: its context, a source filled with its own pattern, a destination.
struct Side {
  std::unique_ptr<Context> owned;
  Context* ctx = nullptr;
  std::uint32_t seed = 0;
  std::uint64_t want = 0;  // checksum of the source
  DeviceBuffer<std::uint32_t> src, dst;
  DeviceBuffer<unsigned long long> partials;

  std::uint64_t dst_checksum() {
    ctx->make_current();
    launch_checksum(dst.data(), k_peer_words, partials.data(), ctx->facts(), ctx->stream());
    return read_partials(partials.data(), checksum_blocks(ctx->facts()), ctx->stream());
  }
};

}  // namespace

void probe_p2p(Context& ctx, const std::vector<std::string>& wanted, ProbeResults& out) {
  int count = 0;
  AISP_CUDA_CHECK(cudaGetDeviceCount(&count));
  if (count < 2) {
    if (wants(wanted, "p2p")) {
      out.entries.push_back(skipped_entry("p2p", "p2p", k_unit_gb_s, "one GPU visible: no pair to copy between"));
    }
    return;
  }
  const int self = ctx.device();
  std::map<int, Side> sides;
  for (int dev = 0; dev < count; ++dev) {
    Side& side = sides[dev];
    if (dev == self) {
      side.ctx = &ctx;
    } else {
      side.owned = std::make_unique<Context>(dev);
      side.ctx = side.owned.get();
    }
    side.ctx->make_current();
    side.seed = 0x85EBCA6Bu + static_cast<std::uint32_t>(dev);
    side.src = DeviceBuffer<std::uint32_t>(k_peer_words);
    side.dst = DeviceBuffer<std::uint32_t>(k_peer_words);
    side.partials = DeviceBuffer<unsigned long long>(static_cast<std::size_t>(checksum_blocks(side.ctx->facts())));
    launch_pattern(side.src.data(), k_peer_words, side.seed, side.ctx->facts(), side.ctx->stream());
    AISP_CUDA_CHECK(cudaStreamSynchronize(side.ctx->stream()));
    side.want = expected_checksum(k_peer_words, side.seed);
  }
  // Every copy runs on the destination's stream and is checked there.
  const auto steps_for = [&](int from, int to, std::function<void()> launch) {
    Side& dst = sides.at(to);
    Steps st;
    st.launch = std::move(launch);
    st.prepare = [&dst] {
      dst.ctx->make_current();
      AISP_CUDA_CHECK(cudaMemsetAsync(dst.dst.data(), 0xFF, k_peer_bytes, dst.ctx->stream()));
    };
    st.check = [&dst, want = sides.at(from).want] { return mismatch(dst.dst_checksum(), want); };
    return st;
  };
  const auto memcpy_peer = [&](int from, int to) {
    return [&sides, from, to] {
      AISP_CUDA_CHECK(cudaMemcpyPeerAsync(sides.at(to).dst.data(), to, sides.at(from).src.data(), from, k_peer_bytes,
                                          sides.at(to).ctx->stream()));
    };
  };
  std::vector<std::pair<int, int>> pairs;
  for (int peer = 0; peer < count; ++peer) {
    if (peer == self) continue;
    pairs.emplace_back(self, peer);
    pairs.emplace_back(peer, self);
  }
  // Without peer access first: peer access, once enabled, stays on for the process.
  for (const auto& [from, to] : pairs) {
    const std::string name = p2p_ceiling_name(from, to, false);
    if (!wants(wanted, name)) continue;
    record(out, name, [&] {
      // Staging may make the call wait for the stream: no blocking kernel ahead of it.
      Steps st = steps_for(from, to, memcpy_peer(from, to));
      st.blocking = false;
      const Timing t = run_steps(sides.at(to).ctx->hot(), sides.at(to).ctx->stream(), st, name);
      return entry(name, "p2p", k_unit_gb_s, static_cast<double>(k_peer_bytes) / t.median_s * 1e-9,
                   fmt::format("cudaMemcpyPeerAsync GPU {} -> GPU {}, {}, peer access not enabled (the driver "
                               "stages the copy)",
                               from, to, gib(k_peer_bytes)),
                   t.samples);
    });
  }
  for (const auto& [from, to] : pairs) {
    const std::string name = p2p_ceiling_name(from, to, true);
    if (!wants(wanted, name)) continue;
    int can = 0;
    AISP_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, to, from));
    if (!can) {
      out.entries.push_back(skipped_entry(name, "p2p", k_unit_gb_s,
                                          fmt::format("GPU {} cannot access GPU {}'s memory (no peer path)", to, from)));
      continue;
    }
    record(out, name, [&] {
      // Both directions, so that copies and the pulling kernel may use the direct path either way.
      for (const auto& [x, y] : {std::pair{to, from}, std::pair{from, to}}) {
        AISP_CUDA_CHECK(cudaSetDevice(x));
        if (!enable_peer_access(y)) {
          throw std::runtime_error(fmt::format("GPU {} cannot access GPU {}'s memory (no peer path)", x, y));
        }
      }
      Side& dst = sides.at(to);
      const Timing tm = run_steps(dst.ctx->hot(), dst.ctx->stream(), steps_for(from, to, memcpy_peer(from, to)), name);
      // The destination's SMs pull the source over the link with the DRAM copy kernel.
      const std::uint32_t* src = sides.at(from).src.data();
      const Timing tk = run_steps(dst.ctx->hot(), dst.ctx->stream(), steps_for(from, to, [&dst, src] {
                                    launch_copy(src, dst.dst.data(), k_peer_words, dst.ctx->facts(), dst.ctx->stream());
                                  }),
                                  name);
      const double gm = static_cast<double>(k_peer_bytes) / tm.median_s * 1e-9;
      const double gk = static_cast<double>(k_peer_bytes) / tk.median_s * 1e-9;
      const std::string mm =
          fmt::format("cudaMemcpyPeerAsync GPU {} -> GPU {}, {}, peer access enabled", from, to, gib(k_peer_bytes));
      const std::string km = fmt::format("copy kernel on GPU {} reading GPU {}'s memory, {}", to, from, gib(k_peer_bytes));
      CeilingEntry e = entry(name, "p2p", k_unit_gb_s, std::max(gm, gk), gm >= gk ? mm : km,
                             gm >= gk ? tm.samples : tk.samples);
      e.note = fmt::format("also measured: {} {:.0f} GB/s; the ceiling is the faster method", gm >= gk ? km : mm,
                           std::min(gm, gk));
      return e;
    });
  }
  ctx.make_current();
}

}  // namespace aisp::probe
