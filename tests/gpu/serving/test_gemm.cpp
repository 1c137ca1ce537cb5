// The runner's two GEMM kernels (gpu::Gemm: cuBLASLt, and ch10:hgemm step 08's kernel through TileGemm)
// compute the same Linear products, and tuning keeps a plan that still computes them. The reference is a
// host fp64 product of the same bf16 operands.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "device/buffer.hpp"
#include "device/cuda_check.hpp"
#include "serving/gpu/gemm.hpp"
#include "serving/gpu/tile_gemm.hpp"
#include "tests/gpu/serving/bf16_host.hpp"

namespace aisp::serving::gpu {
namespace {

// out = x * w^T on the device buffers of one shape, and the fp64 host product to judge it by.
struct Operands {
  int rows, n, k;
  std::vector<std::uint16_t> hx, hw;
  DeviceBuffer<__nv_bfloat16> x, w, out;

  Operands(int r, int n_, int k_, unsigned seed)
      : rows(r), n(n_), k(k_), hx(static_cast<std::size_t>(r) * k_), hw(static_cast<std::size_t>(n_) * k_),
        x(hx.size()), w(hw.size()), out(static_cast<std::size_t>(r) * n_) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (auto& v : hx) v = to_bf16_bits(u(rng));
    for (auto& v : hw) v = to_bf16_bits(u(rng));
    AISP_CUDA_CHECK(cudaMemcpy(x.data(), hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
    AISP_CUDA_CHECK(cudaMemcpy(w.data(), hw.data(), hw.size() * 2, cudaMemcpyHostToDevice));
    AISP_CUDA_CHECK(cudaMemset(out.data(), 0xff, out.size() * 2));  // NaN: an element never written fails
  }

  // Elements outside |got - want| <= 2^-5 + 2^-7 |want| (one bf16 rounding of the output, plus fp32
  // summation-order differences far below 2^-5 for k <= 2048 and inputs in [-1, 1)); returns the first.
  std::string mismatch() const {
    std::vector<std::uint16_t> got(out.size());
    AISP_CUDA_CHECK(cudaMemcpy(got.data(), out.data(), got.size() * 2, cudaMemcpyDeviceToHost));
    for (int r = 0; r < rows; ++r) {
      for (int c = 0; c < n; ++c) {
        double want = 0;
        for (int i = 0; i < k; ++i) {
          want += static_cast<double>(from_bf16_bits(hx[static_cast<std::size_t>(r) * k + i])) *
                  from_bf16_bits(hw[static_cast<std::size_t>(c) * k + i]);
        }
        const double g = from_bf16_bits(got[static_cast<std::size_t>(r) * n + c]);
        if (!(std::fabs(g - want) <= 0x1p-5 + 0x1p-7 * std::fabs(want))) {
          return "out[" + std::to_string(r) + "][" + std::to_string(c) + "] = " + std::to_string(g) + ", want " +
                 std::to_string(want);
        }
      }
    }
    return "";
  }
};

bool hopper() {
  int device = 0, major = 0;
  AISP_CUDA_CHECK(cudaGetDevice(&device));
  AISP_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  return major == 9;
}

TEST(ServingGemm, TileKernelComputesTheLinearProduct) {
  if (!hopper()) GTEST_SKIP() << "ch10:hgemm's kernel is sm_90a code";
  TileGemm tile;
  // A single tile pair in M; several pairs in M and N (the persistent loop deals more than one per
  // cluster on a 132-SM GPU only at larger sizes: the second shape has 2 x 12 pairs, the third 4 x 4).
  for (const auto& [rows, n, k] : std::vector<std::tuple<int, int, int>>{{256, 256, 64}, {512, 3072, 512},
                                                                          {1024, 1024, 2048}}) {
    SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(n) + " x " + std::to_string(k));
    Operands op(rows, n, k, 7u + static_cast<unsigned>(rows));
    ASSERT_TRUE(tile.supports(op.x.data(), op.w.data(), op.out.data(), rows, n, k, k, n));
    tile.run(op.x.data(), k, op.w.data(), op.out.data(), rows, n, k, nullptr);
    AISP_CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_EQ(op.mismatch(), "");
  }
  // x with rows 2k apart (the runner's down projection reads the SwiGLU output from a gate/up buffer of
  // 2 x inter columns): only the first k columns of each row are operands.
  {
    const int rows = 256, n = 512, k = 384;
    Operands wide(rows, n, 2 * k, 5u), op(rows, n, k, 5u);
    for (int r = 0; r < rows; ++r) {
      std::copy_n(wide.hx.begin() + static_cast<std::ptrdiff_t>(r) * 2 * k, k,
                  op.hx.begin() + static_cast<std::ptrdiff_t>(r) * k);
    }
    for (int c = 0; c < n; ++c) {
      std::copy_n(wide.hw.begin() + static_cast<std::ptrdiff_t>(c) * 2 * k, k,
                  op.hw.begin() + static_cast<std::ptrdiff_t>(c) * k);
    }
    AISP_CUDA_CHECK(cudaMemcpy(op.w.data(), op.hw.data(), op.hw.size() * 2, cudaMemcpyHostToDevice));
    ASSERT_TRUE(tile.supports(wide.x.data(), op.w.data(), op.out.data(), rows, n, k, 2 * k, n));
    tile.run(wide.x.data(), 2 * k, op.w.data(), op.out.data(), rows, n, k, nullptr);
    AISP_CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_EQ(op.mismatch(), "") << "strided x";
  }
  Operands small(256, 256, 64, 3u);
  const __nv_bfloat16 *x = small.x.data(), *w = small.w.data();
  __nv_bfloat16* out = small.out.data();
  EXPECT_FALSE(tile.supports(x, w, out, 100, 256, 64, 64, 256)) << "rows not a multiple of 256";
  EXPECT_FALSE(tile.supports(x, w, out, 256, 200, 64, 64, 200)) << "n not a multiple of 256";
  EXPECT_FALSE(tile.supports(x, w, out, 256, 256, 64, 64, 512)) << "strided output";
  EXPECT_FALSE(tile.supports(x + 1, w, out, 256, 256, 64, 64, 256)) << "x not 16-byte aligned";
}

// Tuning times both kernels where the tile kernel takes the shape, keeps the faster, and whatever it
// kept computes the product; a shape the tile kernel does not take is cuBLASLt's alone.
TEST(ServingGemm, TuningKeepsAPlanThatComputesTheProduct) {
  cudaStream_t stream = nullptr;
  AISP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));  // as the runner's
  Gemm gemm;
  {
    Operands op(512, 1024, 1024, 11u);
    const Gemm::Tuning t = gemm.tune(op.x.data(), 1024, op.w.data(), op.out.data(), 1024, 512, 1024, 1024, stream);
    EXPECT_GT(t.first_ms, 0.0f);
    EXPECT_GT(t.lt_ms, 0.0f);
    EXPECT_LE(t.lt_ms, t.first_ms);
    if (hopper()) {
      EXPECT_GT(t.tile_ms, 0.0f);
      EXPECT_EQ(t.tile, t.tile_ms < t.lt_ms);
    }
    AISP_CUDA_CHECK(cudaMemset(op.out.data(), 0xff, op.out.size() * 2));
    gemm.run(op.x.data(), 1024, op.w.data(), op.out.data(), 1024, 512, 1024, 1024, stream);
    AISP_CUDA_CHECK(cudaStreamSynchronize(stream));
    EXPECT_EQ(op.mismatch(), "");
  }
  {
    Operands op(100, 512, 256, 13u);
    const Gemm::Tuning t = gemm.tune(op.x.data(), 256, op.w.data(), op.out.data(), 512, 100, 512, 256, stream);
    EXPECT_LT(t.tile_ms, 0.0f);
    EXPECT_FALSE(t.tile);
    AISP_CUDA_CHECK(cudaMemset(op.out.data(), 0xff, op.out.size() * 2));
    gemm.run(op.x.data(), 256, op.w.data(), op.out.data(), 512, 100, 512, 256, stream);
    AISP_CUDA_CHECK(cudaStreamSynchronize(stream));
    EXPECT_EQ(op.mismatch(), "");
  }
  gemm.finish_tuning();
  AISP_CUDA_CHECK(cudaStreamDestroy(stream));
}

}  // namespace
}  // namespace aisp::serving::gpu
