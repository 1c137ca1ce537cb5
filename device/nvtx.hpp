// NVTX ranges around the harness's launches, so that external profilers (Nsight Systems, Nsight Compute's
// --nvtx-include) can pick out one variant's kernels by name: "chNN:ladder:NN_slug" around every validated,
// audited, warm-up and timed launch, "profile:chNN:ladder:NN_slug" around the one launch `aisp profile`
// measures. NVTX v3 is header-only (it finds an attached tool through dlopen); with no tool attached a
// push/pop pair costs nanoseconds, far below the microseconds of the launch it wraps.
#pragma once

#include <nvtx3/nvToolsExt.h>

#include <memory>
#include <string>
#include <utility>

#include "device/ladder.hpp"

namespace aisp {

class NvtxRange {
 public:
  explicit NvtxRange(const char* name) { nvtxRangePushA(name); }
  ~NvtxRange() { nvtxRangePop(); }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

namespace detail {

class NvtxNamedVariant final : public VariantBase {
 public:
  NvtxNamedVariant(std::unique_ptr<VariantBase> inner, std::string name)
      : m_inner(std::move(inner)), m_name(std::move(name)) {}
  void setup(ProblemBase& p, cudaStream_t s) override { m_inner->setup(p, s); }
  void launch(ProblemBase& p, cudaStream_t s) override {
    const NvtxRange range(m_name.c_str());
    m_inner->launch(p, s);
  }
  std::vector<Fact> facts(ProblemBase& p) override { return m_inner->facts(p); }

 private:
  std::unique_ptr<VariantBase> m_inner;
  std::string m_name;
};

}  // namespace detail

// The variant with every launch inside an NVTX range named `name`: wrapping the object once, where the
// harness makes it, covers every launch site of the pass, present and future.
inline std::unique_ptr<VariantBase> with_nvtx_range(std::unique_ptr<VariantBase> variant, std::string name) {
  return std::make_unique<detail::NvtxNamedVariant>(std::move(variant), std::move(name));
}

}  // namespace aisp
