// ch05:file_to_gpu:03_cufile — cuFile (GPUDirect Storage): the file read straight into device memory.
//
// What changed: no host buffer at all. The file is opened with O_DIRECT, registered with cuFile, the
// device buffer registered too, and cuFileRead moves the range in 256 MiB calls, each a synchronous
// read whose destination is device memory.
// Why it helps: with the nvidia-fs kernel module and a file system that supports it (ext4/xfs on local
// NVMe, some parallel file systems), the drive DMAs into GPU memory through PCIe peer-to-peer: no
// bounce through host memory, no CPU copy, and host memory bandwidth is left to the rest of the
// program; step 02's overlap of read and copy becomes no copy. Without nvidia-fs, cuFile runs in
// "compat mode": POSIX reads into its own pinned bounce buffers and copies from there, which is step 02
// done by a library; the facts say which mode ran.
// Availability: libcufile is loaded with dlopen at set-up (no build-time dependency). Where it is not
// found, or cuFileDriverOpen or the file's registration fails, the step is SKIPPED with the reason,
// never an error. AISP_CUFILE_LIB names the library when it is not on the loader's path (pip's
// nvidia-cufile wheels put it in site-packages/nvidia/cufile/lib/libcufile.so.0).
// Ordering: cuFileRead is not stream-ordered; launch() first synchronizes the harness's stream, so the
// gate's poison (queued before the launch) lands before cuFile writes the buffer. When the last read
// returns, the data is in device memory.
// Napkin math: bounded by the drive: bytes / disk_read, like step 02, without step 02's host memory
// traffic; a win in time only where the host path, not the drive, was the limit.
// Run: aisp bench run --targets ch05:file_to_gpu:03_cufile
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "chapters/ch05_storage/file_to_gpu/problem.hpp"
#include "device/cuda_check.hpp"

namespace aisp::ch05::file_to_gpu::v03 {

// The few cuFile declarations used here, written from the public cufile.h API (GDS API reference).
namespace cufile {
struct Error {  // CUfileError_t: a CUfileOpError (0 = CU_FILE_SUCCESS) and a CUresult
  int err;
  int cu_err;
};
struct Descr {  // CUfileDescr_t
  int type;     // CUfileFileHandleType: CU_FILE_HANDLE_TYPE_OPAQUE_FD = 1
  union {
    int fd;
    void* handle;
  } handle;
  const void* fs_ops;  // CUfileFSOps_t*, NULL for a kernel file system
};
inline constexpr int k_handle_type_opaque_fd = 1;
using Handle = void*;  // CUfileHandle_t
using DriverOpenFn = Error (*)();
using HandleRegisterFn = Error (*)(Handle*, Descr*);
using HandleDeregisterFn = void (*)(Handle);
using BufRegisterFn = Error (*)(const void*, std::size_t, int);
using BufDeregisterFn = Error (*)(const void*);
using ReadFn = ssize_t (*)(Handle, void*, std::size_t, off_t, off_t);
}  // namespace cufile

// libcufile, loaded and its driver opened once per process, and left open: the variant objects come
// and go (the harness, the profiler) while cuFile's state belongs to the process.
struct Library {
  std::string missing;  // why cuFile cannot be used here; "" when it can
  cufile::HandleRegisterFn handle_register = nullptr;
  cufile::HandleDeregisterFn handle_deregister = nullptr;
  cufile::BufRegisterFn buf_register = nullptr;
  cufile::BufDeregisterFn buf_deregister = nullptr;
  cufile::ReadFn read = nullptr;
};

Library load_library() {
  Library lib;
  // cuFile writes cufile.log into the working directory unless told otherwise.
  const std::string log = (std::filesystem::path(aisp_cache_dir()) / "ch05" / "cufile.log").string();
  ::setenv("CUFILE_LOGFILE_PATH", log.c_str(), 0);
  std::vector<std::string> names;
  if (const char* p = std::getenv("AISP_CUFILE_LIB"); p && *p) names.emplace_back(p);
  names.emplace_back("libcufile.so.0");
  names.emplace_back("libcufile.so");
  void* h = nullptr;
  std::string first_error;
  for (const auto& n : names) {
    h = ::dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h) break;
    if (first_error.empty()) first_error = ::dlerror();
  }
  if (!h) {
    lib.missing = "cuFile (GPUDirect Storage) is not installed here: " + first_error +
                  "; AISP_CUFILE_LIB=/path/to/libcufile.so.0 names one (pip's nvidia-cufile wheels: "
                  "site-packages/nvidia/cufile/lib)";
    return lib;
  }
  const auto sym = [&](const char* name) {
    void* s = ::dlsym(h, name);
    if (!s && lib.missing.empty()) lib.missing = std::string("libcufile lacks ") + name;
    return s;
  };
  const auto driver_open = reinterpret_cast<cufile::DriverOpenFn>(sym("cuFileDriverOpen"));
  lib.handle_register = reinterpret_cast<cufile::HandleRegisterFn>(sym("cuFileHandleRegister"));
  lib.handle_deregister = reinterpret_cast<cufile::HandleDeregisterFn>(sym("cuFileHandleDeregister"));
  lib.buf_register = reinterpret_cast<cufile::BufRegisterFn>(sym("cuFileBufRegister"));
  lib.buf_deregister = reinterpret_cast<cufile::BufDeregisterFn>(sym("cuFileBufDeregister"));
  lib.read = reinterpret_cast<cufile::ReadFn>(sym("cuFileRead"));
  if (!lib.missing.empty()) return lib;
  const cufile::Error e = driver_open();
  if (e.err != 0) {
    lib.missing = "cuFileDriverOpen failed: cuFile error " + std::to_string(e.err) + ", CUresult " +
                  std::to_string(e.cu_err) + " (see " + log + ")";
  }
  return lib;
}

const Library& library() {
  static const Library lib = load_library();
  return lib;
}

class CuFileRead {
 public:
  CuFileRead() = default;
  CuFileRead(const CuFileRead&) = delete;
  CuFileRead& operator=(const CuFileRead&) = delete;
  ~CuFileRead() {
    if (m_registered) library().buf_deregister(m_dst);
    if (m_handle) library().handle_deregister(m_handle);
    if (m_fd >= 0) ::close(m_fd);
  }

  void setup(const Args& a, cudaStream_t) {
    const Library& lib = library();
    if (!lib.missing.empty()) throw VariantUnavailable(lib.missing);
    std::string refused;
    m_fd = open_direct(a.path, refused);
    if (m_fd < 0) throw VariantUnavailable("cuFile needs O_DIRECT: " + refused);
    cufile::Descr d{};
    d.type = cufile::k_handle_type_opaque_fd;
    d.handle.fd = m_fd;
    const cufile::Error e = lib.handle_register(&m_handle, &d);
    if (e.err != 0) {
      m_handle = nullptr;
      throw VariantUnavailable("cuFileHandleRegister refused the test file (cuFile error " + std::to_string(e.err) +
                               ", CUresult " + std::to_string(e.cu_err) + "): its file system is not one cuFile serves");
    }
    // Registered memory is pinned for DMA once, not per read; unregistered, cuFile bounces every read.
    m_dst = a.dst;
    const cufile::Error b = lib.buf_register(a.dst, a.bytes, 0);
    m_registered = b.err == 0;
    m_buffer_note = m_registered ? "yes" : "no (cuFile error " + std::to_string(b.err) + "): bounce buffers";
  }

  void launch(const Args& a, cudaStream_t stream) {
    AISP_CUDA_CHECK(cudaStreamSynchronize(stream));  // the harness's earlier work on `dst` lands first
    constexpr std::size_t k_piece = std::size_t{256} << 20;
    for (std::size_t done = 0; done < a.bytes;) {
      const std::size_t n = std::min(k_piece, a.bytes - done);
      const ssize_t r = library().read(m_handle, a.dst, n, static_cast<off_t>(a.offset + done),
                                       static_cast<off_t>(done));
      if (r < 0) {
        throw std::runtime_error("cuFileRead at byte " + std::to_string(a.offset + done) + ": " +
                                 (r == -1 ? std::string(std::strerror(errno))
                                          : "cuFile error " + std::to_string(-r)));
      }
      if (r == 0) throw DataError("cuFileRead: the test file ended early");
      done += static_cast<std::size_t>(r);
    }
  }

  std::vector<Fact> facts(const Args&) {
    const bool nvfs = std::filesystem::exists("/proc/driver/nvidia-fs/stats");
    return {{"gds", nvfs ? "nvidia-fs loaded: direct DMA where the file system allows"
                         : "no nvidia-fs module: compat mode (POSIX reads through cuFile's bounce buffers)"},
            {"buffer_registered", m_buffer_note}};
  }

 private:
  int m_fd = -1;
  cufile::Handle m_handle = nullptr;
  std::uint8_t* m_dst = nullptr;
  bool m_registered = false;
  std::string m_buffer_note;
};

AISP_REGISTER_STATEFUL_VARIANT(FileToGpuProblem, CuFileRead, .step = 3, .slug = "cufile",
                               .kind = VariantKind::optimized,
                               .summary = "cuFileRead into device memory (GPUDirect Storage; SKIPPED without cuFile)");

}  // namespace aisp::ch05::file_to_gpu::v03
