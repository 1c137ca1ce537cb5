// ch13:allocator — the training step every variant runs, as host code: the allocation schedule (which
// buffer is allocated and freed when), the host reference of its output, and the schedule's peak of live
// bytes. Plain C++ (no CUDA headers) so that the CPU tests can drive the same schedule through the caching
// allocator with a fake backing allocator; problem.hpp and training_step.cu take everything from here.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

namespace aisp::ch13::allocator {

// The shape of one step: `n` input (x) and output values, and the fp32 count of each layer's activation,
// which is also the count of that layer's gradient. Fixed for a run: every step allocates the same
// sequence of sizes, as a training loop does.
struct StepPlan {
  std::size_t n = 0;
  std::vector<std::size_t> counts;
};

// The seed of the layer sizes: a constant, not the harness's input seed, so that the allocation pattern is
// the same for both validation seeds and every timed step (only the values in the buffers change).
inline constexpr std::uint64_t k_pattern_seed = 0x13a110c8;

// splitmix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014): spelled
// out rather than a <random> distribution, whose output is not specified across standard libraries.
inline std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Layer sizes log-uniform in [max_count / 512, max_count] fp32 values (at least 1): a few large tensors
// and many small ones, as a network's activations are, and odd counts, so that rounding to size classes is
// exercised. Deterministic in (layers, max_count, seed).
inline StepPlan make_plan(std::size_t n, std::size_t layers, std::size_t max_count,
                          std::uint64_t seed = k_pattern_seed) {
  StepPlan plan;
  plan.n = n;
  const double lo = std::log(static_cast<double>(std::max<std::size_t>(1, max_count / 512)));
  const double hi = std::log(static_cast<double>(max_count));
  std::uint64_t state = seed;
  for (std::size_t i = 0; i < layers; ++i) {
    const double u = static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;  // [0, 1)
    const auto count = static_cast<std::size_t>(std::exp(lo + u * (hi - lo)));
    plan.counts.push_back(std::clamp<std::size_t>(count, 1, max_count));
  }
  return plan;
}

// The arithmetic, per element, each operation one fp32 rounding (explicit fma here and __fmaf_rn on the
// device, so that compiler contraction cannot change a bit and the gate can demand exact equality):
//   forward  act_i[j] = fma(1/2, src[j mod |src|], bias_i)   src = x for layer 0, else act_{i-1}
//   backward g_i[j]   = fma(1/2, up[j mod |up|], act_i[j])   up = g_{i+1}, or act_{L-1} for the top layer
//   output   out[k]   = g_0[k mod |g_0|]
// With x in [-1, 1) and |bias| <= 3/8, every activation stays within 7/8 and every gradient within 7/4:
// no overflow, no values decaying to nothing, however many layers.
inline constexpr float k_decay = 0.5f;
inline float layer_bias(std::size_t i) { return static_cast<float>(static_cast<int>(i % 7) - 3) * 0.125f; }
inline float forward_value(float src, std::size_t layer) { return std::fma(k_decay, src, layer_bias(layer)); }
inline float backward_value(float up, float act) { return std::fma(k_decay, up, act); }

// One training step's buffers in the order a framework's autograd uses them: every activation allocated
// in the forward pass and kept for the backward; in the backward pass each layer allocates its gradient,
// then frees the gradient it consumed and its own activation. `Ops` supplies the memory and the "kernels":
//   float* allocate(std::size_t count);   void release(float* p);
//   void forward(std::size_t i, float* act, const float* src, std::size_t src_count);
//   void backward(std::size_t i, float* g, const float* up, std::size_t up_count, const float* act);
//   void output(const float* g0, std::size_t g0_count);
// The variants run it with device memory and kernels (training_step.cu), the host reference with host
// memory and loops, the CPU tests with a fake allocator and no arithmetic at all.
template <class Ops>
void run_step(const StepPlan& plan, const float* x, Ops& ops) {
  const std::size_t layers = plan.counts.size();
  std::vector<float*> acts(layers);
  for (std::size_t i = 0; i < layers; ++i) {
    acts[i] = ops.allocate(plan.counts[i]);
    if (i == 0) {
      ops.forward(0, acts[0], x, plan.n);
    } else {
      ops.forward(i, acts[i], acts[i - 1], plan.counts[i - 1]);
    }
  }
  float* up = acts[layers - 1];  // the loss's gradient is the last activation itself
  std::size_t up_count = plan.counts[layers - 1];
  float* grad = nullptr;
  for (std::size_t i = layers; i-- > 0;) {
    grad = ops.allocate(plan.counts[i]);
    ops.backward(i, grad, up, up_count, acts[i]);
    if (i + 1 < layers) ops.release(up);  // g_{i+1}: consumed
    ops.release(acts[i]);                 // act_i: its last reader has run
    up = grad;
    up_count = plan.counts[i];
  }
  ops.output(grad, plan.counts[0]);
  ops.release(grad);
}

// Host memory and loops: the reference the GPU test compares the device reference with.
class HostStepOps {
 public:
  HostStepOps(const StepPlan& plan, std::vector<float>& out) : m_plan(plan), m_out(out) {}
  float* allocate(std::size_t count) {
    auto block = std::make_unique<float[]>(count);
    float* p = block.get();
    m_blocks.emplace(p, std::move(block));
    return p;
  }
  void release(float* p) { m_blocks.erase(p); }
  void forward(std::size_t i, float* act, const float* src, std::size_t src_count) {
    for (std::size_t j = 0; j < m_plan.counts[i]; ++j) act[j] = forward_value(src[j % src_count], i);
  }
  void backward(std::size_t i, float* g, const float* up, std::size_t up_count, const float* act) {
    for (std::size_t j = 0; j < m_plan.counts[i]; ++j) g[j] = backward_value(up[j % up_count], act[j]);
  }
  void output(const float* g0, std::size_t g0_count) {
    m_out.resize(m_plan.n);
    for (std::size_t k = 0; k < m_plan.n; ++k) m_out[k] = g0[k % g0_count];
  }
  std::size_t live_blocks() const { return m_blocks.size(); }

 private:
  const StepPlan& m_plan;
  std::vector<float>& m_out;
  std::unordered_map<float*, std::unique_ptr<float[]>> m_blocks;
};

inline std::vector<float> step_reference(const StepPlan& plan, const std::vector<float>& x) {
  std::vector<float> out;
  HostStepOps ops(plan, out);
  run_step(plan, x.data(), ops);
  return out;
}

// The same output, one element at a time with no buffers: out[k] follows a chain of indices through the
// layers (g_0 at m_0 = k mod c_0, g_1 at m_1 = m_0 mod c_1, ...), and act_i at any index follows its own
// chain down to x. O(L^2) per element: a second derivation that the CPU test checks against the layered
// one, so that a slip in run_step's order cannot hide in both.
inline float output_element(const StepPlan& plan, const std::vector<float>& x, std::size_t k) {
  const std::size_t layers = plan.counts.size();
  auto act_at = [&](std::size_t i, std::size_t m) {
    std::vector<std::size_t> index(i + 1);
    index[i] = m;
    for (std::size_t l = i; l > 0; --l) index[l - 1] = index[l] % plan.counts[l - 1];
    float a = forward_value(x[index[0] % plan.n], 0);
    for (std::size_t l = 1; l <= i; ++l) a = forward_value(a, l);
    return a;
  };
  std::vector<std::size_t> m(layers);
  m[0] = k % plan.counts[0];
  for (std::size_t i = 1; i < layers; ++i) m[i] = m[i - 1] % plan.counts[i];
  const float top = act_at(layers - 1, m[layers - 1]);
  float g = backward_value(top, top);
  for (std::size_t i = layers - 1; i-- > 0;) g = backward_value(g, act_at(i, m[i]));
  return g;
}

// The step's peak of live requested bytes: the least memory any allocator could serve it from (before
// rounding and alignment), and what each variant's reserved memory is compared with.
inline std::size_t peak_live_bytes(const StepPlan& plan) {
  struct Counter {
    const StepPlan& plan;
    std::unordered_map<float*, std::size_t> sizes;
    std::size_t live = 0, peak = 0, next = 1;
    float* allocate(std::size_t count) {
      auto* p = reinterpret_cast<float*>(next++ * 16);  // distinct fake addresses, never dereferenced
      sizes[p] = count * sizeof(float);
      live += count * sizeof(float);
      peak = std::max(peak, live);
      return p;
    }
    void release(float* p) {
      live -= sizes.at(p);
      sizes.erase(p);
    }
    void forward(std::size_t, float*, const float*, std::size_t) {}
    void backward(std::size_t, float*, const float*, std::size_t, const float*) {}
    void output(const float*, std::size_t) {}
  } counter{plan, {}};
  run_step(plan, nullptr, counter);
  return counter.peak;
}

}  // namespace aisp::ch13::allocator
