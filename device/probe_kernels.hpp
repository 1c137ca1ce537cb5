// The probe kernels of `aisp hw peaks` (device/probe_kernels.cu) and the host halves of their checks.
// Every probe validates its own output (docs/ceilings.md), so each kernel comes with a way to know the
// right answer on the host: a data pattern with a cheap formula and a position-sensitive checksum.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/base/device_facts.hpp"

namespace aisp::probe {

// The word at index i of a pattern buffer: distinct neighbours, every bit toggling, never all zeros.
inline std::uint32_t pattern_word(std::uint64_t i, std::uint32_t seed) {
  return static_cast<std::uint32_t>(i) * 0x9E3779B1u + seed;
}

// sum_i word[i] * (2i + 1) mod 2^64: sensitive to every word and to its position. Host side, threaded.
std::uint64_t host_checksum(const std::uint32_t* words, std::size_t n);
// The same checksum of pattern_word(i, seed) for i < n, computed without a buffer. Threaded.
std::uint64_t expected_checksum(std::size_t n, std::uint32_t seed);

// One block of the full-wave launches below per (SM x blocks that fit): launch geometry from the device.
int full_wave_blocks(const DeviceFacts& d, int threads);

// ---- memory -----------------------------------------------------------------------------------------
// All word counts must be multiples of 4 (16-byte vectors).
void launch_pattern(std::uint32_t* dst, std::size_t n_words, std::uint32_t seed, const DeviceFacts& d,
                    cudaStream_t stream);
// Writes one partial checksum per block into partials[0 .. checksum_blocks(d)).
int checksum_blocks(const DeviceFacts& d);
void launch_checksum(const std::uint32_t* src, std::size_t n_words, unsigned long long* partials,
                     const DeviceFacts& d, cudaStream_t stream);
// Sum of the partials (copied back; synchronizes `stream`).
std::uint64_t read_partials(const unsigned long long* partials, int count, cudaStream_t stream);
void launch_copy(const std::uint32_t* src, std::uint32_t* dst, std::size_t n_words, const DeviceFacts& d,
                 cudaStream_t stream);

// L2: `passes` windows of l2_window_vectors(d) 16-byte vectors, each starting `step` vectors after the
// last, wrapping around a working set of l2_probe_words(d) words (a power of two, at most half the L2),
// read with ld.global.cg (not L1); one partial plain sum per block.
std::size_t l2_probe_words(const DeviceFacts& d);
std::size_t l2_window_vectors(const DeviceFacts& d);
void launch_l2_read(const std::uint32_t* src, std::size_t n_words, unsigned step, int passes,
                    unsigned long long* partials, const DeviceFacts& d, cudaStream_t stream);
// What the partials must add up to: the sum of the windows' words (mod 2^64) on the host.
std::uint64_t expected_l2_sum(std::size_t n_words, std::uint32_t seed, std::size_t window_vectors, unsigned step,
                              int passes);

// Shared memory: each block fills a 32 KiB tile with pattern_word(j, seed) and reads it `rounds` times.
inline constexpr int k_smem_threads = 1024;
inline constexpr int k_smem_tile_words = 8192;
int smem_blocks(const DeviceFacts& d);
void launch_smem_read(std::uint32_t seed, int rounds, unsigned long long* partials, const DeviceFacts& d,
                      cudaStream_t stream);
// What every block's partial must be.
std::uint64_t expected_smem_partial(std::uint32_t seed, int rounds);

// ---- compute ------------------------------------------------------------------------------------------
// Each thread runs k_fma_chains independent chains a = fma(a, b, c), `iters` steps, and writes their sum.
inline constexpr int k_fma_chains = 8;
inline constexpr int k_fma_threads = 256;
void launch_fma_f32(float* out, float b, float c, int iters, const DeviceFacts& d, cudaStream_t stream);
void launch_fma_f64(double* out, double b, double c, int iters, const DeviceFacts& d, cudaStream_t stream);
// Threads in a launch, for the output size.
std::size_t fma_threads(const DeviceFacts& d);
// The value thread `t` must write (depends on t only through its lane), by the same IEEE fma on the host.
float expected_fma_f32(int lane, float b, float c, int iters);
double expected_fma_f64(int lane, double b, double c, int iters);

// ---- launches -------------------------------------------------------------------------------------------
// One thread adds 1 to *counter: a launch that can be counted.
void launch_count(unsigned* counter, cudaStream_t stream);

// ---- GEMM operands --------------------------------------------------------------------------------------
enum class Operand { f32, f16, bf16, e4m3 };
// Uniform values in [-1, 1) from a hash of (index, seed), rounded to the operand type: never zeros.
void launch_fill_operand(void* dst, std::size_t n, Operand type, std::uint32_t seed, cudaStream_t stream);

}  // namespace aisp::probe
