#include "runtime/cpu/compiled_arg_reduce.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "base/thread_pool.h"
#include "runtime/cpu/compiled_expression.h"
#include "runtime/cpu/compiled_pointwise.h"
#include "runtime/cpu/host_compiler.h"
#include "runtime/cpu/tile_evaluator.h"

namespace kiln::runtime::cpu {
namespace {

using jit::Instr;
using jit::InstrKind;
using jit::KernelProgram;

// Per load j its buffer at the view's offset and the one stride it moves by (along the rows
// or along k); each row's position into result.
using CompiledArgReduce = void (*)(const float* const* loads, const int64_t* steps,
                                   const float* params, int64_t begin, int64_t end, int64_t k,
                                   int64_t* result);

// Along which dim of the [rows, k] space a load moves: kRows (a point's coordinate, the same
// for every j), kAlongK (a center's, the same for every row), kNeither (one value), or
// kBoth, which the generator does not compile.
enum class Moves { kRows, kAlongK, kNeither, kBoth };

Moves load_moves(const KernelProgram& program, int view) {
  const jit::ViewPattern& pattern = program.view_patterns[view];
  if (pattern.access != jit::ViewAccess::kBroadcast) return Moves::kBoth;
  const std::vector<int>& dims = pattern.broadcast_dims;
  if (dims.size() == 2) return Moves::kNeither;
  return dims[0] == 1 ? Moves::kRows : Moves::kAlongK;
}

// Whether the generator takes the program's form: an argmin or argmax along dim 1 of a
// rank-2 space, its operand an f32 value of space 1.
bool takes_form(const KernelProgram& program) {
  const bool arg =
      program.anchor == jit::AnchorKind::kArgReduce &&
      (program.anchor_op == ops::OpKind::Argmin || program.anchor_op == ops::OpKind::Argmax);
  return arg && program.space_ranks.size() == 2 && program.space_ranks[1] == 2 &&
         program.anchor_attrs.axis == 1 && program.anchor_dtype == DType::I64 &&
         program.instrs[program.anchor_operands[0]].dtype == DType::F32;
}

constexpr char kRows[] = R"(
// Lanes of rows [i, i + Lanes(d)) of a load that moves along the rows by `step`.
template <class D>
HWY_INLINE hn::Vec<D> rows_of(D d, const float* p, int64_t step) {
  if (step == 1) return hn::LoadU(d, p);
  HWY_ALIGN float lanes[hn::MaxLanes(d)];
  for (size_t l = 0; l < hn::Lanes(d); ++l) lanes[l] = p[static_cast<int64_t>(l) * step];
  return hn::Load(d, lanes);
}

// Rows [i, i + Lanes(d)): the position of each one's $BEST value along k.
template <class D>
HWY_INLINE void rows(D d, const float* const* loads, const int64_t* steps, const float* params,
                     int64_t i, int64_t k, int64_t* result) {
  const hn::RebindToSigned<D> di;
$ROWS  auto best = hn::Set(d, $START);
  auto best_at = hn::Zero(di);
  for (int64_t j = 0; j < k; ++j) {
$ALONG_K    // A NaN wins over any number, and the first of equal values stays.
    const auto take = hn::Or(hn::$COMPARE(v$OPERAND, best),
                             hn::AndNot(hn::IsNaN(best), hn::IsNaN(v$OPERAND)));
    best = hn::IfThenElse(take, v$OPERAND, best);
    best_at = hn::IfThenElse(hn::RebindMask(di, take), hn::Set(di, static_cast<int32_t>(j)),
                             best_at);
  }
  HWY_ALIGN int32_t at[hn::MaxLanes(di)];
  hn::Store(best_at, di, at);
  for (size_t l = 0; l < hn::Lanes(d); ++l) result[i + static_cast<int64_t>(l)] = at[l];
}
)";

// The generated lines: those of values that move along the rows only (computed once per
// vector of rows) and those that move along k (computed for each j). Empty strings when the
// generator does not compile the program.
struct Body {
  std::string rows, along_k;
};

std::optional<Body> body_of(const KernelProgram& program) {
  Body body;
  std::vector<bool> moves_along_k(program.instrs.size(), false);
  int loads = 0;
  for (int k = 0; k < static_cast<int>(program.instrs.size()); ++k) {
    const Instr& in = program.instrs[k];
    if (in.space == 0) continue;  // the anchor and its epilogue, which the evaluator runs
    if (in.space != 1 || in.dtype != DType::F32) return std::nullopt;
    std::string value;
    switch (in.kind) {
      case InstrKind::kLoad: {
        if (program.input_dtypes[in.input] != DType::F32) return std::nullopt;
        const int j = loads++;
        switch (load_moves(program, in.view)) {
          case Moves::kRows:
            value = absl::StrCat("rows_of(d, loads[", j, "] + i * steps[", j, "], steps[", j, "])");
            break;
          case Moves::kAlongK:
            value = absl::StrCat("hn::Set(d, loads[", j, "][j * steps[", j, "]])");
            moves_along_k[k] = true;
            break;
          case Moves::kNeither:
            value = absl::StrCat("hn::Set(d, loads[", j, "][0])");
            break;
          case Moves::kBoth:
            return std::nullopt;
        }
        break;
      }
      default:
        value = value_expression(in);
        for (int operand : in.operands) {
          if (operand >= 0 && moves_along_k[operand]) moves_along_k[k] = true;
        }
    }
    if (value.empty()) return std::nullopt;
    const std::string line = value_line(program, k, value);
    if (moves_along_k[k]) {
      absl::StrAppend(&body.along_k, "  ", line);
    } else {
      body.rows += line;
    }
  }
  return body;
}

// The steps the compiled function is called with: per load, its view's stride along the dim
// it moves along; nullopt when a view also moves along the other (its pattern says it does
// not, so this only guards the cached source against a launch it was not written for).
std::optional<std::vector<int64_t>> steps_of(const KernelProgram& program,
                                             const jit::KernelLaunch& launch) {
  const ops::Shape& space = launch.spaces[1];
  std::vector<int64_t> steps;
  for (const Instr& in : program.instrs) {
    if (in.kind != InstrKind::kLoad || in.space != 1) continue;
    const std::vector<int64_t>& strides = launch.views[in.view].strides;
    const Moves moves = load_moves(program, in.view);
    const bool along_rows = moves == Moves::kRows, along_k = moves == Moves::kAlongK;
    if ((!along_rows && space[0] > 1 && strides[0] != 0) ||
        (!along_k && space[1] > 1 && strides[1] != 0)) {
      return std::nullopt;
    }
    steps.push_back(along_rows ? strides[0] : along_k ? strides[1] : 0);
  }
  return steps;
}

}  // namespace

std::optional<std::string> compiled_arg_reduce_source(const KernelProgram& program) {
  if (!takes_form(program)) return std::nullopt;
  const std::optional<Body> body = body_of(program);
  if (!body) return std::nullopt;
  const bool argmin = program.anchor_op == ops::OpKind::Argmin;
  const std::string functions =
      absl::StrReplaceAll(kRows, {{"$ROWS", body->rows},
                                  {"$ALONG_K", body->along_k},
                                  {"$BEST", argmin ? "smallest" : "largest"},
                                  {"$START", argmin ? "HUGE_VALF" : "-HUGE_VALF"},
                                  {"$COMPARE", argmin ? "Lt" : "Gt"},
                                  {"$OPERAND", absl::StrCat(program.anchor_operands[0])}});
  return kernel_source(program, "runtime/cpu/compiled_arg_reduce.cc", functions,
                       "kiln_compiled_arg_reduce(const float* const* loads, const int64_t* steps, "
                       "const float* params, int64_t begin, int64_t end, int64_t k, "
                       "int64_t* result)",
                       "rows($TAG, loads, steps, params, i, k, result)", "float");
}

bool run_compiled_arg_reduce(const KernelProgram& program, const jit::KernelLaunch& launch,
                             const std::vector<const base::Buffer*>& inputs,
                             const std::vector<double>& params, int64_t* result) {
  note_compiled_loop(false);
  if (!host_compiler_enabled() || !takes_form(program)) return false;
  const ops::Shape& space = launch.spaces[1];
  const int64_t positions = ops::numel(space);
  if (positions == 0 || positions < compiled_pointwise_min_elements() ||
      space[1] > std::numeric_limits<int32_t>::max()) {
    return false;
  }
  const std::optional<std::vector<int64_t>> steps = steps_of(program, launch);
  if (!steps) return false;
  const auto function = reinterpret_cast<CompiledArgReduce>(
      compiled_kernel_function(program, kCompiledArgReduceSymbol, compiled_arg_reduce_source));
  if (function == nullptr) return false;
  std::vector<const float*> loads;
  for (const Instr& in : program.instrs) {
    if (in.kind != InstrKind::kLoad || in.space != 1) continue;
    loads.push_back(inputs[in.input]->as<float>() + launch.views[in.view].offset);
  }
  const std::vector<float> float_params(params.begin(), params.end());
  const int64_t rows = space[0], k = space[1];
  const int64_t rows_per_chunk = std::max<int64_t>(64, kTile / std::max<int64_t>(1, k));
  base::parallel_for((rows + rows_per_chunk - 1) / rows_per_chunk, 1, [&](int64_t c0, int64_t c1) {
    function(loads.data(), steps->data(), float_params.data(), c0 * rows_per_chunk,
             std::min(rows, c1 * rows_per_chunk), k, result);
  });
  note_compiled_loop(true);
  return true;
}

}  // namespace kiln::runtime::cpu
