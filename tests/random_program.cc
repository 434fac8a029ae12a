#include "tests/random_program.h"

#include <algorithm>
#include <iterator>
#include <numeric>

namespace kiln::testing {

std::vector<int64_t> ProgramGenerator::random_shape() {
  static const int64_t kDims[] = {1, 2, 3, 4, 5, 7, 16};
  std::vector<int64_t> shape(pick(4));
  for (int64_t& d : shape) d = kDims[pick(7)];
  if (chance(0.03) && !shape.empty()) shape[pick(static_cast<int>(shape.size()))] = 0;
  return shape;
}

DType ProgramGenerator::random_dtype() {
  static const DType kTypes[] = {DType::F32,  DType::F32, DType::F32,    DType::F64,   DType::F16,
                                 DType::BF16, DType::I32, DType::I64,    DType::Bool,  DType::I8,
                                 DType::U8,   DType::I16, DType::F8E4M3, DType::F8E5M2};
  return kTypes[pick(static_cast<int>(std::size(kTypes)))];
}

Tensor ProgramGenerator::make_input(const std::vector<int64_t>& shape, DType dt) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<double> values(n);
  for (double& v : values) v = is_floating(dt) ? scalar() : static_cast<double>(pick(11) - 5);
  return Tensor::from_vector(values, shape).astype(dt).eval();
}

Tensor ProgramGenerator::make_indices(const std::vector<int64_t>& shape, int64_t extent, DType dt) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<int64_t> values(n);
  for (int64_t& v : values) v = pick(static_cast<int>(2 * extent)) - extent;
  return Tensor::from_vector(values, shape).astype(dt).eval();
}

std::vector<int64_t> ProgramGenerator::broadcastable(const std::vector<int64_t>& shape) {
  std::vector<int64_t> out = shape;
  for (int64_t& d : out) {
    if (chance(0.3)) d = 1;
  }
  while (!out.empty() && chance(0.3)) out.erase(out.begin());
  return out;
}

const ProgramGenerator::Value& ProgramGenerator::any() {
  // Favour recent values so programs grow deep as well as wide.
  int n = static_cast<int>(pool_.size());
  return chance(0.6) ? pool_[n - 1 - pick(std::min(n, 3))] : pool_[pick(n)];
}

const ProgramGenerator::Value* ProgramGenerator::any_floating() {
  for (int tries = 0; tries < 8; ++tries) {
    const Value& v = any();
    if (is_floating(v.t.dtype())) return &v;
  }
  return nullptr;
}

const ProgramGenerator::Value* ProgramGenerator::any_exact() {
  for (int tries = 0; tries < 8; ++tries) {
    const Value& v = any();
    if (v.exact) return &v;
  }
  return nullptr;
}

void ProgramGenerator::step() {
  const Value a = any();  // a copy: the pool grows below
  const Tensor& x = a.t;
  const bool fp = is_floating(x.dtype());
  const bool integral = !fp;
  // Floats narrower than f32 (16- and 8-bit), rounded after every op.
  const bool half = is_floating(x.dtype()) && dtype_size(x.dtype()) < 4;
  switch (pick(12)) {
    case 0:  // fresh values: an input, or a lazy leaf
      switch (pick(5)) {
        case 0:
          return add(Tensor::rand(random_shape(), rng_(), chance(0.5) ? DType::F32 : DType::BF16),
                     true);
        case 1:
          return add(Tensor::randn(random_shape(), rng_(), chance(0.5) ? DType::F32 : DType::F64),
                     true);
        case 2:
          return add(Tensor::arange(1 + pick(20), random_dtype()), true);
        case 3:
          return add(Tensor::full(random_shape(), scalar(), random_dtype()), true);
        default:
          return add(make_input(random_shape(), random_dtype()), true);
      }
    case 1: {  // well-conditioned unary math (so float paths stay comparable)
      if (!fp) {
        if (x.dtype() == DType::Bool) return add(logical_not(x), a.exact);
        Tensor r = pick(2) ? neg(x) : (pick(2) ? abs(x) : square(x));
        return add(r, a.exact);
      }
      switch (pick(14)) {
        case 0:
          return add(exp(tanh(x)), false);
        case 1:
          return add(log(abs(x) + 1.0), false);
        case 2:
          return add(sqrt(abs(x)), false);
        case 3:
          return add(rsqrt(abs(x) + 1.0), false);
        case 4:
          return add(sin(tanh(x) * 3.0), false);  // periodic: keep arguments small
        case 5:
          return add(cos(tanh(x) * 3.0), false);
        case 6:
          return add(sigmoid(x), false);
        case 7:
          return add(relu(x), a.exact);
        case 8:
          return add(gelu(x), false);
        case 9:
          return add(silu(x), false);
        case 10:
          return add(erf(x), false);
        case 11:
          return add(reciprocal(abs(x) + 1.0), false);
        case 12:
          return add(neg(x), a.exact);
        default:
          return add(tanh(x), false);
      }
    }
    case 2:
    case 3: {  // binary with broadcasting
      Tensor y = make_input(broadcastable(x.shape()), chance(0.7) ? x.dtype() : random_dtype());
      const bool exact = a.exact && !is_floating(promote_types(x.dtype(), y.dtype()));
      switch (pick(7)) {
        case 0:
          return add(x + y, exact);
        case 1:
          return add(x - y, exact);
        case 2:
          return add(is_floating(y.dtype()) ? x * tanh(y) : x * y, exact);
        case 3:
          return add(maximum(x, y), exact);
        case 4:
          return add(minimum(y, x), exact);
        case 5:
          return add(x / (abs(y) + 1.0), false);
        default:
          return add(fp ? pow(abs(x) + 0.5, tanh(y)) : pow(x, abs(y)), exact);
      }
    }
    case 4: {  // scalars on either side
      double s = integral ? static_cast<double>(pick(5) - 2) : scalar();
      switch (pick(3)) {
        case 0:
          return add(x + s, a.exact && integral);
        case 1:
          return add(s - x, a.exact && integral);
        default:
          return add(x * s, a.exact && integral);
      }
    }
    case 5: {  // comparisons and where, on exact values only (no flips from rounding)
      const Value* found = any_exact();
      if (found == nullptr) return;
      const Value e = *found;
      Tensor y = make_input(broadcastable(e.t.shape()), e.t.dtype());
      Tensor cond;
      switch (pick(8)) {
        case 0:
          cond = e.t > y;
          break;
        case 1:
          cond = e.t <= y;
          break;
        case 2:
          cond = e.t != y;
          break;
        case 3:
          cond = eq(e.t, y);
          break;
        case 4:
          cond = lt(e.t, y);
          break;
        case 5:
          cond = ge(e.t, y);
          break;
        case 6:
          cond = logical_and(e.t, y);
          break;
        default:
          cond = logical_or(e.t, logical_not(y));
          break;
      }
      if (chance(0.3) && is_floating(e.t.dtype())) {              // floor/ceil of exact values
        add(pick(2) ? floor(e.t * 2.5) : ceil(e.t * 2.5), true);  // x * 2.5 is exact here
      }
      add(cond, true);
      const Value other = any();
      return add(where(cond, x, other.t), a.exact && other.exact);
    }
    case 6: {  // casts; float to integer only from exact values
      DType to = random_dtype();
      if (fp && !is_floating(to) && !a.exact) return;
      return add(x.astype(to), a.exact && (!is_floating(to) || !fp));
    }
    case 7: {  // reductions
      std::vector<int> axes;
      for (int d = 0; d < x.ndim(); ++d) {
        if (chance(0.5)) axes.push_back(chance(0.5) ? d : d - x.ndim());
      }
      bool keep = chance(0.4);
      // Sums of computed f16/bf16 values can cancel to far below their rounding error (the
      // reference rounds every product to 16 bits, a fused kernel keeps f32): sum only what
      // is exact there.
      const bool ill_conditioned = half && !a.exact;
      switch (ill_conditioned ? 2 + pick(2) : pick(5)) {
        case 0:
          return add(sum(x, axes, keep), a.exact && integral);
        case 1:
          return add(mean(x, axes, keep), false);
        case 2:
          return add(max(x, axes, keep), a.exact);
        case 3:
          return add(min(x, axes, keep), a.exact);
        default: {
          if (!a.exact || x.ndim() == 0) return;
          int axis = pick(x.ndim());
          return add(pick(2) ? argmax(x, axis, keep) : argmin(x, axis, keep), true);
        }
      }
    }
    case 8: {  // views
      const int n = x.ndim();
      switch (pick(7)) {
        case 0: {
          std::vector<int> axes(n);
          std::iota(axes.begin(), axes.end(), 0);
          std::shuffle(axes.begin(), axes.end(), rng_);
          return add(x.permute(axes), a.exact);
        }
        case 1: {
          if (n == 0) return;
          int axis = pick(n);
          int64_t dim = x.shape()[axis];
          int64_t start = pick(static_cast<int>(dim) + 1) - (chance(0.3) ? dim : 0);
          if (chance(0.3)) {  // backwards (a reversed view), or flipped whole
            if (chance(0.3)) return add(flip(x, {axis}), a.exact);
            return add(
                x.slice(axis, start, start - 1 - pick(static_cast<int>(dim) + 1), -1 - pick(3)),
                a.exact);
          }
          return add(x.slice(axis, start, start + 1 + pick(static_cast<int>(dim) + 1), 1 + pick(3)),
                     a.exact);
        }
        case 2:
          return add(chance(0.5) ? x.reshape({-1}) : x.reshape({x.numel() == 0 ? 0 : 1, -1}),
                     a.exact);
        case 3:
          return add(x.unsqueeze(pick(n + 1)), a.exact);
        case 4: {
          std::vector<int64_t> to = x.shape();
          for (int64_t& d : to) {
            if (d == 1 && chance(0.5)) d = 3;
          }
          if (chance(0.5)) to.insert(to.begin(), 2);
          return add(x.broadcast_to(to), a.exact);
        }
        case 5: {  // a triangle, any diagonal (also past the matrix)
          if (n < 2) return;
          const int64_t k = pick(9) - 4;
          return add(chance(0.5) ? tril(x, k) : triu(x, k), a.exact);
        }
        default: {
          if (n < 2) return;
          Tensor t = x.transpose(0, n - 1);
          return add(chance(0.3) ? t.contiguous() : t, a.exact);  // sometimes its own buffer
        }
      }
    }
    case 9: {  // matmul with a fresh right operand (a dot product is a sum: see above)
      if (x.ndim() == 0 || x.dtype() == DType::Bool || (half && !a.exact)) return;
      int64_t k = x.shape().back();
      std::vector<int64_t> shape =
          chance(0.3) ? std::vector<int64_t>{k} : std::vector<int64_t>{k, 1 + pick(5)};
      if (chance(0.3)) shape.insert(shape.begin(), x.ndim() > 2 ? x.shape()[0] : 2);
      Tensor y = make_input(shape, x.dtype());
      return add(matmul(x, y), a.exact && integral);
    }
    case 10: {  // concat, or a gather with fresh in-range indices
      if (x.ndim() == 0) return;
      int axis = pick(x.ndim());
      const int64_t extent = x.shape()[axis];
      if (chance(0.5) && extent > 0) {
        const DType index_dtype = chance(0.5) ? DType::I32 : DType::I64;
        std::vector<int64_t> shape;
        if (chance(0.5)) {
          shape.resize(pick(3));
          for (int64_t& d : shape) d = 1 + pick(4);
          return add(take(x, make_indices(shape, extent, index_dtype), axis - x.ndim()), a.exact);
        }
        shape = x.shape();
        shape[axis] = 1 + pick(4);
        for (int d = 0; d < x.ndim(); ++d) {
          if (d != axis && chance(0.3)) shape[d] = 1;  // broadcast against x
        }
        return add(take_along_axis(x, make_indices(shape, extent, index_dtype), axis), a.exact);
      }
      if (chance(0.2)) {  // a window at a start read when the kernel runs
        const int64_t length = pick(static_cast<int>(extent) + 1);
        const int64_t start = pick(static_cast<int>(extent - length) + 1);
        Tensor at = Tensor::from_vector(std::vector<int64_t>{start}, {})
                        .astype(chance(0.5) ? DType::I32 : DType::I64);
        return add(slice(x, axis - x.ndim(), chance(0.5) ? at.eval() : at, length), a.exact);
      }
      if (chance(0.25)) {
        // A KV cache write in place: a fresh cache whose only handle the write replaces takes
        // x (any family) as its update, sometimes after a lazy constant's write.
        std::vector<int64_t> cache_shape = x.shape();
        cache_shape[axis] = extent + pick(4);
        Tensor cache = make_input(cache_shape, x.dtype());
        bool exact = a.exact;
        if (chance(0.4)) {
          std::vector<int64_t> row = cache_shape;
          row[axis] = 1;
          const int64_t at = pick(static_cast<int>(cache_shape[axis]));
          cache = update_slice(cache, Tensor::full(row, scalar(), x.dtype()), axis, at);
          exact = exact && !is_floating(x.dtype());  // the constant's cast may round by path
        }
        const int64_t start = pick(static_cast<int>(cache_shape[axis] - extent) + 1);
        cache = update_slice(cache, x, axis - x.ndim(), start);
        return add(std::move(cache), exact);
      }
      std::vector<int64_t> shape = x.shape();
      if (chance(0.3) && extent > 0) {  // overwrite a range of x (a KV cache write)
        shape[axis] = 1 + pick(static_cast<int>(extent));
        const int64_t start = pick(static_cast<int>(extent - shape[axis]) + 1);
        return add(update_slice(x, make_input(shape, x.dtype()), axis - x.ndim(), start), a.exact);
      }
      shape[axis] = 1 + pick(3);
      return add(concat({x, make_input(shape, random_dtype())}, axis), false);
    }
    default: {  // row ops: norms, cumsum, topk; attention
      const Value* f = any_floating();
      if (f == nullptr || f->t.ndim() == 0) return;
      const bool exact = f->exact;
      const Tensor v = f->t;
      int64_t d = v.shape().back();
      switch (pick(8)) {
        case 6: {  // attention over v's rows, explicit (maybe causal) or written by hand
          if (v.ndim() < 2) return;
          if (chance(0.5))
            return add(scaled_dot_product_attention(v, v, v, Tensor(), chance(0.5)), false);
          const Tensor scores = matmul(v, v.transpose(-2, -1)) * 0.5;
          return add(matmul(softmax(scores, -1), v), false);
        }
        case 7: {  // attention with a fresh key/value set and a bool mask over the keys
          if (v.ndim() < 2) return;
          std::vector<int64_t> kv = v.shape();
          kv[kv.size() - 2] = 1 + pick(5);
          std::vector<int64_t> mask_shape(kv.size(), 1);
          mask_shape.back() = kv[kv.size() - 2];
          Tensor keys = make_input(kv, v.dtype()), values = make_input(kv, v.dtype());
          const bool decode = chance(0.5);
          if (decode) {  // a decode step: both caches written in place at one position
            std::vector<int64_t> step = kv;
            step[step.size() - 2] = 1;
            const int64_t pos = pick(static_cast<int>(kv[kv.size() - 2]));
            keys = update_slice(keys, make_input(step, v.dtype()) * 2.0, -2, pos);
            values = update_slice(values, make_input(step, v.dtype()), -2, pos);
          }
          add(scaled_dot_product_attention(v, keys, values, make_input(mask_shape, DType::Bool)),
              false);
          if (decode) {  // the caches are outputs too, evaluated with the attention
            add(keys, false);
            add(values, true);
          }
          return;
        }
        case 4:  // a running sum: rounding differs by path, like a reduction
          return add(cumsum(v, pick(v.ndim()) - v.ndim(), chance(0.3), chance(0.3)), false);
        case 5: {
          // Near-equal computed values may order differently by path: topk sees exact ones.
          if (!exact) return;
          const int axis = pick(v.ndim());
          TopK t = topk(v, pick(static_cast<int>(v.shape()[axis]) + 1), axis, chance(0.7));
          add(t.indices, true);
          return add(t.values, true);
        }
        case 0:
          return add(softmax(v, pick(v.ndim())), false);
        case 1:
          return add(log_softmax(v, -1), false);
        case 2:
          // Centering near-equal values amplifies rounding without bound, so layer_norm
          // only sees values that are the same bits on every path, made to vary along the
          // row: the mean of a constant f32 row (a `full`, a broadcast) rounds differently
          // by summation order. Adding 0, 1, ..., d - 1 rounds once, alike on every path.
          if (!exact) return;
          return add(layer_norm(v + Tensor::arange(d, v.dtype()), make_input({d}, v.dtype()),
                                make_input({d}, v.dtype())),
                     false);
        default:
          // Normalizing a tiny row (a difference of near-equal computed values) scales its
          // rounding error up with it: rms_norm too only sees exact values.
          if (!exact) return;
          return add(rms_norm(v, make_input({d}, v.dtype())), false);
      }
    }
  }
}

std::vector<Tensor> ProgramGenerator::generate(int steps) {
  pool_.clear();
  add(make_input(random_shape(), random_dtype()), true);
  add(make_input(random_shape(), DType::F32), true);
  for (int i = 0; i < steps; ++i) {
    try {
      step();
    } catch (const Error&) {
      // An invalid combination (shapes, dtypes): Kiln rejected it and recorded nothing.
    }
  }
  std::vector<Tensor> outputs;
  int count = 1 + pick(3);
  for (int i = 0; i < count; ++i) {
    const Tensor& t = pool_[pool_.size() - 1 - pick(std::min<int>(4, pool_.size()))].t;
    if (!t.is_realized()) outputs.push_back(t);
  }
  return outputs;
}

}  // namespace kiln::testing
