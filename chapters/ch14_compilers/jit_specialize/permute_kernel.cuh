// ch14:jit_specialize — the ladder's one kernel source: a 4-D permute of 16-bit elements, one output
// element per thread. Output element o has coordinates (i0, i1, i2, i3) in the output dims (d0, d1, d2,
// d3), found by dividing o by d3, d2 and d1 in turn; it reads the input at i0*s0 + i1*s1 + i2*s2 + i3*s3,
// where s_j is the input stride that output dim j walks (reference.hpp: make_permute).
//
// The same text is compiled twice:
//   01_generic      by nvcc at build time, #included: dims, strides and count are kernel arguments, so
//                   each thread does three 32-bit divisions by run-time divisors (~20 instructions each:
//                   float reciprocal, multiply, two correction steps) and four multiplies.
//   02_nvrtc_shapes by NVRTC at run time, as text (CMakeLists.txt embeds this file), after a preamble
//                   that defines AISP_JIT_SHAPE and the shape as literals (jit_source.hpp): the divisions
//                   become shifts and masks for powers of two, a multiply-high and a shift otherwise,
//                   and the strides fold into the address arithmetic. The arguments are still passed
//                   (same signature, same launch) and ignored.
//
// NVRTC compiles it with no headers at all: built-in types only, no includes, no templates.
#ifdef AISP_JIT_SHAPE
#define AISP_COUNT AISP_JIT_COUNT
#define AISP_DIM(j) AISP_JIT_DIM##j
#define AISP_STRIDE(j) AISP_JIT_STRIDE##j
#else
#define AISP_COUNT count
#define AISP_DIM(j) d##j
#define AISP_STRIDE(j) s##j
#endif

// extern "C": NVRTC's cubin then names it plainly for cudaLibraryGetKernel.
extern "C" __global__ void __launch_bounds__(256)
    ch14_permute4_kernel(const unsigned short* __restrict__ in, unsigned short* __restrict__ out,
                         unsigned int count, unsigned int d1, unsigned int d2, unsigned int d3,
                         unsigned int s0, unsigned int s1, unsigned int s2, unsigned int s3) {
  // count < 2^31 (the problem checks it), so neither the index nor an input offset overflows 32 bits.
  const unsigned int o = blockIdx.x * blockDim.x + threadIdx.x;
  if (o >= AISP_COUNT) return;
  unsigned int rest = o;
  const unsigned int i3 = rest % AISP_DIM(3);
  rest /= AISP_DIM(3);
  const unsigned int i2 = rest % AISP_DIM(2);
  rest /= AISP_DIM(2);
  const unsigned int i1 = rest % AISP_DIM(1);
  const unsigned int i0 = rest / AISP_DIM(1);
  out[o] = in[i0 * AISP_STRIDE(0) + i1 * AISP_STRIDE(1) + i2 * AISP_STRIDE(2) + i3 * AISP_STRIDE(3)];
}

#undef AISP_COUNT
#undef AISP_DIM
#undef AISP_STRIDE
