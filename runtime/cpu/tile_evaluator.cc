#include "runtime/cpu/tile_evaluator.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <string>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "base/thread_pool.h"
#include "kiln/error.h"
#include "ops/custom_functions.h"
#include "ops/element_access.h"
#include "ops/gather.h"
#include "ops/scalar_math.h"
#include "runtime/cpu/simd_math.h"

namespace kiln::runtime::cpu {
namespace {

using jit::Instr;
using jit::InstrKind;
using jit::KernelLaunch;
using jit::KernelProgram;
using ops::OpKind;
using ops::Shape;

// Rounds a value held in a register to what `dt` can hold.
inline float round_float(DType dt, float v) {
  if (dt == DType::F16) return static_cast<float>(Half(v));
  if (dt == DType::BF16) return static_cast<float>(BFloat16(v));
  return v;
}

// Converts one value between dtypes under the cast rules (docs/semantics.md).
// A 16-bit float value may carry f32 precision inside a kernel; converting it to another
// dtype first rounds it to what it is (as an astype of a stored value would see).
template <class To, class From>
To convert(From v, DType from, DType to) {
  if constexpr (std::is_same_v<From, float>) v = round_float(from, v);
  if constexpr (std::is_same_v<To, int64_t>) {
    if constexpr (std::is_floating_point_v<From>) {
      if (to == DType::Bool) return (v != 0 || std::isnan(v)) ? 1 : 0;
      if (to == DType::I32) return ops::saturate_to<int32_t>(static_cast<double>(v));
      return ops::saturate_to<int64_t>(static_cast<double>(v));
    } else {
      return wrap_int(to, v);
    }
  } else if constexpr (std::is_same_v<To, float>) {
    return round_float(to, static_cast<float>(v));
  } else {
    return static_cast<double>(v);
  }
}

// Reads n elements of a buffer of dtype `dt` into a register of class T; element e is at
// offset index(e). One switch per tile; the loop inlines `index`.
template <class T, class Index>
void load_with(const base::Buffer& b, DType dt, int64_t n, T* out, Index index) {
  auto run = [&](auto* src, auto&& to_value) {
    for (int64_t e = 0; e < n; ++e) out[e] = to_value(src[index(e)]);
  };
  switch (dt) {
    case DType::Bool:
      return run(b.as<uint8_t>(), [](uint8_t v) { return static_cast<T>(v != 0); });
    case DType::I32:
      return run(b.as<int32_t>(), [](int32_t v) { return static_cast<T>(v); });
    case DType::I64:
      return run(b.as<int64_t>(), [](int64_t v) { return static_cast<T>(v); });
    case DType::F16:
      return run(b.as<Half>(), [](Half v) { return static_cast<T>(static_cast<float>(v)); });
    case DType::BF16:
      return run(b.as<BFloat16>(),
                 [](BFloat16 v) { return static_cast<T>(static_cast<float>(v)); });
    case DType::F32:
      return run(b.as<float>(), [](float v) { return static_cast<T>(v); });
    case DType::F64:
      return run(b.as<double>(), [](double v) { return static_cast<T>(v); });
  }
}

// The dtype whose values a register of class T holds unchanged.
template <class T>
constexpr DType register_dtype() {
  if constexpr (std::is_same_v<T, float>) return DType::F32;
  if constexpr (std::is_same_v<T, double>) return DType::F64;
  if constexpr (std::is_same_v<T, int64_t>) return DType::I64;
}

// Reads elements [start, start + n) of a buffer: load_with over a contiguous run, or a plain
// copy when the buffer already holds the register's type (f32 into a float register).
template <class T>
void load_run(const base::Buffer& b, DType dt, int64_t start, int64_t n, T* out) {
  if constexpr (std::is_same_v<T, float>) {
    if (dt == DType::F32) {
      std::memcpy(out, b.as<float>() + start, n * sizeof(float));
      return;
    }
    if (dt == DType::F16) {
      f16_to_floats(b.as<Half>() + start, out, static_cast<size_t>(n));
      return;
    }
  }
  load_with<T>(b, dt, n, out, [start](int64_t e) { return start + e; });
}

// Writes n register values into a buffer of dtype `dt` at [begin, begin + n), converted as
// a store converts them.
template <class T>
void store_values(base::Buffer& b, DType dt, int64_t begin, int64_t n, const T* in) {
  auto run = [&](auto* dst, auto&& convert_one) {
    for (int64_t e = 0; e < n; ++e) dst[begin + e] = convert_one(in[e]);
  };
  switch (dt) {
    case DType::Bool:
      return run(b.as<uint8_t>(), [](T v) -> uint8_t {
        if constexpr (std::is_floating_point_v<T>) return (v != 0 || std::isnan(v)) ? 1 : 0;
        return v != 0;
      });
    case DType::I32:
      return run(b.as<int32_t>(), [](T v) -> int32_t {
        if constexpr (std::is_floating_point_v<T>) return ops::saturate_to<int32_t>(v);
        return static_cast<int32_t>(v);
      });
    case DType::I64:
      return run(b.as<int64_t>(), [](T v) -> int64_t {
        if constexpr (std::is_floating_point_v<T>) return ops::saturate_to<int64_t>(v);
        return v;
      });
    case DType::F16:
      if constexpr (std::is_same_v<T, float>) {
        return floats_to_f16(in, b.as<Half>() + begin, static_cast<size_t>(n));
      }
      return run(b.as<Half>(), [](T v) { return Half(static_cast<float>(v)); });
    case DType::BF16:
      if constexpr (std::is_same_v<T, float>) {
        return floats_to_bf16(in, b.as<BFloat16>() + begin, static_cast<size_t>(n));
      }
      return run(b.as<BFloat16>(), [](T v) { return BFloat16(static_cast<float>(v)); });
    case DType::F32:
      if constexpr (std::is_same_v<T, float>) {
        std::memcpy(b.as<float>() + begin, in, n * sizeof(float));
        return;
      }
      return run(b.as<float>(), [](T v) { return static_cast<float>(v); });
    case DType::F64:
      return run(b.as<double>(), [](T v) { return static_cast<double>(v); });
  }
}

// The per-op loops over a tile. Each dispatches once per tile to the op's functor
// (ops/scalar_math.inc), so the loop body is one known inline function and vectorizes.

// The f32 transcendental ops, those of KILN_SIMD_UNARY_OPS (runtime/cpu/simd_math.h), use
// its Highway loops instead of the functor; tests/scalar_math_test.cc checks each against
// it. Returns false when `op` has no SIMD version.
bool simd_unary(OpKind op, const float* a, float* out, int64_t n) {
  switch (op) {
#define KILN_SIMD_CASE(Enum, name)               \
  case OpKind::Enum:                             \
    simd_##name(a, out, static_cast<size_t>(n)); \
    return true;
    KILN_SIMD_UNARY_OPS(KILN_SIMD_CASE)
#undef KILN_SIMD_CASE
    default:
      return false;
  }
}

template <class T>
void unary_loop(OpKind op, const T* a, T* out, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    if (simd_unary(op, a, out, n)) return;
  }
  math::with_unary_functor(op, [&](auto fn) {
    if constexpr (std::is_floating_point_v<T> || decltype(fn)::kIntegers) {
      for (int64_t e = 0; e < n; ++e) out[e] = static_cast<T>(fn(a[e]));
    } else {
      math::not_of_kind(op, "integer unary");
    }
  });
}

// Operands of type T; results of type R (T, or int64 0/1 for comparisons and logical ops).
template <class T, class R>
void binary_loop(OpKind op, const T* a, const T* b, R* out, int64_t n) {
  if constexpr (std::is_same_v<T, float> && std::is_same_v<R, float>) {
    // f32 pow is the one transcendental binary op; simd_pow stands in for its functor. The
    // four arithmetic ops run in the machine's widest vectors.
    const size_t count = static_cast<size_t>(n);
    switch (op) {
      case OpKind::Pow:
        return simd_pow(a, b, out, count);
      case OpKind::Add:
        return simd_add(a, b, out, count);
      case OpKind::Sub:
        return simd_sub(a, b, out, count);
      case OpKind::Mul:
        return simd_mul(a, b, out, count);
      case OpKind::Div:
        return simd_div(a, b, out, count);
      default:
        break;
    }
  }
  math::with_binary_functor(op, [&](auto fn) {
    if constexpr (std::is_floating_point_v<T> || decltype(fn)::kIntegers) {
      for (int64_t e = 0; e < n; ++e) out[e] = static_cast<R>(fn(a[e], b[e]));
    } else {
      math::not_of_kind(op, "integer binary");
    }
  });
}

}  // namespace

void unary_f32(OpKind op, const float* in, float* out, int64_t n) {
  unary_loop<float>(op, in, out, n);
}

namespace {

// Calls fn(e, run, base) for each run of positions [begin, begin + n) along the last dim of
// `shape`: positions e .. e + run - 1 read view offsets base, base + stride, ... with
// stride the view's last stride.
template <class Fn>
void for_each_run(const Shape& shape, const jit::ViewParams& v, int64_t begin, int64_t n, Fn fn) {
  const int rank = static_cast<int>(shape.size());
  // The position's index per dim, kept inline for the usual ranks; no rank is too large.
  absl::InlinedVector<int64_t, 8> idx(rank);
  int64_t rest = begin;
  int64_t base = v.offset;
  for (int d = rank - 1; d >= 0; --d) {
    idx[d] = shape[d] == 0 ? 0 : rest % shape[d];
    rest = shape[d] == 0 ? 0 : rest / shape[d];
    base += idx[d] * v.strides[d];
  }
  const int last = rank - 1;
  const int64_t stride = v.strides[last];
  int64_t e = 0;
  while (e < n) {
    int64_t run = std::min(n - e, shape[last] - idx[last]);
    fn(e, run, base);
    e += run;
    base += run * stride;
    idx[last] += run;
    if (idx[last] < shape[last]) continue;
    base -= shape[last] * stride;
    idx[last] = 0;
    for (int d = last - 1; d >= 0; --d) {
      ++idx[d];
      base += v.strides[d];
      if (idx[d] < shape[d]) break;
      base -= shape[d] * v.strides[d];
      idx[d] = 0;
    }
  }
}

}  // namespace

void view_offsets(const Shape& shape, const jit::ViewParams& v, int64_t begin, int64_t n,
                  int64_t* out) {
  if (shape.empty()) {
    std::fill(out, out + n, v.offset);
    return;
  }
  const int64_t stride = v.strides.back();
  for_each_run(shape, v, begin, n, [&](int64_t e, int64_t run, int64_t base) {
    for (int64_t k = 0; k < run; ++k) out[e + k] = base + k * stride;
  });
}

TileEvaluator::TileEvaluator(const KernelProgram& program, const KernelLaunch& launch,
                             const std::vector<const base::Buffer*>& inputs,
                             const std::vector<double>& params, const void* anchor)
    : program_(program), launch_(launch), inputs_(inputs), params_(params), anchor_(anchor) {
  const size_t n = program_.instrs.size();
  regs_.f.resize(n);
  regs_.d.resize(n);
  regs_.i.resize(n);
  regs_.offsets.resize(launch_.views.size());
  regs_.alias.assign(n, nullptr);
  skipped_.assign(n, false);
  param_filled_.assign(n, 0);
  for (size_t v = 0; v < launch_.views.size(); ++v) {
    contiguous_.push_back(program_.view_patterns[v].access == jit::ViewAccess::kContiguous ||
                          is_row_major(launch_.views[v], v));
  }
}

bool TileEvaluator::is_row_major(const jit::ViewParams& view, size_t v) const {
  for (size_t i = 0; i < program_.instrs.size(); ++i) {
    const Instr& in = program_.instrs[i];
    if (in.view != static_cast<int>(v)) continue;
    const Shape& space = launch_.spaces[in.space];
    std::vector<int64_t> strides = ops::contiguous_strides(space);
    for (size_t d = 0; d < space.size(); ++d) {
      if (space[d] != 1 && strides[d] != view.strides[d]) return false;
    }
    return true;
  }
  return false;
}

void TileEvaluator::run(int space, int64_t begin, int64_t n) {
  for (size_t k = 0; k < program_.instrs.size(); ++k) {
    if (program_.instrs[k].space != space || skipped_[k]) continue;
    if (static_cast<int>(k) == anchor_instr_) {
      alias_anchor(static_cast<int>(k), begin);
      continue;
    }
    eval(static_cast<int>(k), begin, n);
  }
}

void TileEvaluator::alias_anchor(int k, int64_t begin) {
  dispatch(register_class(program_.instrs[k].dtype), [&](auto t) {
    using T = decltype(t);
    regs_.alias[k] = static_cast<const T*>(anchor_) + (begin - anchor_origin_);
  });
}

void TileEvaluator::read_as_anchor(int instr) {
  anchor_instr_ = instr;
  const size_t count = program_.instrs.size();
  skipped_.assign(count, false);
  if (instr < 0) return;
  // Space 0's instructions still needed: the stored values and, from users back to their
  // operands (operands come first), whatever they read, except through `instr`.
  std::vector<bool> needed(count, false);
  for (const jit::Store& s : program_.stores) needed[s.value] = true;
  for (size_t k = count; k-- > 0;) {
    if (!needed[k] || static_cast<int>(k) == instr) continue;
    for (int operand : program_.instrs[k].operands) {
      if (operand >= 0) needed[operand] = true;
    }
  }
  for (size_t k = 0; k < count; ++k) skipped_[k] = program_.instrs[k].space == 0 && !needed[k];
}

void TileEvaluator::store(int instr, base::Buffer& out, DType dt, int64_t begin, int64_t n) {
  visit(instr, [&](const auto* values) { store_values(out, dt, begin, n, values); });
}

const int64_t* TileEvaluator::offsets(int view, int space, int64_t begin, int64_t n) {
  auto& v = regs_.offsets[view];
  if (static_cast<int64_t>(v.size()) < n) v.resize(n);
  view_offsets(launch_.spaces[space], launch_.views[view], begin, n, v.data());
  return v.data();
}

int64_t TileEvaluator::contiguous_start(int view, int64_t begin) const {
  if (!contiguous_[view]) return -1;
  return launch_.views[view].offset + begin;
}

void TileEvaluator::eval_gather(int k, const Instr& in, int64_t begin, int64_t n) {
  const jit::ViewParams& view = launch_.views[in.view];
  const Shape& space = launch_.spaces[in.space];
  const int64_t* index = regs_.get<int64_t>(in.operands[0]);
  // Each element's checked position along the gathered axis, before anything is read there
  // (the kernel's outputs are never realized when it throws).
  const bool slice = in.op == ops::OpKind::DynamicSlice;
  auto position = [&](int64_t e) {
    const int64_t p = slice ? math::slice_start_position<int64_t>(index[e], view.gather_extent)
                            : math::gather_position<int64_t>(index[e], view.gather_extent);
    if (p < 0) throw Error(ops::index_error_message(in.op, index[e], view.gather_extent));
    return p;
  };
  const base::Buffer& input = *inputs_[in.input];
  const DType dt = program_.input_dtypes[in.input];
  const int64_t stride = space.empty() ? 0 : view.strides.back();
  dispatch(register_class(in.dtype), [&](auto t) {
    using T = decltype(t);
    T* out = alloc<T>(k, n);
    if (space.empty()) {
      load_with<T>(input, dt, n, out,
                   [&](int64_t e) { return view.offset + position(e) * view.gather_stride; });
      return;
    }
    // The view's runs along the innermost dim, with the gathered axis at 0. A run with one
    // index throughout and unit stride is a stretch of one table row (an embedding lookup)
    // and loads as a block; any other run element by element.
    const bool uniform_index = constant_along_last_dim(in.operands[0]);
    for_each_run(space, view, begin, n, [&](int64_t e, int64_t run, int64_t base) {
      bool one_row = stride == 1 && run > 1;
      for (int64_t j = 1; one_row && !uniform_index && j < run; ++j) {
        one_row = index[e + j] == index[e];
      }
      if (one_row) {
        load_run<T>(input, dt, base + position(e) * view.gather_stride, run, out + e);
        return;
      }
      load_with<T>(input, dt, run, out + e, [&](int64_t j) {
        return base + j * stride + position(e + j) * view.gather_stride;
      });
    });
  });
}

bool TileEvaluator::constant_along_last_dim(int instr) const {
  const Instr& in = program_.instrs[instr];
  switch (in.kind) {
    case InstrKind::kParam:
      return true;
    case InstrKind::kLoad:
    case InstrKind::kIndexLeaf: {
      const Shape& space = launch_.spaces[in.space];
      return !space.empty() && launch_.views[in.view].strides.back() == 0;
    }
    case InstrKind::kCast:
    case InstrKind::kUnary:
      return constant_along_last_dim(in.operands[0]);
    default:
      return false;
  }
}

void TileEvaluator::eval(int k, int64_t begin, int64_t n) {
  const Instr& in = program_.instrs[k];
  const RegisterClass c = register_class(in.dtype);
  switch (in.kind) {
    case InstrKind::kLoad: {
      const int64_t start = contiguous_start(in.view, begin);
      if (start >= 0) {
        dispatch(c, [&](auto t) {
          using T = decltype(t);
          const DType dt = program_.input_dtypes[in.input];
          if (dt == register_dtype<T>()) {  // read where it lies
            regs_.alias[k] = inputs_[in.input]->as<T>() + start;
            return;
          }
          load_run<T>(*inputs_[in.input], dt, start, n, alloc<T>(k, n));
        });
        return;
      }
      const jit::ViewParams& view = launch_.views[in.view];
      const Shape& space = launch_.spaces[in.space];
      if (!space.empty() && view.strides.back() == 1) {
        // Contiguous rows (a bias broadcast over rows, a slice): each run loads as a block.
        dispatch(c, [&](auto t) {
          using T = decltype(t);
          T* out = alloc<T>(k, n);
          for_each_run(space, view, begin, n, [&](int64_t e, int64_t run, int64_t base) {
            load_run<T>(*inputs_[in.input], program_.input_dtypes[in.input], base, run, out + e);
          });
        });
        return;
      }
      if (!space.empty() && view.strides.back() == 0) {
        // Broadcast along the last dim (token ids over the hidden size): one value per run.
        dispatch(c, [&](auto t) {
          using T = decltype(t);
          T* out = alloc<T>(k, n);
          for_each_run(space, view, begin, n, [&](int64_t e, int64_t run, int64_t base) {
            load_with<T>(*inputs_[in.input], program_.input_dtypes[in.input], 1, out + e,
                         [base](int64_t) { return base; });
            std::fill_n(out + e + 1, run - 1, out[e]);
          });
        });
        return;
      }
      const int64_t* off = offsets(in.view, in.space, begin, n);
      dispatch(c, [&](auto t) {
        using T = decltype(t);
        load_with<T>(*inputs_[in.input], program_.input_dtypes[in.input], n, alloc<T>(k, n),
                     [off](int64_t e) { return off[e]; });
      });
      return;
    }
    case InstrKind::kParam: {
      // A kernel's parameters are fixed for the evaluator's life: a register filled for a
      // tile this long or longer already holds the value.
      if (param_filled_[k] >= n) return;
      double v = params_[in.param];
      dispatch(c, [&](auto t) {
        using T = decltype(t);
        T value = convert<T>(v, DType::F64, in.dtype);
        std::fill_n(alloc<T>(k, n), n, value);
      });
      param_filled_[k] = n;
      return;
    }
    case InstrKind::kIndexLeaf:
      return eval_index_leaf(k, in, begin, n);
    case InstrKind::kGather:
      return eval_gather(k, in, begin, n);
    case InstrKind::kAnchor:
      return alias_anchor(k, begin);
    case InstrKind::kCast:
      return eval_cast(k, in, n);
    case InstrKind::kUnary:
      eval_unary(k, in, n);
      return round_to_dtype(k, in.dtype, n);
    case InstrKind::kBinary:
      eval_binary(k, in, n);
      return round_to_dtype(k, in.dtype, n);
    case InstrKind::kCustom: {
      // Operands are F32 registers; the user's C++ definition runs over the whole tile.
      const float* operands[ops::kMaxCustomArity] = {};
      int arity = 0;
      for (int operand : in.operands) {
        if (operand >= 0) operands[arity++] = regs_.get<float>(operand);
      }
      const ops::CustomFunction* f = ops::custom_function(in.function);
      float* out = alloc<float>(k, n);
      try {
        f->cpu(n, operands, out);
      } catch (const std::exception& e) {
        throw Error(absl::StrCat("[custom ", f->name, "] its C++ definition failed: ", e.what()));
      }
      return;
    }
    case InstrKind::kWhere:
      dispatch(c, [&](auto t) {
        using T = decltype(t);
        const int64_t* cond = regs_.get<int64_t>(in.operands[0]);
        const T* a = regs_.get<T>(in.operands[1]);
        const T* b = regs_.get<T>(in.operands[2]);
        T* out = alloc<T>(k, n);
        for (int64_t e = 0; e < n; ++e) out[e] = cond[e] ? a[e] : b[e];
      });
      return;
  }
}

void TileEvaluator::round_to_dtype(int k, DType dt, int64_t n) {
  round_all(dt, regs_.own<float>(k), n);
}

void TileEvaluator::eval_index_leaf(int k, const Instr& in, int64_t begin, int64_t n) {
  const Shape& space = launch_.spaces[in.space];
  const jit::ViewParams& view = launch_.views[in.view];
  if (in.op == OpKind::Arange && !space.empty()) {
    // Positions along a run step by the view's last stride (0 for an arange broadcast along
    // the run, 1 along it, any other through a transpose or a stepped slice): each run is
    // its base plus a multiple of the step, with no offset per element.
    dispatch(register_class(in.dtype), [&](auto t) {
      using T = decltype(t);
      T* out = alloc<T>(k, n);
      const int64_t step = view.strides.back();
      for_each_run(space, view, begin, n, [&](int64_t e, int64_t run, int64_t base) {
        for (int64_t j = 0; j < run; ++j) {
          out[e + j] = convert<T>(base + j * step, DType::I64, in.dtype);
        }
      });
    });
    return;
  }
  const int64_t* off = offsets(in.view, in.space, begin, n);
  const uint64_t seed = in.param >= 0 ? std::bit_cast<uint64_t>(params_[in.param]) : 0;
  const int bits = in.dtype == DType::F16 ? 11 : (in.dtype == DType::BF16 ? 8 : 24);
  auto value_at = [&](int64_t i) -> double {
    return in.op == OpKind::Rand ? math::rand_uniform(i, seed, bits) : math::rand_normal(i, seed);
  };
  dispatch(register_class(in.dtype), [&](auto t) {
    using T = decltype(t);
    T* out = alloc<T>(k, n);
    for (int64_t e = 0; e < n; ++e) {
      if (in.op == OpKind::Arange) {
        out[e] = convert<T>(off[e], DType::I64, in.dtype);
      } else {
        out[e] = convert<T>(value_at(off[e]), DType::F64, in.dtype);
      }
    }
  });
}

void TileEvaluator::eval_cast(int k, const Instr& in, int64_t n) {
  const DType from = program_.instrs[in.operands[0]].dtype;
  dispatch(register_class(from), [&](auto s) {
    using S = decltype(s);
    const S* a = regs_.get<S>(in.operands[0]);
    dispatch(register_class(in.dtype), [&](auto t) {
      using T = decltype(t);
      T* out = alloc<T>(k, n);
      if constexpr (std::is_same_v<S, float> && std::is_same_v<T, float>) {
        // Between f16, bf16 and f32: round to the source, then to the target (what
        // convert does), one vectorizable loop each.
        std::copy(a, a + n, out);
        round_all(from, out, n);
        round_all(in.dtype, out, n);
        return;
      }
      for (int64_t e = 0; e < n; ++e) out[e] = convert<T>(a[e], from, in.dtype);
    });
  });
}

void TileEvaluator::eval_unary(int k, const Instr& in, int64_t n) {
  dispatch(register_class(in.dtype), [&](auto t) {
    using T = decltype(t);
    unary_loop<T>(in.op, regs_.get<T>(in.operands[0]), alloc<T>(k, n), n);
  });
  if (register_class(in.dtype) == RegisterClass::kInt) wrap_all(k, in.dtype, n);
}

void TileEvaluator::eval_binary(int k, const Instr& in, int64_t n) {
  const RegisterClass operands = register_class(program_.instrs[in.operands[0]].dtype);
  const bool gives_bool = math::gives_bool(in.op);
  dispatch(operands, [&](auto t) {
    using T = decltype(t);
    if (gives_bool) {
      binary_loop<T, int64_t>(in.op, regs_.get<T>(in.operands[0]), regs_.get<T>(in.operands[1]),
                              alloc<int64_t>(k, n), n);
    } else {
      binary_loop<T, T>(in.op, regs_.get<T>(in.operands[0]), regs_.get<T>(in.operands[1]),
                        alloc<T>(k, n), n);
    }
  });
  if (!gives_bool && operands == RegisterClass::kInt) wrap_all(k, in.dtype, n);
}

// Integer results wrap to their dtype (an i32 keeps its low 32 bits), as if stored.
void TileEvaluator::wrap_all(int k, DType dt, int64_t n) {
  int64_t* values = regs_.own<int64_t>(k);
  for (int64_t e = 0; e < n; ++e) values[e] = wrap_int(dt, values[e]);
}

template <class T>
std::vector<T> evaluate_operand(const KernelProgram& program, const KernelLaunch& launch,
                                const std::vector<const base::Buffer*>& inputs,
                                const std::vector<double>& params, int k) {
  const int space = k + 1;
  const int instr = program.anchor_operands[k];
  const int64_t total = ops::numel(launch.spaces[space]);
  std::vector<T> values(total);
  const int64_t tiles = (total + kTile - 1) / kTile;
  base::parallel_for(tiles, 16, [&](int64_t t0, int64_t t1) {
    TileEvaluator ev(program, launch, inputs, params, nullptr);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t begin = t * kTile, n = std::min(kTile, total - begin);
      ev.run(space, begin, n);
      ev.visit(instr, [&](const auto* src) {
        for (int64_t e = 0; e < n; ++e) values[begin + e] = static_cast<T>(src[e]);
      });
    }
  });
  return values;
}

template std::vector<float> evaluate_operand<float>(const KernelProgram&, const KernelLaunch&,
                                                    const std::vector<const base::Buffer*>&,
                                                    const std::vector<double>&, int);
template std::vector<double> evaluate_operand<double>(const KernelProgram&, const KernelLaunch&,
                                                      const std::vector<const base::Buffer*>&,
                                                      const std::vector<double>&, int);
template std::vector<int64_t> evaluate_operand<int64_t>(const KernelProgram&, const KernelLaunch&,
                                                        const std::vector<const base::Buffer*>&,
                                                        const std::vector<double>&, int);

}  // namespace kiln::runtime::cpu
