// The quantized tile kernel for AVX2: u8 x s8 products summed in pairs by vpmaddubsw (their
// sums stay within int16: |w| <= 128, |a| <= 127), then in fours by vpmaddwd. Compiled with
// -mavx2 -mfma -mf16c on x86-64 (CMakeLists.txt), run only where the CPU has them.
#if defined(__x86_64__)
#define KILN_QDOT_NAMESPACE avx2
#define KILN_QDOT_DOT(ax, sy) \
  _mm256_madd_epi16(_mm256_maddubs_epi16((ax), (sy)), _mm256_set1_epi16(1))
#define KILN_QDOT_ACTIVATIONS 1  // quantize_activations in vectors: AVX2 is enough
#define KILN_QDOT_COLS 2  // 16 registers: 4 x 2 accumulators, the weights and the activations
#include "runtime/cpu/quantized_dot_simd.inc"
#endif
