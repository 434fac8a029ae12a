// Devices behind one interface: a Backend runs a launch plan over a trace's inputs.
#ifndef KILN_RUNTIME_BACKEND_H_
#define KILN_RUNTIME_BACKEND_H_

#include <memory>
#include <vector>

#include "jit/launch_plan.h"
#include "kiln/dtype.h"
#include "runtime/buffer.h"

namespace kiln::runtime {

class Backend {
 public:
  virtual ~Backend() = default;
  // Runs `plan` over `args`; returns a fresh buffer for each of plan.outputs, in order.
  // Must not modify any node: the caller realizes the outputs once everything succeeded.
  virtual std::vector<std::shared_ptr<Buffer>> run(const jit::LaunchPlan& plan,
                                                   const jit::PlanArguments& args) = 0;

  // Runs `plan` for a compiled function, which replays the same plan with new arguments many
  // times: a backend may keep state per plan (the CUDA backend replays a captured graph).
  // Same contract as run().
  virtual std::vector<std::shared_ptr<Buffer>> replay(
      const std::shared_ptr<const jit::LaunchPlan>& plan, const jit::PlanArguments& args) {
    return run(*plan, args);
  }
};

// The backend that executes on device `d`; throws kiln::Error if it is not usable.
Backend& backend_for(Device d);

// The CPU device: runs each kernel's Kernel IR with the tiled, multithreaded executor.
std::unique_ptr<Backend> make_cpu_backend();

}  // namespace kiln::runtime

#endif  // KILN_RUNTIME_BACKEND_H_
