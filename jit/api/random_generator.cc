// kiln::Generator (kiln/random.h): each draw records Tensor::rand or randn with the next
// seed of a SplitMix64 sequence.
#include <utility>

#include "kiln/random.h"

namespace kiln {

// SplitMix64 (Steele, Lea and Flood): a counter that steps by the golden-ratio increment,
// then mixed, so neighbouring seeds give unrelated streams and every 64-bit value is
// reached once per period.
uint64_t Generator::next_seed() {
  uint64_t z = (counter_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

Tensor Generator::rand(std::vector<int64_t> shape, DType dt) {
  return Tensor::rand(std::move(shape), next_seed(), dt);
}

Tensor Generator::randn(std::vector<int64_t> shape, DType dt) {
  return Tensor::randn(std::move(shape), next_seed(), dt);
}

}  // namespace kiln
