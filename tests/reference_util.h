// The reference evaluator as a test oracle: computes a tensor op by op without touching it.
#ifndef KILN_TESTS_REFERENCE_UTIL_H_
#define KILN_TESTS_REFERENCE_UTIL_H_

#include "jit/backend/backend.h"
#include "jit/eval/reference_graph.h"
#include "jit/graph/node.h"
#include "jit/graph/record.h"
#include "kiln/kiln.h"

namespace kiln::testing {

// A realized tensor holding what the reference evaluator computes for `t` (t stays lazy).
inline Tensor reference_tensor(const Tensor& t) {
  const auto& node = detail::TensorAccess::node(t);
  auto buffers = ops::reference_run({node.get()});
  return jit::realized_on(node->type, buffers[0], node->device);
}

}  // namespace kiln::testing

#endif  // KILN_TESTS_REFERENCE_UTIL_H_
