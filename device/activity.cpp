#include "device/activity.hpp"

#include <cuda.h>
#include <cupti_activity.h>
#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <utility>

namespace aisp {

// The few CUPTI entry points the recorder needs, resolved one by one from libcupti. Types come from the
// toolkit's headers; the library itself is never linked, so a machine without it still runs aisp.
struct ActivityRecorder::Api {
  void* lib = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityDisable) disable = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&cuptiGetStreamIdEx) stream_id = nullptr;
};

namespace {

constexpr std::size_t k_buffer_bytes = 4u << 20;
constexpr CUpti_ActivityKind k_kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                          CUPTI_ACTIVITY_KIND_MEMCPY2, CUPTI_ACTIVITY_KIND_MEMSET};

// CUPTI hands completed buffers to a C callback: records land here.
std::mutex g_mutex;
std::vector<ActivityRecord> g_records;
ActivityRecorder::Api* g_api = nullptr;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, k_buffer_bytes));
  *size = *buffer ? k_buffer_bytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  std::lock_guard lock(g_mutex);
  CUpti_Activity* rec = nullptr;
  while (g_api && g_api->next_record(buffer, valid, &rec) == CUPTI_SUCCESS) {
    ActivityRecord r;
    if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
      r = {ActivityRecord::Kind::kernel, k->name ? k->name : "?", k->start, k->end, k->deviceId, k->streamId};
    } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
      r = {ActivityRecord::Kind::memcpy, "memcpy", m->start, m->end, m->deviceId, m->streamId};
    } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY2) {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpyPtoP4*>(rec);
      r = {ActivityRecord::Kind::memcpy, "memcpy peer", m->start, m->end, m->deviceId, m->streamId};
    } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
      r = {ActivityRecord::Kind::memset, "memset", m->start, m->end, m->deviceId, m->streamId};
    } else {
      continue;
    }
    g_records.push_back(std::move(r));
  }
  std::free(buffer);
}

template <class F>
bool resolve(void* lib, const char* name, F& out) {
  out = reinterpret_cast<F>(dlsym(lib, name));
  return out != nullptr;
}

}  // namespace

std::unique_ptr<ActivityRecorder> ActivityRecorder::create(std::string* why_not) {
  static std::shared_ptr<Api> shared;  // CUPTI's callbacks are process-wide: load once
  if (!shared) {
    auto api = std::make_shared<Api>();
    for (const char* path : {"libcupti.so.13", "libcupti.so", "/usr/local/cuda/lib64/libcupti.so.13",
                             "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13"}) {
      api->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
      if (api->lib) break;
    }
    if (!api->lib) {
      if (why_not) *why_not = std::string("CUPTI not loadable: ") + dlerror();
      return nullptr;
    }
    const bool ok = resolve(api->lib, "cuptiActivityRegisterCallbacks", api->register_callbacks) &&
                    resolve(api->lib, "cuptiActivityEnable", api->enable) &&
                    resolve(api->lib, "cuptiActivityDisable", api->disable) &&
                    resolve(api->lib, "cuptiActivityFlushAll", api->flush_all) &&
                    resolve(api->lib, "cuptiActivityGetNextRecord", api->next_record) &&
                    resolve(api->lib, "cuptiGetStreamIdEx", api->stream_id);
    if (!ok) {
      if (why_not) *why_not = "CUPTI lacks an entry point aisp needs (too old a libcupti)";
      return nullptr;
    }
    g_api = api.get();
    if (api->register_callbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS) {
      if (why_not) *why_not = "cuptiActivityRegisterCallbacks failed";
      return nullptr;
    }
    shared = api;
  }
  return std::unique_ptr<ActivityRecorder>(new ActivityRecorder(shared));
}

ActivityRecorder::~ActivityRecorder() = default;

void ActivityRecorder::start() {
  m_api->flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  {
    std::lock_guard lock(g_mutex);
    g_records.clear();
  }
  for (auto k : k_kinds) m_api->enable(k);
}

std::vector<ActivityRecord> ActivityRecorder::stop() {
  m_api->flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  for (auto k : k_kinds) m_api->disable(k);
  std::lock_guard lock(g_mutex);
  return std::exchange(g_records, {});
}

std::uint32_t ActivityRecorder::stream_id(cudaStream_t s) const {
  // The context comes from the driver API, reached through the runtime so that aisp never links libcuda
  // (a machine without a driver must still start aisp and say "no CUDA device").
  using GetCurrent = CUresult (*)(CUcontext*);
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &fn, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess || !fn) {
    return 0;
  }
  std::uint32_t id = 0;
  CUcontext ctx = nullptr;
  if (reinterpret_cast<GetCurrent>(fn)(&ctx) != CUDA_SUCCESS) return 0;
  if (m_api->stream_id(ctx, reinterpret_cast<CUstream>(s), 0, &id) != CUPTI_SUCCESS) return 0;
  return id;
}

}  // namespace aisp
