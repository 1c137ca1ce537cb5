// Every matrix product of the runner goes through this one class: out = x * w^T with bf16 x, w and out,
// fp32 accumulation (a Linear layer: w is [n][k] row-major as Hugging Face stores it). Today cuBLASLt
// with its heuristic's first algorithm, cached per shape; the place where a hand-written kernel (ch10)
// can be chosen instead.
#pragma once

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <map>
#include <tuple>

#include "device/buffer.hpp"

namespace aisp::serving::gpu {

class Gemm {
 public:
  explicit Gemm(std::size_t workspace_bytes = std::size_t{32} << 20);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // out[rows][n] (row stride ld_out) = x[rows][k] (row stride ld_x) * w[n][k]^T.
  void run(const __nv_bfloat16* x, int ld_x, const __nv_bfloat16* w, __nv_bfloat16* out, int ld_out, int rows,
           int n, int k, cudaStream_t stream);

 private:
  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  using Key = std::tuple<int, int, int, int, int>;  // rows, n, k, ld_x, ld_out
  const Plan& plan_for(const Key& key);

  cublasLtHandle_t m_handle = nullptr;
  DeviceBuffer<std::byte> m_workspace;
  std::map<Key, Plan> m_plans;
};

}  // namespace aisp::serving::gpu
