#include "core/base/dtype.hpp"

namespace aisp {

std::string_view to_string(DType t) {
  switch (t) {
    case DType::f64: return "f64";
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::i32: return "i32";
    case DType::u8: return "u8";
  }
  return "?";
}

std::optional<DType> dtype_from_string(std::string_view s) {
  for (DType t : {DType::f64, DType::f32, DType::f16, DType::bf16, DType::i32, DType::u8}) {
    if (to_string(t) == s) return t;
  }
  return std::nullopt;
}

std::size_t size_of(DType t) {
  switch (t) {
    case DType::f64: return 8;
    case DType::f32: return 4;
    case DType::i32: return 4;
    case DType::f16: return 2;
    case DType::bf16: return 2;
    case DType::u8: return 1;
  }
  return 0;
}

}  // namespace aisp
