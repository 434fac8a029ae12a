// The check that tests of a start read when a kernel runs (update_slice and slice with a
// start tensor) share: the kernels of several plans built once, every plan but the last run
// through each emulation variant and compared with the reference evaluation, and the last,
// whose start lies outside x, failing with the index error the backend reports.
#ifndef KILN_TESTS_CUDA_EMULATION_EXPECT_EMULATED_H_
#define KILN_TESTS_CUDA_EMULATION_EXPECT_EMULATED_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kiln/tensor.h"
#include "tests/cuda_emulation/emulated_kernels.h"
#include "tests/cuda_emulation/run_emulated.h"
#include "tests/reference_util.h"
#include "tests/test_util.h"

namespace kiln::testing {

// `results[i]` is the lazy f32 result that `plans` planned as plan i. Plans 0 .. n-2 must give
// its reference values, every element: within 4 ulps, or within `relative` of the value's
// magnitude (at least 1, for sums that cancel) where the kernel may add in another order than
// the reference (atomics); plan n-1
// must throw an error that says each of `error`.
inline void expect_cases_then_index_error(const EmulatedPlans& plans,
                                          const std::vector<Tensor>& results,
                                          const std::string& dir,
                                          const std::vector<std::string>& error,
                                          float relative = 0) {
  absl::StatusOr<EmulatedKernels> kernels = EmulatedKernels::build(plans.modules, dir);
  ASSERT_TRUE(kernels.ok()) << kernels.status();
  const size_t good = results.size() - 1;
  for (const EmulationVariant& v : emulation_variants()) {
    SCOPED_TRACE(v.name());
    for (size_t c = 0; c < good; ++c) {
      std::vector<std::shared_ptr<base::Buffer>> out = plans.run(*kernels, c, v);
      const std::vector<float> want = reference_tensor(results[c]).to_vector<float>();
      ASSERT_EQ(out[0]->nbytes(), static_cast<int64_t>(want.size() * 4));
      for (size_t e = 0; e < want.size(); ++e) {
        if (relative > 0) {
          EXPECT_NEAR(out[0]->as<float>()[e], want[e], relative * std::max(1.0f, std::abs(want[e])))
              << "case " << c << " element " << e;
        } else {
          EXPECT_FLOAT_EQ(out[0]->as<float>()[e], want[e]) << "case " << c << " element " << e;
        }
      }
    }
    expect_error([&] { plans.run(*kernels, good, v); }, error);
  }
}

}  // namespace kiln::testing

#endif  // KILN_TESTS_CUDA_EMULATION_EXPECT_EMULATED_H_
