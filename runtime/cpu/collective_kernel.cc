// Collectives (kiln/distributed.h) on the CPU device: the bytes move through the group's
// communicator straight from and into the plan's buffers.
#include <vector>

#include "ops/collective.h"
#include "runtime/cpu/kernel_families.h"

namespace kiln::runtime::cpu {

void run_collective(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                    const std::vector<const base::Buffer*>& inputs,
                    const std::vector<base::Buffer*>& outputs) {
  // Every collective's operand has its result's dtype; recv's operand is not a buffer.
  const ops::ValueType in{launch.spaces[1], program.anchor_dtype};
  const ops::ValueType out{launch.spaces[0], program.anchor_dtype};
  const void* in_data = inputs.empty() ? nullptr : inputs[0]->data();
  comm::run_host_collective(ops::collective_call(program.anchor_op, program.anchor_attrs, in, out,
                                                 in_data, outputs[0]->data()));
}

}  // namespace kiln::runtime::cpu
