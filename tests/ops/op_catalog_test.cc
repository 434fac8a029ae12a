// Every op of the catalog (ops/op_catalog.h), run on every device present and in the CUDA
// host emulation, checked element by element against the reference evaluator.
// Longer than 500 lines on purpose: one builder per op class in one table, so the walk over
// the catalog and what each op is tested with can be read together.
//
// The catalog is walked programmatically: each op needs a builder in builders() below that
// makes a few small lazy programs using it. An op added to the catalog without one fails
// these tests, so a new op cannot ship without having run on every device.
#include "ops/op_catalog.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/group_registry.h"
#include "jit/backend/backend.h"
#include "jit/eval/reference_graph.h"
#include "jit/fusion/launch_plan.h"
#include "jit/fusion/trace.h"
#include "jit/graph/pending_graph.h"
#include "jit/graph/record.h"
#include "kiln/custom.h"
#include "ops/collective.h"
#include "ops/element_access.h"
#include "tests/cuda_emulation/emulated_kernels.h"
#include "tests/cuda_emulation/run_emulated.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using ops::OpKind;

using kiln::kAllDTypes;
constexpr DType kFloatDtypes[] = {DType::F16, DType::BF16, DType::F32, DType::F64};

// ---------------------------------------------------------------------------------------
// Programs and their inputs.

// A small lazy program: outputs computed together at one sync point. Outputs of one shape
// share a kernel, so an op's dtypes go into one program: the CUDA emulation compiles every
// distinct kernel with the host compiler, and few kernels keep this test fast.
struct Program {
  std::string label;  // what the program exercises, for failure messages
  std::vector<Tensor> outputs;
  std::vector<std::string> names;  // per output, what it computes: "exp(f16)"
  // Whether it sums many values (reductions, matmul, norms): rounding errors then scale with
  // the largest value on the way, not with the result, which may cancel to near zero.
  bool sums = false;

  void add(std::string name, Tensor t) {
    names.push_back(std::move(name));
    outputs.push_back(std::move(t));
  }

  // Adds the output `make()` records, unless its op rejects the operands' dtypes.
  template <class Make>
  void add_unless_rejected(std::string name, Make&& make);
};

// What input values look like.
enum class Values {
  kPlain,    // floats uniform in [-3, 3], integers in [-20, 20], bools a coin toss
  kSpecial,  // kPlain plus NaN, +inf, -inf and -0 at random positions of floats
  // Floats of every magnitude (1e-3 to 1e12) plus the specials, integers over their whole
  // range: casts that saturate or overflow, integer arithmetic that wraps.
  kWide,
};

// Fresh random inputs for one op's programs, reproducible from a seed: the programs are
// built again for each device and must read the same values there.
class Inputs {
 public:
  explicit Inputs(uint64_t seed) : rng_(seed) {}

  Tensor random(DType dt, std::vector<int64_t> shape, Values values = Values::kSpecial) {
    const int64_t n = testing::count(shape);
    switch (dt) {
      case DType::Bool:
        return Tensor::from_vector(bools(n), shape);
      case DType::I8:
        return Tensor::from_vector(integers<int8_t>(n, values), shape);
      case DType::U8:
        return Tensor::from_vector(integers<uint8_t>(n, values), shape);
      case DType::I16:
        return Tensor::from_vector(integers<int16_t>(n, values), shape);
      case DType::I32:
        return Tensor::from_vector(integers<int32_t>(n, values), shape);
      case DType::I64:
        return Tensor::from_vector(integers<int64_t>(n, values), shape);
      default:
        return floating(floats(n, values), dt, shape);
    }
  }

  // A [rows, cols] matrix for row norms: plain values, except that row 0 is all -inf (NaN
  // out, as in PyTorch), row 1 holds a NaN, row 2 a +inf and row 3 a -inf.
  Tensor rows_with_specials(DType dt, int64_t rows, int64_t cols) {
    std::vector<double> v = floats(rows * cols, Values::kPlain);
    const double inf = std::numeric_limits<double>::infinity();
    std::fill(v.begin(), v.begin() + cols, -inf);
    v[cols + pick(cols)] = std::nan("");
    v[2 * cols + pick(cols)] = inf;
    v[3 * cols + pick(cols)] = -inf;
    return floating(v, dt, {rows, cols});
  }

  // Indices of `dt` (I32 or I64) in [-extent, extent): valid, negative ones counting from
  // the end.
  Tensor indices(DType dt, std::vector<int64_t> shape, int64_t extent) {
    std::vector<int64_t> v(testing::count(shape));
    for (int64_t& x : v) x = pick(2 * extent) - extent;
    if (dt == DType::I64) return Tensor::from_vector(v, shape);
    return Tensor::from_vector(std::vector<int32_t>(v.begin(), v.end()), shape);
  }

  uint64_t seed() { return rng_(); }

 private:
  int64_t pick(int64_t n) { return std::uniform_int_distribution<int64_t>(0, n - 1)(rng_); }

  std::vector<bool> bools(int64_t n) {
    std::vector<bool> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = (rng_() & 1) != 0;
    return v;
  }

  template <class T>
  std::vector<T> integers(int64_t n, Values values) {
    std::vector<T> v(n);
    // Drawn as int64 (the distribution takes no 8-bit types): small ones in [-20, 20] (in
    // [0, 20] for unsigned types), any in the type's whole range.
    std::uniform_int_distribution<int64_t> small(std::is_signed_v<T> ? -20 : 0, 20);
    std::uniform_int_distribution<int64_t> any(std::numeric_limits<T>::min(),
                                               std::numeric_limits<T>::max());
    for (T& x : v) x = static_cast<T>(values == Values::kWide ? any(rng_) : small(rng_));
    if (values == Values::kWide && n >= 4) {  // the extremes themselves, where wrapping starts
      v[pick(n)] = std::numeric_limits<T>::min();
      v[pick(n)] = std::numeric_limits<T>::max();
    }
    return v;
  }

  std::vector<double> floats(int64_t n, Values values) {
    std::vector<double> v(n);
    std::uniform_real_distribution<double> plain(-3, 3), exponent(-3, 12);
    for (double& x : v) {
      x = plain(rng_);
      if (values == Values::kWide) x = std::copysign(std::pow(10.0, exponent(rng_)), x);
    }
    if (values != Values::kPlain && n >= 8) {
      const double inf = std::numeric_limits<double>::infinity();
      for (double special : {std::nan(""), inf, -inf, -0.0}) v[pick(n)] = special;
    }
    return v;
  }

  template <class T>
  static std::vector<T> converted(const std::vector<double>& v) {
    std::vector<T> out;
    out.reserve(v.size());
    for (double x : v) out.push_back(T(static_cast<float>(x)));
    return out;
  }

  // `v` stored as floating `dt`.
  static Tensor floating(const std::vector<double>& v, DType dt, std::vector<int64_t> shape) {
    switch (dt) {
      case DType::F16:
        return Tensor::from_vector(converted<Half>(v), shape);
      case DType::BF16:
        return Tensor::from_vector(converted<BFloat16>(v), shape);
      case DType::F8E4M3:
        return Tensor::from_vector(converted<Float8E4M3>(v), shape);
      case DType::F8E5M2:
        return Tensor::from_vector(converted<Float8E5M2>(v), shape);
      case DType::F32:
        return Tensor::from_vector(converted<float>(v), shape);
      default:
        return Tensor::from_vector(v, shape);
    }
  }

  std::mt19937_64 rng_;
};

// Whether an op rejected its operands' dtypes (which dtypes an op takes is shape and dtype
// inference's business, tested on its own); any other error is a mistake in a builder.
bool rejects_dtype(const Error& e) {
  const std::string m = e.what();
  for (const char* word : {"dtype", "bool", "floating"}) {
    if (m.find(word) != std::string::npos) return true;
  }
  return false;
}

template <class Make>
void Program::add_unless_rejected(std::string name, Make&& make) {
  try {
    add(std::move(name), make());
  } catch (const Error& e) {
    if (!rejects_dtype(e)) throw;
  }
}

// "exp(f16)", "add(i32, f32)".
std::string call(OpKind op, std::initializer_list<DType> dtypes, const std::string& more = "") {
  std::vector<std::string> names;
  for (DType dt : dtypes) names.push_back(dtype_name(dt));
  return absl::StrCat(ops::op_name(op), "(", absl::StrJoin(names, ", "), ")", more);
}

// ---------------------------------------------------------------------------------------
// One builder per op class.

using UnaryFn = Tensor (*)(const Tensor&);
using BinaryFn = Tensor (*)(const Tensor&, const Tensor&);
using ReduceFn = Tensor (*)(const Tensor&, std::vector<int>, bool);
using ArgReduceFn = Tensor (*)(const Tensor&, int, bool);
using Builder = std::function<std::vector<Program>(Inputs&)>;

// Ops whose result is exact for any input: they get every magnitude (and integer wrapping).
bool exact_unary(OpKind op) {
  switch (op) {
    case OpKind::Neg:
    case OpKind::Abs:
    case OpKind::Relu:
    case OpKind::Floor:
    case OpKind::Ceil:
    case OpKind::Square:
    case OpKind::LogicalNot:
      return true;
    default:
      return false;
  }
}

// Every dtype the op takes, over contiguous inputs (one vectorized kernel): NaN, infinities
// and -0 among floats; every magnitude, and integers that wrap, where the result is exact.
std::vector<Program> unary_programs(OpKind op, UnaryFn fn, Inputs& in) {
  Program p{"every dtype"};
  for (DType dt : kAllDTypes) {
    Tensor x = in.random(dt, {3, 5, 7}, exact_unary(op) ? Values::kWide : Values::kSpecial);
    p.add_unless_rejected(call(op, {dt}), [&] { return fn(x); });
  }
  return {p};
}

// Ops that wrap or compare exactly over the whole integer range.
bool wide_integers_ok(OpKind op) { return op != OpKind::Pow && op != OpKind::Div; }

// Every dtype, mixed dtypes, a 0-d operand and a scalar, all broadcast to [3, 4, 5].
std::vector<Program> binary_programs(OpKind op, BinaryFn fn, Inputs& in) {
  Program p{"every dtype, mixed dtypes, 0-d and scalar operands, broadcast"};
  for (DType dt : kAllDTypes) {
    const Values values =
        is_integral(dt) && wide_integers_ok(op) ? Values::kWide : Values::kSpecial;
    Tensor a = in.random(dt, {3, 1, 5}, values), b = in.random(dt, {4, 5}, values);
    p.add_unless_rejected(call(op, {dt, dt}), [&] { return fn(a, b); });
  }
  const std::pair<DType, DType> mixed[] = {{DType::I32, DType::F32},
                                           {DType::F16, DType::BF16},
                                           {DType::Bool, DType::I64},
                                           {DType::I64, DType::F64},
                                           {DType::F16, DType::F32}};
  for (auto [da, db] : mixed) {
    Tensor a = in.random(da, {4, 1}), b = in.random(db, {3, 1, 5});
    p.add_unless_rejected(call(op, {da, db}), [&] { return fn(a, b); });
  }
  Tensor s = in.random(DType::F32, {}), x = in.random(DType::F32, {3, 4, 5});
  p.add_unless_rejected(call(op, {DType::F32, DType::F32}, " 0-d first"), [&] { return fn(s, x); });
  p.add_unless_rejected(call(op, {DType::F32}, " with scalar 1.5"),
                        [&] { return fn(x, scalar_like(x, 1.5)); });
  return {p};
}

// Every dtype, with a broadcast condition; mixed and 0-d operands promote.
std::vector<Program> where_programs(Inputs& in) {
  Program p{"every dtype, mixed dtypes and a 0-d operand, broadcast"};
  for (DType dt : kAllDTypes) {
    Tensor cond = in.random(DType::Bool, {3, 1, 5});
    Tensor a = in.random(dt, {4, 5}), b = in.random(dt, {3, 4, 1});
    p.add(call(OpKind::Where, {DType::Bool, dt, dt}), where(cond, a, b));
  }
  Tensor cond = in.random(DType::Bool, {3, 1, 5}), a = in.random(DType::I32, {4, 1});
  Tensor b = in.random(DType::F16, {});
  p.add("where(bool, i32, 0-d f16)", where(cond, a, b));
  p.add("where(bool, 0-d f16, i32)", where(cond, b, a));
  return {p};
}

// Every pair of dtypes, from values of every magnitude with NaN and infinities: floats that
// saturate in integers, integers that wrap into i32, values that overflow f16.
std::vector<Program> astype_programs(Inputs& in) {
  Program p{"every dtype to every other, over every magnitude"};
  for (DType from : kAllDTypes) {
    Tensor x = in.random(from, {4, 9}, Values::kWide);
    for (DType to : kAllDTypes) {
      if (to != from) {
        p.add(call(OpKind::Astype, {from}, absl::StrCat(" to ", dtype_name(to))), x.astype(to));
      }
    }
  }
  return {p};
}

// Each dtype gets one layout (a kernel per dtype and layout would be slow to compile), so
// that between them every layout runs, keepdims on and off, for floats and integers alike.
struct ReduceLayout {
  std::vector<int> axes;
  bool keepdims;
};

ReduceLayout reduce_layout(DType dt) {
  switch (dt) {
    case DType::Bool:
      return {{-1}, true};  // inner
    case DType::I32:
      return {{0}, false};  // outer
    case DType::I64:
      return {{}, false};  // everything
    case DType::F16:
      return {{0, 2}, true};  // two axes
    case DType::BF16:
      return {{}, true};
    case DType::F32:
      return {{1}, false};  // the middle axis
    default:
      return {{-1}, false};
  }
}

// The shape of a reduction's operand of `dt`: f64's two rows are long enough for the CUDA
// backend to split each over several blocks (f64's layouts reduce the last axis).
std::vector<int64_t> reduced_shape(DType dt, std::vector<int64_t> usual) {
  return dt == DType::F64 ? std::vector<int64_t>{2, 4500} : usual;
}

// Every dtype; f32 with NaN and infinities (which propagate), f16 through a fused prologue
// over a transpose, integers over their whole range (sums wrap), f64 as a split reduction.
std::vector<Program> reduce_programs(OpKind op, ReduceFn fn, Inputs& in) {
  Program p{"every dtype, every layout, specials, prologue"};
  p.sums = true;
  for (DType dt : kAllDTypes) {
    const ReduceLayout l = reduce_layout(dt);
    const std::string name = call(op, {dt},
                                  absl::StrCat(" axes {", absl::StrJoin(l.axes, ","), "} keepdims ",
                                               l.keepdims ? "on" : "off"));
    if (dt == DType::F16) {
      Tensor y = in.random(dt, {6, 5, 4}, Values::kPlain);
      p.add_unless_rejected(name + " of 2 * transpose",
                            [&] { return fn(y.transpose(0, 2) * 2.0, l.axes, l.keepdims); });
      continue;
    }
    const Values values = dt == DType::F32  ? Values::kSpecial
                          : is_integral(dt) ? Values::kWide
                                            : Values::kPlain;
    Tensor x = in.random(dt, reduced_shape(dt, {4, 5, 6}), values);
    p.add_unless_rejected(name, [&] { return fn(x, l.axes, l.keepdims); });
  }
  return {p};
}

// Every dtype, along one axis or the other; small integers tie (the first one wins), f32 has
// NaN (the extreme) and infinities, f16 ties often after floor, f64 is split (along axis 1).
std::vector<Program> arg_reduce_programs(OpKind op, ArgReduceFn fn, Inputs& in) {
  Program p{"every dtype, both axes, specials, ties"};
  int turn = 0;
  for (DType dt : kAllDTypes) {
    const int axis = turn % 2 == 0 ? 1 : 0;
    const bool keepdims = turn++ % 2 != 0;
    const std::string name =
        call(op, {dt}, absl::StrCat(" axis ", axis, " keepdims ", keepdims ? "on" : "off"));
    Tensor x = in.random(dt, reduced_shape(dt, {5, 7}),
                         dt == DType::F32 ? Values::kSpecial : Values::kPlain);
    if (dt == DType::F16) {
      p.add(name + " of floor(2 x)", fn(floor(x * 2.0), axis, keepdims));
    } else {
      p.add(name, fn(x, axis, keepdims));
    }
  }
  return {p};
}

// A view, then an elementwise op (maximum takes every dtype) so the view is fused.
std::vector<Tensor> views_of(OpKind op, DType dt, const Tensor& x, Inputs& in) {
  switch (op) {
    case OpKind::Reshape:
      return {maximum(x.reshape({4, 15}), in.random(dt, {4, 15})),
              maximum(x.transpose(0, 2).reshape({5, 12}), in.random(dt, {12}))};
    case OpKind::Permute:
      return {maximum(x.permute({2, 0, 1}), in.random(dt, {5, 3, 4})),
              maximum(x.transpose(1, 2), in.random(dt, {3, 1, 4}))};
    case OpKind::BroadcastTo:
      return {maximum(x.slice(1, 0, 1).broadcast_to({2, 3, 4, 5}), in.random(dt, {5})),
              maximum(in.random(dt, {}).broadcast_to({3, 4}), in.random(dt, {3, 4}))};
    case OpKind::Slice:
      return {maximum(x.slice(2, 1, 5, 2), in.random(dt, {3, 4, 2})),
              maximum(x.slice(0, -2, 100).slice(1, 1, 4, 2), in.random(dt, {2, 2, 5})),
              maximum(x.slice(1, 3, 1), in.random(dt, {3, 0, 5})),  // empty
              // Backward (negative strides): a stepped one, and flip's slices of two axes.
              maximum(x.slice(1, -1, std::numeric_limits<int64_t>::min(), -2),
                      in.random(dt, {3, 2, 5})),
              maximum(flip(x, {0, -1}), in.random(dt, {3, 4, 5}))};
    case OpKind::Contiguous:  // its own buffer, then read by a fused consumer or output
      return {maximum(x.transpose(0, 2).contiguous(), in.random(dt, {5, 4, 3})),
              x.slice(1, 1, 4, 2).contiguous(),
              maximum(x, in.random(dt, {3, 4, 5})).contiguous().reshape({12, 5})};
    default:
      return {};
  }
}

// Views of several dtypes (outputs of one shape share a kernel), and a view fused into a
// reduction's prologue.
std::vector<Program> view_programs(OpKind op, Inputs& in) {
  Program p{"views of several dtypes, then maximum; a view into a reduction"};
  for (DType dt : {DType::F32, DType::F16, DType::I64, DType::Bool}) {
    Tensor x = in.random(dt, {3, 4, 5});
    std::vector<Tensor> outs = views_of(op, dt, x, in);
    for (size_t i = 0; i < outs.size(); ++i) {
      p.add(call(op, {dt}, absl::StrCat(" case ", i, " then maximum")), outs[i]);
    }
  }
  Tensor x = in.random(DType::F32, {3, 4, 5}, Values::kPlain);
  Tensor v = op == OpKind::Reshape       ? x.reshape({6, 10})
             : op == OpKind::Permute     ? x.permute({2, 0, 1})
             : op == OpKind::BroadcastTo ? x.broadcast_to({2, 3, 4, 5})
             : op == OpKind::Contiguous  ? x.transpose(0, 1).contiguous()
                                         : x.slice(1, 1, 4, 2);
  Program reduce{"a view into a reduction", {}, {}, /*sums=*/true};
  reduce.add(call(op, {DType::F32}, " then sum"), sum(v * 1.5, {0}));
  return {p, reduce};
}

// Each matmul kernel: tiled f32 with an epilogue, tensor cores (f16, bf16) with prologues,
// batches that broadcast, vector operands, integers and mixed dtypes.
std::vector<Program> matmul_programs(Inputs& in) {
  const auto rnd = [&](DType dt, std::vector<int64_t> shape) {
    return in.random(dt, shape, Values::kPlain);
  };
  Program p{"every matmul kernel: tiled f32, tensor cores, vectors, batches, mixed dtypes"};
  p.sums = true;
  p.add("relu(matmul(f32, f32) + bias)",
        relu(matmul(rnd(DType::F32, {7, 9}), rnd(DType::F32, {9, 5})) + rnd(DType::F32, {5})));
  for (DType dt : {DType::F16, DType::BF16}) {  // the tensor-core path, with prologues
    Tensor a = rnd(dt, {2, 17, 16}), b = rnd(dt, {9, 16});
    p.add(call(OpKind::Matmul, {dt, dt}, " batched, of relu and a transpose"),
          matmul(relu(a) * 0.5, b.transpose(0, 1)));
  }
  p.add("matmul(f64, f64) batch broadcast",
        matmul(rnd(DType::F64, {2, 1, 7, 9}), rnd(DType::F64, {3, 9, 5})));
  p.add("matmul(i32, i32) vector @ matrix", matmul(rnd(DType::I32, {9}), rnd(DType::I32, {9, 5})));
  p.add("matmul(i64, i64) matrix @ vector", matmul(rnd(DType::I64, {7, 9}), rnd(DType::I64, {9})));
  p.add("matmul(f16, f32)", matmul(rnd(DType::F16, {4, 9}), rnd(DType::F32, {9, 3})));
  p.add("matmul(i32, bf16)", matmul(rnd(DType::I32, {4, 9}), rnd(DType::BF16, {9, 3})));
  // Attention written by hand: the planner computes it as one attention kernel whose score
  // ops (the scale, the mask, the softmax) run per key tile.
  Tensor q = rnd(DType::F32, {2, 3, 6, 4}), k = rnd(DType::F32, {2, 3, 9, 4});
  Tensor scores = matmul(q, k.transpose(-2, -1)) / 2.0 + rnd(DType::F32, {1, 3, 6, 9});
  p.add("matmul(softmax(matmul(f32, f32ᵀ) / 2 + mask), f32): attention",
        matmul(softmax(scores, -1), rnd(DType::F32, {2, 3, 9, 5})));
  Tensor h = rnd(DType::BF16, {4, 8, 8});
  p.add(
      "matmul(softmax(where(causal, matmul(bf16, bf16ᵀ), -inf)), bf16): attention",
      matmul(softmax(where(tril(Tensor::ones({8, 8}, DType::Bool)),
                           matmul(h, h.transpose(-2, -1)) * 0.3,
                           Tensor::full({}, -std::numeric_limits<double>::infinity(), DType::BF16)),
                     -1),
             h));
  return {p};
}

// Gathers: every dtype, each axis, negative indices, indices of rank 0 to 2 (take) and
// broadcast (take_along_axis), fused with their consumers and with computed indices, and a
// gather of a view (its x is stored first).
std::vector<Program> gather_programs(OpKind op, Inputs& in) {
  Program p{"every dtype and axis, fused consumers, computed indices, a viewed x"};
  int turn = 0;
  for (DType dt : kAllDTypes) {
    const DType index_dtype = turn % 2 == 0 ? DType::I64 : DType::I32;
    Tensor x = in.random(dt, {4, 5, 3});
    const int axis = turn++ % 3;
    const int64_t extent = x.shape()[axis];
    if (op == OpKind::Take) {
      std::vector<int64_t> index_shape = std::vector<std::vector<int64_t>>{{}, {6}, {2, 3}}[axis];
      p.add(call(op, {dt, index_dtype}, absl::StrCat(" axis ", axis)),
            take(x, in.indices(index_dtype, index_shape, extent), axis));
    } else {
      std::vector<int64_t> index_shape = {4, 5, 3};
      index_shape[axis] = 2;
      index_shape[(axis + 1) % 3] = 1;  // broadcast against x
      p.add(call(op, {dt, index_dtype}, absl::StrCat(" axis ", axis)),
            take_along_axis(x, in.indices(index_dtype, index_shape, extent), axis));
    }
  }
  Tensor table = in.random(DType::F32, {7, 6}, Values::kPlain);
  Tensor ids = in.indices(DType::I64, {3, 4}, 7);
  if (op == OpKind::Take) {
    p.add("embedding(f32, i64) * 2 + 1, fused", embedding(table, ids) * 2.0 + 1.0);
    p.add("take(f32, computed i64) axis -1",
          take(table, (in.indices(DType::I64, {3, 4}, 6) + 7) - 7, -1));
    p.add("take(transposed f32, i32) axis 0",
          take(table.transpose(0, 1), in.indices(DType::I32, {5}, 6), 0));
  } else {
    Tensor by_row = argmax(table, 1, /*keepdims=*/true);
    p.add("take_along_axis(f32, argmax keepdims) == max", take_along_axis(table, by_row, 1));
    p.add("take_along_axis(exp(f32), i64) axis -1",
          take_along_axis(exp(table), in.indices(DType::I64, {7, 9}, 6), -1));
  }
  return {p};
}

// Each dtype joins views along one axis, in turn; then mixed dtypes promote.
std::vector<Program> concat_programs(Inputs& in) {
  Program p{"every dtype, both axes, views as operands, mixed dtypes"};
  int turn = 0;
  for (DType dt : kAllDTypes) {
    Tensor a = in.random(dt, {2, 5}), b = in.random(dt, {3, 5}), c = in.random(dt, {5, 2});
    if (turn++ % 2 == 0) {
      p.add(call(OpKind::Concat, {dt}, " axis 0"), concat({a, b, c.transpose(0, 1)}, 0));
    } else {
      p.add(call(OpKind::Concat, {dt}, " axis -1"), concat({a, a.slice(1, 1, 4)}, -1));
    }
  }
  Tensor a = in.random(DType::I32, {2, 3}), b = in.random(DType::F16, {2, 1});
  Tensor c = in.random(DType::Bool, {2, 2});
  p.add("concat(i32, f16, bool)", concat({a, b, c}, 1));
  return {p};
}

// Every float dtype over rows of -inf, NaN and inf, and f16 x through a fused transpose with
// f32 parameters (mixed dtypes promote).
std::vector<Program> row_norm_programs(OpKind op, Inputs& in) {
  const auto norm = [&](const Tensor& x, DType param, int axis) {
    const int64_t cols = x.shape().back();
    switch (op) {
      case OpKind::Softmax:
        return softmax(x, axis);
      case OpKind::LogSoftmax:
        return log_softmax(x, axis);
      case OpKind::LayerNorm:
        return layer_norm(x, in.random(param, {cols}, Values::kPlain),
                          in.random(param, {cols}, Values::kPlain), 1e-3);
      default:
        return rms_norm(x, in.random(param, {cols}, Values::kPlain));
    }
  };
  Program p{"every float dtype with special rows, axis 0, mixed dtypes"};
  p.sums = true;
  for (DType dt : kFloatDtypes) {
    // f32 softmax and log_softmax run along axis 0 (the norms take the last axis only).
    const bool any_axis = op == OpKind::Softmax || op == OpKind::LogSoftmax;
    const int axis = any_axis && dt == DType::F32 ? 0 : -1;
    p.add(call(op, {dt}, absl::StrCat(" rows of -inf, NaN, inf, axis ", axis)),
          norm(in.rows_with_specials(dt, 6, 10), dt, axis));
  }
  Tensor x = in.random(DType::F16, {12, 5}, Values::kPlain);
  p.add(call(op, {DType::F16, DType::F32}, " of 2 * transpose"),
        norm(x.transpose(0, 1) * 2.0, DType::F32, -1));
  return {p};
}

// cumsum: every dtype along each axis in turn (integers over their whole range wrap, floats
// carry NaN and inf), through a fused prologue and epilogue, and over a transposed view.
std::vector<Program> cumsum_programs(Inputs& in) {
  Program p{"every dtype, each axis, wide values, fused prologue and epilogue, a view"};
  p.sums = true;
  int turn = 0;
  for (DType dt : kAllDTypes) {
    const int axis = turn++ % 3 - 1;  // -1, 0, 1 in turn
    p.add(call(OpKind::Cumsum, {dt}, absl::StrCat(" axis ", axis)),
          cumsum(in.random(dt, {3, 40, 5}, is_floating(dt) ? Values::kSpecial : Values::kWide),
                 axis));
  }
  Tensor x = in.random(DType::F32, {6, 300}, Values::kPlain);
  p.add("cumsum(exp(f32) * 2) - 1 over 300", cumsum(exp(x) * 2.0, 1) - 1.0);
  p.add("cumsum(transpose(f16)) axis 0",
        cumsum(in.random(DType::F16, {7, 5}, Values::kPlain).transpose(0, 1), 0));
  p.add("cumsum(bool) 0-d", cumsum(in.random(DType::Bool, {}), 0));
  // ONNX's exclusive and reverse forms, each dtype in turn, each axis.
  turn = 0;
  for (DType dt : kAllDTypes) {
    const int axis = turn % 3 - 1;
    const bool exclusive = turn % 3 != 1, reverse = turn++ % 3 != 0;
    p.add(call(OpKind::Cumsum, {dt},
               absl::StrCat(" axis ", axis, exclusive ? " exclusive" : "",
                            reverse ? " reverse" : "")),
          cumsum(in.random(dt, {3, 40, 5}, is_floating(dt) ? Values::kSpecial : Values::kWide),
                 axis, exclusive, reverse));
  }
  p.add("cumsum(exp(f32) * 2, exclusive reverse) over 300",
        cumsum(exp(x) * 2.0, 1, true, true) - 1.0);
  return {p};
}

// topk_indices through kiln::topk: every numeric dtype (ties among small integers, NaN and
// inf among floats), largest and smallest, each axis, k from 0 to the whole extent, the
// values gathered in the same plan, and a computed x.
std::vector<Program> topk_programs(Inputs& in) {
  Program p{"every numeric dtype, both orders, each axis, k from 0 to extent, values"};
  int turn = 0;
  for (DType dt : kAllDTypes) {
    if (dt == DType::Bool) continue;
    const int axis = turn % 2 == 0 ? -1 : 0;
    const bool largest = turn++ % 3 != 1;
    Tensor x = in.random(dt, {9, 37}, Values::kSpecial);
    const int64_t extent = x.shape()[axis < 0 ? 1 : 0];
    const int64_t k = std::vector<int64_t>{5, 1, extent, 0}[turn % 4];
    TopK t = topk(x, k, axis, largest);
    const std::string how =
        absl::StrCat(" k ", k, " axis ", axis, largest ? " largest" : " smallest");
    p.add(call(OpKind::TopkIndices, {dt}, how), t.indices);
    p.add(call(OpKind::TopkIndices, {dt}, absl::StrCat(how, ", values")), t.values);
  }
  Tensor logits = in.random(DType::F32, {4, 700}, Values::kPlain);
  TopK t = topk(logits * 0.5 - 1.0, 40);
  p.add("topk(f32 * 0.5 - 1) k 40 of 700", t.indices);
  p.add("topk(f32 * 0.5 - 1) k 40 of 700, values * 2", t.values * 2.0);
  return {p};
}

// update_slice: every dtype in turn along each axis, updates of another dtype (cast), a
// computed update (the prologue fuses), a computed x (a copy is written), two writes in a
// row, a whole-axis write, and region writes.
std::vector<Program> update_slice_programs(Inputs& in) {
  Program p{"every dtype and axis, casts, computed x and update, chained writes"};
  int turn = 0;
  for (DType dt : kAllDTypes) {
    const int axis = turn % 3;
    const DType other = kAllDTypes[(turn + 3) % std::size(kAllDTypes)];
    ++turn;
    std::vector<int64_t> shape = {3, 6, 4};
    Tensor x = in.random(dt, shape);
    shape[axis] = 2;
    const int64_t start = turn % 2 == 0 ? 0 : x.shape()[axis] - 2;
    p.add(call(OpKind::UpdateSlice, {dt, other}, absl::StrCat(" axis ", axis, " start ", start)),
          update_slice(x, in.random(other, shape), axis - 3, start));
  }
  Tensor cache = in.random(DType::F32, {2, 8, 5}, Values::kPlain);
  Tensor step = in.random(DType::F32, {2, 1, 5}, Values::kPlain);
  p.add("update_slice(f32, exp(f32) * 2) at 3", update_slice(cache, exp(step) * 2.0, 1, 3));
  p.add("update_slice(f32 + 1, f32) at 7: a computed x", update_slice(cache + 1.0, step, 1, 7));
  p.add("update_slice twice, then * 3",
        update_slice(update_slice(cache, step, 1, 0), step * -1.0, 1, 1) * 3.0);
  p.add("update_slice(f16, f16) the whole axis",
        update_slice(in.random(DType::F16, {4, 3}), in.random(DType::F16, {4, 3}), 1, 0));
  // Region writes: every dtype, a region inside x along every dim, and one at the corner
  // whose innermost start sits on a 16-byte vector.
  for (DType dt : kAllDTypes) {
    p.add(call(OpKind::UpdateSlice, {dt, DType::F32}, " region at (1, 2, 1)"),
          update_slice(in.random(dt, {3, 6, 4}), in.random(DType::F32, {2, 3, 2}), {1, 2, 1}));
  }
  p.add("update_slice region of exp(f32) at (0, 4, 4): a vector's start",
        update_slice(in.random(DType::F32, {2, 8, 12}), exp(step.slice(2, 0, 4)), {0, 4, 4}));
  return {p};
}

// index_add: every numeric dtype and axis, both index dtypes, repeated, negative, first and
// last positions, a source of another dtype, a computed source and x, a fused consumer, and
// segment_sum and bincount, which record it.
std::vector<Program> index_add_programs(Inputs& in) {
  Program p{"every dtype and axis, repeated and negative indices, computed operands"};
  auto indices = [](std::vector<int64_t> values, DType dt) {
    const int64_t n = static_cast<int64_t>(values.size());
    return Tensor::from_vector(values, {n}).astype(dt);
  };
  int turn = 0;
  for (DType dt : kAllDTypes) {
    if (dt == DType::Bool) continue;  // index_add does not add into bool
    const int axis = turn % 3;
    const DType other = kAllDTypes[(turn + 3) % std::size(kAllDTypes)];
    const DType index_dtype = turn % 2 == 0 ? DType::I64 : DType::I32;
    ++turn;
    std::vector<int64_t> shape = {3, 6, 4};
    Tensor x = in.random(dt, shape);
    const int64_t extent = shape[axis];
    shape[axis] = 5;
    p.add(call(OpKind::IndexAdd, {dt, other, index_dtype}, absl::StrCat(" axis ", axis)),
          index_add(x, axis - 3, indices({0, extent - 1, 1, -1, 1}, index_dtype),
                    in.random(other, shape)));
  }
  Tensor table = in.random(DType::F32, {4, 5}, Values::kPlain);
  Tensor rows = in.random(DType::F32, {6, 5}, Values::kPlain);
  const Tensor ids = indices({3, 0, 3, 2, 3, 0}, DType::I64);
  p.add("index_add(f32 + 1, exp(f32) * 2) * 3: computed operands, a fused consumer",
        index_add(table + 1.0, 0, ids, exp(rows) * 2.0) * 3.0);
  p.add("segment_sum(f32, i64, 5): an empty segment", segment_sum(rows, ids, 5));
  p.add("bincount(i32, 6) and with f64 weights",
        bincount(ids.astype(DType::I32), 6) +
            bincount(ids, in.random(DType::F64, {6}, Values::kPlain), 6).astype(DType::I64));
  return {p};
}

// slice at a start tensor (dynamic_slice): every dtype and axis, both start dtypes, the
// first and the last start, an empty and a whole window, a computed start, a viewed x and
// fused consumers.
std::vector<Program> dynamic_slice_programs(Inputs& in) {
  Program p{"every dtype and axis, computed starts, a viewed x, fused consumers"};
  auto start = [](int64_t at, DType dt) {
    return Tensor::from_vector(std::vector<int64_t>{at}, {}).astype(dt);
  };
  int turn = 0;
  for (DType dt : kAllDTypes) {
    const int axis = turn % 3;
    const DType index_dtype = turn % 2 == 0 ? DType::I64 : DType::I32;
    ++turn;
    Tensor x = in.random(dt, {3, 6, 4});
    const int64_t length = 1 + turn % 2;
    const int64_t at = turn % 4 < 2 ? 0 : x.shape()[axis] - length;
    p.add(call(OpKind::DynamicSlice, {dt, index_dtype},
               absl::StrCat(" axis ", axis, " start ", at, " length ", length)),
          slice(x, axis - 3, start(at, index_dtype), length));
  }
  Tensor table = in.random(DType::F32, {7, 6}, Values::kPlain);
  p.add("dynamic_slice(f32, (i64 * 2) + 1) * 2 + 1, fused",
        slice(table, 0, start(2, DType::I64) * 2.0 + 1.0, 2) * 2.0 + 1.0);
  p.add("dynamic_slice(transposed f32) axis 1, the whole axis",
        slice(table.transpose(0, 1), 1, start(0, DType::I32), 7));
  p.add("dynamic_slice(f32) length 0", slice(table, -1, start(6, DType::I64), 0));
  p.add("sum(dynamic_slice(exp(f32)), axis 0)",
        sum(slice(exp(table), 0, start(4, DType::I64), 3), {0}));
  return {p};
}

// scaled_dot_product_attention: every floating dtype with grouped-query heads, causal rows,
// a bool padding mask and a float mask (both broadcast), rank 3, key counts past one CUDA
// tile (256 keys) with a rank-2 causal form, and a fused prologue and epilogue. (The
// hand-written form the planner turns into it is a matmul program: its trace has no
// attention node.)
std::vector<Program> attention_programs(Inputs& in) {
  Program p{"floating dtypes, GQA, causal, masks, rank 2 and 3, prologue and epilogue"};
  p.sums = true;
  const auto rnd = [&](DType dt, std::vector<int64_t> shape) {
    return in.random(dt, shape, Values::kPlain);
  };
  int turn = 0;
  for (DType dt : kFloatDtypes) {
    const bool causal = turn++ % 2 == 1;
    Tensor q = rnd(dt, {2, 4, 5, 8}), k = rnd(dt, {2, 2, 7, 8}), v = rnd(dt, {2, 2, 7, 3});
    p.add(call(OpKind::Attention, {dt, dt, dt}, causal ? " gqa causal" : " gqa"),
          scaled_dot_product_attention(q, k, v, Tensor(), causal));
  }
  // The tensor-core form's edges: 130 query rows (two blocks of 128), 140 keys (three tiles
  // of 64), D = 72 (five k-steps of 16, the last partial), Dv = 40, a mask, causal rows.
  for (DType dt : {DType::F16, DType::BF16}) {
    Tensor q = rnd(dt, {1, 4, 130, 72}), k = rnd(dt, {1, 2, 140, 72}), v = rnd(dt, {1, 2, 140, 40});
    p.add(call(OpKind::Attention, {dt, dt, dt}, " 130x140, D 72, mask, causal"),
          scaled_dot_product_attention(q, k, v, rnd(dt, {130, 140}), dt == DType::BF16, 0.2));
  }
  // A head wider than 128: the 16-bit kernel takes its portable form.
  p.add("scaled_dot_product_attention(f16 x3) D 136",
        scaled_dot_product_attention(rnd(DType::F16, {1, 3, 136}), rnd(DType::F16, {1, 5, 136}),
                                     rnd(DType::F16, {1, 5, 136})));
  Tensor q = rnd(DType::F32, {2, 3, 6, 4}), k = rnd(DType::F32, {2, 3, 9, 4});
  Tensor v = rnd(DType::F32, {2, 3, 9, 5});
  std::vector<bool> keep(2 * 9, true);
  keep[3] = keep[9 + 8] = false;  // one padded key per batch, never a whole row
  Tensor padding = Tensor::from_vector(keep, {2, 1, 1, 9});
  p.add("scaled_dot_product_attention(f32 x3, bool padding mask)",
        scaled_dot_product_attention(q, k, v, padding));
  p.add(
      "scaled_dot_product_attention(exp(f32), f32, f32, f32 mask) * 2, scale 0.7",
      scaled_dot_product_attention(exp(q * 0.5), k, v, rnd(DType::F32, {6, 9}), false, 0.7) * 2.0);
  p.add("scaled_dot_product_attention(f32 rank 3)",
        scaled_dot_product_attention(rnd(DType::F32, {3, 4, 2}), rnd(DType::F32, {3, 6, 2}),
                                     rnd(DType::F32, {3, 6, 2})));
  p.add("scaled_dot_product_attention(f32 rank 2, 300 keys, causal)",
        scaled_dot_product_attention(rnd(DType::F32, {300, 3}), rnd(DType::F32, {300, 3}),
                                     rnd(DType::F32, {300, 2}), Tensor(), true));
  // Bottom-right causal alignment: a chunk after a prefix (Sq < Sk) in every floating dtype,
  // and Sq > Sk, whose first rows see no key (NaN): the portable form (f32), and the
  // tensor-core form's two 128-row blocks (bf16).
  for (DType dt : kFloatDtypes) {
    Tensor bq = rnd(dt, {2, 4, 5, 8}), bk = rnd(dt, {2, 2, 11, 8}), bv = rnd(dt, {2, 2, 11, 3});
    p.add(call(OpKind::Attention, {dt, dt, dt}, " gqa causal bottom-right, Sq 5 < Sk 11"),
          scaled_dot_product_attention(bq, bk, bv, Tensor(), CausalAlignment::BottomRight));
  }
  for (DType dt : {DType::F32, DType::BF16}) {
    p.add(call(OpKind::Attention, {dt, dt, dt}, " causal bottom-right, Sq 130 > Sk 100, mask"),
          scaled_dot_product_attention(rnd(dt, {1, 2, 130, 16}), rnd(dt, {1, 2, 100, 16}),
                                       rnd(dt, {1, 2, 100, 16}), rnd(dt, {130, 100}),
                                       CausalAlignment::BottomRight));
  }
  return {p};
}

// Leaves, every dtype each takes: a realized input, constants, arange, random numbers.
std::vector<Program> leaf_programs(OpKind op, Inputs& in) {
  Program p{"every dtype"};
  for (DType dt : kAllDTypes) {
    const bool f = is_floating(dt);
    switch (op) {
      case OpKind::Input: {
        Tensor x = in.random(dt, {3, 5});
        p.add(call(op, {dt}, " then maximum"), maximum(x, x));
        break;
      }
      case OpKind::Constant: {
        const double big = dt == DType::I64 ? 1099511627777.0 : 123.0;  // 2^40 + 1
        p.add(call(op, {dt}), Tensor::full({3, 4}, f ? std::nan("") : big, dt));
        p.add(call(op, {dt}, " -inf or -7"),
              Tensor::full({3, 4}, f ? -std::numeric_limits<double>::infinity() : -7.0, dt));
        p.add(call(op, {dt}, " 0-d, then maximum"),
              maximum(in.random(dt, {3, 4}), Tensor::full({}, f ? 2.5 : 1.0, dt)));
        break;
      }
      case OpKind::Arange:
        p.add_unless_rejected(call(op, {dt}, " 2500"), [&] { return Tensor::arange(2500, dt); });
        p.add_unless_rejected(call(op, {dt}, " 12, reshaped, then maximum"), [&] {
          return maximum(Tensor::arange(12, dt).reshape({3, 4}), in.random(dt, {4}));
        });
        break;
      case OpKind::Rand:
      case OpKind::Randn: {
        const auto gen = op == OpKind::Rand ? &Tensor::rand : &Tensor::randn;
        p.add_unless_rejected(call(op, {dt}), [&] { return gen({5, 7}, in.seed(), dt); });
        p.add_unless_rejected(call(op, {dt}, " * 2 - x"), [&] {
          Tensor r = gen({300}, in.seed(), dt);
          return r * 2.0 - in.random(dt, {300});
        });
        break;
      }
      default:
        break;
    }
  }
  return {p};
}

// Custom elementwise functions of each arity, defined once per process (definitions are
// permanent).
const CustomElementwise& custom_function(int arity) {
  static const CustomElementwise unary =
      define_elementwise({"catalog_softplus", 1,
                          "__device__ float catalog_softplus(float x) { return log1pf(expf(x)); }",
                          [](int64_t n, const float* const* in, float* out) {
                            for (int64_t i = 0; i < n; ++i) out[i] = std::log1p(std::exp(in[0][i]));
                          }});
  static const CustomElementwise binary =
      define_elementwise({"catalog_twist2", 2,
                          "__device__ float catalog_twist2(float a, float b) { return a * b - a; }",
                          [](int64_t n, const float* const* in, float* out) {
                            for (int64_t i = 0; i < n; ++i) out[i] = in[0][i] * in[1][i] - in[0][i];
                          }});
  static const CustomElementwise ternary = define_elementwise(
      {"catalog_twist3", 3,
       "__device__ float catalog_twist3(float a, float b, float c) { return a * b + 2.0f * c; }",
       [](int64_t n, const float* const* in, float* out) {
         for (int64_t i = 0; i < n; ++i) out[i] = in[0][i] * in[1][i] + 2.0f * in[2][i];
       }});
  return arity == 1 ? unary : arity == 2 ? binary : ternary;
}

// Each arity over operands of several dtypes (converted to f32) with broadcasting, and a
// function fused into a reduction's and a row norm's prologue.
std::vector<Program> custom_programs(Inputs& in) {
  const CustomElementwise &f1 = custom_function(1), &f2 = custom_function(2),
                          &f3 = custom_function(3);
  Program p{"each arity, several dtypes, in a reduction and a row norm"};
  p.sums = true;
  Tensor x = in.random(DType::F32, {4, 6});
  Tensor a = in.random(DType::F16, {3, 1, 5}), b = in.random(DType::I32, {4, 5});
  Tensor c = in.random(DType::F64, {5}), d = in.random(DType::Bool, {3, 4, 5});
  Tensor e = in.random(DType::F32, {4, 6}, Values::kPlain);
  p.add("2 * catalog_softplus(f32)", f1({x}) * 2.0);
  p.add("catalog_twist2(f16, i32)", f2({a, b}));
  p.add("catalog_twist3(bool, f16, f64)", f3({d, a, c}));
  p.add("sum(catalog_softplus(f32), {1})", sum(f1({e}), {1}));
  p.add("softmax(catalog_twist2(f32, f32 column))", softmax(f2({e, e.slice(1, 0, 1)})));
  return {p};
}

// A custom kernel: out[r, c] = x[r, cols - 1 - c] + bias[c], over dense f32 inputs.
KernelFunction reverse_rows_definition() {
  KernelFunction f;
  f.name = "catalog_reverse_rows";
  f.arity = 2;
  f.cuda = R"(
extern "C" __global__ void catalog_reverse_rows(KilnKernelArgs a) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= a.out_numel) return;
  const long long cols = a.out_shape[a.out_rank - 1];
  const long long c = i % cols;
  const float* x = (const float*)a.in[0];
  const float* bias = (const float*)a.in[1];
  ((float*)a.out)[i] = x[i - c + (cols - 1 - c)] + bias[c];
})";
  f.infer = [](const std::vector<TensorType>& in) {
    if (in[0].dtype != DType::F32 || in[1].dtype != DType::F32) throw Error("expects f32");
    if (in[0].shape.empty() || in[1].shape != std::vector<int64_t>{in[0].shape.back()}) {
      throw Error("expects a bias of shape [cols]");
    }
    return in[0];
  };
  f.launch = [](const std::vector<TensorType>&, const TensorType& out) {
    LaunchDims dims;
    dims.grid[0] = (testing::count(out.shape) + 127) / 128;
    dims.block[0] = 128;
    return dims;
  };
  f.cpu = [](const std::vector<const void*>& in, const std::vector<TensorType>&, void* out,
             const TensorType& type) {
    const int64_t cols = type.shape.back(), n = testing::count(type.shape);
    const float* x = static_cast<const float*>(in[0]);
    const float* bias = static_cast<const float*>(in[1]);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t c = i % cols;
      static_cast<float*>(out)[i] = x[i - c + (cols - 1 - c)] + bias[c];
    }
  };
  return f;
}

// Inputs from a fused transpose (which Kiln makes dense first), consumers fused after it, and
// an output of several blocks.
std::vector<Program> custom_kernel_programs(Inputs& in) {
  static const CustomKernel k = define_kernel(reverse_rows_definition());
  Tensor x = in.random(DType::F32, {9, 5}), bias = in.random(DType::F32, {9});
  Tensor big = in.random(DType::F32, {3, 200}, Values::kPlain);
  Program p{"over a transpose, then add; over several blocks, then sum"};
  p.sums = true;
  p.add("catalog_reverse_rows(2 * transpose, bias) + 1", k({x.transpose(0, 1) * 2.0, bias}) + 1.0);
  p.add("sum(catalog_reverse_rows(x, bias), {1})",
        sum(k({big, in.random(DType::F32, {200})}), {1}));
  return {p};
}

// Collectives over this process alone (the world of one rank): what each device does with
// the collective's buffers, against the reference evaluator; tests/comm/distributed_ops_test.cc
// runs them on several processes. Recorded directly: the public API records nothing for a
// group of one. Every dtype each takes, each reduction, an inner axis, and a fused
// producer and consumer on either side of the boundary.
std::vector<Program> collective_programs(OpKind op, Inputs& in) {
  const int world = comm::open_world();
  auto collective = [&](const Tensor& x, int reduction, int axis) {
    ops::Attrs attrs;
    ops::set_collective_group(world, attrs);
    attrs.reduction = reduction;
    attrs.axis = axis;
    return jit::record(op, {x}, std::move(attrs));
  };
  const bool reduces = op == OpKind::AllReduce || op == OpKind::ReduceScatter;
  Program p{"every dtype and reduction, an inner axis, fused on both sides"};
  int turn = 0;
  for (DType dt : kAllDTypes) {
    if (reduces && dt == DType::Bool) continue;
    for (int r = 0; r < (reduces ? 4 : 1); ++r) {
      if (r == 1 && !is_floating(dt)) continue;  // 1: mean
      const int axis = turn++ % 2;
      p.add(call(op, {dt}, absl::StrCat(" reduction ", r, " axis ", axis)),
            collective(in.random(dt, {4, 6}), r, axis));
    }
  }
  p.add(absl::StrCat(ops::op_name(op), "(exp(f32) * 2) + 1"),
        collective(exp(in.random(DType::F32, {3, 8}, Values::kPlain)) * 2.0, 0, 0) + 1.0);
  return {p};
}

// Ops that need two processes: tests/comm/distributed_ops_test.cc runs them (mpirun).
bool needs_several_processes(OpKind op) { return op == OpKind::Send || op == OpKind::Recv; }

// Every op's builder. A new op in the catalog needs one here.
const std::map<OpKind, Builder>& builders() {
  static const std::map<OpKind, Builder> map = [] {
    std::map<OpKind, Builder> m;
    const std::pair<OpKind, UnaryFn> unary[] = {{OpKind::Neg, &kiln::neg},
                                                {OpKind::Abs, &kiln::abs},
                                                {OpKind::Exp, &kiln::exp},
                                                {OpKind::Log, &kiln::log},
                                                {OpKind::Sqrt, &kiln::sqrt},
                                                {OpKind::Rsqrt, &kiln::rsqrt},
                                                {OpKind::Sin, &kiln::sin},
                                                {OpKind::Cos, &kiln::cos},
                                                {OpKind::Tanh, &kiln::tanh},
                                                {OpKind::Sigmoid, &kiln::sigmoid},
                                                {OpKind::Relu, &kiln::relu},
                                                {OpKind::Gelu, &kiln::gelu},
                                                {OpKind::Silu, &kiln::silu},
                                                {OpKind::Erf, &kiln::erf},
                                                {OpKind::Floor, &kiln::floor},
                                                {OpKind::Ceil, &kiln::ceil},
                                                {OpKind::Reciprocal, &kiln::reciprocal},
                                                {OpKind::Square, &kiln::square},
                                                {OpKind::LogicalNot, &kiln::logical_not},
                                                {OpKind::Log1p, &kiln::log1p},
                                                {OpKind::Expm1, &kiln::expm1}};
    for (const auto& [kind, function] : unary) {
      m[kind] = [op = kind, fn = function](Inputs& in) { return unary_programs(op, fn, in); };
    }
    const std::pair<OpKind, BinaryFn> binary[] = {{OpKind::Add, &kiln::add},
                                                  {OpKind::Sub, &kiln::sub},
                                                  {OpKind::Mul, &kiln::mul},
                                                  {OpKind::Div, &kiln::div},
                                                  {OpKind::Pow, &kiln::pow},
                                                  {OpKind::Maximum, &kiln::maximum},
                                                  {OpKind::Minimum, &kiln::minimum},
                                                  {OpKind::Eq, &kiln::eq},
                                                  {OpKind::Ne, &kiln::ne},
                                                  {OpKind::Lt, &kiln::lt},
                                                  {OpKind::Le, &kiln::le},
                                                  {OpKind::Gt, &kiln::gt},
                                                  {OpKind::Ge, &kiln::ge},
                                                  {OpKind::LogicalAnd, &kiln::logical_and},
                                                  {OpKind::LogicalOr, &kiln::logical_or}};
    for (const auto& [kind, function] : binary) {
      m[kind] = [op = kind, fn = function](Inputs& in) { return binary_programs(op, fn, in); };
    }
    const std::pair<OpKind, ReduceFn> reduce[] = {{OpKind::Sum, &kiln::sum},
                                                  {OpKind::Mean, &kiln::mean},
                                                  {OpKind::Max, &kiln::max},
                                                  {OpKind::Min, &kiln::min}};
    for (const auto& [kind, function] : reduce) {
      m[kind] = [op = kind, fn = function](Inputs& in) { return reduce_programs(op, fn, in); };
    }
    const std::pair<OpKind, ArgReduceFn> arg_reduce[] = {{OpKind::Argmax, &kiln::argmax},
                                                         {OpKind::Argmin, &kiln::argmin}};
    for (const auto& [kind, function] : arg_reduce) {
      m[kind] = [op = kind, fn = function](Inputs& in) { return arg_reduce_programs(op, fn, in); };
    }
    for (OpKind op : {OpKind::Reshape, OpKind::Permute, OpKind::BroadcastTo, OpKind::Slice,
                      OpKind::Contiguous}) {
      m[op] = [op](Inputs& in) { return view_programs(op, in); };
    }
    for (OpKind op : {OpKind::Softmax, OpKind::LogSoftmax, OpKind::LayerNorm, OpKind::RmsNorm}) {
      m[op] = [op](Inputs& in) { return row_norm_programs(op, in); };
    }
    for (OpKind op :
         {OpKind::Input, OpKind::Constant, OpKind::Arange, OpKind::Rand, OpKind::Randn}) {
      m[op] = [op](Inputs& in) { return leaf_programs(op, in); };
    }
    m[OpKind::Where] = where_programs;
    m[OpKind::Astype] = astype_programs;
    m[OpKind::Matmul] = matmul_programs;
    m[OpKind::Concat] = concat_programs;
    m[OpKind::Cumsum] = cumsum_programs;
    m[OpKind::TopkIndices] = topk_programs;
    m[OpKind::UpdateSlice] = update_slice_programs;
    m[OpKind::IndexAdd] = index_add_programs;
    m[OpKind::DynamicSlice] = dynamic_slice_programs;
    m[OpKind::Attention] = attention_programs;
    for (OpKind op : {OpKind::Take, OpKind::TakeAlongAxis}) {
      m[op] = [op](Inputs& in) { return gather_programs(op, in); };
    }
    m[OpKind::Custom] = custom_programs;
    m[OpKind::CustomKernel] = custom_kernel_programs;
    for (OpKind op :
         {OpKind::AllReduce, OpKind::AllGather, OpKind::ReduceScatter, OpKind::Broadcast}) {
      m[op] = [op](Inputs& in) { return collective_programs(op, in); };
    }
    return m;
  }();
  return map;
}

// ---------------------------------------------------------------------------------------
// Walking the catalog.

struct OpCases {
  const ops::OpInfo* info;
  std::vector<Program> programs;
};

std::vector<detail::Node*> nodes_of(const std::vector<Tensor>& outputs) {
  std::vector<detail::Node*> nodes;
  for (const Tensor& t : outputs) nodes.push_back(detail::TensorAccess::node(t).get());
  return nodes;
}

// The programs of every catalog op, built on the default device from a seed fixed per op
// (so every device gets the same values). An op with no builder fails here.
std::vector<OpCases> build_catalog_cases() {
  int count = 0;
  const ops::OpInfo* all = ops::all_ops(&count);
  std::vector<OpCases> cases;
  for (int i = 0; i < count; ++i) {
    const ops::OpInfo& info = all[i];
    if (needs_several_processes(info.kind)) continue;
    const auto it = builders().find(info.kind);
    if (it == builders().end()) {
      ADD_FAILURE() << "op '" << info.name << "' has no case here: add a case for " << info.name
                    << " to op_catalog_test.cc";
      continue;
    }
    Inputs in(testing::test_seed() * 1000003 + i);
    cases.push_back({&info, it->second(in)});
    EXPECT_FALSE(cases.back().programs.empty()) << "the case for " << info.name << " is empty";
    // A builder must exercise its op, not only name it.
    for (const Program& p : cases.back().programs) {
      for (size_t o = 0; o < p.outputs.size(); ++o) {
        const jit::Trace trace = jit::build_trace(nodes_of({p.outputs[o]}));
        EXPECT_TRUE(std::any_of(trace.nodes.begin(), trace.nodes.end(),
                                [&](const jit::TraceNode& n) { return n.op == info.kind; }))
            << p.names[o] << " in the case for " << info.name << " does not use it:\n"
            << dump_trace({p.outputs[o]}, DumpFormat::Text);
      }
    }
  }
  return cases;
}

// ---------------------------------------------------------------------------------------
// Expected values and comparison.

// What the reference evaluator computes for each output of a program, and how closely a
// device must agree: per output, as a program holds outputs of every dtype.
struct Expected {
  std::vector<DType> dtypes;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<std::vector<double>> values;
  std::vector<double> tolerances;   // of the least precise floating value on the way
  std::vector<double> magnitudes;   // in summing programs, the largest finite value on the way
  std::vector<std::string> traces;  // for failure messages
};

Expected expected_of(const Program& p) {
  const std::vector<detail::Node*> pending = jit::collect_pending(nodes_of(p.outputs));
  const std::vector<std::shared_ptr<base::Buffer>> values = ops::reference_run(pending);
  std::map<const detail::Node*, const base::Buffer*> value_of;
  for (size_t i = 0; i < pending.size(); ++i) value_of[pending[i]] = values[i].get();
  Expected e;
  for (const Tensor& t : p.outputs) {
    detail::Node* out = detail::TensorAccess::node(t).get();
    double tol = 0, magnitude = 0;
    for (const detail::Node* n : jit::collect_pending({out})) {
      tol = std::max(tol, testing::reference_tolerance(n->type.dtype));
      if (!p.sums || !is_floating(n->type.dtype)) continue;
      for (int64_t k = 0; k < ops::numel(n->type.shape); ++k) {
        const double v = std::fabs(ops::load_double(*value_of.at(n), n->type.dtype, k));
        if (std::isfinite(v)) magnitude = std::max(magnitude, v);
      }
    }
    std::vector<double> v(ops::numel(out->type.shape));
    for (size_t k = 0; k < v.size(); ++k) {
      v[k] = ops::load_double(*value_of.at(out), out->type.dtype, static_cast<int64_t>(k));
    }
    e.dtypes.push_back(out->type.dtype);
    e.shapes.push_back(out->type.shape);
    e.values.push_back(std::move(v));
    e.tolerances.push_back(tol);
    e.magnitudes.push_back(magnitude);
    e.traces.push_back(dump_trace({t}, DumpFormat::Text));
  }
  return e;
}

// Elements compared and failures seen, so that a broken device stops the test after a few
// screens of messages rather than one per element.
struct Tally {
  int64_t checked = 0;
  int failures = 0;
  bool enough() const { return failures >= 30; }
};

// Output `o` of `p` as computed `where` against the reference, every element: NaN only where
// the reference has NaN, integers and bool exactly, floats within the output's tolerance.
void expect_output_matches(const Program& p, const Expected& e, size_t o,
                           const std::vector<double>& got, const std::string& where, Tally& tally) {
  const std::vector<double>& want = e.values[o];
  const std::string what =
      absl::StrCat(where, ": ", p.names[o], " (", dtype_name(e.dtypes[o]), " [",
                   absl::StrJoin(e.shapes[o], ","), "], in the program '", p.label, "')");
  if (got.size() != want.size()) {
    ADD_FAILURE() << what << " has " << got.size() << " elements, want " << want.size();
    ++tally.failures;
    return;
  }
  const double tol = is_floating(e.dtypes[o]) ? e.tolerances[o] : 0.0;
  int failures = 0;
  for (size_t i = 0; i < want.size() && failures < 3; ++i) {
    ::testing::AssertionResult ok = testing::close(want[i], got[i], tol, /*nan_ok=*/true);
    if (!ok && std::isfinite(want[i]) && std::fabs(want[i] - got[i]) <= tol * e.magnitudes[o]) {
      ok = ::testing::AssertionSuccess();
    }
    if (!ok) {
      ++failures;
      ADD_FAILURE() << what << " element " << i << ": " << ok.message() << "\n" << e.traces[o];
    }
  }
  tally.checked += static_cast<int64_t>(want.size());
  tally.failures += failures;
}

// Every device Kiln can run on here: the CPU always, each usable GPU.
std::vector<Device> devices_present() {
  std::vector<Device> devices = {{DeviceType::CPU, 0}};
  for (int i = 0; i < 64 && jit::device_usable({DeviceType::CUDA, i}).ok(); ++i) {
    devices.push_back({DeviceType::CUDA, i});
  }
  return devices;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

class OpCatalogTest : public testing::ScratchDirTest {};

TEST_F(OpCatalogTest, EveryCatalogOpHasACase) {
  int count = 0;
  const ops::OpInfo* all = ops::all_ops(&count);
  ASSERT_GT(count, 0);
  for (int i = 0; i < count; ++i) {
    EXPECT_TRUE(builders().count(all[i].kind) || needs_several_processes(all[i].kind))
        << "add a case for " << all[i].name << " to op_catalog_test.cc";
  }
}

// The reference values come from programs built on the CPU; each device builds the same
// programs (same seeds) with its own tensors and computes them.
TEST_F(OpCatalogTest, EveryOpMatchesTheReferenceOnEveryDevice) {
  SCOPED_TRACE("KILN_TEST_SEED=" + std::to_string(testing::test_seed()));
  const auto start = std::chrono::steady_clock::now();
  std::vector<OpCases> reference_cases;
  std::vector<std::vector<Expected>> expected;
  {
    testing::DefaultDevice cpu({DeviceType::CPU, 0});
    reference_cases = build_catalog_cases();
    for (const OpCases& c : reference_cases) {
      expected.emplace_back();
      for (const Program& p : c.programs) expected.back().push_back(expected_of(p));
    }
  }
  std::vector<std::string> names;
  Tally tally;
  size_t programs = 0;
  for (const Device d : devices_present()) {
    names.push_back(device_name(d));
    testing::DefaultDevice device(d);
    std::vector<OpCases> cases =
        d.type == DeviceType::CPU ? reference_cases : build_catalog_cases();
    ASSERT_EQ(cases.size(), expected.size());
    for (size_t op = 0; op < cases.size(); ++op) {
      ASSERT_EQ(cases[op].programs.size(), expected[op].size()) << cases[op].info->name;
      for (size_t k = 0; k < cases[op].programs.size() && !tally.enough(); ++k) {
        const Program& p = cases[op].programs[k];
        eval(p.outputs);
        for (size_t o = 0; o < p.outputs.size(); ++o) {
          ASSERT_EQ(p.outputs[o].dtype(), expected[op][k].dtypes[o]) << p.names[o];
          ASSERT_EQ(p.outputs[o].shape(), expected[op][k].shapes[o]) << p.names[o];
          expect_output_matches(p, expected[op][k], o, testing::values(p.outputs[o]),
                                device_name(d), tally);
        }
        ++programs;
      }
    }
  }
  std::printf(
      "op catalog (seed %llu): %zu ops, %zu programs on %s, %lld elements checked (%.1f s)\n",
      static_cast<unsigned long long>(testing::test_seed()), expected.size(), programs,
      absl::StrJoin(names, ", ").c_str(), static_cast<long long>(tally.checked),
      seconds_since(start));
}

// One planned program in the emulation.
struct EmulatedCase {
  size_t op, program;
  std::shared_ptr<const jit::LaunchPlan> plan;
  jit::PlanArguments args;
  std::vector<int> modules;  // per plan kernel, its module's index
};

TEST_F(OpCatalogTest, EveryOpMatchesTheReferenceInTheCudaEmulation) {
  SCOPED_TRACE("KILN_TEST_SEED=" + std::to_string(testing::test_seed()));
  const auto start = std::chrono::steady_clock::now();
  testing::DefaultDevice cpu({DeviceType::CPU, 0});
  const std::vector<OpCases> cases = build_catalog_cases();
  std::vector<std::vector<Expected>> expected(cases.size());
  std::vector<EmulatedCase> planned;
  std::vector<testing::EmulatedModule> modules;
  std::map<std::string, int> module_of_source;
  for (size_t op = 0; op < cases.size(); ++op) {
    size_t kernels = 0;
    for (size_t k = 0; k < cases[op].programs.size(); ++k) {
      const Program& p = cases[op].programs[k];
      expected[op].push_back(expected_of(p));
      const jit::Trace trace = jit::build_trace(nodes_of(p.outputs));
      EmulatedCase c{op, k, jit::build_plan(trace), jit::arguments_of(trace), {}};
      for (const jit::PlannedKernel& pk : c.plan->kernels) {
        if (pk.program->anchor == jit::AnchorKind::kCollective) {  // no kernel to compile
          c.modules.push_back(-1);
          continue;
        }
        testing::EmulatedModule m = testing::emulated_module(*pk.program);
        auto [it, added] = module_of_source.emplace(m.source, static_cast<int>(modules.size()));
        if (added) modules.push_back(std::move(m));
        c.modules.push_back(it->second);
      }
      kernels += c.plan->kernels.size();
      planned.push_back(std::move(c));
    }
    // Otherwise the emulation would check nothing of this op.
    EXPECT_GT(kernels, 0u) << "no program of the case for " << cases[op].info->name
                           << " runs a kernel";
  }
  const auto built_start = std::chrono::steady_clock::now();
  absl::StatusOr<testing::EmulatedKernels> kernels =
      testing::EmulatedKernels::build(modules, dir_.string());
  ASSERT_TRUE(kernels.ok()) << kernels.status();
  const double compile_seconds = seconds_since(built_start);
  Tally tally;
  for (const EmulatedCase& c : planned) {
    const Program& p = cases[c.op].programs[c.program];
    const Expected& e = expected[c.op][c.program];
    for (const testing::EmulationVariant& v : testing::emulation_variants()) {
      const std::vector<std::shared_ptr<base::Buffer>> got =
          testing::run_emulated_plan(*kernels, *c.plan, c.args, c.modules, v);
      for (size_t o = 0; o < got.size(); ++o) {
        std::vector<double> values(got[o]->nbytes() / dtype_size(e.dtypes[o]));
        for (size_t i = 0; i < values.size(); ++i) {
          values[i] = ops::load_double(*got[o], e.dtypes[o], static_cast<int64_t>(i));
        }
        expect_output_matches(p, e, o, values, "CUDA emulation, " + v.name(), tally);
      }
    }
    if (tally.enough()) break;
  }
  std::printf(
      "op catalog in the CUDA emulation (seed %llu): %zu programs, %zu modules (host compile "
      "%.1f s), %lld elements checked (%.1f s in all)\n",
      static_cast<unsigned long long>(testing::test_seed()), planned.size(), modules.size(),
      compile_seconds, static_cast<long long>(tally.checked), seconds_since(start));
}

}  // namespace
}  // namespace kiln
