#include "runtime/cpu/compiled_pointwise.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "base/cache_dir.h"
#include "base/thread_pool.h"
#include "ops/op_catalog.h"
#include "runtime/cpu/host_compiler.h"
#include "runtime/cpu/simd_math.h"
#include "runtime/cpu/simd_math_inl_source.h"
#include "runtime/cpu/tile_evaluator.h"

namespace kiln::runtime::cpu {
namespace {

using jit::Instr;
using jit::InstrKind;
using jit::KernelProgram;
using ops::OpKind;

// f(in[j] + i, ...) per load j, f(p[k]) per parameter: the kernel's calling convention.
using CompiledPointwise = void (*)(const float* const* loads, float* const* outputs,
                                   const float* params, int64_t begin, int64_t end);

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

// Whether view `v` reads one value for every position (a scalar broadcast).
bool reads_one_value(const KernelProgram& program, int v) {
  const jit::ViewPattern& pattern = program.view_patterns[v];
  return pattern.access == jit::ViewAccess::kBroadcast &&
         static_cast<int>(pattern.broadcast_dims.size()) == pattern.rank;
}

// The statement computing instruction k into v<k>, or "" when the generator has none.
// Loads are numbered in instruction order (`loads` counts them).
std::string statement(const KernelProgram& program, int k, int& loads) {
  const Instr& in = program.instrs[k];
  if (in.dtype != DType::F32 || in.space != 0) return "";
  const std::string v = absl::StrCat("v", k);
  std::string value;
  switch (in.kind) {
    case InstrKind::kLoad: {
      if (program.input_dtypes[in.input] != DType::F32) return "";
      const int j = loads++;
      if (program.view_patterns[in.view].access == jit::ViewAccess::kContiguous) {
        value = absl::StrCat("hn::LoadU(d, loads[", j, "] + i)");
      } else if (reads_one_value(program, in.view)) {
        value = absl::StrCat("hn::Set(d, loads[", j, "][0])");
      } else {
        return "";
      }
      break;
    }
    case InstrKind::kParam:
      value = absl::StrCat("hn::Set(d, params[", in.param, "])");
      break;
    case InstrKind::kUnary:
      value = unary_expression(in.op, absl::StrCat("v", in.operands[0]));
      break;
    case InstrKind::kBinary:
      value = binary_expression(in.op, absl::StrCat("v", in.operands[0]),
                                absl::StrCat("v", in.operands[1]));
      break;
    default:
      return "";
  }
  if (value.empty()) return "";
  const char* what = in.kind == InstrKind::kLoad    ? "load"
                     : in.kind == InstrKind::kParam ? "param"
                                                    : ops::op_name(in.op);
  return absl::StrCat("  const auto ", v, " = ", value, ";  // %", k, " ", what, "\n");
}

constexpr char kKernelTemplate[] = R"(
HWY_BEFORE_NAMESPACE();
namespace kiln_compiled {
namespace hn = hwy::HWY_NAMESPACE;
using namespace kiln::runtime::cpu::HWY_NAMESPACE;  // the executor's math

// The kernel at positions [i, i + Lanes(d)): every value in registers.
template <class D>
HWY_INLINE void positions(D d, const float* const* loads, float* const* outputs,
                          const float* params, int64_t i) {
$BODY}

}  // namespace kiln_compiled
HWY_AFTER_NAMESPACE();

extern "C" __attribute__((visibility("default"))) void kiln_compiled_pointwise(
    const float* const* loads, float* const* outputs, const float* params, int64_t begin,
    int64_t end) {
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = begin;
  for (; i + lanes <= end; i += lanes) kiln_compiled::positions(d, loads, outputs, params, i);
  const hn::CappedTag<float, 1> one;  // the last positions, one at a time
  for (; i < end; ++i) kiln_compiled::positions(one, loads, outputs, params, i);
}
)";

int64_t environment_min_elements() {
  int64_t elements = int64_t{1} << 20;
  if (const char* text = std::getenv("KILN_CPU_JIT_MIN_ELEMENTS"); text != nullptr) {
    if (!absl::SimpleAtoi(text, &elements)) elements = int64_t{1} << 20;
  }
  return elements;
}

std::atomic<int64_t> min_elements_override{-1};
std::atomic<int64_t> runs{0};
thread_local bool last_ran_compiled = false;

// The compiled function of `program`, compiling it on first use; null when the generator
// does not compile it or the compiler failed (said once on stderr).
CompiledPointwise function_for(const KernelProgram& program) {
  static std::mutex mutex;
  static auto* functions = new absl::flat_hash_map<std::string, CompiledPointwise>();
  const std::string text = program.to_string();
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = functions->find(text); it != functions->end()) return it->second;
  }
  CompiledPointwise function = nullptr;
  if (std::optional<std::string> source = compiled_pointwise_source(program)) {
    absl::StatusOr<void*> compiled =
        compiled_function(kSimdMathInlSource, *source, kCompiledPointwiseSymbol);
    if (compiled.ok()) {
      function = reinterpret_cast<CompiledPointwise>(*compiled);
    } else if (!base::reported_on_stderr(compiled.status())) {  // a refused cache file was said
      static std::once_flag said;
      std::call_once(said, [&] {
        std::fprintf(stderr, "kiln: %s; the tile evaluator runs such kernels instead\n",
                     std::string(compiled.status().message()).c_str());
      });
    }
  }
  std::lock_guard<std::mutex> lock(mutex);
  functions->emplace(text, function);
  return function;
}

// Whether the launch's views are what the program's patterns promise: contiguous loads
// row-major from offset 0, broadcast loads one value.
bool launch_suits(const KernelProgram& program, const jit::KernelLaunch& launch) {
  const ops::Shape& space = launch.spaces[0];
  for (const Instr& in : program.instrs) {
    if (in.kind != InstrKind::kLoad) continue;
    const jit::ViewParams& view = launch.views[in.view];
    const bool one_value = reads_one_value(program, in.view);
    int64_t row_major = 1;
    for (int d = static_cast<int>(space.size()) - 1; d >= 0; --d) {
      const int64_t expected = one_value ? 0 : row_major;
      if (space[d] > 1 && view.strides[d] != expected) return false;
      row_major *= space[d];
    }
    if (!one_value && view.offset != 0) return false;
  }
  return true;
}

}  // namespace

std::optional<std::string> compiled_pointwise_source(const KernelProgram& program) {
  if (program.anchor != jit::AnchorKind::kNone || program.space_ranks.size() != 1) {
    return std::nullopt;
  }
  for (DType dt : program.output_dtypes) {
    if (dt != DType::F32) return std::nullopt;
  }
  std::string body;
  int loads = 0;
  for (int k = 0; k < static_cast<int>(program.instrs.size()); ++k) {
    const std::string line = statement(program, k, loads);
    if (line.empty()) return std::nullopt;
    body += line;
  }
  for (const jit::Store& s : program.stores) {
    absl::StrAppend(&body, "  hn::StoreU(v", s.value, ", d, outputs[", s.output, "] + i);\n");
  }
  const std::string program_text = absl::StrReplaceAll(program.to_string(), {{"\n", "\n// "}});
  return absl::StrCat("// Kiln compiled CPU kernel ", program.name,
                      " (runtime/cpu/compiled_pointwise.cc): the loop of\n// ", program_text,
                      "\n// Built with the executor's vector math (runtime/cpu/simd_math-inl.h) "
                      "included first.\n",
                      absl::StrReplaceAll(kKernelTemplate, {{"$BODY", body}}));
}

int64_t compiled_pointwise_min_elements() {
  static const int64_t from_environment = environment_min_elements();
  const int64_t set = min_elements_override.load();
  return set >= 0 ? set : from_environment;
}

void set_compiled_pointwise_min_elements(int64_t elements) { min_elements_override = elements; }

int64_t compiled_pointwise_runs() { return runs.load(); }

bool last_kernel_ran_compiled_loop() { return last_ran_compiled; }

bool run_compiled_pointwise(const KernelProgram& program, const jit::KernelLaunch& launch,
                            const std::vector<const base::Buffer*>& inputs,
                            const std::vector<base::Buffer*>& outputs,
                            const std::vector<double>& params) {
  last_ran_compiled = false;
  if (!host_compiler_enabled() || program.anchor != jit::AnchorKind::kNone) return false;
  const int64_t total = ops::numel(launch.spaces[0]);
  if (total == 0 || total < compiled_pointwise_min_elements()) return false;
  if (!launch_suits(program, launch)) return false;
  const CompiledPointwise function = function_for(program);
  if (function == nullptr) return false;
  std::vector<const float*> load_pointers;
  for (const Instr& in : program.instrs) {
    if (in.kind != InstrKind::kLoad) continue;
    load_pointers.push_back(inputs[in.input]->as<float>() + launch.views[in.view].offset);
  }
  std::vector<float*> output_pointers;
  output_pointers.reserve(outputs.size());
  for (base::Buffer* out : outputs) output_pointers.push_back(out->as<float>());
  std::vector<float> float_params(params.size());
  for (size_t k = 0; k < params.size(); ++k) float_params[k] = static_cast<float>(params[k]);
  const int64_t tiles = (total + kTile - 1) / kTile;
  base::parallel_for(tiles, 16, [&](int64_t t0, int64_t t1) {
    function(load_pointers.data(), output_pointers.data(), float_params.data(), t0 * kTile,
             std::min(total, t1 * kTile));
  });
  ++runs;
  last_ran_compiled = true;
  return true;
}

}  // namespace kiln::runtime::cpu
