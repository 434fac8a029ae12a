// The quantized kernels with AVX-512 VNNI: vpdpbusd sums four u8 x s8 products into each
// int32 lane in one instruction. The tile kernel works on 256-bit vectors, whose 32 registers
// hold a tile of 4 x 4 accumulators (but a one-row Q4_K or Q5_K product runs two chunks per
// 512-bit vector); the panel kernel on 512-bit vectors, 16 columns a panel, so that each
// activation broadcast feeds twice the products (a 256-bit panel's loop issues about as many
// broadcasts as dot products). Compiled with -mavx512f -mavx512vl -mavx512bw
// -mavx512vnni on x86-64 (CMakeLists.txt), run only where the CPU has them.
#if defined(__x86_64__)
#define KILN_QDOT_NAMESPACE avx512_vnni
#define KILN_QDOT_DOT(ax, sy) _mm256_dpbusd_epi32(_mm256_setzero_si256(), (ax), (sy))
#define KILN_QDOT_ACCUMULATE(start, u, s) _mm256_dpbusd_epi32((start), (u), (s))
#define KILN_QDOT_BIASED 1
#define KILN_QDOT_PANEL_COLUMNS 16
#define KILN_QDOT_PANEL_ROWS 8
#define KILN_QDOT_COLS 4
#include "runtime/cpu/quantized_dot_simd.inc"
#endif
