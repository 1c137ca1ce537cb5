// cheats:scale — a hidden ladder of variants that cheat, each in one way the harness must catch
// (docs/trust.md; ../shared/docs/measurement.md "Audit"). The problem is out[i] = 3 * in[i] + 1 in fp32.
// tests/gpu/test_cheats.cpp runs them all and checks each verdict. Fixtures, not a ladder to learn from:
// they share one file so that the whole catalogue of cheats reads in one place.
#include <cuda_bf16.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "device/buffer.hpp"
#include "device/cuda_check.hpp"
#include "device/gate.hpp"
#include "device/ladder.hpp"

namespace aisp::cheats {

struct Args {
  float* in;  // not const: one cheat writes to it
  float* out;
  std::size_t n;
};

__global__ void scale_kernel(const float* in, float* out, std::size_t begin, std::size_t end) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = begin + blockIdx.x * blockDim.x + threadIdx.x; i < end; i += stride) {
    out[i] = fmaf(3.0f, in[i], 1.0f);
  }
}

void scale(const float* in, float* out, std::size_t begin, std::size_t end, cudaStream_t s) {
  if (end <= begin) return;
  scale_kernel<<<256, 256, 0, s>>>(in, out, begin, end);
  AISP_CHECK_LAUNCH();
}

class ScaleProblem final : public Problem<Args> {
 public:
  static TargetInfo target_info() {
    return {.chapter = "cheats",
            .ladder = "scale",
            .summary = "out = 3 * in + 1 (fp32): variants that cheat, each of which must be caught",
            .axes = {{.name = "n", .default_value = std::int64_t{1} << 22, .help = "fp32 elements",
                      .test_value = std::int64_t{1} << 20}},
            .hidden = true};
  }
  void allocate(const AxisValues& axes, const DeviceFacts&) override {
    m_n = static_cast<std::size_t>(axes.at("n"));
    m_in = DeviceBuffer<float>(m_n);
    m_out = DeviceBuffer<float>(m_n);
    m_ref = DeviceBuffer<float>(m_n);
  }
  void generate(std::uint64_t seed, cudaStream_t s) override {
    fill_uniform(inputs().front(), seed, -1.0, 1.0, s);
    scale(m_in.data(), m_ref.data(), 0, m_n, s);  // the trusted reference: the honest kernel
  }
  std::vector<TensorView> inputs() const override { return {{"in", m_in.data(), m_n, DType::f32}}; }
  std::vector<TensorView> outputs() const override { return {{"out", m_out.data(), m_n, DType::f32}}; }
  std::vector<TensorView> references() const override { return {{"ref", m_ref.data(), m_n, DType::f32}}; }
  Tolerance tolerance() const override { return {1e-6, 1e-6}; }  // fp32: a rounding step at most
  Work work() const override { return {8.0 * static_cast<double>(m_n), 2.0 * static_cast<double>(m_n)}; }
  Args args() const override { return {m_in.data(), m_out.data(), m_n}; }

 private:
  std::size_t m_n = 0;
  DeviceBuffer<float> m_in, m_out, m_ref;
};

#define AISP_CHEAT(step_, slug_, summary_) \
  .step = step_, .slug = slug_, .kind = step_ == 1 ? VariantKind::baseline : VariantKind::step, .summary = summary_

namespace honest {
void launch(const Args& a, cudaStream_t s) { scale(a.in, a.out, 0, a.n, s); }
AISP_REGISTER_VARIANT(ScaleProblem, launch, AISP_CHEAT(1, "honest", "the honest kernel: PASS"));
}  // namespace honest

// Cheat 1: the work runs on a stream of its own and is never joined back into the harness stream.
namespace own_stream {
struct V {
  cudaStream_t side = nullptr;
  void setup(const Args&, cudaStream_t) { AISP_CUDA_CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking)); }
  void launch(const Args& a, cudaStream_t) { scale(a.in, a.out, 0, a.n, side); }
  ~V() { if (side) cudaStreamDestroy(side); }
};
AISP_REGISTER_STATEFUL_VARIANT(ScaleProblem, V, AISP_CHEAT(2, "own_stream", "own stream, never joined: INVALID"));
}  // namespace own_stream

// Cheat 2: writes only the first half of the output.
namespace half_output {
void launch(const Args& a, cudaStream_t s) { scale(a.in, a.out, 0, a.n / 2, s); }
AISP_REGISTER_VARIANT(ScaleProblem, launch, AISP_CHEAT(3, "half_output", "writes half the output: FAIL"));
}  // namespace half_output

// Cheat 3: computes the answer in setup() and only copies it in launch().
namespace precomputed {
struct V {
  DeviceBuffer<float> answer;
  void setup(const Args& a, cudaStream_t s) {
    answer = DeviceBuffer<float>(a.n);
    scale(a.in, answer.data(), 0, a.n, s);
  }
  void launch(const Args& a, cudaStream_t s) {
    AISP_CUDA_CHECK(cudaMemcpyAsync(a.out, answer.data(), a.n * sizeof(float), cudaMemcpyDeviceToDevice, s));
  }
};
AISP_REGISTER_STATEFUL_VARIANT(ScaleProblem, V, AISP_CHEAT(4, "precomputed", "answer computed in setup: FAIL (second seed)"));
}  // namespace precomputed

// Cheat 4: computes once, then returns the cached result on every later call.
namespace cached {
struct V {
  DeviceBuffer<float> cache;
  bool filled = false;
  void setup(const Args& a, cudaStream_t) { cache = DeviceBuffer<float>(a.n); }
  void launch(const Args& a, cudaStream_t s) {
    if (!filled) {
      scale(a.in, cache.data(), 0, a.n, s);
      filled = true;
    }
    AISP_CUDA_CHECK(cudaMemcpyAsync(a.out, cache.data(), a.n * sizeof(float), cudaMemcpyDeviceToDevice, s));
  }
};
AISP_REGISTER_STATEFUL_VARIANT(ScaleProblem, V, AISP_CHEAT(5, "cached", "first call's result cached: FAIL"));
}  // namespace cached

// Cheat 5: modifies its input in place (here: overwrites it with the output).
namespace in_place {
void launch(const Args& a, cudaStream_t s) {
  scale(a.in, a.out, 0, a.n, s);
  AISP_CUDA_CHECK(cudaMemcpyAsync(a.in, a.out, a.n * sizeof(float), cudaMemcpyDeviceToDevice, s));
}
AISP_REGISTER_VARIANT(ScaleProblem, launch, AISP_CHEAT(6, "in_place", "modifies its input: FAIL"));
}  // namespace in_place

// Cheat 6: a tiny kernel on the harness stream, then a host callback that hands the real work to a thread,
// which launches it after launch() has returned and the timed window has closed.
__global__ void tiny_kernel() {}
namespace host_callback {
struct V {
  cudaStream_t side = nullptr;
  int device = 0;
  std::mutex m;
  std::condition_variable cv;
  bool go = false, quit = false;
  Args args{};
  std::thread worker;
  void setup(const Args&, cudaStream_t) {
    AISP_CUDA_CHECK(cudaGetDevice(&device));
    AISP_CUDA_CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    worker = std::thread([this] {
      cudaSetDevice(device);
      std::unique_lock lock(m);
      while (true) {
        cv.wait(lock, [this] { return go || quit; });
        if (quit) return;
        go = false;
        scale(args.in, args.out, 0, args.n, side);
      }
    });
  }
  static void CUDART_CB notify(void* self) {
    auto* v = static_cast<V*>(self);
    std::lock_guard lock(v->m);
    v->go = true;
    v->cv.notify_one();
  }
  void launch(const Args& a, cudaStream_t s) {
    args = a;
    tiny_kernel<<<1, 1, 0, s>>>();
    AISP_CHECK_LAUNCH();
    AISP_CUDA_CHECK(cudaLaunchHostFunc(s, notify, this));
  }
  ~V() {
    {
      std::lock_guard lock(m);
      quit = true;
    }
    cv.notify_one();
    if (worker.joinable()) worker.join();
    if (side) {
      cudaStreamSynchronize(side);
      cudaStreamDestroy(side);
    }
  }
};
AISP_REGISTER_STATEFUL_VARIANT(ScaleProblem, V, AISP_CHEAT(7, "host_callback", "real work launched from a host callback: INVALID"));
}  // namespace host_callback

// Cheat 7: the kernel runs on a second GPU, reading and writing the first one's memory through peer access.
namespace other_gpu {
struct V {
  int home = 0, other = 1;
  cudaStream_t remote = nullptr;
  cudaEvent_t fork = nullptr, join = nullptr;  // each created on the device whose stream records it
  void setup(const Args&, cudaStream_t) {
    AISP_CUDA_CHECK(cudaGetDevice(&home));
    other = home == 0 ? 1 : 0;
    AISP_CUDA_CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    AISP_CUDA_CHECK(cudaSetDevice(other));
    const cudaError_t st = cudaDeviceEnablePeerAccess(home, 0);
    if (st != cudaSuccess && st != cudaErrorPeerAccessAlreadyEnabled) AISP_CUDA_CHECK(st);
    cudaGetLastError();
    AISP_CUDA_CHECK(cudaStreamCreateWithFlags(&remote, cudaStreamNonBlocking));
    AISP_CUDA_CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
    AISP_CUDA_CHECK(cudaSetDevice(home));
  }
  void launch(const Args& a, cudaStream_t s) {
    AISP_CUDA_CHECK(cudaEventRecord(fork, s));
    AISP_CUDA_CHECK(cudaSetDevice(other));
    AISP_CUDA_CHECK(cudaStreamWaitEvent(remote, fork, 0));
    scale(a.in, a.out, 0, a.n, remote);
    AISP_CUDA_CHECK(cudaEventRecord(join, remote));
    AISP_CUDA_CHECK(cudaSetDevice(home));
    AISP_CUDA_CHECK(cudaStreamWaitEvent(s, join, 0));
  }
  ~V() {
    if (remote) cudaStreamDestroy(remote);
    if (fork) cudaEventDestroy(fork);
    if (join) cudaEventDestroy(join);
  }
};
AISP_REGISTER_STATEFUL_VARIANT(ScaleProblem, V, AISP_CHEAT(8, "other_gpu", "runs on another GPU: INVALID (SKIPPED on one GPU)"),
                               .features = {"multi_gpu"});
}  // namespace other_gpu

// Cheat 8: computes in bf16 inside an fp32 ladder, without declaring it.
__global__ void scale_bf16_kernel(const float* in, float* out, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    const __nv_bfloat16 x = __float2bfloat16(in[i]);
    out[i] = __bfloat162float(__hfma(__float2bfloat16(3.0f), x, __float2bfloat16(1.0f)));
  }
}
namespace bf16 {
void launch(const Args& a, cudaStream_t s) {
  scale_bf16_kernel<<<256, 256, 0, s>>>(a.in, a.out, a.n);
  AISP_CHECK_LAUNCH();
}
AISP_REGISTER_VARIANT(ScaleProblem, launch, AISP_CHEAT(9, "bf16", "silent bf16 arithmetic: FAIL"));
}  // namespace bf16

// Cheat 9: does a tenth of the work while the problem declares all of it.
namespace tenth {
void launch(const Args& a, cudaStream_t s) { scale(a.in, a.out, 0, a.n / 10, s); }
AISP_REGISTER_VARIANT(ScaleProblem, launch, AISP_CHEAT(10, "tenth", "a tenth of the work: FAIL"));
}  // namespace tenth

// Not a cheat: two streams, forked from and joined back into the harness stream with events. Must PASS.
namespace two_streams {
struct V {
  cudaStream_t side = nullptr;
  cudaEvent_t fork = nullptr, join = nullptr;
  void setup(const Args&, cudaStream_t) {
    AISP_CUDA_CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    AISP_CUDA_CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    AISP_CUDA_CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
  }
  void launch(const Args& a, cudaStream_t s) {
    AISP_CUDA_CHECK(cudaEventRecord(fork, s));
    AISP_CUDA_CHECK(cudaStreamWaitEvent(side, fork, 0));
    scale(a.in, a.out, 0, a.n / 2, s);
    scale(a.in, a.out, a.n / 2, a.n, side);
    AISP_CUDA_CHECK(cudaEventRecord(join, side));
    AISP_CUDA_CHECK(cudaStreamWaitEvent(s, join, 0));
  }
  ~V() {
    if (side) cudaStreamDestroy(side);
    if (fork) cudaEventDestroy(fork);
    if (join) cudaEventDestroy(join);
  }
};
AISP_REGISTER_STATEFUL_VARIANT(ScaleProblem, V, AISP_CHEAT(11, "two_streams", "honest fork/join on two streams: PASS"));
}  // namespace two_streams

}  // namespace aisp::cheats
