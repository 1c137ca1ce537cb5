// ch14's run-time compilation and loading (jit.hpp says what and why).
#include "chapters/ch14_compilers/common/jit.hpp"

#include <nvrtc.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "device/cuda_check.hpp"

namespace aisp::ch14 {
namespace {

void nvrtc_check(nvrtcResult r, const char* what) {
  if (r != NVRTC_SUCCESS) throw std::runtime_error(std::string(what) + ": " + nvrtcGetErrorString(r));
}

// Destroys the program on every path out of compile_cubin.
struct ProgramGuard {
  nvrtcProgram program = nullptr;
  ~ProgramGuard() {
    if (program) nvrtcDestroyProgram(&program);
  }
};

}  // namespace

DeviceIdentity current_device_identity() {
  int device = 0;
  AISP_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  AISP_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return {prop.name, prop.major * 10 + prop.minor};
}

std::string nvrtc_version_text() {
  int major = 0, minor = 0;
  nvrtc_check(nvrtcVersion(&major, &minor), "nvrtcVersion");
  return std::to_string(major) + "." + std::to_string(minor);
}

std::vector<std::string> nvrtc_cubin_options(int cc) {
  int count = 0;
  nvrtc_check(nvrtcGetNumSupportedArchs(&count), "nvrtcGetNumSupportedArchs");
  std::vector<int> archs(static_cast<std::size_t>(count));
  if (count > 0) nvrtc_check(nvrtcGetSupportedArchs(archs.data()), "nvrtcGetSupportedArchs");
  if (std::find(archs.begin(), archs.end(), cc) == archs.end()) {
    throw std::runtime_error("NVRTC " + nvrtc_version_text() + " cannot compile for sm_" + std::to_string(cc) +
                             " (newest it knows: sm_" + (archs.empty() ? std::string("none") : std::to_string(archs.back())) +
                             ")");
  }
  // sm_XY, not compute_XY: a cubin needs no driver JIT at load time. No fast-math or other flags: the
  // same code generation choices as nvcc's defaults for 01, so that the shapes are the only difference.
  return {"--gpu-architecture=sm_" + std::to_string(cc), "--std=c++17"};
}

std::string compile_cubin(const std::string& source, const std::string& program_name,
                          const std::vector<std::string>& options) {
  ProgramGuard guard;
  nvrtc_check(nvrtcCreateProgram(&guard.program, source.c_str(), program_name.c_str(), 0, nullptr, nullptr),
              "nvrtcCreateProgram");
  std::vector<const char*> argv;
  for (const auto& o : options) argv.push_back(o.c_str());
  const nvrtcResult compiled = nvrtcCompileProgram(guard.program, static_cast<int>(argv.size()), argv.data());
  if (compiled != NVRTC_SUCCESS) {
    std::size_t log_size = 0;
    std::string log;
    if (nvrtcGetProgramLogSize(guard.program, &log_size) == NVRTC_SUCCESS && log_size > 1) {
      log.resize(log_size);
      if (nvrtcGetProgramLog(guard.program, log.data()) != NVRTC_SUCCESS) log.clear();
      while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
    }
    throw std::runtime_error("NVRTC could not compile " + program_name + ": " + nvrtcGetErrorString(compiled) +
                             (log.empty() ? "" : "\n" + log));
  }
  std::size_t size = 0;
  nvrtc_check(nvrtcGetCUBINSize(guard.program, &size), "nvrtcGetCUBINSize");
  if (size == 0) throw std::runtime_error("NVRTC produced an empty cubin for " + program_name);
  std::string cubin(size, '\0');
  nvrtc_check(nvrtcGetCUBIN(guard.program, cubin.data()), "nvrtcGetCUBIN");
  return cubin;
}

void LoadedLibrary::load(const std::string& image) {
  reset();
  AISP_CUDA_CHECK(cudaLibraryLoadData(&m_library, image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
}

cudaKernel_t LoadedLibrary::kernel(const char* name) const {
  cudaKernel_t k = nullptr;
  AISP_CUDA_CHECK(cudaLibraryGetKernel(&k, m_library, name));
  return k;
}

void LoadedLibrary::reset() {
  if (m_library) cudaLibraryUnload(m_library);  // at teardown an error here has nobody to tell
  m_library = nullptr;
}

long long now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double ms_since(long long start_ns) { return static_cast<double>(now_ns() - start_ns) * 1e-6; }

}  // namespace aisp::ch14
