// FP32 and FP64 FMA rates on the CUDA cores, and the launch latencies and timer noise floor.
#include <chrono>
#include <cmath>
#include <fmt/format.h>

#include "core/measure/stats.hpp"
#include "device/buffer.hpp"
#include "device/cuda_check.hpp"
#include "device/probe_kernels.hpp"
#include "device/probes_internal.hpp"

namespace aisp::probe {

namespace {

// b = 1 + 2^-16 and c = 2^-10 are exact in both precisions; the chains grow by about e^(iters / 65536),
// far from overflow, and every step changes every value.
template <class T>
CeilingEntry fma_entry(Context& ctx, const char* name, int iters) {
  const DeviceFacts& d = ctx.facts();
  const cudaStream_t s = ctx.stream();
  const T b = T(1) + T(1.0 / 65536), c = T(1.0 / 1024);
  const std::size_t threads = fma_threads(d);
  DeviceBuffer<T> outbuf(threads);
  T expected[32];
  for (int lane = 0; lane < 32; ++lane) {
    if constexpr (sizeof(T) == 4) expected[lane] = expected_fma_f32(lane, b, c, iters);
    else expected[lane] = expected_fma_f64(lane, b, c, iters);
  }
  Steps st;
  st.launch = [&] {
    if constexpr (sizeof(T) == 4) launch_fma_f32(outbuf.data(), b, c, iters, d, s);
    else launch_fma_f64(outbuf.data(), b, c, iters, d, s);
  };
  st.prepare = [&] { AISP_CUDA_CHECK(cudaMemsetAsync(outbuf.data(), 0xFF, outbuf.bytes(), s)); };
  st.check = [&]() -> std::string {
    std::vector<T> host(threads);
    AISP_CUDA_CHECK(cudaMemcpyAsync(host.data(), outbuf.data(), outbuf.bytes(), cudaMemcpyDeviceToHost, s));
    AISP_CUDA_CHECK(cudaStreamSynchronize(s));
    for (std::size_t t = 0; t < threads; ++t) {
      // Bit-exact: the device fma and the host std::fma are both IEEE 754 fused multiply-adds.
      if (!(host[t] == expected[t % 32])) {
        return fmt::format("thread {} wrote {:.9g}, expected {:.9g}", t, double(host[t]), double(expected[t % 32]));
      }
    }
    return "";
  };
  const Timing t = run_steps(ctx.hot(), s, st, name);
  const double flops = 2.0 * k_fma_chains * static_cast<double>(threads) * iters;
  return entry(name, "compute", k_unit_tflop_s, flops / t.median_s * 1e-12,
               fmt::format("{} independent {} FMA chains per thread x {} steps, one full wave ({} threads); "
                           "an FMA counts 2 FLOPs",
                           k_fma_chains, sizeof(T) == 4 ? "fp32" : "fp64", iters, threads),
               t.samples);
}

double wall_seconds(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

void probe_compute(Context& ctx, const std::vector<std::string>& wanted, ProbeResults& out) {
  // About a millisecond per launch at an H100's rates (67 and 34 TFLOP/s).
  if (wants(wanted, "fp32_fma")) record(out, "fp32_fma", [&] { return fma_entry<float>(ctx, "fp32_fma", 16384); });
  if (wants(wanted, "fp64_fma")) record(out, "fp64_fma", [&] { return fma_entry<double>(ctx, "fp64_fma", 8192); });
}

void probe_launch(Context& ctx, const std::vector<std::string>& wanted, ProbeResults& out) {
  const cudaStream_t s = ctx.stream();
  DeviceBuffer<unsigned> counter(1);
  unsigned expected = 0;
  const auto reset = [&] {
    AISP_CUDA_CHECK(cudaMemsetAsync(counter.data(), 0, sizeof(unsigned), s));
    AISP_CUDA_CHECK(cudaStreamSynchronize(s));
    expected = 0;
  };
  // Every launch adds one to the counter: a launch that did not run is an error, not a fast sample.
  const auto check_count = [&](const char* what) {
    unsigned got = 0;
    AISP_CUDA_CHECK(cudaMemcpy(&got, counter.data(), sizeof got, cudaMemcpyDeviceToHost));
    if (got != expected) throw ProbeError(fmt::format("{}: {} launches counted, {} made", what, got, expected));
  };
  constexpr int k_batch = 1000, k_repeats = 15;
  // Warm: module load and the first launch's set-up are not launch latency.
  launch_count(counter.data(), s);
  AISP_CUDA_CHECK(cudaStreamSynchronize(s));

  if (wants(wanted, "launch_kernel")) {
    record(out, "launch_kernel", [&] {
      reset();
      std::vector<double> per;
      for (int r = 0; r < k_repeats; ++r) {
        per.push_back(wall_seconds([&] {
                        for (int i = 0; i < k_batch; ++i) launch_count(counter.data(), s);
                        AISP_CUDA_CHECK(cudaStreamSynchronize(s));
                      }) / k_batch);
        expected += k_batch;
      }
      check_count("launch_kernel");
      return entry("launch_kernel", "launch", k_unit_us, stats::median(per) * 1e6,
                   fmt::format("host wall time of {} back-to-back one-thread kernel launches and one synchronize, "
                               "per launch; median of {}",
                               k_batch, k_repeats),
                   per.size());
    });
  }
  if (wants(wanted, "launch_graph_node")) {
    record(out, "launch_graph_node", [&] {
      reset();
      cudaGraph_t graph = nullptr;
      cudaGraphExec_t exec = nullptr;
      AISP_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      for (int i = 0; i < k_batch; ++i) launch_count(counter.data(), s);
      AISP_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
      AISP_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
      std::vector<double> per;
      AISP_CUDA_CHECK(cudaGraphLaunch(exec, s));  // warm: the first replay uploads the graph
      AISP_CUDA_CHECK(cudaStreamSynchronize(s));
      expected += k_batch;
      for (int r = 0; r < k_repeats; ++r) {
        per.push_back(wall_seconds([&] {
                        AISP_CUDA_CHECK(cudaGraphLaunch(exec, s));
                        AISP_CUDA_CHECK(cudaStreamSynchronize(s));
                      }) / k_batch);
        expected += k_batch;
      }
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
      check_count("launch_graph_node");
      return entry("launch_graph_node", "launch", k_unit_us, stats::median(per) * 1e6,
                   fmt::format("host wall time of one CUDA graph of {} one-thread kernel nodes, launched and "
                               "synchronized, per node; median of {}",
                               k_batch, k_repeats),
                   per.size());
    });
  }
  if (wants(wanted, "launch_roundtrip")) {
    record(out, "launch_roundtrip", [&] {
      reset();
      std::vector<double> per;
      for (int r = 0; r < 200; ++r) {
        per.push_back(wall_seconds([&] {
          launch_count(counter.data(), s);
          AISP_CUDA_CHECK(cudaStreamSynchronize(s));
        }));
        ++expected;
      }
      check_count("launch_roundtrip");
      return entry("launch_roundtrip", "launch", k_unit_us, stats::median(per) * 1e6,
                   "host wall time of one one-thread kernel launch and its cudaStreamSynchronize; median of 200",
                   per.size());
    });
  }
  SampleTimer& timer = ctx.hot();
  if (wants(wanted, "empty_kernel")) {
    record(out, "empty_kernel", [&] {
      std::vector<double> per;
      for (int r = 0; r < 56; ++r) {
        const auto t = timer.time([&] { launch_empty_kernel(s); }, 1, true);
        if (r >= 5) per.push_back(t.seconds);
      }
      return entry("empty_kernel", "launch", k_unit_us, stats::median(per) * 1e6,
                   "CUDA events around one empty kernel queued behind the blocking kernel (device time); median of "
                   "51",
                   per.size());
    });
  }
  if (wants(wanted, "timer_noise_floor")) {
    record(out, "timer_noise_floor", [&] {
      const double floor = timer.measure_noise_floor(51);
      if (!(floor >= 0) || !std::isfinite(floor)) throw ProbeError("timer_noise_floor: not a number");
      // An event pair around nothing can read exactly 0 at the event timer's resolution; a cached ceiling
      // must be positive, so 0 is stored as 1 ns.
      return entry("timer_noise_floor", "launch", k_unit_us, std::max(floor * 1e6, 0.001),
                   "CUDA events around nothing, behind the blocking kernel (SampleTimer::measure_noise_floor); "
                   "median of 51",
                   51);
    });
  }
}

}  // namespace aisp::probe
