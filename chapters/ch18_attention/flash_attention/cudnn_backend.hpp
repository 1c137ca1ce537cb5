// ch18:flash_attention — cuDNN's graph ("backend") API, loaded with dlopen, and thin RAII helpers over
// its descriptors. Host-only; included by vendor_cudnn.cu alone.
//
// Why dlopen: linking libcudnn would make the whole aisp binary refuse to start on a machine where the
// library is not on the loader's path (a GPU machine with cuDNN only in a Python wheel, a binary carried
// from elsewhere). Loaded at setup(), a missing cuDNN costs only this variant, with a message saying
// where it looked. Why not cudnn_frontend (the C++ header library NVIDIA recommends): it ships in a
// Python wheel that is not on every machine this project builds on; the graph below is the one the
// frontend's SDPA node (v1.x, "composite" implementation) lowers to, built by hand.
#pragma once

#include <cudnn_graph.h>
#include <dlfcn.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#ifndef AISP_CUDNN_LIBRARY_HINT
#define AISP_CUDNN_LIBRARY_HINT ""
#endif

namespace aisp::ch18::flash_attention::cudnn {

// The entry points used, typed from cuDNN's own declarations (decltype links nothing).
struct Api {
  decltype(&::cudnnGetVersion) get_version;
  decltype(&::cudnnGetErrorString) error_string;
  decltype(&::cudnnGetLastErrorString) last_error;
  decltype(&::cudnnCreate) create;
  decltype(&::cudnnDestroy) destroy;
  decltype(&::cudnnSetStream) set_stream;
  decltype(&::cudnnBackendCreateDescriptor) create_descriptor;
  decltype(&::cudnnBackendDestroyDescriptor) destroy_descriptor;
  decltype(&::cudnnBackendFinalize) finalize;
  decltype(&::cudnnBackendSetAttribute) set_attribute;
  decltype(&::cudnnBackendGetAttribute) get_attribute;
  decltype(&::cudnnBackendExecute) execute;
};

// libcudnn.so.9 dispatches to sibling libraries (libcudnn_graph.so.9, the engines, ...) that it opens
// by name; loading them first from the same folder lets that work when the folder is not on the
// loader's path (pip's nvidia/cudnn/lib). Best effort: a sibling that fails here fails later, loudly.
inline void* open_with_siblings(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash != std::string::npos) {
    const std::string dir = path.substr(0, slash + 1);
    for (const char* sibling : {"libcudnn_graph.so.9", "libcudnn_ops.so.9", "libcudnn_heuristic.so.9",
                                "libcudnn_engines_precompiled.so.9", "libcudnn_engines_runtime_compiled.so.9",
                                "libcudnn_cnn.so.9", "libcudnn_adv.so.9"}) {
      dlopen((dir + sibling).c_str(), RTLD_NOW | RTLD_GLOBAL);
    }
  }
  return dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
}

template <class F>
void resolve(void* lib, F& fn, const char* name) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  if (!fn) throw std::runtime_error(std::string("cuDNN library lacks ") + name + " (cuDNN 9 needed)");
}

// Loaded once per process: $AISP_CUDNN_LIBRARY, then the library CMake found, then the loader's search.
inline const Api& api() {
  static const Api loaded = [] {
    std::vector<std::string> tried;
    if (const char* env = std::getenv("AISP_CUDNN_LIBRARY")) tried.emplace_back(env);
    if (std::string(AISP_CUDNN_LIBRARY_HINT).size() > 0) tried.emplace_back(AISP_CUDNN_LIBRARY_HINT);
    tried.emplace_back("libcudnn.so.9");
    void* lib = nullptr;
    std::string why;
    for (const auto& path : tried) {
      lib = path.find('/') == std::string::npos ? dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL)
                                                : open_with_siblings(path);
      if (lib) break;
      const char* err = dlerror();
      why += "\n  " + path + ": " + (err ? err : "not loadable");
    }
    if (!lib) {
      throw std::runtime_error(
          "cuDNN 9 not loadable (set AISP_CUDNN_LIBRARY to libcudnn.so.9, e.g. in "
          "site-packages/nvidia/cudnn/lib of the nvidia-cudnn-cu13 wheel); tried:" +
          why);
    }
    Api a{};
    resolve(lib, a.get_version, "cudnnGetVersion");
    resolve(lib, a.error_string, "cudnnGetErrorString");
    resolve(lib, a.last_error, "cudnnGetLastErrorString");
    resolve(lib, a.create, "cudnnCreate");
    resolve(lib, a.destroy, "cudnnDestroy");
    resolve(lib, a.set_stream, "cudnnSetStream");
    resolve(lib, a.create_descriptor, "cudnnBackendCreateDescriptor");
    resolve(lib, a.destroy_descriptor, "cudnnBackendDestroyDescriptor");
    resolve(lib, a.finalize, "cudnnBackendFinalize");
    resolve(lib, a.set_attribute, "cudnnBackendSetAttribute");
    resolve(lib, a.get_attribute, "cudnnBackendGetAttribute");
    resolve(lib, a.execute, "cudnnBackendExecute");
    return a;
  }();
  return loaded;
}

// cuDNN errors as exceptions, with cuDNN's own last message (which names the attribute or engine).
inline void check(cudnnStatus_t status, const char* what) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  std::array<char, 1024> detail{};
  api().last_error(detail.data(), detail.size());
  throw std::runtime_error(std::string("cuDNN: ") + what + ": " + api().error_string(status) +
                           (detail[0] ? std::string(" (") + detail.data() + ")" : std::string()));
}
#define AISP_CUDNN_CHECK(expr) ::aisp::ch18::flash_attention::cudnn::check((expr), #expr)

// One backend descriptor, destroyed with its owner.
class Descriptor {
 public:
  explicit Descriptor(cudnnBackendDescriptorType_t type) {
    AISP_CUDNN_CHECK(api().create_descriptor(type, &m_desc));
  }
  Descriptor(Descriptor&& o) noexcept : m_desc(o.m_desc) { o.m_desc = nullptr; }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  Descriptor& operator=(Descriptor&&) = delete;
  ~Descriptor() {
    if (m_desc) api().destroy_descriptor(m_desc);
  }

  template <class T>
  Descriptor& set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, const T& value) {
    AISP_CUDNN_CHECK(api().set_attribute(m_desc, name, type, 1, &value));
    return *this;
  }
  template <class T>
  Descriptor& set_array(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
                        const std::vector<T>& values) {
    AISP_CUDNN_CHECK(
        api().set_attribute(m_desc, name, type, static_cast<std::int64_t>(values.size()), values.data()));
    return *this;
  }
  Descriptor& set_descriptor(cudnnBackendAttributeName_t name, const Descriptor& d) {
    return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, d.m_desc);
  }
  Descriptor& finalize() {
    AISP_CUDNN_CHECK(api().finalize(m_desc));
    return *this;
  }
  cudnnBackendDescriptor_t get() const { return m_desc; }

 private:
  cudnnBackendDescriptor_t m_desc = nullptr;
};

// A handle, destroyed with its owner.
class Handle {
 public:
  Handle() { AISP_CUDNN_CHECK(api().create(&m_handle)); }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() {
    if (m_handle) api().destroy(m_handle);
  }
  cudnnHandle_t get() const { return m_handle; }

 private:
  cudnnHandle_t m_handle = nullptr;
};

}  // namespace aisp::ch18::flash_attention::cudnn
