// Arg-reductions along a short last dim compiled to one loop: k-means' nearest center.
//
// argmin(f(...), 1) over a [rows, k] space, where f is an f32 expression (what
// compiled_pointwise.cc compiles) of loads that each vary along one dim at most (a point's
// coordinate along the rows, a center's along k), is written as C++ that takes a vector of
// rows at a time: the values that vary along the rows only are computed once, then for each
// position j along k the rest, each lane keeping its best value and where it was. The [rows, k]
// values are never stored, and every one stays in registers. The first NaN, else the first
// best value, wins, as in the tile evaluator, and each value is computed with the same
// operations, so the positions are the evaluator's.
//
// Compiled when the space covers at least KILN_CPU_JIT_MIN_ELEMENTS positions, as for
// pointwise kernels (compiled_pointwise.h); everything else runs on the evaluator.
#ifndef KILN_RUNTIME_CPU_COMPILED_ARG_REDUCE_H_
#define KILN_RUNTIME_CPU_COMPILED_ARG_REDUCE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/buffer.h"
#include "jit/fusion/kernel_ir.h"

namespace kiln::runtime::cpu {

// The C++ source of arg-reduce `program` as a compiled loop, or nullopt when the generator
// does not compile it. Depends on the program alone, never on sizes.
std::optional<std::string> compiled_arg_reduce_source(const jit::KernelProgram& program);

// The name of the function the source defines.
inline constexpr char kCompiledArgReduceSymbol[] = "kiln_compiled_arg_reduce";

// Writes each row's position into `result` through the compiled loop, when the program is
// compiled (building it on first use) and this launch suits it; false when the caller must
// use the tile evaluator.
bool run_compiled_arg_reduce(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                             const std::vector<const base::Buffer*>& inputs,
                             const std::vector<double>& params, int64_t* result);

}  // namespace kiln::runtime::cpu

#endif  // KILN_RUNTIME_CPU_COMPILED_ARG_REDUCE_H_
