// Device side of the correctness gate. Deliberately simple kernels: they must be right, not fast, but
// they run over multi-GB tensors, so they use a grid-stride loop over the whole device.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <type_traits>

#include "device/buffer.hpp"
#include "device/cuda_check.hpp"
#include "device/gate.hpp"

namespace aisp {
namespace {

__host__ __device__ inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

template <class T>
__device__ inline T from_double(double v) { return static_cast<T>(v); }
template <>
__device__ inline __nv_bfloat16 from_double<__nv_bfloat16>(double v) { return __double2bfloat16(v); }
template <>
__device__ inline __half from_double<__half>(double v) { return __double2half(v); }

template <class T>
__device__ inline double to_double(T v) { return static_cast<double>(v); }
template <>
__device__ inline double to_double<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template <>
__device__ inline double to_double<__half>(__half v) { return __half2float(v); }

template <class T>
__global__ void fill_uniform_kernel(T* data, std::size_t n, std::uint64_t seed, double lo, double hi) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    // 53 random bits -> [0, 1).
    const double u = static_cast<double>(splitmix64(seed ^ splitmix64(i)) >> 11) * 0x1.0p-53;
    data[i] = from_double<T>(lo + (hi - lo) * u);
  }
}

// The keystream of a masked reference: the low bytes of a hash of (key, index), as many as the element
// has. key 0 means "not masked".
__host__ __device__ inline std::uint64_t mask_word(std::uint64_t key, std::size_t i) {
  return key == 0 ? 0 : splitmix64(key ^ splitmix64(i ^ 0x5bd1e995ULL));
}

// Element bits as an unsigned integer of the same size, for XOR masking.
template <class T>
struct BitsOf;
template <> struct BitsOf<double> { using type = std::uint64_t; };
template <> struct BitsOf<float> { using type = std::uint32_t; };
template <> struct BitsOf<__half> { using type = std::uint16_t; };
template <> struct BitsOf<__nv_bfloat16> { using type = std::uint16_t; };
template <> struct BitsOf<int> { using type = std::uint32_t; };
template <> struct BitsOf<unsigned char> { using type = std::uint8_t; };

template <class T>
__host__ __device__ inline T unmask(T v, std::uint64_t key, std::size_t i) {
  using U = typename BitsOf<T>::type;
  static_assert(sizeof(U) == sizeof(T));
  if (key == 0) return v;
  U bits;
  // Through void*: __half and __nv_bfloat16 are classes whose bits we mean to copy as bits.
  memcpy(static_cast<void*>(&bits), static_cast<const void*>(&v), sizeof(T));
  bits ^= static_cast<U>(mask_word(key, i));
  memcpy(static_cast<void*>(&v), static_cast<const void*>(&bits), sizeof(T));
  return v;
}

template <class T>
__global__ void mask_kernel(T* data, std::size_t n, std::uint64_t key) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) data[i] = unmask(data[i], key, i);
}

struct CompareTotals {
  unsigned long long mismatches;
  unsigned long long max_abs_bits;  // non-negative doubles order like their bit patterns
  unsigned long long max_rel_bits;
};

template <class T>
__global__ void compare_kernel(const T* out, const T* ref, std::size_t n, double atol, double rtol,
                               std::uint64_t ref_key, CompareTotals* totals) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  unsigned long long bad = 0;
  double max_abs = 0, max_rel = 0;
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    const double o = to_double(out[i]);
    const double r = to_double(unmask(ref[i], ref_key, i));
    const double diff = fabs(o - r);
    // Written so that a NaN in either operand fails: comparisons with NaN are false.
    const bool ok = diff <= atol + rtol * fabs(r);
    if (!ok) ++bad;
    if (!isnan(diff)) {
      max_abs = fmax(max_abs, diff);
      if (r != 0) max_rel = fmax(max_rel, diff / fabs(r));
    }
  }
  if (bad) atomicAdd(&totals->mismatches, bad);
  atomicMax(&totals->max_abs_bits, static_cast<unsigned long long>(__double_as_longlong(max_abs)));
  atomicMax(&totals->max_rel_bits, static_cast<unsigned long long>(__double_as_longlong(max_rel)));
}

// Words of 8 bytes mixed with their index and summed (mod 2^64): a moved, changed or lost word changes
// the sum with overwhelming probability. The tail that is not a whole word is mixed byte by byte.
__global__ void hash_kernel(const unsigned char* bytes, std::size_t nbytes, unsigned long long* sum) {
  const std::size_t words = nbytes / 8;
  const auto* w = reinterpret_cast<const std::uint64_t*>(bytes);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  unsigned long long local = 0;
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < words; i += stride) {
    local += splitmix64(w[i] ^ splitmix64(i));
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    for (std::size_t b = words * 8; b < nbytes; ++b) local += splitmix64(bytes[b] ^ splitmix64(~b));
  }
  atomicAdd(sum, local);
}

// Every byte to 0xFF, for memory a memset on this GPU's stream may not reach (poison).
__global__ void poison_bytes_kernel(unsigned char* bytes, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) bytes[i] = 0xFF;
}

int grid_for(std::size_t n) {
  int sms = 0, dev = 0;
  AISP_CUDA_CHECK(cudaGetDevice(&dev));
  AISP_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const std::size_t blocks_needed = (n + 255) / 256;
  return static_cast<int>(std::max<std::size_t>(1, std::min<std::size_t>(blocks_needed, 8ull * sms)));
}

template <class F>
void dispatch(DType t, F&& f) {
  switch (t) {
    case DType::f64: f(double{}); return;
    case DType::f32: f(float{}); return;
    case DType::f16: f(__half{}); return;
    case DType::bf16: f(__nv_bfloat16{}); return;
    case DType::i32: f(int{}); return;
    case DType::u8: f(static_cast<unsigned char>(0)); return;
  }
}

template <class T>
double host_to_double(const T& v) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat162float(v);
  else if constexpr (std::is_same_v<T, __half>) return __half2float(v);
  else return static_cast<double>(v);
}

// Failure path only: stream both tensors to the host in chunks and list the lowest mismatching indices.
template <class T>
void find_first_mismatches(const TensorView& out, const TensorView& ref, const Tolerance& tol,
                           std::uint64_t ref_key, std::size_t max_report, std::vector<Mismatch>& found) {
  constexpr std::size_t chunk = 1 << 22;
  std::vector<T> o(chunk), r(chunk);
  for (std::size_t base = 0; base < out.count && found.size() < max_report; base += chunk) {
    const std::size_t len = std::min(chunk, out.count - base);
    // cudaMemcpyDefault: an output may live in pinned host memory (a ladder whose last step is a D2H
    // copy); under unified addressing the runtime infers the direction from the pointer.
    AISP_CUDA_CHECK(cudaMemcpy(o.data(), static_cast<const T*>(out.data) + base, len * sizeof(T),
                               cudaMemcpyDefault));
    AISP_CUDA_CHECK(cudaMemcpy(r.data(), static_cast<const T*>(ref.data) + base, len * sizeof(T),
                               cudaMemcpyDefault));
    for (std::size_t i = 0; i < len && found.size() < max_report; ++i) {
      const double ov = host_to_double(o[i]), rv = host_to_double(unmask(r[i], ref_key, base + i));
      if (!(std::fabs(ov - rv) <= tol.atol + tol.rtol * std::fabs(rv))) found.push_back({base + i, ov, rv});
    }
  }
}

}  // namespace

void fill_uniform(const TensorView& t, std::uint64_t seed, double lo, double hi, cudaStream_t stream) {
  if (t.count == 0) return;
  dispatch(t.dtype, [&](auto tag) {
    using T = decltype(tag);
    fill_uniform_kernel<T><<<grid_for(t.count), 256, 0, stream>>>(static_cast<T*>(t.data), t.count,
                                                                    seed, lo, hi);
    AISP_CHECK_LAUNCH();
  });
}

void poison(const TensorView& t, cudaStream_t stream) {
  const std::size_t bytes = t.count * size_of(t.dtype);
  if (bytes == 0) return;
  // Memory of another GPU (a collective's outputs on every rank, ch04) is written by a kernel of this
  // one over peer access, as the fill and compare kernels read and write it; a memset is kept for the
  // common case.
  cudaPointerAttributes attr{};
  AISP_CUDA_CHECK(cudaPointerGetAttributes(&attr, t.data));
  int current = 0;
  AISP_CUDA_CHECK(cudaGetDevice(&current));
  if (attr.type == cudaMemoryTypeDevice && attr.device != current) {
    poison_bytes_kernel<<<grid_for(bytes), 256, 0, stream>>>(static_cast<unsigned char*>(t.data), bytes);
    AISP_CHECK_LAUNCH();
    return;
  }
  AISP_CUDA_CHECK(cudaMemsetAsync(t.data, 0xFF, bytes, stream));
}

CompareOutcome compare(const TensorView& out, const TensorView& ref, const Tolerance& tol,
                       cudaStream_t stream, std::size_t max_report, std::uint64_t ref_key) {
  if (out.count != ref.count || out.dtype != ref.dtype) {
    throw std::logic_error("compare: output '" + out.name + "' and its reference differ in shape or dtype");
  }
  CompareOutcome result;
  result.checked = out.count;
  if (out.count == 0) return result;
  DeviceBuffer<CompareTotals> totals(1);
  AISP_CUDA_CHECK(cudaMemsetAsync(totals.data(), 0, sizeof(CompareTotals), stream));
  dispatch(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    compare_kernel<T><<<grid_for(out.count), 256, 0, stream>>>(
        static_cast<const T*>(out.data), static_cast<const T*>(ref.data), out.count, tol.atol, tol.rtol,
        ref_key, totals.data());
    AISP_CHECK_LAUNCH();
  });
  CompareTotals host{};
  AISP_CUDA_CHECK(cudaMemcpyAsync(&host, totals.data(), sizeof(host), cudaMemcpyDeviceToHost, stream));
  AISP_CUDA_CHECK(cudaStreamSynchronize(stream));
  result.mismatches = host.mismatches;
  long long abs_bits = static_cast<long long>(host.max_abs_bits);
  long long rel_bits = static_cast<long long>(host.max_rel_bits);
  std::memcpy(&result.max_abs_error, &abs_bits, sizeof(double));
  std::memcpy(&result.max_rel_error, &rel_bits, sizeof(double));
  if (result.mismatches > 0) {
    dispatch(out.dtype, [&](auto tag) {
      find_first_mismatches<decltype(tag)>(out, ref, tol, ref_key, max_report, result.first_mismatches);
    });
  }
  return result;
}

void mask_reference(const TensorView& ref, std::uint64_t key, cudaStream_t stream) {
  if (key == 0) throw std::logic_error("mask_reference: key 0 would leave '" + ref.name + "' unmasked");
  if (ref.count == 0) return;
  dispatch(ref.dtype, [&](auto tag) {
    using T = decltype(tag);
    mask_kernel<T><<<grid_for(ref.count), 256, 0, stream>>>(static_cast<T*>(ref.data), ref.count, key);
    AISP_CHECK_LAUNCH();
  });
}

std::uint64_t hash_bytes(const TensorView& t, cudaStream_t stream) {
  const std::size_t nbytes = t.count * size_of(t.dtype);
  DeviceBuffer<unsigned long long> sum(1);
  AISP_CUDA_CHECK(cudaMemsetAsync(sum.data(), 0, sizeof(unsigned long long), stream));
  if (nbytes > 0) {
    hash_kernel<<<grid_for(nbytes / 8 + 1), 256, 0, stream>>>(static_cast<const unsigned char*>(t.data),
                                                               nbytes, sum.data());
    AISP_CHECK_LAUNCH();
  }
  unsigned long long host = 0;
  AISP_CUDA_CHECK(cudaMemcpyAsync(&host, sum.data(), sizeof(host), cudaMemcpyDeviceToHost, stream));
  AISP_CUDA_CHECK(cudaStreamSynchronize(stream));
  return splitmix64(host ^ nbytes);
}

std::vector<double> to_host(const TensorView& t, cudaStream_t stream) {
  std::vector<double> values(t.count);
  AISP_CUDA_CHECK(cudaStreamSynchronize(stream));
  dispatch(t.dtype, [&](auto zero) {
    using T = decltype(zero);
    std::vector<T> raw(t.count);
    AISP_CUDA_CHECK(cudaMemcpy(raw.data(), t.data, t.count * sizeof(T), cudaMemcpyDefault));  // see above
    for (std::size_t i = 0; i < t.count; ++i) values[i] = host_to_double(raw[i]);
  });
  return values;
}

std::string compare_on_host(const std::string& name, const std::vector<double>& got,
                            const std::vector<double>& want, const Tolerance& tol) {
  if (got.size() != want.size()) {
    return name + ": " + std::to_string(got.size()) + " elements, host reference has " +
           std::to_string(want.size());
  }
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!(std::fabs(got[i] - want[i]) <= tol.atol + tol.rtol * std::fabs(want[i]))) {
      if (bad++ == 0) first = i;
    }
  }
  if (bad == 0) return {};
  return name + ": " + std::to_string(bad) + " of " + std::to_string(got.size()) +
         " elements differ from the host reference; first at " + std::to_string(first) + ": device " +
         std::to_string(got[first]) + ", host " + std::to_string(want[first]);
}

}  // namespace aisp
