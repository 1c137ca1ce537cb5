#include <gtest/gtest.h>

#include <string>

#include "core/base/hardware_key.hpp"

namespace {

using aisp::gpu_model_slug;

TEST(GpuModelSlug, HopperVariants) {
  EXPECT_EQ(gpu_model_slug("NVIDIA H100 80GB HBM3"), "h100_sxm");
  EXPECT_EQ(gpu_model_slug("NVIDIA H100 PCIe"), "h100_pcie");
  EXPECT_EQ(gpu_model_slug("NVIDIA H100 NVL"), "h100_nvl");
  EXPECT_EQ(gpu_model_slug("NVIDIA H200"), "h200");
  EXPECT_EQ(gpu_model_slug("NVIDIA H200 NVL"), "h200_nvl");
  EXPECT_EQ(gpu_model_slug("NVIDIA H800"), "h800");
  EXPECT_EQ(gpu_model_slug("NVIDIA H800 80GB HBM3"), "h800_sxm");
}

TEST(GpuModelSlug, GenericFallback) {
  EXPECT_EQ(gpu_model_slug("NVIDIA A100-SXM4-80GB"), "a100_sxm4_80gb");
  EXPECT_EQ(gpu_model_slug("NVIDIA GeForce RTX 4090"), "rtx_4090");
  EXPECT_EQ(gpu_model_slug("NVIDIA GeForce RTX 3080 Ti"), "rtx_3080_ti");
  EXPECT_EQ(gpu_model_slug("Tesla V100-SXM2-16GB"), "tesla_v100_sxm2_16gb");
  EXPECT_EQ(gpu_model_slug("NVIDIA RTX 6000 Ada Generation"), "rtx_6000_ada_generation");
  // Runs of separators collapse, ends are trimmed, case is folded.
  EXPECT_EQ(gpu_model_slug("  nvidia   B200 -- (rev 2)  "), "b200_rev_2");
  EXPECT_EQ(gpu_model_slug("GeForce GTX 1080"), "gtx_1080");
}

TEST(GpuModelSlug, OnlyWholeLeadingWordsAreDropped) {
  EXPECT_EQ(gpu_model_slug("NVIDIAX 1"), "nvidiax_1");
  EXPECT_EQ(gpu_model_slug("Acme NVIDIA H100"), "acme_nvidia_h100");
}

TEST(GpuModelSlug, EmptyNames) {
  EXPECT_EQ(gpu_model_slug(""), "unknown_gpu");
  EXPECT_EQ(gpu_model_slug("NVIDIA"), "unknown_gpu");
  EXPECT_EQ(gpu_model_slug(" -- "), "unknown_gpu");
}

TEST(HardwareKey, CountPrefix) {
  EXPECT_EQ(aisp::hardware_key("NVIDIA H200", 1), "h200");
  EXPECT_EQ(aisp::hardware_key("NVIDIA H200", 2), "2x_h200");
  EXPECT_EQ(aisp::hardware_key("NVIDIA H100 80GB HBM3", 8), "8x_h100_sxm");
  EXPECT_EQ(aisp::hardware_key("", 4), "4x_unknown_gpu");
  EXPECT_EQ(aisp::hardware_key("NVIDIA H200", 0), "h200");
}

}  // namespace
