#include "ops/reference_evaluator.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "ops/attention.h"
#include "ops/collective.h"
#include "ops/custom_functions.h"
#include "ops/element_access.h"
#include "ops/gather.h"
#include "ops/infer.h"
#include "ops/scalar_math.h"
#include "ops/update_slice.h"

namespace kiln::ops {
namespace {

using base::Buffer;
using Strides = std::vector<int64_t>;

// Element strides of `in` seen through numpy broadcasting to `out` (0 on broadcast dims).
Strides broadcast_strides(const Shape& in, const Shape& out) {
  Strides contiguous = contiguous_strides(in);
  Strides strides(out.size(), 0);
  size_t offset = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) {
    strides[offset + i] = in[i] == 1 ? 0 : contiguous[i];
  }
  return strides;
}

// Calls f(i, offsets) for each element i of `shape` in row-major order, where offsets[k]
// walks `strides[k]` (starting at bases[k]).
template <class F>
void for_each_index(const Shape& shape, const std::vector<Strides>& strides, F&& f,
                    std::vector<int64_t> offsets = {}) {
  int64_t count = numel(shape);
  if (count == 0) return;
  offsets.resize(strides.size(), 0);
  const int ndim = static_cast<int>(shape.size());
  std::vector<int64_t> index(ndim, 0);
  for (int64_t i = 0; i < count; ++i) {
    f(i, offsets);
    for (int d = ndim - 1; d >= 0; --d) {
      ++index[d];
      for (size_t k = 0; k < strides.size(); ++k) offsets[k] += strides[k][d];
      if (index[d] < shape[d]) break;
      for (size_t k = 0; k < strides.size(); ++k) offsets[k] -= strides[k][d] * shape[d];
      index[d] = 0;
    }
  }
}

// Rounds a double to what dtype `dt` can hold (the value an operand has once cast).
double round_to(DType dt, double v) {
  switch (dt) {
    case DType::F16:
      return static_cast<float>(Half(static_cast<float>(v)));
    case DType::BF16:
      return static_cast<float>(BFloat16(static_cast<float>(v)));
    case DType::F32:
      return static_cast<float>(v);
    default:
      return v;
  }
}

void eval_leaf(OpKind op, const Attrs& attrs, const ValueType& out, Buffer& result) {
  int64_t n = numel(out.shape);
  DType dt = out.dtype;
  int bits = dt == DType::F16 ? 11 : (dt == DType::BF16 ? 8 : 24);
  for (int64_t i = 0; i < n; ++i) {
    switch (op) {
      case OpKind::Constant:
        store_double(result, dt, i, attrs.value);
        break;
      case OpKind::Arange:
        store_int(result, dt, i, i);
        break;
      case OpKind::Rand:
        store_double(result, dt, i, math::rand_uniform(i, attrs.seed, bits));
        break;
      case OpKind::Randn:
        store_double(result, dt, i, math::rand_normal(i, attrs.seed));
        break;
      case OpKind::Input:
        break;  // an input is bound, never evaluated (reference_graph.cc)
        KILN_UNARY_OPS(KILN_OP_CASE)
        KILN_BINARY_OPS(KILN_OP_CASE)
        KILN_STRUCTURED_OPS(KILN_OP_CASE)
        KILN_VIEW_OPS(KILN_OP_CASE)
        math::not_of_kind(op, "leaf");
    }
  }
}

// A custom function: each operand broadcast and converted to F32, then one call of its C++
// definition over all elements.
void eval_custom(const Attrs& attrs, const ValueType& out, const std::vector<HostValue>& in,
                 Buffer& result) {
  const CustomFunction* f = custom_function(attrs.function);
  const int64_t n = numel(out.shape);
  std::vector<std::vector<float>> operands(in.size(), std::vector<float>(n));
  std::vector<Strides> strides;
  strides.reserve(in.size());
  for (const HostValue& v : in) strides.push_back(broadcast_strides(v.type.shape, out.shape));
  for_each_index(out.shape, strides, [&](int64_t i, const std::vector<int64_t>& off) {
    for (size_t k = 0; k < in.size(); ++k) {
      operands[k][i] = static_cast<float>(load_double(*in[k].buffer, in[k].type.dtype, off[k]));
    }
  });
  std::vector<const float*> pointers;
  pointers.reserve(operands.size());
  for (const auto& o : operands) pointers.push_back(o.data());
  f->cpu(n, pointers.data(), reinterpret_cast<float*>(result.data()));
}

void eval_custom_kernel(const Attrs& attrs, const ValueType& out, const std::vector<HostValue>& in,
                        Buffer& result) {
  std::vector<const void*> data;
  std::vector<ValueType> types;
  for (const HostValue& v : in) {
    data.push_back(v.buffer->data());
    types.push_back(v.type);
  }
  custom_kernel(attrs.function)->cpu(data, types, result.data(), out);
}

void eval_elementwise(OpKind op, const ValueType& out, const std::vector<HostValue>& in,
                      Buffer& result) {
  std::vector<Strides> strides;
  std::vector<DType> dtypes;
  for (const HostValue& v : in) {
    strides.push_back(broadcast_strides(v.type.shape, out.shape));
    dtypes.push_back(v.type.dtype);
  }
  const OpClass cls = op_class(op);
  // Where selects between a and b; the condition does not take part in the compute dtype.
  const DType compute = cls == OpClass::kWhere ? out.dtype : compute_dtype(op, dtypes);
  const bool floating = is_floating(compute);
  auto load = [&](size_t k, int64_t offset) {
    return round_to(compute, load_double(*in[k].buffer, dtypes[k], offset));
  };
  auto load_i = [&](size_t k, int64_t offset) {
    return load_int(*in[k].buffer, dtypes[k], offset);
  };
  auto truth = [&](size_t k, int64_t offset) {
    return load_truth(*in[k].buffer, dtypes[k], offset);
  };
  for_each_index(out.shape, strides, [&](int64_t i, const std::vector<int64_t>& off) {
    if (cls == OpClass::kWhere) {
      size_t pick = truth(0, off[0]) ? 1 : 2;
      if (floating) {
        store_double(result, out.dtype, i, load(pick, off[pick]));
      } else {
        store_int(result, out.dtype, i, load_i(pick, off[pick]));
      }
    } else if (op == OpKind::LogicalNot || op == OpKind::LogicalAnd || op == OpKind::LogicalOr) {
      // Logical ops see each operand as a truth value (NaN is true), whatever its dtype.
      const int64_t a = truth(0, off[0]);
      store_int(result, out.dtype, i,
                cls == OpClass::kUnary ? math::apply_unary(op, a)
                                       : math::apply_binary<int64_t>(op, a, truth(1, off[1])));
    } else if (cls == OpClass::kUnary) {
      if (floating) {
        store_double(result, out.dtype, i, math::apply_unary(op, load(0, off[0])));
      } else {
        store_int(result, out.dtype, i, math::apply_unary(op, load_i(0, off[0])));
      }
    } else if (floating) {
      // A comparison gives 0 or 1, stored as bool.
      store_double(result, out.dtype, i, math::apply_binary(op, load(0, off[0]), load(1, off[1])));
    } else {
      store_int(result, out.dtype, i, math::apply_binary(op, load_i(0, off[0]), load_i(1, off[1])));
    }
  });
}

void eval_cast(const ValueType& out, const HostValue& in, Buffer& result) {
  int64_t n = numel(out.shape);
  for (int64_t i = 0; i < n; ++i)
    convert_element(*in.buffer, in.type.dtype, i, result, out.dtype, i);
}

void eval_view(OpKind op, const Attrs& attrs, const ValueType& out, const HostValue& in,
               Buffer& result) {
  const int64_t size = dtype_size(out.dtype);
  if (op == OpKind::Reshape || op == OpKind::Contiguous) {
    std::memcpy(result.data(), in.buffer->data(), static_cast<size_t>(numel(out.shape) * size));
    return;
  }
  Strides in_strides = contiguous_strides(in.type.shape);
  Strides strides;
  int64_t base = 0;
  if (op == OpKind::Permute) {
    for (int axis : attrs.axes) strides.push_back(in_strides[axis]);
  } else if (op == OpKind::BroadcastTo) {
    strides = broadcast_strides(in.type.shape, out.shape);
  } else {  // Slice
    strides = in_strides;
    strides[attrs.axis] *= attrs.step;
    base = attrs.start * in_strides[attrs.axis];
  }
  const std::byte* src = in.buffer->data();
  std::byte* dst = result.data();
  for_each_index(out.shape, {strides},
                 [&](int64_t i, const std::vector<int64_t>& off) {
                   std::memcpy(dst + i * size, src + off[0] * size, static_cast<size_t>(size));
                 },
                 {base});
}

void eval_reduce(OpKind op, const ValueType& out, const HostValue& in, const Attrs& attrs,
                 Buffer& result) {
  const Shape& shape = in.type.shape;
  // Map every input element to its output element: reduced axes get stride 0.
  Strides out_strides(shape.size(), 0);
  {
    Shape kept;
    for (size_t d = 0; d < shape.size(); ++d) {
      bool reduced =
          std::find(attrs.axes.begin(), attrs.axes.end(), static_cast<int>(d)) != attrs.axes.end();
      if (!reduced) kept.push_back(shape[d]);
    }
    Strides kept_strides = contiguous_strides(kept);
    size_t k = 0;
    for (size_t d = 0; d < shape.size(); ++d) {
      bool reduced =
          std::find(attrs.axes.begin(), attrs.axes.end(), static_cast<int>(d)) != attrs.axes.end();
      if (!reduced) out_strides[d] = kept_strides[k++];
    }
  }
  const int64_t out_count = numel(out.shape);
  const int64_t extent = out_count == 0 ? 0 : numel(shape) / out_count;
  const DType dt = in.type.dtype;
  const bool floating = is_floating(dt);
  std::vector<double> acc_f(out_count, 0.0);
  std::vector<int64_t> acc_i(out_count, 0);
  std::vector<bool> seen(out_count, false);
  for_each_index(shape, {contiguous_strides(shape), out_strides},
                 [&](int64_t, const std::vector<int64_t>& off) {
                   int64_t o = off[1];
                   if (floating) {
                     double v = load_double(*in.buffer, dt, off[0]);
                     double& a = acc_f[o];
                     if (op == OpKind::Sum || op == OpKind::Mean) {
                       a += v;
                     } else if (!seen[o] || std::isnan(v)) {
                       a = v;
                     } else if (!std::isnan(a)) {
                       a = op == OpKind::Max ? std::max(a, v) : std::min(a, v);
                     }
                   } else {
                     int64_t v = load_int(*in.buffer, dt, off[0]);
                     int64_t& a = acc_i[o];
                     if (op == OpKind::Sum) {
                       a = math::wrapping_add(a, v);
                     } else if (!seen[o]) {
                       a = v;
                     } else {
                       a = op == OpKind::Max ? std::max(a, v) : std::min(a, v);
                     }
                   }
                   seen[o] = true;
                 });
  for (int64_t o = 0; o < out_count; ++o) {
    if (floating) {
      double v = op == OpKind::Mean ? acc_f[o] / static_cast<double>(extent) : acc_f[o];
      store_double(result, out.dtype, o, v);
    } else {
      store_int(result, out.dtype, o, acc_i[o]);
    }
  }
}

void eval_arg_reduce(OpKind op, const HostValue& in, const Attrs& attrs, Buffer& result) {
  RowLayout r = row_layout(in.type.shape, attrs.axis);
  const DType dt = in.type.dtype;
  const bool want_max = op == OpKind::Argmax;
  for (int64_t o = 0; o < r.outer; ++o) {
    for (int64_t i = 0; i < r.inner; ++i) {
      int64_t best = 0;
      for (int64_t k = 1; k < r.extent; ++k) {
        bool better;
        if (is_floating(dt)) {
          double b = load_double(*in.buffer, dt, r.at(o, best, i));
          double v = load_double(*in.buffer, dt, r.at(o, k, i));
          better = !std::isnan(b) && (std::isnan(v) || (want_max ? v > b : v < b));
        } else {
          int64_t b = load_int(*in.buffer, dt, r.at(o, best, i));
          int64_t v = load_int(*in.buffer, dt, r.at(o, k, i));
          better = want_max ? v > b : v < b;
        }
        if (better) best = k;
      }
      result.as<int64_t>()[o * r.inner + i] = best;
    }
  }
}

void eval_matmul(const ValueType& out, const std::vector<HostValue>& in, Buffer& result) {
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

void eval_concat(const ValueType& out, const std::vector<HostValue>& in, const Attrs& attrs,
                 Buffer& result) {
  RowLayout r = row_layout(out.shape, attrs.axis);
  int64_t offset = 0;  // along the axis
  for (const HostValue& v : in) {
    int64_t extent = v.type.shape[attrs.axis];
    for (int64_t o = 0; o < r.outer; ++o) {
      for (int64_t j = 0; j < extent * r.inner; ++j) {
        convert_element(*v.buffer, v.type.dtype, o * extent * r.inner + j, result, out.dtype,
                        (o * r.extent + offset) * r.inner + j);
      }
    }
    offset += extent;
  }
}

// cumsum along the axis: floats add in double, integers and bool in int64 (wrapping). The
// scan walks the row from its end when reverse; exclusive stores the sum before adding.
void eval_cumsum(const Attrs& attrs, const ValueType& out, const HostValue& x, Buffer& result) {
  const RowLayout r = row_layout(out.shape, attrs.axis);
  for (int64_t o = 0; o < r.outer; ++o) {
    for (int64_t i = 0; i < r.inner; ++i) {
      double total = 0;
      uint64_t int_total = 0;
      for (int64_t step = 0; step < r.extent; ++step) {
        const int64_t at = r.at(o, attrs.reverse ? r.extent - 1 - step : step, i);
        if (is_floating(out.dtype)) {
          const double before = total;
          total += load_double(*x.buffer, x.type.dtype, at);
          store_double(result, out.dtype, at, attrs.exclusive ? before : total);
        } else {
          const uint64_t before = int_total;
          int_total += static_cast<uint64_t>(load_int(*x.buffer, x.type.dtype, at));
          result.as<int64_t>()[at] = static_cast<int64_t>(attrs.exclusive ? before : int_total);
        }
      }
    }
  }
}

// The positions of the k first elements of each row in topk's order (math::topk_before).
void eval_topk_indices(const Attrs& attrs, const ValueType& out, const HostValue& x,
                       Buffer& result) {
  const RowLayout in = row_layout(x.type.shape, attrs.axis);
  const RowLayout r = row_layout(out.shape, attrs.axis);
  std::vector<int64_t> order(in.extent);
  for (int64_t o = 0; o < in.outer; ++o) {
    for (int64_t i = 0; i < in.inner; ++i) {
      for (int64_t k = 0; k < in.extent; ++k) order[k] = k;
      auto before = [&](int64_t a, int64_t b) {
        const int64_t pa = in.at(o, a, i), pb = in.at(o, b, i);
        if (is_floating(x.type.dtype)) {
          return math::topk_before(load_double(*x.buffer, x.type.dtype, pa), a,
                                   load_double(*x.buffer, x.type.dtype, pb), b, attrs.largest);
        }
        return math::topk_before(load_int(*x.buffer, x.type.dtype, pa), a,
                                 load_int(*x.buffer, x.type.dtype, pb), b, attrs.largest);
      };
      std::partial_sort(order.begin(), order.begin() + r.extent, order.end(), before);
      for (int64_t k = 0; k < r.extent; ++k) result.as<int64_t>()[r.at(o, k, i)] = order[k];
    }
  }
}

void eval_row_norm(OpKind op, const Attrs& attrs, const ValueType& out,
                   const std::vector<HostValue>& in, Buffer& result) {
  if (op == OpKind::Cumsum) return eval_cumsum(attrs, out, in[0], result);
  if (op == OpKind::TopkIndices) return eval_topk_indices(attrs, out, in[0], result);
  RowLayout r = row_layout(out.shape, attrs.axis);
  auto x = [&](int64_t idx) {
    return round_to(out.dtype, load_double(*in[0].buffer, in[0].type.dtype, idx));
  };
  auto param = [&](size_t which, int64_t k) {
    return round_to(out.dtype, load_double(*in[which].buffer, in[which].type.dtype, k));
  };
  const double n = static_cast<double>(r.extent);
  for (int64_t o = 0; o < r.outer; ++o) {
    for (int64_t i = 0; i < r.inner; ++i) {
      if (op == OpKind::Softmax || op == OpKind::LogSoftmax) {
        double max = -std::numeric_limits<double>::infinity();
        for (int64_t k = 0; k < r.extent; ++k) max = std::max(max, x(r.at(o, k, i)));
        if (std::isinf(max)) max = 0;  // all -inf rows: avoid inf - inf
        double total = 0;
        for (int64_t k = 0; k < r.extent; ++k) total += std::exp(x(r.at(o, k, i)) - max);
        for (int64_t k = 0; k < r.extent; ++k) {
          double v = x(r.at(o, k, i)) - max;
          double y = op == OpKind::Softmax ? std::exp(v) / total : v - std::log(total);
          store_double(result, out.dtype, r.at(o, k, i), y);
        }
        continue;
      }
      double mean = 0, square_mean = 0;
      for (int64_t k = 0; k < r.extent; ++k) mean += x(r.at(o, k, i));
      mean /= n;
      for (int64_t k = 0; k < r.extent; ++k) {
        double v = x(r.at(o, k, i));
        square_mean += op == OpKind::LayerNorm ? (v - mean) * (v - mean) : v * v;
      }
      double scale = 1.0 / std::sqrt(square_mean / n + attrs.eps);
      for (int64_t k = 0; k < r.extent; ++k) {
        double v = x(r.at(o, k, i));
        double y = op == OpKind::LayerNorm ? (v - mean) * scale * param(1, k) + param(2, k)
                                           : v * scale * param(1, k);
        store_double(result, out.dtype, r.at(o, k, i), y);
      }
    }
  }
}

}  // namespace

std::shared_ptr<Buffer> evaluate_reference(OpKind op, const Attrs& attrs, const ValueType& out,
                                           const std::vector<HostValue>& inputs) {
  auto result = std::make_shared<Buffer>(numel(out.shape) * dtype_size(out.dtype));
  switch (op_class(op)) {
    case OpClass::kLeaf:
      eval_leaf(op, attrs, out, *result);
      break;
    case OpClass::kUnary:
    case OpClass::kBinary:
    case OpClass::kWhere:
      eval_elementwise(op, out, inputs, *result);
      break;
    case OpClass::kCustom:
      eval_custom(attrs, out, inputs, *result);
      break;
    case OpClass::kCustomKernel:
      eval_custom_kernel(attrs, out, inputs, *result);
      break;
    case OpClass::kCast:
      eval_cast(out, inputs[0], *result);
      break;
    case OpClass::kReduce:
      eval_reduce(op, out, inputs[0], attrs, *result);
      break;
    case OpClass::kArgReduce:
      eval_arg_reduce(op, inputs[0], attrs, *result);
      break;
    case OpClass::kView:
      eval_view(op, attrs, out, inputs[0], *result);
      break;
    case OpClass::kMatmul:
      eval_matmul(out, inputs, *result);
      break;
    case OpClass::kConcat:
      eval_concat(out, inputs, attrs, *result);
      break;
    case OpClass::kRowNorm:
      eval_row_norm(op, attrs, out, inputs, *result);
      break;
    case OpClass::kGather:
      evaluate_gather(op, attrs, out, inputs, *result);
      break;
    case OpClass::kUpdateSlice:
      evaluate_update_slice(attrs, out, inputs, *result);
      break;
    case OpClass::kAttention:
      evaluate_attention(attrs, out, inputs, *result);
      break;
    case OpClass::kCollective:
      evaluate_collective(op, attrs, out, inputs, *result);
      break;
  }
  return result;
}

}  // namespace kiln::ops
