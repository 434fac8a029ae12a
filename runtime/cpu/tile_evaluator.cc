// The tile evaluator (tile_evaluator.h): registers, the run over a space's instructions,
// the anchor's values read in place, stores, and the instructions that compute (parameters,
// casts, unary and binary ops, where, custom functions). Its leaves that read buffers are in
// tile_loads.cc, the per-op loops in elementwise_loops.cc and evaluate_operand in
// evaluate_operand.cc.
#include "runtime/cpu/tile_evaluator.h"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kiln/error.h"
#include "ops/custom_functions.h"
#include "ops/scalar_math.h"
#include "runtime/cpu/elementwise_loops.h"
#include "runtime/cpu/register_io.h"
#include "runtime/cpu/view_runs.h"

namespace kiln::runtime::cpu {
namespace {

using jit::Instr;
using jit::InstrKind;
using jit::KernelLaunch;
using jit::KernelProgram;
using ops::Shape;

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

void TileEvaluator::eval(int k, int64_t begin, int64_t n) {
  const Instr& in = program_.instrs[k];
  const RegisterClass c = register_class(in.dtype);
  switch (in.kind) {
    case InstrKind::kLoad:
      return eval_load(k, in, begin, n);
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

void TileEvaluator::eval_cast(int k, const Instr& in, int64_t n) {
  const DType from = program_.instrs[in.operands[0]].dtype;
  dispatch(register_class(from), [&](auto s) {
    using S = decltype(s);
    const S* a = regs_.get<S>(in.operands[0]);
    dispatch(register_class(in.dtype), [&](auto t) {
      using T = decltype(t);
      T* out = alloc<T>(k, n);
      if constexpr (std::is_same_v<S, float> && std::is_same_v<T, float>) {
        // Between the narrow floats and f32: round to the source, then to the target (what
        // convert does), one vectorizable loop each.
        std::copy(a, a + n, out);
        round_all(from, out, n);
        round_all(in.dtype, out, n);
        return;
      }
      if constexpr (!std::is_same_v<S, T> && std::is_floating_point_v<S> &&
                    std::is_floating_point_v<T>) {
        const auto wide = [](DType dt) { return dt == DType::F32 || dt == DType::F64; };
        if (wide(from) && wide(in.dtype)) {
          // Between f32 and f64 (an unrolled sum's terms): no rounding rule besides the
          // conversion's own, so one loop the compiler vectorizes.
          for (int64_t e = 0; e < n; ++e) out[e] = static_cast<T>(a[e]);
          return;
        }
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

}  // namespace kiln::runtime::cpu
