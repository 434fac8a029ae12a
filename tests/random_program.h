// Random programs over the whole public API: random ops, shapes with size-1 and broadcast
// dims, non-contiguous views, every dtype. Used by the differential test (planner + device
// against the reference evaluator) and by fuzzing.
#ifndef KILN_TESTS_RANDOM_PROGRAM_H_
#define KILN_TESTS_RANDOM_PROGRAM_H_

#include <cstdint>
#include <random>
#include <vector>

#include "kiln/kiln.h"

namespace kiln::testing {

class ProgramGenerator {
 public:
  explicit ProgramGenerator(uint64_t seed) : rng_(seed) {}

  // Records about `steps` random ops (invalid combinations are skipped) and returns 1 to 3
  // of the tensors made, all still lazy.
  std::vector<Tensor> generate(int steps);

 private:
  struct Value {
    Tensor t;
    bool exact;  // the same bits on every correct path (inputs, integer results, ...)
  };

  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }
  double scalar() { return std::uniform_real_distribution<double>(-2, 2)(rng_); }
  std::vector<int64_t> random_shape();
  DType random_dtype();
  Tensor make_input(const std::vector<int64_t>& shape, DType dt);
  // In-range indices (negative ones included) for an axis of `extent` elements.
  Tensor make_indices(const std::vector<int64_t>& shape, int64_t extent, DType dt);
  // A shape that broadcasts against `shape`: dims set to 1, leading dims dropped.
  std::vector<int64_t> broadcastable(const std::vector<int64_t>& shape);
  const Value& any();
  const Value* any_floating();
  const Value* any_exact();
  void step();
  void add(Tensor t, bool exact) { pool_.push_back({std::move(t), exact}); }

  std::mt19937_64 rng_;
  std::vector<Value> pool_;
};

}  // namespace kiln::testing

#endif  // KILN_TESTS_RANDOM_PROGRAM_H_
