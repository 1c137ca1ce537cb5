// The host twin of fp8_quant.cu's row quantization (plain C++, no CUDA): what the device must produce bit
// for bit, built on ch19's e4m3 arithmetic (chapters/ch19_low_precision/common/quant.hpp, checked there
// against cuda_fp8.h). The CPU tests check it on hand values (tests/cpu/serving/test_fp8_reference.cpp),
// the GPU test checks the kernel against it (LlamaRunnerFp8.QuantizedRowsMatchTheHost).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "chapters/ch19_low_precision/common/quant.hpp"

namespace aisp::serving::gpu {

struct QuantizedRows {
  std::vector<std::uint8_t> codes;  // [rows][k] e4m3
  std::vector<float> scales;        // [rows]: value = e4m3_decode(code) * scale
};

// Each row of `values` ([rows][k], row-major) gets the scale that maps its largest magnitude onto 448,
// and every element the nearest e4m3 code of value / scale (fp32 division; ties to even; saturating).
inline QuantizedRows quantize_rows_host(std::span<const float> values, int rows, int k) {
  QuantizedRows q;
  q.codes.resize(static_cast<std::size_t>(rows) * k);
  q.scales.resize(static_cast<std::size_t>(rows));
  for (int r = 0; r < rows; ++r) {
    const std::span<const float> row = values.subspan(static_cast<std::size_t>(r) * k, static_cast<std::size_t>(k));
    const float scale = ch19::quant_scale(ch19::abs_max(row), ch19::k_e4m3_max);
    q.scales[static_cast<std::size_t>(r)] = scale;
    for (int i = 0; i < k; ++i) {
      q.codes[static_cast<std::size_t>(r) * k + i] = ch19::e4m3_encode(row[static_cast<std::size_t>(i)] / scale);
    }
  }
  return q;
}

// The value a code of row r stands for once dequantized: what the FP8 GEMM multiplies.
inline float dequantized(const QuantizedRows& q, int r, int k, int i) {
  return ch19::e4m3_decode(q.codes[static_cast<std::size_t>(r) * k + i]) * q.scales[static_cast<std::size_t>(r)];
}

}  // namespace aisp::serving::gpu
