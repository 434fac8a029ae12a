// What the CPU code generators share (compiled_pointwise.cc, compiled_arg_reduce.cc): the
// vector expression of each op they compile, the line that computes one instruction, and the
// cache of compiled functions per Kernel IR program.
//
// A generated kernel is C++ over Highway vectors (`d` is the vector tag, `hn` Highway's
// namespace) with the executor's own math (simd_math-inl.h) in scope, so each op computes the
// tile evaluator's bits.
#ifndef KILN_RUNTIME_CPU_COMPILED_EXPRESSION_H_
#define KILN_RUNTIME_CPU_COMPILED_EXPRESSION_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "jit/fusion/kernel_ir.h"

namespace kiln::runtime::cpu {

// The vector expression of instruction `in`, a parameter (params[p] in every lane) or a
// unary or binary op on values v<operand>, in f32, or in f64 for the ops the evaluator
// computes with IEEE operations alone (add, sub, mul, div, neg, abs, sqrt, rsqrt,
// reciprocal, square); "" when no generator compiles it.
std::string value_expression(const jit::Instr& in);

// "  const auto v<k> = <value>;  // %<k> <what>": the line computing instruction k.
std::string value_line(const jit::KernelProgram& program, int k, const std::string& value);

// A generated kernel's whole source: a head naming the kernel, the generator that wrote it
// (`generator`, its file) and its program (as comments); `functions`, templates over the
// vector tag `D`, inside Highway's per-target namespace with `hn` and the executor's math in
// scope; then the extern "C" function `signature` (its parameters include int64_t begin and
// end), which runs `call` (in which $TAG names the tag) for each vector of positions i in
// [begin, end) and then for each position left, one at a time, over lanes of `value_type`
// ("float" or "double").
std::string kernel_source(const jit::KernelProgram& program, const std::string& generator,
                          const std::string& functions, const std::string& signature,
                          const std::string& call, const std::string& value_type);

// The address of `symbol` in the source `generate(program)` gives (host_compiler.h), kept
// per program and symbol; null while it is not compiled yet (compiled_kernel_cache.h says
// when that happens), when `generate` gives nothing, or when the compiler failed (said once
// on stderr). The tile evaluator runs the kernel whenever it is null: the same bits.
// Defined in compiled_kernel_cache.cc.
void* compiled_kernel_function(
    const jit::KernelProgram& program, const std::string& symbol,
    const std::function<std::optional<std::string>(const jit::KernelProgram&)>& generate);

// Notes that a kernel launch ran through a compiled loop (`ran`) or through the evaluator:
// the counts compiled_pointwise_runs and last_kernel_ran_compiled_loop report
// (compiled_pointwise.h).
void note_compiled_loop(bool ran);
int64_t compiled_loop_runs();
bool last_launch_ran_compiled_loop();

}  // namespace kiln::runtime::cpu

#endif  // KILN_RUNTIME_CPU_COMPILED_EXPRESSION_H_
