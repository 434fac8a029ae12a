// The quantized tile kernel with AVX-VNNI (the VEX-encoded vpdpbusd of Intel's client CPUs
// from Alder Lake, and of Zen 5, without AVX-512): the VNNI kernel's arithmetic on the 16
// vector registers of AVX2, so tiles of 4 x 2 and panels of 4 rows. Compiled with -mavxvnni
// on x86-64 (CMakeLists.txt), run only where the CPU has it.
#if defined(__x86_64__)
#define KILN_QDOT_NAMESPACE avx_vnni
#define KILN_QDOT_DOT(ax, sy) _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), (ax), (sy))
#define KILN_QDOT_ACCUMULATE(start, u, s) _mm256_dpbusd_avx_epi32((start), (u), (s))
#define KILN_QDOT_BIASED 1
#define KILN_QDOT_PANEL_COLUMNS 8
#define KILN_QDOT_PANEL_ROWS 4
#define KILN_QDOT_COLS 2
#include "runtime/cpu/quantized_dot_simd.inc"
#endif
