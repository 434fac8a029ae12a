#include "runtime/cpu/compiled_pointwise.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <functional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "base/thread_pool.h"
#include "kiln/dtype.h"
#include "runtime/cpu/compiled_expression.h"
#include "runtime/cpu/host_compiler.h"
#include "runtime/cpu/tile_evaluator.h"

namespace kiln::runtime::cpu {
namespace {

using jit::Instr;
using jit::InstrKind;
using jit::KernelProgram;

// The kernel's calling convention, for T its value type (f32 or f64): per load j a pointer to
// T, read at loads[j] + i (kRun) or loads[j][0] (kValue); per output a pointer to T, written
// at outputs[k] + i; the parameters in T; positions i in [begin, end).
using CompiledPointwise = void (*)(const void* const* loads, void* const* outputs,
                                   const void* params, int64_t begin, int64_t end);

// How the compiled loop reads a load: kRun reads consecutive values from its pointer on,
// kValue the one value its pointer points at (a scalar broadcast, or, run row by row, one
// value per row: a view broadcast along its last dim).
enum class LoadForm { kRun, kValue, kNone };

LoadForm load_form(const KernelProgram& program, int v) {
  const jit::ViewPattern& pattern = program.view_patterns[v];
  switch (pattern.access) {
    case jit::ViewAccess::kContiguous:
    case jit::ViewAccess::kStrided:  // read by rows, when the last dim's stride is 1
      return LoadForm::kRun;
    case jit::ViewAccess::kBroadcast: {
      const std::vector<int>& dims = pattern.broadcast_dims;
      const bool along_last = std::find(dims.begin(), dims.end(), pattern.rank - 1) != dims.end();
      return along_last ? LoadForm::kValue : LoadForm::kRun;
    }
    case jit::ViewAccess::kGathered:
      return LoadForm::kNone;
  }
  return LoadForm::kNone;
}

// The line computing instruction k into v<k>, or "" when the generator has none. Every value
// is of dtype `dt`. Loads are numbered in instruction order (`loads` counts them).
std::string statement(const KernelProgram& program, int space, DType dt, int k, int& loads) {
  const Instr& in = program.instrs[k];
  if (in.dtype != dt || in.space != space) return "";
  std::string value;
  switch (in.kind) {
    case InstrKind::kLoad: {
      if (program.input_dtypes[in.input] != dt) return "";
      const int j = loads++;
      switch (load_form(program, in.view)) {
        case LoadForm::kRun:
          value = absl::StrCat("hn::LoadU(d, static_cast<const T*>(loads[", j, "]) + i)");
          break;
        case LoadForm::kValue:
          value = absl::StrCat("hn::Set(d, static_cast<const T*>(loads[", j, "])[0])");
          break;
        case LoadForm::kNone:
          return "";
      }
      break;
    }
    default:
      value = value_expression(in);
  }
  return value.empty() ? "" : value_line(program, k, value);
}

constexpr char kPositions[] = R"(
// The kernel at positions [i, i + Lanes(d)): every value in registers.
template <class D>
HWY_INLINE void positions(D d, const void* const* loads, void* const* outputs,
                          const void* param_values, int64_t i) {
  using T = hn::TFromD<D>;
  [[maybe_unused]] const T* params = static_cast<const T*>(param_values);
$BODY}
)";

int64_t environment_min_elements() {
  int64_t elements = int64_t{1} << 18;
  if (const char* text = std::getenv("KILN_CPU_JIT_MIN_ELEMENTS"); text != nullptr) {
    if (!absl::SimpleAtoi(text, &elements)) elements = int64_t{1} << 18;
  }
  return elements;
}

std::atomic<int64_t> min_elements_override{-1};

// The compiled function of `program`, compiling it on first use; null when the generator
// does not compile it or the compiler failed.
CompiledPointwise function_for(const KernelProgram& program) {
  return reinterpret_cast<CompiledPointwise>(
      compiled_kernel_function(program, kCompiledPointwiseSymbol, compiled_pointwise_source));
}

// The space the compiled loop runs over: 0 for a pointwise kernel, 1 (the update) for an
// update_slice, whose one store is its anchor; -1 for every other kind of kernel.
int compute_space(const KernelProgram& program) {
  if (program.anchor == jit::AnchorKind::kNone) return program.space_ranks.size() == 1 ? 0 : -1;
  const bool stores_the_update = program.stores.size() == 1 && program.stores[0].output == 0 &&
                                 program.instrs[program.stores[0].value].kind == InstrKind::kAnchor;
  return program.anchor == jit::AnchorKind::kUpdateSlice && stores_the_update ? 1 : -1;
}

// Rows shorter than this run through the evaluator: a call per row would cost more than its
// lanes save.
constexpr int64_t kMinRowLength = 32;

// What the compiled function is called with, but for where each row starts: each load's
// buffer at its view's offset, with its view and form, and the parameters in the kernel's
// value type.
struct Arguments {
  int64_t element_size = 0;  // of the kernel's value type
  std::vector<const char*> loads;
  std::vector<const jit::ViewParams*> views;
  std::vector<LoadForm> forms;
  std::vector<float> params_f32;
  std::vector<double> params_f64;
  const void* params() const {
    return element_size == 4 ? static_cast<const void*>(params_f32.data()) : params_f64.data();
  }
};

Arguments arguments_of(const KernelProgram& program, const jit::KernelLaunch& launch,
                       const std::vector<const base::Buffer*>& inputs,
                       const std::vector<double>& params) {
  Arguments a;
  a.element_size = dtype_size(program.output_dtypes[0]);
  for (const Instr& in : program.instrs) {
    if (in.kind != InstrKind::kLoad) continue;
    const jit::ViewParams& view = launch.views[in.view];
    a.loads.push_back(inputs[in.input]->as<char>() + view.offset * a.element_size);
    a.views.push_back(&view);
    a.forms.push_back(load_form(program, in.view));
  }
  a.params_f32.assign(params.begin(), params.end());
  a.params_f64 = params;
  return a;
}

// Whether every load reads row-major from its buffer's start over the whole space (kRun) or
// one value (kValue), so the kernel runs as one flat range.
bool reads_flat(const Arguments& a, const ops::Shape& space) {
  for (size_t j = 0; j < a.loads.size(); ++j) {
    const bool one_value = a.forms[j] == LoadForm::kValue;
    int64_t row_major = 1;
    for (int d = static_cast<int>(space.size()) - 1; d >= 0; --d) {
      const int64_t expected = one_value ? 0 : row_major;
      if (space[d] > 1 && a.views[j]->strides[d] != expected) return false;
      row_major *= space[d];
    }
    if (!one_value && a.views[j]->offset != 0) return false;
  }
  return true;
}

// Whether the kernel can run row by row: rows long enough, and along each row every kRun load
// steps by 1 and every kValue load by 0. (A view reversed along its last dim, or transposed,
// does neither; one reversed along an outer dim does.)
bool reads_by_rows(const Arguments& a, const ops::Shape& space) {
  if (space.empty() || space.back() < kMinRowLength) return false;
  for (size_t j = 0; j < a.loads.size(); ++j) {
    const int64_t step = a.views[j]->strides.back();
    if (step != (a.forms[j] == LoadForm::kRun ? 1 : 0)) return false;
  }
  return true;
}

// Whether a launch of `program` over `positions` positions may run a compiled loop:
// compiled kernels on, a form the generator takes, and large enough. The launch's views are
// checked next, before anything is compiled.
bool worth_compiling(const KernelProgram& program, int64_t positions) {
  return host_compiler_enabled() && compute_space(program) >= 0 && positions > 0 &&
         positions >= compiled_pointwise_min_elements();
}

// Runs `function` over `space` as one range of positions, outputs contiguous.
void run_flat(CompiledPointwise function, const Arguments& a, const ops::Shape& space,
              const std::vector<char*>& outputs) {
  const int64_t total = ops::numel(space);
  const int64_t tiles = (total + kTile - 1) / kTile;
  const std::vector<const void*> loads(a.loads.begin(), a.loads.end());
  const std::vector<void*> out(outputs.begin(), outputs.end());
  base::parallel_for(tiles, 16, [&](int64_t t0, int64_t t1) {
    function(loads.data(), out.data(), a.params(), t0 * kTile, std::min(total, t1 * kTile));
  });
}

// Runs `function` over `space` a row (its last dim) at a time: each load starts where its
// view places the row, and every output at output_row(r) elements into its buffer. A long row
// is cut into segments, so that one row (a 1-D slice) still spreads over the cores.
void run_rows(CompiledPointwise function, const Arguments& a, const ops::Shape& space,
              const std::vector<char*>& outputs,
              const std::function<int64_t(int64_t)>& output_row) {
  const int rank = static_cast<int>(space.size());
  const int64_t length = space[rank - 1], rows = ops::numel(space) / length;
  const int64_t segment = std::min<int64_t>(length, 8 * kTile);
  const int64_t segments = (length + segment - 1) / segment;
  const int64_t grain = std::max<int64_t>(1, 16384 / segment);
  base::parallel_for(rows * segments, grain, [&](int64_t t0, int64_t t1) {
    std::vector<const void*> loads(a.loads.size());
    std::vector<void*> row_outputs(outputs.size());
    int64_t placed = -1;  // the row whose pointers `loads` and `row_outputs` hold
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t r = t / segments, begin = t % segments * segment;
      if (r != placed) {
        for (size_t j = 0; j < loads.size(); ++j) {
          int64_t at = 0;
          for (int64_t d = rank - 2, rest = r; d >= 0; --d) {
            at += rest % space[d] * a.views[j]->strides[d];
            rest /= space[d];
          }
          loads[j] = a.loads[j] + at * a.element_size;
        }
        const int64_t place = output_row(r) * a.element_size;
        for (size_t k = 0; k < outputs.size(); ++k) row_outputs[k] = outputs[k] + place;
        placed = r;
      }
      function(loads.data(), row_outputs.data(), a.params(), begin,
               std::min(length, begin + segment));
    }
  });
}

}  // namespace

std::optional<std::string> compiled_pointwise_source(const KernelProgram& program) {
  const int space = compute_space(program);
  if (space < 0 || program.output_dtypes.empty()) return std::nullopt;
  const DType dt = program.output_dtypes[0];  // every value's: f32 or f64
  if (dt != DType::F32 && dt != DType::F64) return std::nullopt;
  for (DType out : program.output_dtypes) {
    if (out != dt) return std::nullopt;
  }
  std::string body;
  int loads = 0;
  for (int k = 0; k < static_cast<int>(program.instrs.size()); ++k) {
    if (space == 1 && program.instrs[k].kind == InstrKind::kAnchor) continue;  // written below
    const std::string line = statement(program, space, dt, k, loads);
    if (line.empty()) return std::nullopt;
    body += line;
  }
  if (space == 1) {
    absl::StrAppend(&body, "  hn::StoreU(v", program.anchor_operands[0],
                    ", d, static_cast<T*>(outputs[0]) + i);  // the update, into x's region\n");
  }
  for (const jit::Store& s : program.stores) {
    if (space == 0) {
      absl::StrAppend(&body, "  hn::StoreU(v", s.value, ", d, static_cast<T*>(outputs[", s.output,
                      "]) + i);\n");
    }
  }
  return kernel_source(program, "runtime/cpu/compiled_pointwise.cc",
                       absl::StrReplaceAll(kPositions, {{"$BODY", body}}),
                       "kiln_compiled_pointwise(const void* const* loads, void* const* outputs, "
                       "const void* params, int64_t begin, int64_t end)",
                       "positions($TAG, loads, outputs, params, i)",
                       dt == DType::F32 ? "float" : "double");
}

int64_t compiled_pointwise_min_elements() {
  static const int64_t from_environment = environment_min_elements();
  const int64_t set = min_elements_override.load();
  return set >= 0 ? set : from_environment;
}

void set_compiled_pointwise_min_elements(int64_t elements) { min_elements_override = elements; }

int64_t compiled_pointwise_runs() { return compiled_loop_runs(); }

bool last_kernel_ran_compiled_loop() { return last_launch_ran_compiled_loop(); }

bool run_compiled_pointwise(const KernelProgram& program, const jit::KernelLaunch& launch,
                            const std::vector<const base::Buffer*>& inputs,
                            const std::vector<base::Buffer*>& outputs,
                            const std::vector<double>& params) {
  note_compiled_loop(false);
  if (program.anchor != jit::AnchorKind::kNone) return false;
  const ops::Shape& space = launch.spaces[0];
  if (!worth_compiling(program, ops::numel(space))) return false;
  const Arguments a = arguments_of(program, launch, inputs, params);
  const bool flat = reads_flat(a, space);
  if (!flat && !reads_by_rows(a, space)) return false;
  const CompiledPointwise function = function_for(program);
  if (function == nullptr) return false;
  std::vector<char*> output_pointers;
  output_pointers.reserve(outputs.size());
  for (base::Buffer* out : outputs) output_pointers.push_back(out->as<char>());
  if (flat) {
    run_flat(function, a, space, output_pointers);
  } else {
    const int64_t length = space.back();
    run_rows(function, a, space, output_pointers, [length](int64_t r) { return r * length; });
  }
  note_compiled_loop(true);
  return true;
}

bool run_compiled_update_slice(const KernelProgram& program, const jit::KernelLaunch& launch,
                               const std::vector<const base::Buffer*>& inputs,
                               const std::vector<double>& params,
                               const std::function<int64_t(int64_t)>& row_place,
                               base::Buffer& out) {
  note_compiled_loop(false);
  if (program.anchor != jit::AnchorKind::kUpdateSlice) return false;
  const ops::Shape& update = launch.spaces[1];
  if (!worth_compiling(program, ops::numel(update))) return false;
  const Arguments a = arguments_of(program, launch, inputs, params);
  if (!reads_by_rows(a, update)) return false;
  const CompiledPointwise function = function_for(program);
  if (function == nullptr) return false;
  run_rows(function, a, update, {out.as<char>()}, row_place);
  note_compiled_loop(true);
  return true;
}

}  // namespace kiln::runtime::cpu
