// Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): a
// counter-based generator, so element i of rand(seed) is a pure function of (seed, i) and
// every device and every run produce the same numbers.
#ifndef KILN_OPS_PHILOX_H_
#define KILN_OPS_PHILOX_H_

#include <array>
#include <cstdint>

namespace kiln::ops {

inline std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter, uint64_t seed) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  uint32_t key0 = static_cast<uint32_t>(seed);
  uint32_t key1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = static_cast<uint64_t>(kMul0) * counter[0];
    uint64_t p1 = static_cast<uint64_t>(kMul1) * counter[2];
    counter = {static_cast<uint32_t>(p1 >> 32) ^ counter[1] ^ key0, static_cast<uint32_t>(p1),
               static_cast<uint32_t>(p0 >> 32) ^ counter[3] ^ key1, static_cast<uint32_t>(p0)};
    key0 += kWeyl0;
    key1 += kWeyl1;
  }
  return counter;
}

// The Philox block for element `index`: counter = (low, high 32 bits of index, 0, 0).
inline std::array<uint32_t, 4> philox_block(uint64_t index, uint64_t seed) {
  return philox4x32({static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), 0, 0}, seed);
}

// Uniform in [0, 1) with `bits` bits of precision, so the value is exact in the dtype it
// will be stored in (24 for f32/f64, 11 for f16, 8 for bf16) and never rounds up to 1.
inline double uniform_from_bits(uint32_t x, int bits) {
  return static_cast<double>(x >> (32 - bits)) / static_cast<double>(uint64_t{1} << bits);
}

}  // namespace kiln::ops

#endif  // KILN_OPS_PHILOX_H_
