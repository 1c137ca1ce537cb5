// ch14:jit_specialize:02_nvrtc_shapes — the same kernel source, compiled at run time by NVRTC with this
// run's shape as compile-time constants.
//
// What changed: setup() prepends #defines of the dims, strides and count to permute_kernel.cuh's text
// (jit_source.hpp), compiles it with NVRTC for this GPU's sm_XY, loads the cubin (cudaLibraryLoadData)
// and launches the kernel from it with exactly 01's geometry and arguments. The cubin is cached on disk
// per source hash + options + NVRTC version + device name + compute capability (common/kernel_cache.hpp),
// so the second run of a shape loads it instead of compiling.
// Why it helps: with the divisors known, the compiler replaces each division by a shift and a mask (a
// power of two) or by a multiply-high and a shift (any other constant), and folds the strides into the
// addressing. At the default shape (all powers of two) NVRTC 13's PTX turns the whole index computation
// into a bit permutation: a shift, a left shift, three masks, two ors (README "What the constants do").
// With the load, store and addressing that is ~15 instructions per element instead of ~70, and none on
// the quarter-rate pipes.
// Napkin math: ~15 instructions for 4 bytes is well under what the SMs can issue while DRAM moves 4 bytes
// (H100: ~29e12 thread-instructions/s against 8.4e11 elements/s, ~34 per element), so the kernel should
// sit at the DRAM copy bound: up to ~2x over 01 at the default shape. The price is paid in setup, outside
// the measured window: an NVRTC compile (hundreds of ms; fact jit_compile_ms, on a cache miss) or a cache
// read and module load (fact jit_load_ms, every run). A JIT wins when one compile serves many launches.
// Host-only file (.cpp): nothing here is device code; the kernel is the text NVRTC compiles.
// Run: aisp bench run --targets ch14:jit_specialize:02_nvrtc_shapes
#include <fmt/format.h>

#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "chapters/ch14_compilers/common/jit.hpp"
#include "chapters/ch14_compilers/common/kernel_cache.hpp"
#include "chapters/ch14_compilers/jit_specialize/jit_source.hpp"
#include "chapters/ch14_compilers/jit_specialize/problem.hpp"
#include "device/cuda_check.hpp"
#include "device/kernel_facts.hpp"

namespace aisp::ch14::jit_specialize::v02 {
namespace {

// permute_kernel.cuh's text, embedded at configure time (CMakeLists.txt): the binary carries the source
// it compiles, and an edit of the .cuh rebuilds both steps.
constexpr const char k_kernel_source[] =
#include "permute_kernel_source.inc"
    ;

}  // namespace

class NvrtcShapes {
 public:
  void setup(const Args& a, cudaStream_t) {
    const DeviceIdentity device = current_device_identity();
    const std::string source = specialized_source(k_kernel_source, a.shape);
    const std::vector<std::string> options = nvrtc_cubin_options(device.cc);
    const CacheKey key = cubin_key(source, options, nvrtc_version_text(), device.name, device.cc);
    // Warnings and the one status line go to stderr: the worker's log (artifacts/runs/<run>/*.log).
    const KernelCache cache(cache_dir_from_env(), std::cerr, "aisp ch14:jit_specialize");

    const long long load_start = now_ns();
    if (std::optional<std::string> cubin = cache.load(key, "cubin")) {
      // A cubin that passed the file's checks but that the driver refuses (another driver's bug, a
      // hand-edited file) is treated like a bad file: warn and compile afresh.
      const cudaError_t loaded = try_load(*cubin);
      if (loaded == cudaSuccess) {
        m_cache_hit = true;
      } else {
        cache.note(fmt::format("warning: cache {}: the driver refused the cached cubin ({}); recompiling",
                               cache.path_of(key, "cubin").string(), cudaGetErrorString(loaded)));
      }
    }
    if (!m_cache_hit) {
      const long long compile_start = now_ns();
      const std::string cubin = compile_cubin(source, "permute_kernel.cuh", options);
      m_compile_ms = ms_since(compile_start);
      const long long store_start = now_ns();
      const bool stored = cache.store(key, "cubin", cubin);
      m_library.load(cubin);
      m_load_ms = ms_since(store_start);
      cache.note(fmt::format("cubin cache miss: NVRTC {} compiled {} ({} bytes) for sm_{} in {:.1f} ms; {}",
                             nvrtc_version_text(), shape_text(a.shape), cubin.size(), device.cc, m_compile_ms,
                             stored ? "stored " + cache.path_of(key, "cubin").string()
                                    : std::string("not stored (cache off or unwritable)")));
    } else {
      m_load_ms = ms_since(load_start);
      cache.note(fmt::format("cubin cache hit: loaded {} for {} in {:.1f} ms, no compile",
                             cache.path_of(key, "cubin").string(), shape_text(a.shape), m_load_ms));
    }
    m_kernel = m_library.kernel(k_kernel_name);
  }

  void launch(const Args& a, cudaStream_t stream) {
    // The arguments 01 passes, in the same order: the specialized kernel keeps the signature (and
    // ignores the values), so both steps launch identically.
    const PermuteShape& p = a.shape;
    const void* in = a.in;
    void* out = a.out;
    unsigned count = p.count, d1 = p.dim[1], d2 = p.dim[2], d3 = p.dim[3];
    unsigned s0 = p.in_stride[0], s1 = p.in_stride[1], s2 = p.in_stride[2], s3 = p.in_stride[3];
    void* args[] = {&in, &out, &count, &d1, &d2, &d3, &s0, &s1, &s2, &s3};
    AISP_CUDA_CHECK(cudaLaunchKernel(reinterpret_cast<const void*>(m_kernel), dim3(blocks_for(p)), dim3(k_threads),
                                     args, 0, stream));
  }

  std::vector<Fact> facts(const Args&) {
    std::vector<Fact> out = {{"jit_cache", m_cache_hit ? "hit" : "miss"},
                             {"jit_load_ms", fmt::format("{:.1f}", m_load_ms)}};
    if (!m_cache_hit) out.push_back({"jit_compile_ms", fmt::format("{:.1f}", m_compile_ms)});
    // The kernel's registers and occupancy, beside 01's; a runtime that cannot describe a library
    // kernel costs only these facts, not the JIT ones.
    try {
      for (auto& f : standard_facts(kernel_facts(reinterpret_cast<const void*>(m_kernel), k_threads))) {
        out.push_back(std::move(f));
      }
    } catch (const CudaError&) {
      cudaGetLastError();
    }
    return out;
  }

 private:
  cudaError_t try_load(const std::string& cubin) {
    try {
      m_library.load(cubin);
      return cudaSuccess;
    } catch (const CudaError& e) {
      cudaGetLastError();  // a refused image is not a sticky error; clear it for the next call
      return e.code();
    }
  }

  static std::string shape_text(const PermuteShape& p) {
    return fmt::format("[{}, {}, {}, {}]", p.dim[0], p.dim[1], p.dim[2], p.dim[3]);
  }

  LoadedLibrary m_library;
  cudaKernel_t m_kernel = nullptr;
  bool m_cache_hit = false;
  double m_compile_ms = 0;
  double m_load_ms = 0;
};

AISP_REGISTER_STATEFUL_VARIANT(JitSpecializeProblem, NvrtcShapes, .step = 2, .slug = "nvrtc_shapes",
                               .kind = VariantKind::optimized,
                               .summary = "same source compiled by NVRTC in setup with the shape as constants; "
                                          "cubin cached per device");

}  // namespace aisp::ch14::jit_specialize::v02
