// kiln::Generator: a seeded source of random tensors that advances, so a loop need not
// pass a new seed to every Tensor::rand call.
//
// Each draw takes the generator's next seed (SplitMix64 of a counter that starts at the
// seed) and records Tensor::rand or Tensor::randn with it, so a program's random numbers
// depend only on the seed and the order of its draws: the same on every device and every
// run. Not safe to draw from two threads at once (as std::mt19937); give each thread its
// own generator.
#ifndef KILN_RANDOM_H_
#define KILN_RANDOM_H_

#include <cstdint>
#include <vector>

#include "kiln/tensor.h"

namespace kiln {

class Generator {
 public:
  explicit Generator(uint64_t seed) : counter_(seed) {}

  // Uniform in [0, 1) and standard normal, as Tensor::rand and Tensor::randn.
  Tensor rand(std::vector<int64_t> shape, DType dt = DType::F32);
  Tensor randn(std::vector<int64_t> shape, DType dt = DType::F32);
  // The seed the next draw uses; the generator advances past it.
  uint64_t next_seed();

 private:
  uint64_t counter_;
};

}  // namespace kiln

#endif  // KILN_RANDOM_H_
