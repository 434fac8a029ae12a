// kiln::explain_plan and save_trace_folder: looking at a pending computation without running it.
#include "absl/strings/str_cat.h"
#include "jit/backend/backend.h"
#include "jit/eval/sync_dump.h"
#include "jit/fusion/launch_plan.h"
#include "jit/fusion/plan_cache.h"
#include "jit/fusion/trace.h"
#include "kiln/debug.h"
#include "kiln/error.h"

namespace kiln {

void save_trace_folder(const std::vector<Tensor>& outputs, const std::string& folder) {
  std::vector<detail::Node*> nodes;
  for (const Tensor& t : outputs) {
    if (!t.defined()) throw Error("[save_trace_folder] an output tensor is empty (undefined)");
    nodes.push_back(detail::TensorAccess::node(t).get());
  }
  absl::Status s = jit::write_trace_folder(folder, nodes);
  if (!s.ok()) throw Error(absl::StrCat("[save_trace_folder] ", s.message()));
}

std::string explain_plan(const std::vector<Tensor>& outputs, ExplainDetail detail) {
  std::vector<detail::Node*> targets;
  for (const Tensor& t : outputs) {
    if (!t.defined()) throw Error("[explain_plan] an output tensor is empty (undefined)");
    detail::Node* n = detail::TensorAccess::node(t).get();
    if (!n->realized()) targets.push_back(n);
  }
  if (targets.empty()) return "nothing to compute: every output is already computed\n";
  const jit::Trace trace = jit::build_trace(targets);
  const Device device = targets.front()->device;
  // The plan a sync would use: the cached one, or a new one that the sync will then reuse.
  bool hit = false;
  std::shared_ptr<const jit::LaunchPlan> plan = jit::find_or_build_plan(trace, device, &hit);
  // The device's own words on how it runs the plan (on CUDA: cuBLASLt or the generated kernel
  // for each matmul) end the plan's description. Asked here, not when the plan is built, so
  // planning does no device work.
  std::string out = plan->description + jit::describe_plan_on(device, *plan);
  if (detail == ExplainDetail::kPlan) return out;
  // The device source, rendered by the registry's renderer for dumps (CUDA C++), even on a
  // machine where that device cannot run.
  const jit::SourceRenderer* renderer =
      detail == ExplainDetail::kCuda ? jit::dump_source_renderer() : nullptr;
  for (size_t k = 0; k < plan->kernels.size(); ++k) {
    const jit::KernelProgram& program = *plan->kernels[k].program;
    absl::StrAppend(&out, "\n-- kernel ", k, ": ", program.name, " (Kernel IR)\n",
                    program.to_string());
    if (renderer != nullptr) {
      absl::StrAppend(&out, "\n-- kernel ", k, ": ", program.name, " (", renderer->language(),
                      ")\n", renderer->render(program));
    }
  }
  return out;
}

}  // namespace kiln
