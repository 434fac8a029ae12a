// The CPU device: runs each kernel's Kernel IR with the tiled, multithreaded executor
// (kernel_executor.h), or as a loop compiled by the host compiler (compiled_pointwise.h).
#ifndef KILN_RUNTIME_CPU_CPU_BACKEND_H_
#define KILN_RUNTIME_CPU_CPU_BACKEND_H_

#include <memory>

#include "jit/backend/backend.h"

namespace kiln::runtime::cpu {

// The backend of the one CPU device.
std::unique_ptr<jit::Backend> make_cpu_backend();

// The compiled CPU kernels' libraries as bundles carry them (cpu_machine_code.cc).
std::shared_ptr<const jit::MachineCodeStore> cpu_machine_code_store();

}  // namespace kiln::runtime::cpu

#endif  // KILN_RUNTIME_CPU_CPU_BACKEND_H_
