// Matmul: inference and reference evaluation.
#include "ops/matmul.h"

#include "absl/strings/str_cat.h"
#include "ops/element_access.h"
#include "ops/infer.h"
#include "ops/reference_loops.h"
#include "ops/scalar_math.h"

namespace kiln::ops {

absl::StatusOr<ValueType> infer_matmul(const std::vector<ValueType>& in) {
  const OpKind op = OpKind::Matmul;
  Shape a = in[0].shape;
  Shape b = in[1].shape;
  if (a.empty() || b.empty()) return op_error(op, in, "needs operands of rank >= 1");
  DType dt = promote_types(in[0].dtype, in[1].dtype);
  if (dt == DType::Bool) return op_error(op, in, "does not support dtype bool");
  bool a_vector = a.size() == 1;
  bool b_vector = b.size() == 1;
  if (a_vector) a.insert(a.begin(), 1);
  if (b_vector) b.push_back(1);
  int64_t k_a = a[a.size() - 1];
  int64_t k_b = b[b.size() - 2];
  if (k_a != k_b) {
    return op_error(op, in, absl::StrCat("inner dimensions ", k_a, " and ", k_b, " differ"));
  }
  absl::StatusOr<Shape> batch =
      broadcast_shapes(Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2));
  if (!batch.ok()) {
    return op_error(op, in, absl::StrCat("batch dimensions: ", batch.status().message()));
  }
  Shape out = *batch;
  if (!a_vector) out.push_back(a[a.size() - 2]);
  if (!b_vector) out.push_back(b[b.size() - 1]);
  return ValueType{out, dt};
}

void evaluate_matmul(const ValueType& out, const std::vector<HostValue>& in, base::Buffer& result) {
  Shape a = in[0].type.shape;
  Shape b = in[1].type.shape;
  if (a.size() == 1) a.insert(a.begin(), 1);
  if (b.size() == 1) b.push_back(1);
  const int64_t m = a[a.size() - 2], k = a.back(), n = b.back();
  // The output is batch dims, then m unless a was a vector, then n unless b was one.
  const size_t matrix_dims = (in[0].type.shape.size() > 1) + (in[1].type.shape.size() > 1);
  Shape batch(out.shape.begin(), out.shape.end() - static_cast<int64_t>(matrix_dims));
  Shape a_batch(a.begin(), a.end() - 2);
  Shape b_batch(b.begin(), b.end() - 2);
  Strides a_strides = broadcast_strides(a_batch, batch);
  Strides b_strides = broadcast_strides(b_batch, batch);
  for (int64_t& s : a_strides) s *= m * k;
  for (int64_t& s : b_strides) s *= k * n;
  const DType compute = out.dtype;
  const bool floating = is_floating(compute);
  const DType da = in[0].type.dtype, db = in[1].type.dtype;
  for_each_index(batch, {a_strides, b_strides}, [&](int64_t bi, const std::vector<int64_t>& off) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        int64_t o = (bi * m + i) * n + j;
        if (floating) {
          double acc = 0;
          for (int64_t p = 0; p < k; ++p) {
            acc += round_to(compute, load_double(*in[0].buffer, da, off[0] + i * k + p)) *
                   round_to(compute, load_double(*in[1].buffer, db, off[1] + p * n + j));
          }
          store_double(result, compute, o, acc);
        } else {
          int64_t acc = 0;
          for (int64_t p = 0; p < k; ++p) {
            acc = math::wrapping_add(
                acc, math::wrapping_mul(load_int(*in[0].buffer, da, off[0] + i * k + p),
                                        load_int(*in[1].buffer, db, off[1] + p * n + j)));
          }
          store_int(result, compute, o, acc);
        }
      }
    }
  });
}

}  // namespace kiln::ops
