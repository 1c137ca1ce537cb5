#include "device/activity.hpp"

#include <cuda.h>
#include <cupti_activity.h>
#include <cupti_callbacks.h>
#include <dlfcn.h>

#include <atomic>
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
  decltype(&cuptiSubscribe) subscribe = nullptr;
  decltype(&cuptiEnableDomain) enable_domain = nullptr;
  decltype(&cuptiUnsubscribe) unsubscribe = nullptr;
  decltype(&cuptiFinalize) finalize = nullptr;
  bool attached = false;  // buffer callbacks registered since the last cuptiFinalize
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

// Detaching (cuptiFinalize) is safe from the exit callsite of a CUDA API call (the CUPTI reference,
// "cuptiFinalize"): detach() subscribes this to the runtime API and makes one call of it.
std::atomic<bool> g_detach_requested{false};
std::atomic<bool> g_detached{false};

void CUPTIAPI detach_at_api_exit(void*, CUpti_CallbackDomain domain, CUpti_CallbackId, const void* data) {
  const auto* info = static_cast<const CUpti_CallbackData*>(data);
  if ((domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) ||
      info->callbackSite != CUPTI_API_EXIT || !g_detach_requested.exchange(false)) {
    return;
  }
  g_detached = g_api && g_api->finalize() == CUPTI_SUCCESS;
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
                    resolve(api->lib, "cuptiGetStreamIdEx", api->stream_id) &&
                    resolve(api->lib, "cuptiSubscribe", api->subscribe) &&
                    resolve(api->lib, "cuptiEnableDomain", api->enable_domain) &&
                    resolve(api->lib, "cuptiUnsubscribe", api->unsubscribe) &&
                    resolve(api->lib, "cuptiFinalize", api->finalize);
    if (!ok) {
      if (why_not) *why_not = "CUPTI lacks an entry point aisp needs (too old a libcupti)";
      return nullptr;
    }
    g_api = api.get();
    if (api->register_callbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS) {
      if (why_not) *why_not = "cuptiActivityRegisterCallbacks failed";
      return nullptr;
    }
    api->attached = true;
    shared = api;
  }
  return std::unique_ptr<ActivityRecorder>(new ActivityRecorder(shared));
}

ActivityRecorder::~ActivityRecorder() = default;

void ActivityRecorder::start() {
  // After a detach CUPTI attaches again on its first call; the buffer callbacks went with the detach.
  if (!m_api->attached && m_api->register_callbacks(buffer_requested, buffer_completed) == CUPTI_SUCCESS) {
    m_api->attached = true;
  }
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

bool ActivityRecorder::detach(std::string* why) {
  if (!m_api->attached) return true;
  // Why detach at all: with CUPTI left attached after an audit (activity disabled, nothing recorded),
  // timed launches of ch15:disaggregated's colocated step (two engines replaying CUDA graphs on two
  // GPUs from two threads) stopped moving twice on nvidia-h200-x2 (2026-11-28): once with both engine
  // threads waiting on a mutex inside libcupti under cudaGraphLaunch, once with both in
  // cudaStreamSynchronize while a CUPTI thread waited on a lock. And a timed launch should not pay for
  // CUPTI's hooks in any case.
  CUpti_SubscriberHandle subscriber = nullptr;
  if (m_api->subscribe(&subscriber, detach_at_api_exit, nullptr) != CUPTI_SUCCESS) {
    if (why) *why = "cuptiSubscribe refused (another CUPTI client, a profiler, holds the callbacks?)";
    return false;  // CUPTI stays attached; the audit still works
  }
  if (m_api->enable_domain(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API) != CUPTI_SUCCESS) {
    m_api->unsubscribe(subscriber);
    if (why) *why = "cuptiEnableDomain refused the runtime API";
    return false;
  }
  g_detached = false;
  g_detach_requested = true;
  int device = 0;
  (void)cudaGetDevice(&device);  // any runtime call: its exit callsite runs cuptiFinalize
  if (g_detach_requested.exchange(false)) {
    // No callback came (a runtime that does not report to CUPTI): the work is synchronized and the
    // buffers flushed by stop(), the condition the reference gives for calling it directly.
    (void)cudaDeviceSynchronize();
    g_detached = m_api->finalize() == CUPTI_SUCCESS;
  }
  if (!g_detached) {
    m_api->unsubscribe(subscriber);  // a finalize takes the subscriber with it; a failed one does not
    if (why) *why = "cuptiFinalize failed";
    return false;
  }
  m_api->attached = false;
  return true;
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
