// KILN_DUMP=trace: each sync point writes a replayable folder
//   <KILN_DUMP_DIR>/sync-<pid>-<n>/trace.json      the pending trace (kiln.trace v1)
//   <KILN_DUMP_DIR>/sync-<pid>-<n>/inputs/*.npy    its realized inputs, by name
//   <KILN_DUMP_DIR>/sync-<pid>-<n>/expected/out*.npy  the outputs, once computed
// so `kiln replay trace.json --inputs inputs --out DIR` reproduces the sync.
// KILN_DUMP=plan adds plan.txt (kernels, their nodes, stored intermediates and why);
// KILN_DUMP=kernels adds kernels/<k>_<name>.txt, each kernel's program.
#ifndef KILN_JIT_EVAL_SYNC_DUMP_H_
#define KILN_JIT_EVAL_SYNC_DUMP_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "jit/fusion/launch_plan.h"
#include "jit/graph/node.h"

namespace kiln::jit {

// Writes `folder`/trace.json and `folder`/inputs/*.npy for the graph behind `outputs`.
absl::Status write_trace_folder(const std::string& folder,
                                const std::vector<detail::Node*>& outputs);

// Writes trace.json and inputs/; returns the folder. Failures to write are reported on
// stderr and never fail the sync.
std::string dump_sync_trace(const std::vector<detail::Node*>& outputs);
// Writes plan.txt and/or kernels/ (per KILN_DUMP) into *folder, made first if empty. plan.txt
// ends with what `device`'s backend says of how it runs the plan (Backend::describe_plan).
void dump_sync_plan(std::string* folder, const LaunchPlan& plan, Device device);
// KILN_RECORD_CUDA_DIR writes the CUDA source of every kernel a plan build adds to the kernel
// cache; tests that plan thousands of random kernels pause it after a sample (scripts/test.sh
// compiles what was recorded).
void set_cuda_recording_paused(bool paused);

// Writes expected/out<i>.npy for the realized outputs into `folder`.
void dump_sync_outputs(const std::string& folder, const std::vector<detail::Node*>& outputs);

}  // namespace kiln::jit

#endif  // KILN_JIT_EVAL_SYNC_DUMP_H_
