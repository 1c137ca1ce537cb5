// The correctness gate's device helpers: seeded inputs, poisoned outputs, elementwise comparison and
// input hashing (docs/measurement.md "Correctness gate"). All of them run on the GPU so that a gate over
// several GB costs milliseconds, not seconds.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/results/results.hpp"
#include "device/ladder.hpp"

namespace aisp {

// Uniform values in [lo, hi) from a counter-based hash of (seed, index): reproducible, never all zeros.
void fill_uniform(const TensorView& t, std::uint64_t seed, double lo, double hi, cudaStream_t stream);

// Every byte 0xFF: NaN for f16/bf16/f32/f64, -1 for integers. An unwritten element then fails the compare.
void poison(const TensorView& t, cudaStream_t stream);

struct CompareOutcome {
  std::uint64_t checked = 0;
  std::uint64_t mismatches = 0;
  double max_abs_error = 0;
  double max_rel_error = 0;
  std::vector<Mismatch> first_mismatches;  // lowest indices, at most `max_report`; filled on failure
};

// Compares every element of `out` with `ref` (same count and dtype) under `tol`. Synchronizes `stream`.
// A non-zero `ref_key` says that `ref` is masked (mask_reference with that key): the compare kernel
// unmasks each element as it reads it, so the plain reference never exists in device memory.
CompareOutcome compare(const TensorView& out, const TensorView& ref, const Tolerance& tol,
                       cudaStream_t stream, std::size_t max_report = 10, std::uint64_t ref_key = 0);

// XORs every element's bits with a keystream drawn from (key, index), in place: applied once it masks
// the reference, so that a variant that finds the buffer and copies it copies noise (docs/trust.md
// "Reference masking"); applied again it unmasks. `key` must not be 0.
void mask_reference(const TensorView& ref, std::uint64_t key, cudaStream_t stream);

// A 64-bit checksum of the tensor's bytes, position-sensitive. Synchronizes `stream`.
std::uint64_t hash_bytes(const TensorView& t, cudaStream_t stream);

// The tensor's elements on the host as doubles (any dtype). Synchronizes `stream`. For the CPU reference
// checks at test sizes (ProblemBase::check_reference_on_host), not for full-size data.
std::vector<double> to_host(const TensorView& t, cudaStream_t stream);

// Compares host values with a host reference under `tol`; "" when all agree, else one line naming the
// tensor, the number of mismatches and the first one.
std::string compare_on_host(const std::string& name, const std::vector<double>& got,
                            const std::vector<double>& want, const Tolerance& tol);

}  // namespace aisp
