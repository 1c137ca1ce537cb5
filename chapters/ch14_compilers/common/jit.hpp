// ch14's run-time compilation and loading: NVRTC to a cubin, the cubin into a CUDA library, a kernel out
// of it. Not a ladder: host code both ch14 ladders' JIT steps share (jit.cpp).
//
// Loading goes through the runtime's library API (cudaLibraryLoadData / cudaLibraryGetKernel, CUDA 12+),
// the runtime twin of the driver's cuLibraryLoadData: aisp links the static runtime, which finds the
// driver at run time, so the binary keeps starting on a machine without a GPU driver (`aisp list`, the
// CPU tests); linking libcuda for cuLibraryLoadData would not. A cudaKernel_t, cast to const void*, is
// accepted by cudaLaunchKernel and cudaFuncGetAttributes like a __global__ function's address.
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

namespace aisp::ch14 {

// What a cached cubin depends on besides the source: the device's name and compute capability.
struct DeviceIdentity {
  std::string name;  // "NVIDIA H100 80GB HBM3"
  int cc = 0;        // major * 10 + minor
};
DeviceIdentity current_device_identity();

// "13.0": the NVRTC that compiles (part of the cache key: a new compiler may emit different code).
std::string nvrtc_version_text();

// NVRTC options for a cubin of this compute capability ("--gpu-architecture=sm_90", C++17). Throws
// std::runtime_error when this NVRTC cannot target it (a GPU newer than the toolkit).
std::vector<std::string> nvrtc_cubin_options(int cc);

// Compiles `source` (no headers) to a cubin. Throws std::runtime_error with NVRTC's log on failure.
std::string compile_cubin(const std::string& source, const std::string& program_name,
                          const std::vector<std::string>& options);

// A loaded cubin; unloads in the destructor.
class LoadedLibrary {
 public:
  LoadedLibrary() = default;
  ~LoadedLibrary() { reset(); }
  LoadedLibrary(const LoadedLibrary&) = delete;
  LoadedLibrary& operator=(const LoadedLibrary&) = delete;

  // Loads `image` (a cubin). Throws aisp::CudaError when the driver refuses it.
  void load(const std::string& image);
  // The kernel named `name` (an extern "C" __global__). Throws aisp::CudaError when absent.
  cudaKernel_t kernel(const char* name) const;
  bool loaded() const { return m_library != nullptr; }
  void reset();

 private:
  cudaLibrary_t m_library = nullptr;
};

// Milliseconds of the host's monotonic clock since `start_ns` (from now_ns()). For the compile and load
// times the JIT steps report as facts in setup(), outside the harness's measured window: the harness
// still measures every launch.
long long now_ns();
double ms_since(long long start_ns);

}  // namespace aisp::ch14
