// ch14:jit_specialize's host side: the permute's shape arithmetic and host reference, the specialized
// source handed to NVRTC, and the cubin's cache key.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "chapters/ch14_compilers/jit_specialize/jit_source.hpp"
#include "chapters/ch14_compilers/jit_specialize/reference.hpp"

namespace {

using namespace aisp::ch14;
using namespace aisp::ch14::jit_specialize;

TEST(Ch14JitPermute, HeadSplitShapeAndStrides) {
  const PermuteShape p = head_split(2, 3, 4, 5);  // in [b, s, h, d] strides (60, 20, 5, 1)
  EXPECT_EQ(p.count, 120u);
  EXPECT_EQ(p.dim, (std::array<std::uint32_t, 4>{2, 4, 3, 5}));        // out [b, h, s, d]
  EXPECT_EQ(p.in_stride, (std::array<std::uint32_t, 4>{60, 5, 20, 1}));  // h walks 5, s walks 20
}

TEST(Ch14JitPermute, ReferenceMovesEachElementToItsPlace) {
  const std::uint32_t b = 2, s = 3, h = 4, d = 5;
  std::vector<int> in(b * s * h * d);
  std::iota(in.begin(), in.end(), 0);  // each element is its own input index
  const auto out = permute_reference(in, head_split(b, s, h, d));
  ASSERT_EQ(out.size(), in.size());
  for (std::uint32_t ib = 0; ib < b; ++ib)
    for (std::uint32_t ih = 0; ih < h; ++ih)
      for (std::uint32_t is = 0; is < s; ++is)
        for (std::uint32_t id = 0; id < d; ++id) {
          const std::size_t o = ((ib * h + ih) * s + is) * d + id;
          EXPECT_EQ(out[o], static_cast<int>(((ib * s + is) * h + ih) * d + id)) << o;
        }
}

TEST(Ch14JitPermute, IdentityPermutationIsACopy) {
  std::vector<int> in(24);
  std::iota(in.begin(), in.end(), 7);
  EXPECT_EQ(permute_reference(in, make_permute({2, 3, 2, 2}, {0, 1, 2, 3})), in);
}

TEST(Ch14JitPermute, DimsBeyondThe32BitIndexAreRefused) {
  EXPECT_EQ(check_dims({16, 4096, 32, 64}), "");
  EXPECT_EQ(check_dims({1, 1, 1, k_max_count}), "");
  EXPECT_NE(check_dims({2, 1, 1, k_max_count}), "");
  EXPECT_NE(check_dims({1u << 16, 1u << 16, 1, 1}), "");
  EXPECT_NE(check_dims({0, 1, 1, 1}), "");
  EXPECT_NE(check_dims({std::uint64_t{1} << 40, 1, 1, 1}), "");
}

TEST(Ch14JitSource, PreambleDefinesTheShapeThenTheSourceFollows) {
  const std::string src = specialized_source("KERNEL TEXT", head_split(2, 3, 4, 5));
  for (const char* line : {"#define AISP_JIT_SHAPE 1\n", "#define AISP_JIT_COUNT 120u\n", "#define AISP_JIT_DIM0 2u\n",
                           "#define AISP_JIT_DIM1 4u\n", "#define AISP_JIT_DIM2 3u\n", "#define AISP_JIT_DIM3 5u\n",
                           "#define AISP_JIT_STRIDE0 60u\n", "#define AISP_JIT_STRIDE1 5u\n",
                           "#define AISP_JIT_STRIDE2 20u\n", "#define AISP_JIT_STRIDE3 1u\n"}) {
    EXPECT_NE(src.find(line), std::string::npos) << line;
  }
  const std::string tail = "#line 1 \"permute_kernel.cuh\"\nKERNEL TEXT";
  ASSERT_GE(src.size(), tail.size());
  EXPECT_EQ(src.substr(src.size() - tail.size()), tail);
  EXPECT_NE(specialized_source("K", head_split(2, 3, 4, 5)), specialized_source("K", head_split(2, 3, 4, 6)));
}

TEST(Ch14JitSource, TheRealKernelSourceIsFitForNvrtc) {
  // NVRTC is given no headers: the kernel must include nothing, read the preamble's switch and keep the
  // extern "C" name that cudaLibraryGetKernel looks up.
  std::ifstream in(std::string(AISP_TEST_DATA_DIR) + "/../../chapters/ch14_compilers/jit_specialize/permute_kernel.cuh");
  ASSERT_TRUE(in) << "permute_kernel.cuh not found from " << AISP_TEST_DATA_DIR;
  std::stringstream text;
  text << in.rdbuf();
  const std::string s = text.str();
  std::istringstream lines(s);
  for (std::string line; std::getline(lines, line);) {
    const auto first = line.find_first_not_of(" \t");
    EXPECT_FALSE(first != std::string::npos && line.compare(first, 8, "#include") == 0) << line;
  }
  EXPECT_NE(s.find("#ifdef AISP_JIT_SHAPE"), std::string::npos);
  EXPECT_NE(s.find(std::string("extern \"C\" __global__")), std::string::npos);
  EXPECT_NE(s.find(k_kernel_name), std::string::npos);
  // The raw string delimiter CMake wraps it in must not occur inside it.
  EXPECT_EQ(s.find(")aisp_source\""), std::string::npos);
}

TEST(Ch14JitSource, CubinKeyCoversShapeOptionsCompilerAndDevice) {
  const std::vector<std::string> opts = {"--gpu-architecture=sm_90", "--std=c++17"};
  const std::string src = specialized_source("K", head_split(16, 4096, 32, 64));
  const CacheKey base = cubin_key(src, opts, "13.0", "NVIDIA H100 80GB HBM3", 90);
  EXPECT_NE(base.text().find("options=--gpu-architecture=sm_90 --std=c++17\n"), std::string::npos);
  EXPECT_NE(base.text().find("device=NVIDIA H100 80GB HBM3\ncc=90\n"), std::string::npos);
  const std::string other_shape = specialized_source("K", head_split(16, 2048, 32, 64));
  const std::string edited = specialized_source("K2", head_split(16, 4096, 32, 64));
  for (const CacheKey& k : {cubin_key(other_shape, opts, "13.0", "NVIDIA H100 80GB HBM3", 90),
                            cubin_key(edited, opts, "13.0", "NVIDIA H100 80GB HBM3", 90),
                            cubin_key(src, {"--gpu-architecture=sm_100", "--std=c++17"}, "13.0", "NVIDIA H100 80GB HBM3", 90),
                            cubin_key(src, opts, "13.1", "NVIDIA H100 80GB HBM3", 90),
                            cubin_key(src, opts, "13.0", "NVIDIA H200", 90)}) {
    EXPECT_NE(k.file_name("cubin"), base.file_name("cubin")) << k.text();
  }
}

}  // namespace
