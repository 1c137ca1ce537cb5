// ch18:flash_attention — the host reference: O = softmax(scale * Q K^T [+ causal mask]) V per
// (batch, head).
//
// Plain C++ (no CUDA headers), so that the CPU tests can check it on hand-made cases and the GPU test can
// check the device reference with it at the test size. Values travel as doubles holding the exact bf16
// inputs; every operation is in fp64 and the result is not rounded (the bf16 rounding of the output is
// part of the tolerance, problem.hpp).
//
// Layout, as on the device: Q and O are [batch][heads][seq][head_dim], K and V [batch][kv_heads][seq]
// [head_dim], all row-major with head_dim contiguous. Grouped-query attention: query head h reads K/V
// head h / (heads / kv_heads), so consecutive query heads share a K/V head (Llama-3: 32 over 8).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

namespace aisp::ch18::flash_attention {

struct Shape {
  int batch = 1;
  int heads = 1;
  int kv_heads = 1;  // divides heads
  int seq = 1;       // query and key length
  int head_dim = 1;
  bool causal = false;  // query i sees keys 0..i (top-left aligned: the usual decoder mask)

  std::size_t q_count() const { return static_cast<std::size_t>(batch) * heads * seq * head_dim; }
  std::size_t kv_count() const { return static_cast<std::size_t>(batch) * kv_heads * seq * head_dim; }
  int group() const { return heads / kv_heads; }  // query heads per K/V head
};

// The softmax scale of "Attention Is All You Need": 1 / sqrt(head_dim).
inline double attention_scale(int head_dim) { return 1.0 / std::sqrt(static_cast<double>(head_dim)); }

// q: shape.q_count() values, k and v: shape.kv_count(); returns O with shape.q_count() values.
inline std::vector<double> attention_forward(const std::vector<double>& q, const std::vector<double>& k,
                                             const std::vector<double>& v, const Shape& shape) {
  const int s = shape.seq, d = shape.head_dim;
  const double scale = attention_scale(d);
  const auto rows = [&](int b, int head, int heads) {
    return (static_cast<std::size_t>(b) * heads + head) * s * d;
  };
  std::vector<double> o(shape.q_count());
  std::vector<double> p(s);
  for (int b = 0; b < shape.batch; ++b) {
    for (int h = 0; h < shape.heads; ++h) {
      const double* qh = q.data() + rows(b, h, shape.heads);
      const double* kh = k.data() + rows(b, h / shape.group(), shape.kv_heads);
      const double* vh = v.data() + rows(b, h / shape.group(), shape.kv_heads);
      double* oh = o.data() + rows(b, h, shape.heads);
      for (int i = 0; i < s; ++i) {
        const int keys = shape.causal ? i + 1 : s;  // masked keys take no part at all
        double m = -std::numeric_limits<double>::infinity();
        for (int j = 0; j < keys; ++j) {
          double dot = 0;
          for (int c = 0; c < d; ++c) dot += qh[i * d + c] * kh[j * d + c];
          p[j] = scale * dot;
          m = std::max(m, p[j]);
        }
        double l = 0;
        for (int j = 0; j < keys; ++j) {
          p[j] = std::exp(p[j] - m);  // the max subtracted first: no overflow for large scores
          l += p[j];
        }
        for (int c = 0; c < d; ++c) {
          double acc = 0;
          for (int j = 0; j < keys; ++j) acc += p[j] * vh[j * d + c];
          oh[i * d + c] = acc / l;
        }
      }
    }
  }
  return o;
}

}  // namespace aisp::ch18::flash_attention
