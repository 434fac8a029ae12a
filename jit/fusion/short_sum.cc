#include "jit/fusion/short_sum.h"

#include "kiln/dtype.h"
#include "ops/value_type.h"

namespace kiln::jit {

bool is_unrolled_sum(const Trace& trace, int node) {
  const TraceNode& n = trace.nodes[node];
  if (n.op != ops::OpKind::Sum) return false;
  const ops::ValueType& x = *trace.nodes[n.args[0]].type;
  const int64_t results = ops::numel(n.type->shape);
  if (!is_floating(x.dtype) || results == 0) return false;
  const int64_t terms = ops::numel(x.shape) / results;
  return terms >= 1 && terms <= (x.dtype == DType::F64 ? kMaxUnrolledSum : 2);
}

}  // namespace kiln::jit
