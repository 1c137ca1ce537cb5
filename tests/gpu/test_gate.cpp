// The correctness gate's device helpers must catch what they claim to catch.
#include <gtest/gtest.h>

#include <cmath>
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

}  // namespace
