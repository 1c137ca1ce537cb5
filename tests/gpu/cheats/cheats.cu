// cheats:scale — a hidden ladder of variants that cheat, each in one way the harness must catch
// (docs/trust.md; ../shared/docs/measurement.md "Audit"). The problem is out[i] = 3 * in[i] + 1 in fp32.
// tests/gpu/test_cheats.cpp runs them all and checks each verdict. Fixtures, not a ladder to learn from:
// they share one file so that the whole catalogue of cheats reads in one place.
#include <cuda.h>
#include <cuda_bf16.h>

#include <cmath>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "device/buffer.hpp"
#include "device/cuda_check.hpp"
#include "device/gate.hpp"
#include "device/harness.hpp"
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

// ---- Cheats of a careful adversary (issue "Trust II"): each passed every check above before the check
// named in its summary existed. tests/gpu/test_cheats.cpp runs them with that check off (they must get
// past everything else) and on (they must be caught).

// Cheat 12: finds the reference buffer next to its own arguments and copies it. The problem allocated
// in, out and ref one after another, so the reference is the allocation of the same size just past (or
// before) one of them. Caught by reference masking: what it copies is noise (FAIL).
namespace reference_thief {
using GetRange = CUresult (*)(CUdeviceptr*, std::size_t*, CUdeviceptr);
GetRange get_address_range() {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  AISP_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000, cudaEnableDefault, &found));
  if (found != cudaDriverEntryPointSuccess || !fn) throw std::runtime_error("cuMemGetAddressRange not found");
  return reinterpret_cast<GetRange>(fn);
}
struct V {
  const float* ref = nullptr;
  void setup(const Args& a, cudaStream_t) {
    const GetRange range = get_address_range();
    CUdeviceptr in_base = 0, out_base = 0;
    std::size_t in_size = 0, out_size = 0;
    if (range(&in_base, &in_size, reinterpret_cast<CUdeviceptr>(a.in)) != CUDA_SUCCESS ||
        range(&out_base, &out_size, reinterpret_cast<CUdeviceptr>(a.out)) != CUDA_SUCCESS) {
      throw std::runtime_error("reference_thief: the arguments are not device allocations");
    }
    for (const CUdeviceptr guess : {out_base + out_size, in_base + in_size, in_base - out_size, out_base - out_size}) {
      CUdeviceptr base = 0;
      std::size_t size = 0;
      if (guess != in_base && guess != out_base && range(&base, &size, guess) == CUDA_SUCCESS && base == guess &&
          size == out_size) {
        ref = reinterpret_cast<const float*>(guess);
        return;
      }
    }
    throw std::runtime_error("reference_thief: no allocation of the output's size next to the arguments");
  }
  void launch(const Args& a, cudaStream_t s) {
    AISP_CUDA_CHECK(cudaMemcpyAsync(a.out, ref, a.n * sizeof(float), cudaMemcpyDeviceToDevice, s));
  }
};
AISP_REGISTER_STATEFUL_VARIANT(ScaleProblem, V, AISP_CHEAT(12, "reference_thief", "copies the reference found next to its arguments: FAIL (masked reference)"));
}  // namespace reference_thief

// A fingerprint of the inputs, on the GPU (no host sync): a hash of 4096 sampled elements, by one block.
__device__ unsigned long long fingerprint(const float* in, std::size_t n) {
  __shared__ unsigned long long part[256];
  unsigned long long h = 0;
  for (std::size_t k = threadIdx.x; k < 4096; k += blockDim.x) {
    const std::size_t i = (k * 2654435761ULL) % n;
    h += (static_cast<unsigned long long>(__float_as_uint(in[i])) + 0x9e3779b97f4a7c15ULL) * (2 * k + 1);
  }
  part[threadIdx.x] = h;
  __syncthreads();
  unsigned long long total = 0;
  if (threadIdx.x == 0) {
    for (int t = 0; t < 256; ++t) total += part[t];
  }
  return total;
}

// Cheat 13: remembers the fingerprint of its last inputs and replays its stored output when they repeat.
// Its real work is slow (each thread a contiguous chunk: uncoalesced); the replay is a fast copy. Right
// on every check that reuses inputs; caught by the fresh-inputs check (INVALID: slower on fresh inputs).
__global__ void replay_decide_kernel(const float* in, std::size_t n, unsigned long long* last, int* hit) {
  const unsigned long long f = fingerprint(in, n);
  if (threadIdx.x == 0) {
    *hit = f == *last;
    *last = f;
  }
}
__global__ void slow_scale_kernel(const float* in, float* out, std::size_t n, const int* hit) {
  if (*hit) return;
  const std::size_t threads = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t chunk = (n + threads - 1) / threads;
  const std::size_t begin = (blockIdx.x * blockDim.x + threadIdx.x) * chunk;
  for (std::size_t i = begin; i < begin + chunk && i < n; ++i) out[i] = fmaf(3.0f, in[i], 1.0f);
}
__global__ void replay_or_save_kernel(float* out, float* saved, std::size_t n, const int* hit) {
  const bool replay = *hit;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    if (replay) out[i] = saved[i];
    else saved[i] = out[i];
  }
}
namespace replay {
struct V {
  DeviceBuffer<float> saved;
  DeviceBuffer<unsigned long long> last;
  DeviceBuffer<int> hit;
  void setup(const Args& a, cudaStream_t s) {
    saved = DeviceBuffer<float>(a.n);
    last = DeviceBuffer<unsigned long long>(1);
    hit = DeviceBuffer<int>(1);
    AISP_CUDA_CHECK(cudaMemsetAsync(last.data(), 0, sizeof(unsigned long long), s));
  }
  void launch(const Args& a, cudaStream_t s) {
    replay_decide_kernel<<<1, 256, 0, s>>>(a.in, a.n, last.data(), hit.data());
    AISP_CHECK_LAUNCH();
    slow_scale_kernel<<<256, 256, 0, s>>>(a.in, a.out, a.n, hit.data());
    AISP_CHECK_LAUNCH();
    replay_or_save_kernel<<<256, 256, 0, s>>>(a.out, saved.data(), a.n, hit.data());
    AISP_CHECK_LAUNCH();
  }
};
AISP_REGISTER_STATEFUL_VARIANT(ScaleProblem, V, AISP_CHEAT(13, "replay", "replays its stored output when the inputs repeat: INVALID (fresh inputs)"));
}  // namespace replay

// Cheat 14: knows the harness's two validation seeds (they are no secret: HarnessConfig), generates
// both seeds' inputs itself in setup and keeps both answers; launch() copies the one whose fingerprint
// matches. Right on both seeds and when timed; caught by the fresh-inputs check (FAIL: wrong on a seed
// drawn at run time).
__global__ void pick_answer_kernel(const float* in, std::size_t n, const unsigned long long* known, int count,
                                   int* pick) {
  const unsigned long long f = fingerprint(in, n);
  if (threadIdx.x == 0) {
    int p = count - 1;
    for (int k = 0; k < count; ++k) {
      if (known[k] == f) p = k;
    }
    *pick = p;
  }
}
__global__ void fingerprint_kernel(const float* in, std::size_t n, unsigned long long* out) {
  const unsigned long long f = fingerprint(in, n);
  if (threadIdx.x == 0) *out = f;
}
__global__ void copy_picked_kernel(float* out, const float* answers, std::size_t n, const int* pick) {
  const float* answer = answers + static_cast<std::size_t>(*pick) * n;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = answer[i];
}
namespace known_seeds {
struct V {
  DeviceBuffer<float> answers, scratch;
  DeviceBuffer<unsigned long long> known;
  DeviceBuffer<int> pick;
  int count = 0;
  void setup(const Args& a, cudaStream_t s) {
    const auto seeds = HarnessConfig{}.seeds;
    count = static_cast<int>(seeds.size());
    answers = DeviceBuffer<float>(a.n * seeds.size());
    scratch = DeviceBuffer<float>(a.n);
    known = DeviceBuffer<unsigned long long>(seeds.size());
    pick = DeviceBuffer<int>(1);
    for (int k = 0; k < count; ++k) {
      fill_uniform({"in", scratch.data(), a.n, DType::f32}, seeds[k], -1.0, 1.0, s);  // as the problem does
      scale(scratch.data(), answers.data() + k * a.n, 0, a.n, s);
      fingerprint_kernel<<<1, 256, 0, s>>>(scratch.data(), a.n, known.data() + k);
      AISP_CHECK_LAUNCH();
    }
  }
  void launch(const Args& a, cudaStream_t s) {
    pick_answer_kernel<<<1, 256, 0, s>>>(a.in, a.n, known.data(), count, pick.data());
    AISP_CHECK_LAUNCH();
    copy_picked_kernel<<<256, 256, 0, s>>>(a.out, answers.data(), a.n, pick.data());
    AISP_CHECK_LAUNCH();
  }
};
AISP_REGISTER_STATEFUL_VARIANT(ScaleProblem, V, AISP_CHEAT(14, "known_seeds", "answers for the two known seeds precomputed: FAIL (fresh inputs)"));
}  // namespace known_seeds

// Cheat 15: honest for its first launches (the audit before validation, the validation itself), then
// runs half the work on a stream of its own, started at once and never joined: the timed window sees
// half the work. Caught by the audit among the timed rounds or at the timed-output launch (INVALID).
namespace late_side_stream {
struct V {
  static constexpr int k_honest_launches = 8;
  cudaStream_t side = nullptr;
  int calls = 0;
  void setup(const Args&, cudaStream_t) { AISP_CUDA_CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking)); }
  void launch(const Args& a, cudaStream_t s) {
    if (++calls <= k_honest_launches) return scale(a.in, a.out, 0, a.n, s);
    scale(a.in, a.out, a.n / 2, a.n, side);
    scale(a.in, a.out, 0, a.n / 2, s);
  }
  ~V() {
    if (side) {
      cudaStreamSynchronize(side);
      cudaStreamDestroy(side);
    }
  }
};
AISP_REGISTER_STATEFUL_VARIANT(ScaleProblem, V, AISP_CHEAT(15, "late_side_stream", "honest at first, then half the work on an unjoined stream: INVALID (timed audit)"));
}  // namespace late_side_stream

// Cheat 16: computes on the host inside launch(): copies the input to the host, computes there, copies
// the answer back (all synchronous), and enqueues only a tiny kernel on the harness stream, which is all
// the GPU clock sees. Caught by the host-time rule on every timed sample, and by the audit (INVALID).
namespace host_compute {
struct V {
  std::vector<float> host;
  void setup(const Args& a, cudaStream_t) { host.resize(a.n); }
  void launch(const Args& a, cudaStream_t s) {
    AISP_CUDA_CHECK(cudaMemcpy(host.data(), a.in, a.n * sizeof(float), cudaMemcpyDeviceToHost));
    for (auto& x : host) x = std::fma(3.0f, x, 1.0f);
    AISP_CUDA_CHECK(cudaMemcpy(a.out, host.data(), a.n * sizeof(float), cudaMemcpyHostToDevice));
    tiny_kernel<<<1, 1, 0, s>>>();
    AISP_CHECK_LAUNCH();
  }
};
AISP_REGISTER_STATEFUL_VARIANT(ScaleProblem, V, AISP_CHEAT(16, "host_compute", "computes on the host inside launch(): INVALID (host time)"));
}  // namespace host_compute

}  // namespace aisp::cheats
