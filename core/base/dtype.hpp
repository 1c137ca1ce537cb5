// Element types a ladder's tensors can have; the correctness gate and the reports speak of these.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace aisp {

enum class DType { f64, f32, f16, bf16, i32, u8 };

std::string_view to_string(DType t);
std::optional<DType> dtype_from_string(std::string_view s);
std::size_t size_of(DType t);

}  // namespace aisp
