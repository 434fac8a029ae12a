// Launch plans as JSON, both directions: the plans a compiled bundle holds (docs/bundles.md).
//
// A plan's kernels are Kernel IR programs (kernel_ir.h), written once each in a program table
// and named by their index from the plans that run them, so a bundle with many signatures
// holds each kernel once. Reading checks the structure executors rely on: every index a plan or
// program holds against what it indexes (instructions before their users and in their space,
// input, view and parameter slots, spaces, plan buffers), operand counts per kind, the data
// flow of the plan. It does not check what strides and offsets address (docs/bundles.md).
#ifndef KILN_JIT_FORMATS_PLAN_FORMAT_H_
#define KILN_JIT_FORMATS_PLAN_FORMAT_H_

#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "absl/status/statusor.h"
#include "jit/fusion/kernel_ir.h"
#include "jit/fusion/launch_plan.h"

namespace kiln::jit {

nlohmann::json program_to_json(const KernelProgram& program);
absl::StatusOr<KernelProgram> program_from_json(const nlohmann::json& j);

// `program_index` gives the program table's index of each kernel's program.
nlohmann::json plan_to_json(const LaunchPlan& plan, const std::vector<int>& program_index);
absl::StatusOr<LaunchPlan> plan_from_json(
    const nlohmann::json& j, const std::vector<std::shared_ptr<const KernelProgram>>& programs);

}  // namespace kiln::jit

#endif  // KILN_JIT_FORMATS_PLAN_FORMAT_H_
