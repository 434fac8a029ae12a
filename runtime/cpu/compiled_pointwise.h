// Pointwise kernels compiled to one loop: the CPU code generator.
//
// The tile evaluator computes a fused kernel one instruction at a time over a tile, so every
// value makes a round trip through memory. For a large pointwise kernel, this writes the
// kernel as C++ instead: one loop over vectors in which each instruction is a line, values
// stay in registers, and each input is read and each output written once. The machine's C++
// compiler builds it (host_compiler.h). The math is Kiln's own (simd_math-inl.h, the
// evaluator's), so a compiled kernel computes the same bits as the evaluator.
//
// Compiled: kernels whose values are all f32, built from loads, scalar parameters, and the
// unary and binary ops the generator knows (compiled_pointwise.cc), either without an anchor
// or an update_slice (the loop computes the update and writes it into x's region). A load is
// read as consecutive values or as one value; a launch whose views are not row-major from
// offset 0 runs row by row, each row's pointers placed by the views' strides, when along
// every row each load steps by 1 (or by 0: one value per row) and the rows hold at least 32
// elements. Everything else, and every kernel when no compiler can be run, goes through the
// tile evaluator. A kernel is compiled when it covers at least KILN_CPU_JIT_MIN_ELEMENTS
// positions (default 262144): below that, the first build (a fraction of a second, once per
// machine) would not pay for itself.
#ifndef KILN_RUNTIME_CPU_COMPILED_POINTWISE_H_
#define KILN_RUNTIME_CPU_COMPILED_POINTWISE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/buffer.h"
#include "jit/fusion/kernel_ir.h"

namespace kiln::runtime::cpu {

// The C++ source of `program` as a compiled pointwise kernel, or nullopt when the generator
// does not compile it. Depends on the program alone, never on sizes.
std::optional<std::string> compiled_pointwise_source(const jit::KernelProgram& program);

// The name of the function the source defines.
inline constexpr char kCompiledPointwiseSymbol[] = "kiln_compiled_pointwise";

// Runs the kernel through its compiled loop when it is compiled (building it on first use)
// and this launch suits it; false when the caller must use the tile evaluator.
bool run_compiled_pointwise(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                            const std::vector<const base::Buffer*>& inputs,
                            const std::vector<base::Buffer*>& outputs,
                            const std::vector<double>& params);

// Runs an update_slice kernel through its compiled loop, when it is compiled and this launch
// suits it: row r of the update (along its last dim) is written into `out` (which already
// holds x) from element row_place(r) on. False when the caller must use the tile evaluator.
bool run_compiled_update_slice(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                               const std::vector<const base::Buffer*>& inputs,
                               const std::vector<double>& params,
                               const std::function<int64_t(int64_t)>& row_place, base::Buffer& out);

// The smallest kernel (positions) compiled: KILN_CPU_JIT_MIN_ELEMENTS unless a test set it.
int64_t compiled_pointwise_min_elements();
// For tests: compile kernels of at least `elements` positions (-1: back to the environment).
void set_compiled_pointwise_min_elements(int64_t elements);
// How many kernel launches in this process ran a compiled loop (pointwise, update_slice or
// arg-reduce: compiled_arg_reduce.h).
int64_t compiled_pointwise_runs();
// Whether this thread's last call to run a kernel through a compiled loop did (KILN_LOG=2
// says so on the kernel's line).
bool last_kernel_ran_compiled_loop();

}  // namespace kiln::runtime::cpu

#endif  // KILN_RUNTIME_CPU_COMPILED_POINTWISE_H_
