// The device-side helpers every generated kernel starts with: storage conversions (f16 and
// bf16 through PTX cvt, so no CUDA headers are needed), the cast rules of
// docs/semantics.md, tensor-core and shared-memory helpers, block reductions and scans, then
// the op functors of ops/scalar_math.inc (what each elementwise op computes, Philox and
// Box-Muller, topk's order: the same source the host compiles), then topk's block select.
// The PTX is the only part a host compiler cannot take; under KILN_CUDA_HOST_EMULATION (the
// tests' host execution of generated kernels) the conversions come from the host instead.
#ifndef KILN_RUNTIME_CUDA_CUDA_PREAMBLE_H_
#define KILN_RUNTIME_CUDA_CUDA_PREAMBLE_H_

#include <string>

#include "ops/scalar_math_source.h"

namespace kiln::runtime::cuda {

inline constexpr const char* kPreambleHelpers = R"CUDA(
// ---- kiln preamble ----
typedef long long i64;
typedef unsigned long long u64;
#ifdef KILN_CUDA_HOST_EMULATION  // tests run generated kernels on the host (tests/cuda_emulation)
__device__ __forceinline__ float f16_to_f32(unsigned short h) { return kiln_emulation::f16_to_f32(h); }
__device__ __forceinline__ unsigned short f32_to_f16(float f) { return kiln_emulation::f32_to_f16(f); }
__device__ __forceinline__ float bf16_to_f32(unsigned short h) { return kiln_emulation::bf16_to_f32(h); }
__device__ __forceinline__ unsigned short f32_to_bf16(float f) { return kiln_emulation::f32_to_bf16(f); }
#else
__device__ __forceinline__ float f16_to_f32(unsigned short h) {
  float f; asm("{ .reg .b16 t; mov.b16 t, %1; cvt.f32.f16 %0, t; }" : "=f"(f) : "h"(h)); return f;
}
__device__ __forceinline__ unsigned short f32_to_f16(float f) {
  unsigned short h; asm("{ .reg .b16 t; cvt.rn.f16.f32 t, %1; mov.b16 %0, t; }" : "=h"(h) : "f"(f)); return h;
}
__device__ __forceinline__ float bf16_to_f32(unsigned short h) {
  return __int_as_float(((unsigned int)h) << 16);
}
__device__ __forceinline__ unsigned short f32_to_bf16(float f) {
  unsigned short h; asm("{ .reg .b16 t; cvt.rn.bf16.f32 t, %1; mov.b16 %0, t; }" : "=h"(h) : "f"(f)); return h;
}
#endif
__device__ __forceinline__ float round_f16(float f) { return f16_to_f32(f32_to_f16(f)); }
__device__ __forceinline__ float round_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }
// Float to integer: truncate toward zero, saturate, NaN gives 0.
__device__ __forceinline__ i64 sat_i64(double v) {
  if (v != v) return 0;
  if (v <= -9223372036854775808.0) return (i64)(-9223372036854775807LL - 1);
  if (v >= 9223372036854775808.0) return 9223372036854775807LL;
  return (i64)v;
}
__device__ __forceinline__ i64 sat_i32(double v) {
  if (v != v) return 0;
  if (v <= -2147483648.0) return -2147483648LL;
  if (v >= 2147483648.0) return 2147483647LL;
  return (i64)(int)v;
}
// Float to an integer narrower than i32, with range [low, high]. On the GPU one instruction,
// cvt.rzi.s32.f32, truncates, saturates and gives 0 for NaN (PTX ISA, cvt; from f64 it would
// give INT_MIN for NaN). A double goes to f32 rounded toward zero first, which changes no
// truncated value in the range: no FP64 but that narrowing, which the compiler hoists out of
// a kernel's loops when it converts a scalar parameter (branches kept it in the loop).
#ifdef KILN_CUDA_HOST_EMULATION
__device__ __forceinline__ i64 sat_int(double v, i64 low, i64 high) {
  if (v != v) return 0;
  if (v <= (double)low) return low;
  if (v >= (double)high) return high;
  return (i64)v;
}
#else
__device__ __forceinline__ i64 sat_int(float v, i64 low, i64 high) {
  int t; asm("cvt.rzi.s32.f32 %0, %1;" : "=r"(t) : "f"(v));
  return t < low ? low : (t > high ? high : (i64)t);
}
__device__ __forceinline__ i64 sat_int(double v, i64 low, i64 high) {
  float f; asm("cvt.rz.f32.f64 %0, %1;" : "=f"(f) : "d"(v));
  return sat_int(f, low, high);
}
#endif
__device__ __forceinline__ i64 wrap_i32(i64 v) { return (i64)(int)(unsigned int)(u64)v; }
__device__ __forceinline__ i64 wrap_i16(i64 v) { return (i64)(short)(unsigned short)(u64)v; }
__device__ __forceinline__ i64 wrap_i8(i64 v) { return (i64)(signed char)(unsigned char)(u64)v; }
__device__ __forceinline__ i64 wrap_u8(i64 v) { return (i64)(unsigned char)(u64)v; }
// OCP 8-bit floats (kiln::Float8E4M3 and Float8E5M2 in include/kiln/dtype.h, the same
// arithmetic): round to nearest even, saturate to the largest finite value, NaN stays NaN.
__device__ __forceinline__ unsigned char kiln_f32_to_fp8(float f, int mantissa, int bias,
                                                         unsigned max_bits) {
  const unsigned bits = __float_as_uint(f);
  const unsigned sign = (bits >> 24) & 0x80u;
  const unsigned abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return (unsigned char)(sign | 0x7fu);
  const int exponent = (int)(abs >> 23) - 127;
  unsigned r;
  if (exponent >= 16 + bias) {
    r = max_bits;
  } else if (exponent < 1 - bias) {
    r = (unsigned)rintf(__uint_as_float(abs) * __uint_as_float((unsigned)(127 + bias + mantissa - 1) << 23));
  } else {
    const unsigned steps = (unsigned)rintf(__uint_as_float(abs) * __uint_as_float((unsigned)(127 + mantissa - exponent) << 23));
    r = ((unsigned)(exponent + bias) << mantissa) + steps - (1u << mantissa);
  }
  return (unsigned char)(sign | (r > max_bits ? max_bits : r));
}
__device__ __forceinline__ float kiln_fp8_to_f32(unsigned char b, int mantissa, int bias, bool has_infinity) {
  const unsigned sign = (unsigned)(b & 0x80u) << 24;
  const unsigned exponent = (b & 0x7fu) >> mantissa;
  const unsigned m = b & ((1u << mantissa) - 1u);
  if (has_infinity ? exponent == (0x7fu >> mantissa) : (b & 0x7fu) == 0x7fu) {
    return __uint_as_float(sign | 0x7f800000u | (m != 0 || !has_infinity ? 0x400000u : 0u));
  }
  if (exponent == 0) {
    const float magnitude = (float)m * __uint_as_float((unsigned)(127 + 1 - bias - mantissa) << 23);
    return sign ? -magnitude : magnitude;
  }
  return __uint_as_float(sign | ((exponent - bias + 127) << 23) | (m << (23 - mantissa)));
}
// An e5m2 value is the upper byte of the f16 with the same value: widened exactly by one
// f16 conversion everywhere. sm_89 and later (sm_90 among them) convert the rest in
// hardware, with the same rounding and saturation (cvt.rn.satfinite); sm_80 and the host
// emulation compute them as above.
__device__ __forceinline__ float e5m2_to_f32(unsigned char b) { return f16_to_f32((unsigned short)(b << 8)); }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890 && !defined(KILN_CUDA_HOST_EMULATION)
__device__ __forceinline__ unsigned char f32_to_e4m3(float f) {
  unsigned short h; asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(h) : "f"(0.0f), "f"(f)); return (unsigned char)h;
}
__device__ __forceinline__ unsigned char f32_to_e5m2(float f) {
  unsigned short h; asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(h) : "f"(0.0f), "f"(f)); return (unsigned char)h;
}
__device__ __forceinline__ float e4m3_to_f32(unsigned char b) {
  unsigned int h2; asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"((unsigned short)b));
  return f16_to_f32((unsigned short)(h2 & 0xffffu));
}
#else
__device__ __forceinline__ unsigned char f32_to_e4m3(float f) { return kiln_f32_to_fp8(f, 3, 7, 0x7eu); }
__device__ __forceinline__ unsigned char f32_to_e5m2(float f) { return kiln_f32_to_fp8(f, 2, 15, 0x7bu); }
__device__ __forceinline__ float e4m3_to_f32(unsigned char b) { return kiln_fp8_to_f32(b, 3, 7, false); }
#endif
__device__ __forceinline__ float round_e4m3(float f) { return e4m3_to_f32(f32_to_e4m3(f)); }
__device__ __forceinline__ float round_e5m2(float f) { return e5m2_to_f32(f32_to_e5m2(f)); }
// Gathers: the first out-of-range index of a plan's launches, for the host to raise after
// them (IndexErrorWord in runtime/cuda/kernel_args.h: flag, index, extent, op).
__device__ __forceinline__ void kiln_report_index_error(u64* error, i64 index, i64 extent, int op) {
  if (atomicCAS(error, 0ull, 1ull) == 0ull) {
    error[1] = (u64)index;
    error[2] = (u64)extent;
    error[3] = (u64)op;
  }
}
// index_add: *p += v atomically (the additions into one element land in any order).
// Elements narrower than 32 bits swap the 32-bit word that holds them until no other thread
// wrote it in between (`add` gives the element's new bits from its old ones); for the last
// elements of a buffer that word reaches up to 3 bytes past its end, which the device
// allocator's blocks always hold (runtime/cuda/device_allocator.cc rounds every size up to a
// multiple of 512 bytes).
__device__ __forceinline__ void kiln_atomic_add(float* p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void kiln_atomic_add(double* p, double v) { atomicAdd(p, v); }
__device__ __forceinline__ void kiln_atomic_add(int* p, i64 v) { atomicAdd(p, (int)(unsigned int)(u64)v); }
__device__ __forceinline__ void kiln_atomic_add(i64* p, i64 v) { atomicAdd((u64*)p, (u64)v); }
template <class Add>
__device__ __forceinline__ void kiln_atomic_add_narrow(void* p, unsigned int element_mask, Add add) {
  unsigned int* word = (unsigned int*)((u64)p & ~(u64)3);
  const unsigned int shift = (unsigned int)((u64)p & 3) * 8u;
  unsigned int seen = *word, assumed;
  do {
    assumed = seen;
    const unsigned int r = add((assumed >> shift) & element_mask) & element_mask;
    seen = atomicCAS(word, assumed, (assumed & ~(element_mask << shift)) | (r << shift));
  } while (seen != assumed);
}
// Narrow integers wrap: the low bits of old + v, whatever the element's signedness.
__device__ __forceinline__ void kiln_atomic_add(signed char* p, i64 v) {
  kiln_atomic_add_narrow(p, 0xffu, [&](unsigned int old) { return (unsigned int)((u64)old + (u64)v); });
}
__device__ __forceinline__ void kiln_atomic_add(unsigned char* p, i64 v) {
  kiln_atomic_add_narrow(p, 0xffu, [&](unsigned int old) { return (unsigned int)((u64)old + (u64)v); });
}
__device__ __forceinline__ void kiln_atomic_add(short* p, i64 v) {
  kiln_atomic_add_narrow(p, 0xffffu, [&](unsigned int old) { return (unsigned int)((u64)old + (u64)v); });
}
__device__ __forceinline__ void kiln_atomic_add_16(unsigned short* p, float v, bool bf16) {
  kiln_atomic_add_narrow(p, 0xffffu, [&](unsigned int old) {
    const unsigned short h = (unsigned short)old;
    const float sum = (bf16 ? bf16_to_f32(h) : f16_to_f32(h)) + v;
    return (unsigned int)(bf16 ? f32_to_bf16(sum) : f32_to_f16(sum));
  });
}
__device__ __forceinline__ void kiln_atomic_add_fp8(unsigned char* p, float v, bool e5m2) {
  kiln_atomic_add_narrow(p, 0xffu, [&](unsigned int old) {
    const unsigned char b = (unsigned char)old;
    const float sum = (e5m2 ? e5m2_to_f32(b) : e4m3_to_f32(b)) + v;
    return (unsigned int)(e5m2 ? f32_to_e5m2(sum) : f32_to_e4m3(sum));
  });
}
// Tensor cores: D = A * B + D for a 16x16 (row) by 16x8 (col) product, f32 accumulators,
// fragments as PTX lays them out; pack2 makes a register of two 16-bit elements (low first).
__device__ __forceinline__ unsigned pack2(unsigned short lo, unsigned short hi) {
  return (unsigned)lo | ((unsigned)hi << 16);
}
#ifdef KILN_CUDA_HOST_EMULATION
__device__ __forceinline__ void mma_bf16_16816(float c[4], const unsigned a[4], const unsigned b[2]) { kiln_emulation::mma_16816(c, a, b, true); }
__device__ __forceinline__ void mma_f16_16816(float c[4], const unsigned a[4], const unsigned b[2]) { kiln_emulation::mma_16816(c, a, b, false); }
#else
__device__ __forceinline__ void mma_bf16_16816(float c[4], const unsigned a[4], const unsigned b[2]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void mma_f16_16816(float c[4], const unsigned a[4], const unsigned b[2]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
#endif
// The dot product of four unsigned bytes of `a` with four signed bytes of `b`, plus c
// (dp4a.u32.s32: one IDP.4A instruction since sm_61), for the quantized matrix products.
#ifdef KILN_CUDA_HOST_EMULATION
__device__ __forceinline__ int dp4a_u8_s8(unsigned a, unsigned b, int c) { return kiln_emulation::dp4a_u8_s8(a, b, c); }
#else
__device__ __forceinline__ int dp4a_u8_s8(unsigned a, unsigned b, int c) {
  int d; asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c)); return d;
}
#endif
// Feeding the tensor cores (sm_80 and later), at shared-memory byte addresses
// (shared_address). cp_async_16 copies 16 bytes from global to shared memory without a
// register round trip, reading the first `src_bytes` (0 to 16) and zero-filling the rest, so
// tile edges need no second path; copies are waited for in groups (cp_async_commit closes
// the thread's current group, cp_async_wait<N> waits until at most N of its groups are in
// flight). ldmatrix_x4 loads four 8x8 b16 matrices for the warp: lane 8i + r gives the
// address of row r of matrix i (16 bytes), and each lane receives register i = row lane/4,
// columns 2(lane%4) and +1 of matrix i (the mma fragment layout); _trans gives column
// lane/4, rows 2(lane%4) and +1 instead. Every lane of the warp must take part. Constant<N>
// is a type carrying N (a generic lambda's compile-time argument).
template <int N> struct Constant { static constexpr int value = N; };
#ifdef KILN_CUDA_HOST_EMULATION
typedef unsigned long long SharedAddress;  // the host address itself
__device__ __forceinline__ SharedAddress shared_address(const void* p) { return (SharedAddress)p; }
__device__ __forceinline__ void cp_async_16(SharedAddress dst, const void* src, int src_bytes) { kiln_emulation::cp_async_16((void*)dst, src, src_bytes); }
__device__ __forceinline__ void cp_async_commit() { kiln_emulation::cp_async_commit(); }
template <int N> __device__ __forceinline__ void cp_async_wait() { kiln_emulation::cp_async_wait(N); }
__device__ __forceinline__ void ldmatrix_x4(unsigned r[4], SharedAddress row) { kiln_emulation::ldmatrix(r, 4, false, (const void*)row); }
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned r[4], SharedAddress row) { kiln_emulation::ldmatrix(r, 4, true, (const void*)row); }
#else
// A byte address in the shared window, as ldmatrix and cp.async take it: 32-bit arithmetic
// with the offsets folded into the instructions, where generic pointers cost 64-bit math.
typedef unsigned SharedAddress;
__device__ __forceinline__ SharedAddress shared_address(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
#if __CUDA_ARCH__ >= 800
__device__ __forceinline__ void cp_async_16(SharedAddress dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory"); }
#else  // before Ampere: a synchronous copy with the same zero fill
__device__ __forceinline__ void cp_async_16(SharedAddress dst, const void* src, int src_bytes) {
  for (int i = 0; i < 16; ++i) {
    const unsigned char v = i < src_bytes ? ((const unsigned char*)src)[i] : 0;
    asm volatile("st.shared.u8 [%0], %1;" :: "r"(dst + i), "h"((unsigned short)v) : "memory");
  }
}
__device__ __forceinline__ void cp_async_commit() {}
template <int N> __device__ __forceinline__ void cp_async_wait() {}
#endif
__device__ __forceinline__ void ldmatrix_x4(unsigned r[4], SharedAddress row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(row) : "memory");
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned r[4], SharedAddress row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(row) : "memory");
}
#endif
// A reduction split over gridDim.y chunks: phase 0 is unsplit, phase 1 writes each chunk's
// partial results to scratch, phase 2 combines them (docs/cuda.md).
struct Split { void* scratch; i64 chunks; i64 phase; };
// E elements of T moved as one aligned access (16 bytes at most: one vector load or store).
template <class T, int E> struct alignas(sizeof(T) * E) Pack { T v[E]; };
// The block's dynamic shared memory and its size in bytes (0 when the launch gave none).
#ifdef KILN_CUDA_HOST_EMULATION
__device__ __forceinline__ unsigned dynamic_shared_bytes() { return kiln_emulation::dynamic_shared_bytes(); }
template <class T> __device__ __forceinline__ T* dynamic_shared() { return (T*)kiln_emulation::dynamic_shared(); }
#else
__device__ __forceinline__ unsigned dynamic_shared_bytes() {
  unsigned bytes; asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(bytes)); return bytes;
}
extern __shared__ __align__(16) double kiln_dynamic_shared[];  // 16 B: row caches store Packs
template <class T> __device__ __forceinline__ T* dynamic_shared() { return (T*)kiln_dynamic_shared; }
#endif
// Block-wide reductions over blockDim.x threads (a multiple of 32, at most 1024).
template <class T, class F> __device__ T block_reduce(T v, F f, T identity, T* shared) {
  for (int o = 16; o > 0; o >>= 1) v = f(v, __shfl_down_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) >> 5;
  v = threadIdx.x < warps ? shared[threadIdx.x] : identity;
  if (warp == 0) for (int o = 16; o > 0; o >>= 1) v = f(v, __shfl_down_sync(0xffffffffu, v, o));
  if (threadIdx.x == 0) shared[0] = v;
  __syncthreads();
  v = shared[0];
  __syncthreads();
  return v;
}
// Block-wide inclusive prefix sum of v over the threads in order (cumsum); *total gets the
// whole block's sum. `shared` holds 32 values.
template <class T> __device__ T block_inclusive_scan(T v, T* shared, T* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  for (int o = 1; o < 32; o <<= 1) { const T u = __shfl_up_sync(0xffffffffu, v, o); if (lane >= o) v += u; }
  if (lane == 31) shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    T s = lane < warps ? shared[lane] : (T)0;
    for (int o = 1; o < 32; o <<= 1) { const T u = __shfl_up_sync(0xffffffffu, s, o); if (lane >= o) s += u; }
    if (lane < warps) shared[lane] = s;
  }
  __syncthreads();
  if (warp > 0) v += shared[warp - 1];
  *total = shared[warps - 1];
  __syncthreads();
  return v;
}
// Block-wide exclusive prefix sum: the sum of v over the threads before this one (0 for the
// first), added up without subtracting v back out of an inclusive sum, so an inf in v does
// not turn the sums before it into NaN: the warp's inclusive sums, shifted up one lane, plus
// the warps before. *total as above.
template <class T> __device__ T block_exclusive_scan(T v, T* shared, T* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  for (int o = 1; o < 32; o <<= 1) { const T u = __shfl_up_sync(0xffffffffu, v, o); if (lane >= o) v += u; }
  if (lane == 31) shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    T s = lane < warps ? shared[lane] : (T)0;
    for (int o = 1; o < 32; o <<= 1) { const T u = __shfl_up_sync(0xffffffffu, s, o); if (lane >= o) s += u; }
    if (lane < warps) shared[lane] = s;
  }
  __syncthreads();
  const T warps_before = warp > 0 ? shared[warp - 1] : (T)0;
  const T lanes_before = __shfl_up_sync(0xffffffffu, v, 1);
  *total = shared[warps - 1];
  __syncthreads();
  return lane > 0 ? lanes_before + warps_before : warps_before;
}
// ---- op functors (ops/scalar_math.inc) ----
#define KILN_SCALAR __device__ __forceinline__
namespace kiln {
namespace math {
)CUDA";

inline constexpr const char* kPreambleEnd = R"CUDA(
}  // namespace math
}  // namespace kiln
#undef KILN_SCALAR
// The block's first candidate in topk's order (kiln::math::topk_before): every thread brings
// its best (value, index), index < 0 for none, and every thread gets the block's.
template <class X, class I> __device__ void block_select(X& value, I& index, bool largest, X* shared_value, I* shared_index) {
  auto merge = [&](X v, I i) {
    if (i >= 0 && (index < 0 || kiln::math::topk_before(v, i, value, index, largest))) { value = v; index = i; }
  };
  for (int o = 16; o > 0; o >>= 1) {
    const X v = __shfl_down_sync(0xffffffffu, value, o);
    const I i = __shfl_down_sync(0xffffffffu, index, o);
    merge(v, i);
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  if (lane == 0) { shared_value[warp] = value; shared_index[warp] = index; }
  __syncthreads();
  if (warp == 0) {
    index = -1;
    if (lane < warps) { value = shared_value[lane]; index = shared_index[lane]; }
    for (int o = 16; o > 0; o >>= 1) {
      const X v = __shfl_down_sync(0xffffffffu, value, o);
      const I i = __shfl_down_sync(0xffffffffu, index, o);
      merge(v, i);
    }
    if (lane == 0) { shared_value[0] = value; shared_index[0] = index; }
  }
  __syncthreads();
  value = shared_value[0];
  index = shared_index[0];
  __syncthreads();
}
// ---- end of preamble ----
)CUDA";

// The whole preamble: the helpers, then the functors inside namespace kiln::math.
inline const std::string& preamble() {
  static const std::string text =
      std::string(kPreambleHelpers) + ops::kScalarMathSource + kPreambleEnd;
  return text;
}

}  // namespace kiln::runtime::cuda

#endif  // KILN_RUNTIME_CUDA_CUDA_PREAMBLE_H_
