// The correctness gate's device helpers must catch what they claim to catch.
#include <gtest/gtest.h>

#include <cuda_bf16.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

#include "device/buffer.hpp"
#include "device/gate.hpp"

namespace {

using namespace aisp;

TEST(Gate, PoisonedOutputFailsEveryElement) {
  DeviceBuffer<float> ref(1000), out(1000);
  const TensorView r{"ref", ref.data(), 1000, DType::f32}, o{"out", out.data(), 1000, DType::f32};
  fill_uniform(r, 1, -1, 1, nullptr);
  poison(o, nullptr);
  const auto c = compare(o, r, {1e-3, 1e-3}, nullptr);
  EXPECT_EQ(c.mismatches, 1000u);
  ASSERT_EQ(c.first_mismatches.size(), 10u);
  EXPECT_EQ(c.first_mismatches[0].index, 0u);
  EXPECT_TRUE(std::isnan(c.first_mismatches[0].got));
}

TEST(Gate, ToleranceBoundaryAndFirstMismatches) {
  std::vector<float> h_ref(4096, 1.0f), h_out(4096, 1.0f);
  h_out[100] = 1.0f + 1e-3f;  // inside atol + rtol*|ref| = 2e-3
  h_out[200] = 1.01f;         // outside
  h_out[300] = -1.0f;         // outside
  DeviceBuffer<float> ref(4096), out(4096);
  cudaMemcpy(ref.data(), h_ref.data(), 4096 * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(out.data(), h_out.data(), 4096 * 4, cudaMemcpyHostToDevice);
  const auto c = compare({"o", out.data(), 4096, DType::f32}, {"r", ref.data(), 4096, DType::f32}, {1e-3, 1e-3}, nullptr);
  EXPECT_EQ(c.mismatches, 2u);
  ASSERT_EQ(c.first_mismatches.size(), 2u);
  EXPECT_EQ(c.first_mismatches[0].index, 200u);
  EXPECT_EQ(c.first_mismatches[1].index, 300u);
  EXPECT_NEAR(c.max_abs_error, 2.0, 1e-12);
}

TEST(Gate, SeedsDifferAndHashSeesOneChangedElement) {
  DeviceBuffer<float> a(1 << 20);
  const TensorView v{"a", a.data(), 1 << 20, DType::f32};
  fill_uniform(v, 1, -1, 1, nullptr);
  const auto h1 = hash_bytes(v, nullptr);
  EXPECT_EQ(hash_bytes(v, nullptr), h1);
  fill_uniform(v, 2, -1, 1, nullptr);
  const auto h2 = hash_bytes(v, nullptr);
  EXPECT_NE(h1, h2);
  float x = 0;
  cudaMemcpy(&x, a.data() + 12345, 4, cudaMemcpyDeviceToHost);
  x = std::nextafter(x, 2.0f);
  cudaMemcpy(a.data() + 12345, &x, 4, cudaMemcpyHostToDevice);
  EXPECT_NE(hash_bytes(v, nullptr), h2);
}

TEST(Gate, Bf16Compare) {
  DeviceBuffer<unsigned short> a(513), b(513);
  const TensorView va{"a", a.data(), 513, DType::bf16}, vb{"b", b.data(), 513, DType::bf16};
  fill_uniform(va, 7, -2, 2, nullptr);
  fill_uniform(vb, 7, -2, 2, nullptr);
  EXPECT_EQ(compare(va, vb, {0, 0}, nullptr).mismatches, 0u);
  fill_uniform(vb, 8, -2, 2, nullptr);
  EXPECT_GT(compare(va, vb, {1e-2, 1e-2}, nullptr).mismatches, 400u);
}

// Reference masking (docs/trust.md): a masked reference compares like the plain one when the key is given,
// and is noise to anyone without it, for every dtype the gate knows.
TEST(Gate, MaskedReferenceComparesOnlyWithItsKey) {
  constexpr std::size_t n = 100003;  // odd: the tail of every vector width
  constexpr std::uint64_t key = 0x0123456789abcdefULL;
  for (const DType t : {DType::f64, DType::f32, DType::f16, DType::bf16, DType::i32, DType::u8}) {
    DeviceBuffer<unsigned char> ref(n * size_of(t)), out(n * size_of(t));
    const TensorView r{"ref", ref.data(), n, t}, o{"out", out.data(), n, t};
    fill_uniform(r, 7, 0, 100, nullptr);
    cudaMemcpy(out.data(), ref.data(), n * size_of(t), cudaMemcpyDeviceToDevice);
    mask_reference(r, key, nullptr);
    EXPECT_EQ(compare(o, r, {0, 0}, nullptr, 10, key).mismatches, 0u) << to_string(t);
    // A variant that copied the masked buffer: most elements wrong (u8 can collide by chance: 1 in 256).
    EXPECT_GT(compare(o, r, {0, 0}, nullptr).mismatches, n / 2) << to_string(t);
    EXPECT_GT(compare(r, r, {0, 0}, nullptr, 10, key).mismatches, n / 2) << "the copy itself compared " << to_string(t);
    mask_reference(r, key, nullptr);  // masking twice unmasks
    EXPECT_EQ(compare(o, r, {0, 0}, nullptr).mismatches, 0u) << to_string(t);
  }
  EXPECT_THROW(mask_reference({"r", nullptr, 1, DType::f32}, 0, nullptr), std::logic_error);
}

// What masking costs: the mask pass per generated seed, and the compare with and without unmasking, on a
// 1 GiB fp32 tensor. Printed for docs/trust.md; the assertion is only that the masked compare is right.
TEST(Gate, MaskingCost) {
  constexpr std::size_t n = std::size_t{1} << 28;
  DeviceBuffer<float> ref(n), out(n);
  const TensorView r{"ref", ref.data(), n, DType::f32}, o{"out", out.data(), n, DType::f32};
  fill_uniform(r, 3, -1, 1, nullptr);
  cudaMemcpy(out.data(), ref.data(), n * sizeof(float), cudaMemcpyDeviceToDevice);
  const auto seconds = [](auto&& f) {
    cudaDeviceSynchronize();
    const auto t0 = std::chrono::steady_clock::now();
    f();
    cudaDeviceSynchronize();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  constexpr std::uint64_t key = 42;
  double plain = 1e9, masked = 1e9, mask = 1e9;
  std::uint64_t bad = 1;
  for (int rep = 0; rep < 5; ++rep) {
    plain = std::min(plain, seconds([&] { compare(o, r, {0, 0}, nullptr); }));
    mask = std::min(mask, seconds([&] { mask_reference(r, key, nullptr); }));
    masked = std::min(masked, seconds([&] { bad = compare(o, r, {0, 0}, nullptr, 10, key).mismatches; }));
    mask_reference(r, key, nullptr);
  }
  EXPECT_EQ(bad, 0u);
  std::printf("  1 GiB fp32: mask pass %.3f ms; compare %.3f ms plain, %.3f ms masked (%+.1f%%)\n", mask * 1e3,
              plain * 1e3, masked * 1e3, 100 * (masked / plain - 1));
}

// device/buffer.hpp's PinnedBuffer, which the curriculum's host-transfer ladders share (ch01, ch02, ch03,
// ch05, ch11, ch12): sizes, moves, and a round trip through the device at the pinned copy path.
TEST(Buffer, PinnedBufferHoldsPinnedMemoryAndMovesItsOwnership) {
  PinnedBuffer<float> empty(0);
  EXPECT_EQ(empty.data(), nullptr);
  EXPECT_EQ(empty.bytes(), 0u);

  const std::size_t n = 4099;  // not a multiple of anything convenient
  PinnedBuffer<float> host(n);
  ASSERT_NE(host.data(), nullptr);
  EXPECT_EQ(host.count(), n);
  EXPECT_EQ(host.size(), n);
  EXPECT_EQ(host.bytes(), n * sizeof(float));
  cudaPointerAttributes attr{};
  ASSERT_EQ(cudaPointerGetAttributes(&attr, host.data()), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeHost) << "cudaHostAlloc memory is registered host memory";

  for (std::size_t i = 0; i < n; ++i) host.data()[i] = static_cast<float>(i) * 0.5f;
  DeviceBuffer<float> device(n);
  PinnedBuffer<float> back(n, cudaHostAllocPortable);
  ASSERT_EQ(cudaMemcpy(device.data(), host.data(), host.bytes(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(back.data(), device.data(), back.bytes(), cudaMemcpyDeviceToHost), cudaSuccess);
  for (std::size_t i = 0; i < n; i += 97) EXPECT_EQ(back.data()[i], static_cast<float>(i) * 0.5f);

  float* const raw = host.data();
  PinnedBuffer<float> moved(std::move(host));
  EXPECT_EQ(moved.data(), raw);
  EXPECT_EQ(moved.count(), n);
  EXPECT_EQ(host.data(), nullptr);  // NOLINT(bugprone-use-after-move): the moved-from state is the point
  EXPECT_EQ(host.count(), 0u);
  back = std::move(moved);  // frees back's old allocation, takes moved's
  EXPECT_EQ(back.data(), raw);
  EXPECT_EQ(moved.data(), nullptr);
}

}  // namespace
