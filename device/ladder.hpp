// The ladder API (docs/architecture.md "The ladder contract"): what a chapter's problem.hpp and variant
// files use. A problem owns the buffers, inputs, reference, tolerance and declared work; a variant only
// launches. No timing here, ever: the harness (device/harness.cpp) times and validates.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/base/axes.hpp"
#include "core/base/device_facts.hpp"
#include "core/base/dtype.hpp"
#include "core/base/registry.hpp"

namespace aisp {

// A view of one device tensor, for the gate (poison, compare, hash).
struct TensorView {
  std::string name;
  void* data = nullptr;
  std::size_t count = 0;  // elements
  DType dtype = DType::f32;
};

// |out - ref| <= atol + rtol * |ref|, elementwise; NaN never passes.
struct Tolerance {
  double atol = 0;
  double rtol = 0;
};

// Declared work of one launch: the fewest bytes that must cross DRAM, and the FLOPs. The optional fields
// say which measured ceiling applies (docs/ceilings.md "Placement"); leave them out for a plain copy mix.
struct Work {
  double bytes = 0;
  double flops = 0;
  double bytes_read = 0;     // of `bytes`, how many are read and written: picks DRAM read, write or copy
  double bytes_written = 0;  // (both 0 = undeclared, placed against the DRAM copy ceiling)
  std::string flop_dtype;    // "fp32" (default), "fp64", "tf32", "bf16", "fp16", "fp8": whose peak rate
  std::string ceiling;       // the bytes cross this named ceiling instead of DRAM, e.g. "p2p_1_to_0_peer"
};

class ProblemBase {
 public:
  virtual ~ProblemBase() = default;
  // Allocates the buffers for these axis values on the current device.
  virtual void allocate(const AxisValues& axes, const DeviceFacts& device) = 0;
  // Fills the inputs from `seed` and computes the reference outputs by the ladder's trusted path.
  virtual void generate(std::uint64_t seed, cudaStream_t stream) = 0;
  virtual std::vector<TensorView> inputs() const = 0;
  virtual std::vector<TensorView> outputs() const = 0;
  // One per output, same order; or none at all for a problem that judges its outputs itself
  // (judge_outputs).
  virtual std::vector<TensorView> references() const = 0;
  virtual Tolerance tolerance() const = 0;
  virtual Work work() const = 0;
  // False only for ladders whose output does not depend on the inputs (then the two seeds may agree).
  virtual bool output_depends_on_inputs() const { return true; }
  // The CPU reference at small sizes: recomputes the references from the inputs on the host and returns
  // "" when the device's references agree under tolerance(), else what differs (compare_on_host in
  // device/gate.hpp helps). The GPU test Correctness.DeviceReferencesMatchTheHost calls it after
  // generate() at the ladder's test size; the harness never does (too slow at full size). Ladders whose
  // reference needs no computing (a copy's is its input) keep the default.
  virtual bool has_host_reference() const { return false; }
  virtual std::string check_reference_on_host(cudaStream_t /*stream*/) { return {}; }
  // Called on the host before every timed sample, outside the timed interval (before the L2 flush in
  // cold mode, so that device work done here leaves nothing in the L2): a ladder whose data sits in a
  // cache the harness does not know of (the OS page cache of a file, ch05:file_to_gpu) puts it in the
  // state the ladder measures; device work it does here must be finished when it returns. Returns true
  // when it wrote new references() (ch05 moves each cold sample to a new range of its file): the harness
  // then masks them again, as after generate(). Default: nothing, false.
  virtual bool prepare_sample() { return false; }
  // For outputs that no fixed reference can judge element by element: a greedy generation's tokens,
  // which may rightly part from any one reference after a near-tie of two logits (ch16:serving). Such a
  // problem returns no references() and checks the outputs here, by its trusted path, wherever the
  // harness compares (validation, the timed-output and fresh-input checks): "" when they are right, else
  // why not. Default: nothing to judge beyond the element-wise comparison.
  virtual std::string judge_outputs(cudaStream_t /*stream*/) { return {}; }
};

// Thrown by a variant's setup() when this machine lacks, at run time, something the variant needs that
// VariantInfo::features cannot name (a library found with dlopen, its driver), or when the configuration
// is outside what the step's idea can run (ch10:hgemm 08's tile multiples, ch16:serving's unchunked
// steps under a token budget below the longest prompt): the harness records the variant as SKIPPED with
// the message as the reason, never as a pass and never as an ERROR.
class VariantUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A ladder's problem derives from this with its Args: the plain struct every variant's launch takes.
template <class ArgsT>
class Problem : public ProblemBase {
 public:
  using Args = ArgsT;
  virtual Args args() const = 0;
};

// A fact a variant reports beside its time: registers per thread, spilled bytes, predicted occupancy.
// Shown in the run's table and stored in results.json ("facts"); never a timing (the harness times).
struct Fact {
  std::string name;   // short, snake_case: "regs", "spill_bytes", "occupancy_pct"
  std::string value;  // as printed: "64", "0", "75.0"
};

// The value of the fact called `name`, or "(none)" where the list has none (tests read facts this way).
inline std::string fact_value(const std::vector<Fact>& facts, const std::string& name) {
  for (const Fact& f : facts) {
    if (f.name == name) return f.value;
  }
  return "(none)";
}

// What the harness holds for one variant.
class VariantBase {
 public:
  virtual ~VariantBase() = default;
  // Called after setup() and again after the timed launches (the later answer replaces the earlier):
  // kernel attributes and occupancy predictions (device/kernel_facts.hpp), or what a stateful variant
  // learned from its last launch.
  virtual std::vector<Fact> facts(ProblemBase& /*problem*/) { return {}; }
  // Once, before validation; may allocate scratch, create extra streams, build plans.
  virtual void setup(ProblemBase& problem, cudaStream_t stream) = 0;
  // Enqueues one launch's work on `stream` (all of it, or joined back into it before returning).
  virtual void launch(ProblemBase& problem, cudaStream_t stream) = 0;
};

struct VariantEntry {
  VariantInfo info;
  std::function<std::unique_ptr<VariantBase>()> make;
};

struct TargetEntry {
  TargetInfo info;  // info.variants mirrors `variants` (kept in ladder order)
  std::function<std::unique_ptr<ProblemBase>()> make_problem;
  std::vector<VariantEntry> variants;
};

// Every ladder linked into this binary. Filled by static registration before main().
class LadderRegistry {
 public:
  static LadderRegistry& instance();
  void add(const TargetInfo& target, std::function<std::unique_ptr<ProblemBase>()> make_problem,
           VariantEntry variant);
  std::vector<TargetInfo> catalogue() const;
  const TargetEntry* find(const std::string& target_name) const;

 private:
  std::vector<TargetEntry> m_targets;
};

namespace detail {

template <class P>
class FunctionVariant final : public VariantBase {
 public:
  using Fn = void (*)(const typename P::Args&, cudaStream_t);
  using FactsFn = std::vector<Fact> (*)(const typename P::Args&);
  explicit FunctionVariant(Fn fn, FactsFn facts = nullptr) : m_fn(fn), m_facts(facts) {}
  void setup(ProblemBase&, cudaStream_t) override {}
  void launch(ProblemBase& p, cudaStream_t s) override { m_fn(static_cast<P&>(p).args(), s); }
  std::vector<Fact> facts(ProblemBase& p) override {
    return m_facts ? m_facts(static_cast<P&>(p).args()) : std::vector<Fact>{};
  }

 private:
  Fn m_fn;
  FactsFn m_facts;
};

// V provides setup(const Args&, cudaStream_t) and launch(const Args&, cudaStream_t); its destructor
// releases what setup made. It may also provide std::vector<Fact> facts(const Args&).
template <class P, class V>
class StatefulVariant final : public VariantBase {
 public:
  void setup(ProblemBase& p, cudaStream_t s) override { m_v.setup(static_cast<P&>(p).args(), s); }
  void launch(ProblemBase& p, cudaStream_t s) override { m_v.launch(static_cast<P&>(p).args(), s); }
  std::vector<Fact> facts(ProblemBase& p) override {
    if constexpr (requires { m_v.facts(static_cast<P&>(p).args()); }) {
      return m_v.facts(static_cast<P&>(p).args());
    } else {
      return {};
    }
  }

 private:
  V m_v;
};

template <class P>
bool register_variant(VariantInfo info, std::function<std::unique_ptr<VariantBase>()> make) {
  LadderRegistry::instance().add(P::target_info(), [] { return std::make_unique<P>(); },
                                 VariantEntry{std::move(info), std::move(make)});
  return true;
}

}  // namespace detail
}  // namespace aisp

// In a variant file, after `void launch(const Args&, cudaStream_t)`:
//   AISP_REGISTER_VARIANT(CopyProblem, launch, .step = 2, .slug = "coalesced",
//                         .kind = aisp::VariantKind::step, .summary = "...");
#define AISP_REGISTER_VARIANT(ProblemT, launch_fn, ...)                                        \
  [[maybe_unused]] static const bool aisp_variant_registered_ =                                \
      ::aisp::detail::register_variant<ProblemT>(::aisp::VariantInfo{__VA_ARGS__}, [] {        \
        return std::unique_ptr<::aisp::VariantBase>(                                           \
            new ::aisp::detail::FunctionVariant<ProblemT>(&launch_fn));                        \
      })

// The same, with a function std::vector<Fact> facts_fn(const Args&) reporting the variant's facts:
//   AISP_REGISTER_VARIANT_WITH_FACTS(ProblemT, launch, facts, .step = 2, ...);
#define AISP_REGISTER_VARIANT_WITH_FACTS(ProblemT, launch_fn, facts_fn, ...)                  \
  [[maybe_unused]] static const bool aisp_variant_registered_ =                                \
      ::aisp::detail::register_variant<ProblemT>(::aisp::VariantInfo{__VA_ARGS__}, [] {        \
        return std::unique_ptr<::aisp::VariantBase>(                                           \
            new ::aisp::detail::FunctionVariant<ProblemT>(&launch_fn, &facts_fn));             \
      })

// For a variant with state: a class with setup(const Args&, cudaStream_t) and launch(...).
#define AISP_REGISTER_STATEFUL_VARIANT(ProblemT, VariantT, ...)                                \
  [[maybe_unused]] static const bool aisp_variant_registered_ =                                \
      ::aisp::detail::register_variant<ProblemT>(::aisp::VariantInfo{__VA_ARGS__}, [] {        \
        return std::unique_ptr<::aisp::VariantBase>(                                           \
            new ::aisp::detail::StatefulVariant<ProblemT, VariantT>());                        \
      })
