// ch04 — NCCL, loaded with dlopen, and a communicator over the GPUs of this process. Host-only; included
// by the vendor_nccl steps alone.
//
// Why dlopen (as ch18 does for cuDNN): linking libnccl would make the whole aisp binary refuse to start
// where the library is not on the loader's path (a GPU machine with NCCL only inside PyTorch's wheels, a
// binary carried from elsewhere). Loaded when a vendor step's setup() runs, a missing NCCL costs that
// step only: it is SKIPPED with a message saying where it looked. The entry points are typed from
// NCCL's own header (decltype links nothing). ch04:allreduce's exist in every NCCL 2.x since 2.4 and are
// required; ch04:collectives' (all-gather, reduce-scatter, broadcast, and send/recv, which came in NCCL
// 2.7) are resolved when present, so that an older library still serves the all-reduce and only the
// collectives step is SKIPPED, naming what the library lacks (Api::missing).
#pragma once

#include <dlfcn.h>
#include <nccl.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "device/cuda_check.hpp"
#include "device/ladder.hpp"

#ifndef AISP_NCCL_LIBRARY_HINT
#define AISP_NCCL_LIBRARY_HINT ""
#endif

namespace aisp::ch04::nccl {

struct Api {
  decltype(&::ncclGetVersion) get_version;
  decltype(&::ncclGetErrorString) error_string;
  decltype(&::ncclCommInitAll) comm_init_all;
  decltype(&::ncclCommDestroy) comm_destroy;
  decltype(&::ncclGroupStart) group_start;
  decltype(&::ncclGroupEnd) group_end;
  decltype(&::ncclAllReduce) all_reduce;
  // Optional (null where the library lacks them): ch04:collectives' entry points, all in NCCL >= 2.7.
  decltype(&::ncclAllGather) all_gather = nullptr;
  decltype(&::ncclReduceScatter) reduce_scatter = nullptr;
  decltype(&::ncclBroadcast) broadcast = nullptr;
  decltype(&::ncclSend) send = nullptr;
  decltype(&::ncclRecv) recv = nullptr;
  std::string missing;    // the optional entry points not found, e.g. "ncclSend ncclRecv"; "" when none
  int version = 0;        // ncclGetVersion's code: 22809 for 2.28.9
  std::string path;       // where it was loaded from
};

// Loaded once per process: $AISP_NCCL_LIBRARY, then the library CMake found, then the loader's search
// for libnccl.so.2. Throws VariantUnavailable (the step is SKIPPED) saying what it tried.
inline const Api& api() {
  static const Api* loaded = nullptr;
  static std::string failure;
  if (loaded) return *loaded;
  if (!failure.empty()) throw VariantUnavailable(failure);
  std::vector<std::string> tried;
  if (const char* env = std::getenv("AISP_NCCL_LIBRARY"); env && *env) tried.emplace_back(env);
  if (std::string(AISP_NCCL_LIBRARY_HINT).size() > 0) tried.emplace_back(AISP_NCCL_LIBRARY_HINT);
  tried.emplace_back("libnccl.so.2");
  std::string why;
  for (const auto& path : tried) {
    void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* err = dlerror();
      why += "; " + path + ": " + (err ? err : "not loadable");
      continue;
    }
    auto* api = new Api{};
    bool complete = true;
    const auto resolve = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      if (!fn) {
        complete = false;
        why += "; " + path + " lacks " + name;
      }
    };
    resolve(api->get_version, "ncclGetVersion");
    resolve(api->error_string, "ncclGetErrorString");
    resolve(api->comm_init_all, "ncclCommInitAll");
    resolve(api->comm_destroy, "ncclCommDestroy");
    resolve(api->group_start, "ncclGroupStart");
    resolve(api->group_end, "ncclGroupEnd");
    resolve(api->all_reduce, "ncclAllReduce");
    if (!complete) {
      delete api;
      continue;
    }
    const auto resolve_optional = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      if (!fn) api->missing += (api->missing.empty() ? "" : " ") + std::string(name);
    };
    resolve_optional(api->all_gather, "ncclAllGather");
    resolve_optional(api->reduce_scatter, "ncclReduceScatter");
    resolve_optional(api->broadcast, "ncclBroadcast");
    resolve_optional(api->send, "ncclSend");
    resolve_optional(api->recv, "ncclRecv");
    api->get_version(&api->version);
    api->path = path;
    loaded = api;  // kept for the process: NCCL's own threads outlive any one step
    return *loaded;
  }
  failure = "NCCL not found (set AISP_NCCL_LIBRARY to a libnccl.so.2, e.g. PyTorch's nvidia/nccl/lib)" + why;
  throw VariantUnavailable(failure);
}

// "2.28.9" for the version code 22809.
inline std::string version_string(const Api& a) {
  return std::to_string(a.version / 10000) + "." + std::to_string(a.version / 100 % 100) + "." +
         std::to_string(a.version % 100);
}

// Throws on an NCCL error, naming the call.
inline void check(ncclResult_t result, const char* what) {
  if (result != ncclSuccess) {
    throw std::runtime_error(std::string(what) + " failed: " + api().error_string(result));
  }
}

// One communicator per GPU of `devices`, made by ncclCommInitAll (one process, every rank; NCCL's
// single-process mode), destroyed with them.
class Communicators {
 public:
  Communicators() = default;
  Communicators(const Communicators&) = delete;
  Communicators& operator=(const Communicators&) = delete;
  ~Communicators() {
    for (ncclComm_t c : m_comms) {
      if (c) api().comm_destroy(c);
    }
  }

  void init(const std::vector<int>& devices) {
    int home = 0;
    AISP_CUDA_CHECK(cudaGetDevice(&home));
    m_comms.assign(devices.size(), nullptr);
    const ncclResult_t result = api().comm_init_all(m_comms.data(), static_cast<int>(devices.size()), devices.data());
    AISP_CUDA_CHECK(cudaSetDevice(home));  // ncclCommInitAll may leave another device current
    check(result, "ncclCommInitAll");
  }

  ncclComm_t operator[](std::size_t rank) const { return m_comms[rank]; }

 private:
  std::vector<ncclComm_t> m_comms;
};

}  // namespace aisp::ch04::nccl
