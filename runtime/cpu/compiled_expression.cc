#include "runtime/cpu/compiled_expression.h"

#include <atomic>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "ops/op_catalog.h"
#include "runtime/cpu/simd_math.h"

namespace kiln::runtime::cpu {
namespace {

using jit::Instr;
using jit::InstrKind;
using ops::OpKind;

std::atomic<int64_t> runs{0};
thread_local bool last_ran_compiled = false;

// A case of unary_expression for each op whose f32 evaluator loop applies a vector function
// of simd_math-inl.h (the list in simd_math.h): a call of it.
#define KILN_VECTOR_CALL(Enum, name) \
  case OpKind::Enum:                 \
    return absl::StrCat(#name "_vec(d, ", x, ")");

// The vector expression of unary op `op` on value `x`, or "" when the generator has none.
// Each is the evaluator's f32 loop for the op (simd_math-inl.h, or the functor's IEEE
// operations), so the bits agree.
std::string unary_expression(OpKind op, const std::string& x) {
  switch (op) {
    KILN_SIMD_UNARY_VECTOR_OPS(KILN_VECTOR_CALL)
    case OpKind::Neg:
      return absl::StrCat("hn::Neg(", x, ")");
    case OpKind::Abs:
      return absl::StrCat("hn::Abs(", x, ")");
    case OpKind::Sqrt:
      return absl::StrCat("hn::Sqrt(", x, ")");
    case OpKind::Rsqrt:
      return absl::StrCat("hn::Div(hn::Set(d, 1.0f), hn::Sqrt(", x, "))");
    case OpKind::Reciprocal:
      return absl::StrCat("hn::Div(hn::Set(d, 1.0f), ", x, ")");
    case OpKind::Square:
      return absl::StrCat("hn::Mul(", x, ", ", x, ")");
    case OpKind::Relu:  // the evaluator's functor loop, whose bits relu_vec gives
      return absl::StrCat("relu_vec(d, ", x, ")");
    default:
      return "";
  }
}
#undef KILN_VECTOR_CALL

std::string binary_expression(OpKind op, const std::string& a, const std::string& b) {
  const char* function = nullptr;
  switch (op) {
    case OpKind::Add:
      function = "hn::Add";
      break;
    case OpKind::Sub:
      function = "hn::Sub";
      break;
    case OpKind::Mul:
      function = "hn::Mul";
      break;
    case OpKind::Div:
      function = "hn::Div";
      break;
    case OpKind::Maximum:
      function = "maximum_vec";
      break;
    case OpKind::Minimum:
      function = "minimum_vec";
      break;
    default:
      return "";
  }
  return absl::StrCat(function, "(", a, ", ", b, ")");
}

// Whether f64 op `op` is one the generator compiles: those the evaluator's f64 loops compute
// with IEEE operations alone (the functors of ops/scalar_math.inc), which Highway's vector
// operations round the same. The transcendental functions compute differently in f64.
bool exact_in_f64(OpKind op) {
  switch (op) {
    case OpKind::Neg:
    case OpKind::Abs:
    case OpKind::Sqrt:
    case OpKind::Rsqrt:
    case OpKind::Reciprocal:
    case OpKind::Square:
    case OpKind::Add:
    case OpKind::Sub:
    case OpKind::Mul:
    case OpKind::Div:
      return true;
    default:
      return false;
  }
}

}  // namespace

std::string value_expression(const Instr& in) {
  if (in.dtype != DType::F32 && in.dtype != DType::F64) return "";
  const bool op = in.kind == InstrKind::kUnary || in.kind == InstrKind::kBinary;
  if (in.dtype == DType::F64 && op && !exact_in_f64(in.op)) return "";
  switch (in.kind) {
    case InstrKind::kParam:
      return absl::StrCat("hn::Set(d, params[", in.param, "])");
    case InstrKind::kUnary:
      return unary_expression(in.op, absl::StrCat("v", in.operands[0]));
    case InstrKind::kBinary:
      return binary_expression(in.op, absl::StrCat("v", in.operands[0]),
                               absl::StrCat("v", in.operands[1]));
    default:
      return "";
  }
}

std::string value_line(const jit::KernelProgram& program, int k, const std::string& value) {
  const Instr& in = program.instrs[k];
  const char* what = in.kind == InstrKind::kLoad    ? "load"
                     : in.kind == InstrKind::kParam ? "param"
                                                    : ops::op_name(in.op);
  return absl::StrCat("  const auto v", k, " = ", value, ";  // %", k, " ", what, "\n");
}

std::string kernel_source(const jit::KernelProgram& program, const std::string& generator,
                          const std::string& functions, const std::string& signature,
                          const std::string& call, const std::string& value_type) {
  constexpr char kSource[] = R"(// Kiln compiled CPU kernel $NAME ($GENERATOR): the loop of
// $PROGRAM
// Built with the executor's vector math (runtime/cpu/simd_math-inl.h) included first.

HWY_BEFORE_NAMESPACE();
namespace kiln_compiled {
namespace hn = hwy::HWY_NAMESPACE;
using namespace kiln::runtime::cpu::HWY_NAMESPACE;  // the executor's math
$FUNCTIONS
}  // namespace kiln_compiled
HWY_AFTER_NAMESPACE();

extern "C" __attribute__((visibility("default"))) void $SIGNATURE {
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::ScalableTag<$VALUE> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = begin;
  for (; i + lanes <= end; i += lanes) kiln_compiled::$FULL;
  const hn::CappedTag<$VALUE, 1> one;  // the last positions, one at a time
  for (; i < end; ++i) kiln_compiled::$ONE;
}
)";
  return absl::StrReplaceAll(
      kSource,
      {{"$NAME", program.name},
       {"$GENERATOR", generator},
       {"$PROGRAM", absl::StrReplaceAll(absl::StripTrailingAsciiWhitespace(program.to_string()),
                                        {{"\n", "\n// "}})},
       {"$FUNCTIONS", functions},
       {"$SIGNATURE", signature},
       {"$VALUE", value_type},
       {"$FULL", absl::StrReplaceAll(call, {{"$TAG", "d"}})},
       {"$ONE", absl::StrReplaceAll(call, {{"$TAG", "one"}})}});
}

void note_compiled_loop(bool ran) {
  last_ran_compiled = ran;
  if (ran) ++runs;
}

int64_t compiled_loop_runs() { return runs.load(); }

bool last_launch_ran_compiled_loop() { return last_ran_compiled; }

}  // namespace kiln::runtime::cpu
