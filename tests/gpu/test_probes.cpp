// The ceiling probes on a real GPU: every probe validates its own output and gives a sane number; the
// checks they rely on catch a wrong output; the cache is written, reused, and a corrupt one re-measured.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <unistd.h>

#include "core/ceilings/ceilings.hpp"
#include "device/buffer.hpp"
#include "device/cuda_check.hpp"
#include "device/device_info.hpp"
#include "device/probe_kernels.hpp"
#include "device/probes.hpp"
#include "device/probes_internal.hpp"

namespace {

using namespace aisp;
namespace fs = std::filesystem;

std::map<std::string, CeilingEntry> run(const std::vector<std::string>& groups) {
  int count = 0;
  AISP_CUDA_CHECK(cudaGetDeviceCount(&count));
  const ProbeResults r = run_probes(0, expected_ceilings(groups, 0, count), {});
  for (const auto& [name, why] : r.errors) ADD_FAILURE() << name << ": " << why;
  std::map<std::string, CeilingEntry> by_name;
  for (const auto& e : r.entries) by_name[e.name] = e;
  for (const auto& n : expected_ceilings(groups, 0, count)) {
    EXPECT_TRUE(by_name.count(n) || std::any_of(r.errors.begin(), r.errors.end(), [&](auto& p) { return p.first == n; }))
        << n << " has neither an entry nor an error";
  }
  return by_name;
}

void expect_between(const std::map<std::string, CeilingEntry>& m, const std::string& name, double lo, double hi) {
  ASSERT_TRUE(m.count(name)) << name;
  const auto& e = m.at(name);
  if (!e.skipped.empty()) {
    GTEST_LOG_(INFO) << name << " skipped: " << e.skipped;
    return;
  }
  EXPECT_GE(e.value, lo) << name << " (" << e.method << ")";
  EXPECT_LE(e.value, hi) << name << " (" << e.method << ")";
  EXPECT_FALSE(e.method.empty()) << name;
  EXPECT_GE(e.samples, 10u) << name;
}

TEST(Probes, MemoryCeilingsAreValidatedAndSane) {
  const auto m = run({"dram", "l2", "smem"});
  expect_between(m, "dram_read", 100, 20000);
  expect_between(m, "dram_write", 100, 20000);
  expect_between(m, "dram_copy", 100, 20000);
  expect_between(m, "l2_read", 100, 100000);
  expect_between(m, "smem_read", 100, 1000000);
  if (m.count("l2_read") && m.count("dram_read") && m.at("l2_read").measured()) {
    EXPECT_GT(m.at("l2_read").value, m.at("dram_read").value) << "L2 must beat DRAM";
  }
  if (m.count("smem_read") && m.count("dram_read")) {
    EXPECT_GT(m.at("smem_read").value, m.at("dram_read").value);
  }
  ASSERT_TRUE(m.count("dram_copy"));
  EXPECT_NE(m.at("dram_copy").note.find("also measured"), std::string::npos) << "both copy methods ran";
}

TEST(Probes, ComputeAndTensorCeilingsAreValidatedAndSane) {
  const auto m = run({"compute", "tensor"});
  expect_between(m, "fp32_fma", 0.5, 500);
  expect_between(m, "fp64_fma", 0.01, 500);
  for (const char* t : {"tensor_bf16", "tensor_fp16", "tensor_tf32", "tensor_fp8"}) expect_between(m, t, 1, 20000);
  if (m.count("tensor_bf16") && m.at("tensor_bf16").measured()) {
    const CeilingEntry& e = m.at("tensor_bf16");
    EXPECT_GT(e.value, m.at("fp32_fma").value) << "tensor cores beat the FMA pipe";
    // Both methods are named: the faster one as the method, the other (or why it did not run) in the note.
    const std::string both = e.method + " | " + e.note;
    EXPECT_NE(both.find("cuBLASLt GEMM 8192x8192x8192"), std::string::npos) << both;
    EXPECT_NE(both.find("wgmma probe"), std::string::npos) << both;
    probe::Context ctx(0);
    if (probe::wgmma_unavailable(ctx).empty()) {
      EXPECT_NE(e.note.find("also measured"), std::string::npos) << "both methods ran on Hopper: " << e.note;
    }
  }
}

// The wgmma probe is the hardware's bound: near the datasheet's dense rate (power and clocks keep it
// under), and never a weaker bound than the library's GEMM (3% for run-to-run noise).
TEST(Probes, WgmmaTensorProbeIsNearTheDatasheetAndNotBelowCublasLt) {
  probe::Context ctx(0);
  const std::string why = probe::wgmma_unavailable(ctx);
  if (!why.empty()) GTEST_SKIP() << why;
  // In probe_tensor's order: cuBLASLt first, then the wgmma probe.
  const CeilingEntry lib = probe::cublaslt_tensor_entry(ctx, "tensor_bf16");
  const CeilingEntry wgmma = probe::wgmma_tensor_entry(ctx, "tensor_bf16");
  ASSERT_TRUE(lib.measured()) << lib.skipped;
  ASSERT_TRUE(wgmma.measured()) << wgmma.skipped;
  GTEST_LOG_(INFO) << "bf16: wgmma probe " << wgmma.value << " TFLOP/s (" << wgmma.note << "), cuBLASLt "
                   << lib.value << " TFLOP/s";
  EXPECT_GE(wgmma.samples, 10u);
  EXPECT_NE(wgmma.note.find("median"), std::string::npos) << "the median is kept beside the fastest launch";
  if (const auto ds = datasheet_for(ctx.facts().name)) {
    if (const auto sheet = ds->value("tensor_bf16")) {
      EXPECT_GE(wgmma.value, 0.5 * *sheet) << ds->model << " datasheet " << *sheet << " TFLOP/s";
      EXPECT_LE(wgmma.value, 1.05 * *sheet) << ds->model << " datasheet " << *sheet << " TFLOP/s";
    }
  }
  EXPECT_GE(wgmma.value, 0.97 * lib.value) << "the wgmma probe is a weaker bound than cuBLASLt's GEMM";
}

TEST(Probes, HostLaunchAndPeerCeilings) {
  const auto m = run({"host", "launch", "p2p"});
  for (const char* h : {"h2d_pinned", "d2h_pinned", "h2d_pageable", "d2h_pageable"}) expect_between(m, h, 0.5, 1000);
  expect_between(m, "launch_kernel", 0.05, 1000);
  expect_between(m, "launch_graph_node", 0.01, 1000);
  expect_between(m, "launch_roundtrip", 0.1, 10000);
  expect_between(m, "empty_kernel", 0.0005, 1000);
  expect_between(m, "timer_noise_floor", 0.0005, 1000);
  int count = 0;
  AISP_CUDA_CHECK(cudaGetDeviceCount(&count));
  if (count < 2) {
    ASSERT_TRUE(m.count("p2p"));
    EXPECT_FALSE(m.at("p2p").skipped.empty()) << "one GPU: GPU<->GPU is skipped with the reason";
  } else {
    expect_between(m, p2p_ceiling_name(1, 0, true), 1, 10000);
    expect_between(m, p2p_ceiling_name(0, 1, false), 0.5, 10000);
  }
}

// The disk under aisp_cache_dir(): measured with O_DIRECT, or skipped with the reason (tmpfs, no space).
TEST(Probes, DiskReadCeiling) {
  const auto m = run({"disk"});
  expect_between(m, "disk_read", 0.01, 1000);  // from a USB stick to a RAID of NVMe drives
  EXPECT_EQ(m.at("disk_read").group, "disk");
}

// The checks the probes rely on must fail on a wrong output, or "validated" means nothing.
TEST(Probes, ChecksumCatchesAChangedOrMovedWord) {
  const DeviceFacts d = query_device(0);
  cudaStream_t s = nullptr;
  AISP_CUDA_CHECK(cudaStreamCreate(&s));
  constexpr std::size_t n = (1 << 20) + 64;
  DeviceBuffer<std::uint32_t> buf(n);
  DeviceBuffer<unsigned long long> partials(static_cast<std::size_t>(probe::checksum_blocks(d)));
  const auto checksum = [&] {
    probe::launch_checksum(buf.data(), n, partials.data(), d, s);
    return probe::read_partials(partials.data(), probe::checksum_blocks(d), s);
  };
  probe::launch_pattern(buf.data(), n, 7, d, s);
  const std::uint64_t want = probe::expected_checksum(n, 7);
  EXPECT_EQ(checksum(), want);
  std::vector<std::uint32_t> host(n);
  AISP_CUDA_CHECK(cudaMemcpy(host.data(), buf.data(), n * 4, cudaMemcpyDeviceToHost));
  EXPECT_EQ(probe::host_checksum(host.data(), n), want);
  // One byte changed.
  AISP_CUDA_CHECK(cudaMemset(reinterpret_cast<unsigned char*>(buf.data()) + 4097, 0, 1));
  EXPECT_NE(checksum(), want);
  // Two words swapped: same sum, other positions.
  probe::launch_pattern(buf.data(), n, 7, d, s);
  AISP_CUDA_CHECK(cudaStreamSynchronize(s));
  std::swap(host[10], host[20]);
  AISP_CUDA_CHECK(cudaMemcpy(buf.data(), host.data(), n * 4, cudaMemcpyHostToDevice));
  EXPECT_NE(checksum(), want);
  EXPECT_NE(probe::expected_checksum(n, 8), want) << "another seed, another checksum";
  cudaStreamDestroy(s);
}

TEST(Probes, FmaCheckIsBitExactAndStepSensitive) {
  const DeviceFacts d = query_device(0);
  const std::size_t threads = probe::fma_threads(d);
  DeviceBuffer<float> out(threads);
  const float b = 1.0f + 1.0f / 65536, c = 1.0f / 1024;
  probe::launch_fma_f32(out.data(), b, c, 1000, d, nullptr);
  std::vector<float> host(threads);
  AISP_CUDA_CHECK(cudaMemcpy(host.data(), out.data(), threads * 4, cudaMemcpyDeviceToHost));
  for (std::size_t t = 0; t < threads; t += 997) {
    EXPECT_EQ(host[t], probe::expected_fma_f32(static_cast<int>(t % 32), b, c, 1000)) << t;
  }
  EXPECT_NE(host[0], probe::expected_fma_f32(0, b, c, 999)) << "a skipped step changes the answer";
}

TEST(Probes, CacheIsWrittenReusedAndACorruptOneRemeasured) {
  const fs::path dir = fs::temp_directory_path() / ("aisp_peaks_" + std::to_string(getpid()));
  fs::remove_all(dir);
  PeaksOptions o;
  o.dir = dir.string();
  o.groups = {"launch"};
  const PeaksOutcome first = measure_peaks(o);
  EXPECT_TRUE(first.errors.empty());
  EXPECT_EQ(first.measured.size(), 5u);
  ASSERT_TRUE(fs::exists(first.path));
  const PeaksOutcome again = measure_peaks(o);
  EXPECT_EQ(again.cache_note, "reused");
  EXPECT_TRUE(again.measured.empty()) << "nothing re-measured when the cache has it";
  EXPECT_EQ(again.set.value("launch_kernel"), first.set.value("launch_kernel"));
  {
    std::ofstream out(first.path);
    out << "{\"schema\": \"aisp.peaks\", \"trunc";
  }
  const PeaksOutcome fixed = measure_peaks(o);
  EXPECT_NE(fixed.cache_note.find("corrupt"), std::string::npos) << fixed.cache_note;
  EXPECT_EQ(fixed.measured.size(), 5u);
  EXPECT_TRUE(fs::exists(first.path + ".corrupt")) << "the corrupt file is kept aside, not overwritten";
  EXPECT_EQ(load_ceiling_cache(fixed.path, fixed.set.gpu_uuid, fixed.set.driver_version).status,
            CacheLoad::Status::ok);
  fs::remove_all(dir);
}

}  // namespace
