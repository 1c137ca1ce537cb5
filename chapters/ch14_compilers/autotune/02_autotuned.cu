// ch14:autotune:02_autotuned — the same kernel, at the tile shape that was fastest for this device and
// this shape when timed in setup(); the winner is cached on disk and reused by every later run.
//
// What changed: setup() looks the winner up in the cache (key: device name, compute capability, m, n, k,
// the candidate list and the kernel's revision; tiles.hpp: winner_key). On a miss it launches each of the
// six instantiations once to warm it up, then times 3 back-to-back launches between two CUDA events, and
// keeps the fastest (pick_winner: a challenger must beat 128 x 128 by more than 3%, or it is a tie and the
// default stays). launch() then runs only the winner, with 01's geometry for that tile.
// Why it helps: no tile is best everywhere. Where 128 x 128 leaves SMs idle (a short m), a smaller tile
// makes enough blocks for every SM and wins although it reloads more; where 128 x 128 fills the GPU it is
// kept, and 02 ties 01. Napkin math: at m = 256, n = 4096 on an H100, 64 x 64 makes 256 blocks (~2 per SM)
// against 128 x 128's 64: up to ~2x; at m = 4096, 1.0x.
// Honest accounting: the tuning runs in setup, outside the measured window, once per device and shape
// (~6 x 4 launches; fact tune_ms), like a framework's first-call autotuning (cuDNN's benchmark mode,
// Triton's autotuner). The harness times launches only, so the facts show what the first run paid.
// Run: aisp bench run --targets ch14:autotune:02_autotuned   (twice: the second run logs a cache hit)
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "chapters/ch14_compilers/autotune/problem.hpp"
#include "chapters/ch14_compilers/autotune/tiled_sgemm.cuh"
#include "chapters/ch14_compilers/common/kernel_cache.hpp"
#include "device/cuda_check.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch14::autotune::v02 {
namespace {

constexpr int k_timed_launches = 3;

// Two events for the tuning, destroyed on every path out of it.
struct EventPair {
  cudaEvent_t start = nullptr, stop = nullptr;
  EventPair() {
    AISP_CUDA_CHECK(cudaEventCreate(&start));
    AISP_CUDA_CHECK(cudaEventCreate(&stop));
  }
  ~EventPair() {
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
};

std::string fixed(double v, int decimals) {
  const double scale = std::pow(10.0, decimals);
  const long long whole = std::llround(v * scale);
  std::string s = std::to_string(whole / static_cast<long long>(scale));
  if (decimals > 0) {
    std::string frac = std::to_string(std::llabs(whole % static_cast<long long>(scale)));
    s += "." + std::string(static_cast<std::size_t>(decimals) - frac.size(), '0') + frac;
  }
  return s;
}

}  // namespace

class Autotuned {
 public:
  void setup(const Args& a, cudaStream_t stream) {
    int device = 0;
    AISP_CUDA_CHECK(cudaGetDevice(&device));
    cudaDeviceProp prop{};
    AISP_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    const CacheKey key = winner_key(prop.name, prop.major * 10 + prop.minor, a.m, a.n, a.k);
    // Warnings and the status line go to stderr: the worker's log (artifacts/runs/<run>/*.log).
    const KernelCache cache(cache_dir_from_env(), std::cerr, "aisp ch14:autotune");
    const std::string shape = "m=" + std::to_string(a.m) + " n=" + std::to_string(a.n) + " k=" + std::to_string(a.k);

    if (const std::optional<std::string> stored = cache.load(key, "autotune")) {
      if (const std::optional<int> index = tile_index(*stored)) {
        m_winner = *index;
        m_cache_hit = true;
        cache.note("autotune cache hit: " + shape + " -> " + *stored + " (from " +
                   cache.path_of(key, "autotune").string() + ", no tuning)");
        return;
      }
      cache.note("warning: cache " + cache.path_of(key, "autotune").string() + " names no candidate ('" +
                 stored->substr(0, 40) + "'); retuning");
    }

    const auto start = std::chrono::steady_clock::now();
    const std::vector<double> ms = time_candidates(a, stream);
    m_tune_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    m_winner = pick_winner(ms, k_default_tile);
    const std::string winner = k_tiles[static_cast<std::size_t>(m_winner)].name();
    const bool stored = cache.store(key, "autotune", winner);
    std::string times;
    for (std::size_t i = 0; i < ms.size(); ++i) times += (i ? ", " : "") + k_tiles[i].name() + " " + fixed(ms[i], 3) + " ms";
    cache.note("autotune cache miss: " + shape + " -> " + winner + " after " + fixed(m_tune_ms, 1) + " ms of tuning (" +
               times + "); " +
               (stored ? "stored " + cache.path_of(key, "autotune").string() : std::string("not stored (cache off or unwritable)")));
  }

  void launch(const Args& a, cudaStream_t stream) { launch_tile(m_winner, a.a, a.b, a.c, a.m, a.n, a.k, stream); }

  std::vector<Fact> facts(const Args&) {
    std::vector<Fact> out = {{"tile", k_tiles[static_cast<std::size_t>(m_winner)].name()},
                             {"tune_cache", m_cache_hit ? "hit" : "miss"}};
    if (!m_cache_hit) out.push_back({"tune_ms", fixed(m_tune_ms, 1)});
    for (auto& f : standard_facts(kernel_facts(tile_kernel(m_winner), k_tile_threads))) out.push_back(std::move(f));
    return out;
  }

 private:
  // Each candidate's mean time over k_timed_launches back-to-back launches on `stream`, after one
  // untimed launch (module load, first-touch). The output buffer takes the candidates' results: the
  // gate poisons it before every validated launch, so nothing computed here can be mistaken for 02's.
  static std::vector<double> time_candidates(const Args& a, cudaStream_t stream) {
    EventPair ev;
    std::vector<double> ms(k_tiles.size(), 0.0);
    for (std::size_t i = 0; i < k_tiles.size(); ++i) {
      const int t = static_cast<int>(i);
      launch_tile(t, a.a, a.b, a.c, a.m, a.n, a.k, stream);
      AISP_CUDA_CHECK(cudaEventRecord(ev.start, stream));
      for (int r = 0; r < k_timed_launches; ++r) launch_tile(t, a.a, a.b, a.c, a.m, a.n, a.k, stream);
      AISP_CUDA_CHECK(cudaEventRecord(ev.stop, stream));
      AISP_CUDA_CHECK(cudaEventSynchronize(ev.stop));
      float elapsed = 0;
      AISP_CUDA_CHECK(cudaEventElapsedTime(&elapsed, ev.start, ev.stop));
      ms[i] = static_cast<double>(elapsed) / k_timed_launches;
    }
    return ms;
  }

  int m_winner = k_default_tile;
  bool m_cache_hit = false;
  double m_tune_ms = 0;
};

AISP_REGISTER_STATEFUL_VARIANT(AutotuneProblem, Autotuned, .step = 2, .slug = "autotuned", .kind = VariantKind::optimized,
                               .summary = "fastest of six tile shapes, timed once in setup with CUDA events, "
                                          "winner cached per device and shape");

}  // namespace aisp::ch14::autotune::v02
