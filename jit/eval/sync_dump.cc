#include "jit/eval/sync_dump.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/atomic_file.h"
#include "base/cache_dir.h"
#include "base/env_options.h"
#include "jit/backend/backend.h"
#include "jit/formats/npy_file.h"
#include "jit/formats/trace_export.h"

namespace kiln::jit {
namespace {

void report(const std::string& what) {
  std::fprintf(stderr, "kiln: KILN_DUMP: %s\n", what.c_str());
}

// A fresh folder name under KILN_DUMP_DIR for this sync point: unique per process and call.
std::string new_folder() {
  static std::atomic<int> sequence{0};
  return absl::StrFormat("%s/sync-%d-%06d", base::env_options().dump_dir,
                         static_cast<int>(::getpid()), sequence++);
}

std::atomic<bool> recording_paused{false};

// KILN_RECORD_CUDA_DIR: every new program's CUDA source (the registry's renderer for dumps),
// one file each, named by a hash of its text that every process computes alike (absl::Hash
// is seeded per process), so the test processes that plan the same kernel write one file and
// `kiln compile-cuda DIR` compiles everything a run planned once (scripts/test.sh does).
void record_cuda_source(const KernelProgram& program) {
  const jit::SourceRenderer* renderer = jit::dump_source_renderer();
  if (renderer == nullptr) return;
  const std::string source = renderer->render(program);
  const std::string dir = base::env_options().record_cuda_dir;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string path = absl::StrCat(dir, "/", program.name, "_", base::cache_file_stem(source),
                                        renderer->file_extension());
  if (std::filesystem::exists(path, ec)) return;
  (void)base::write_file_atomically(path, [&](std::ostream& out) { out << source; });
}

}  // namespace

absl::Status write_trace_folder(const std::string& folder,
                                const std::vector<detail::Node*>& outputs) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(fs::path(folder) / "inputs", ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", folder, ": ", ec.message()));
  TraceExport trace = export_trace(outputs);
  absl::Status s =
      base::write_file_atomically(absl::StrCat(folder, "/trace.json"),
                                  [&](std::ostream& out) { out << trace_json_text(trace.json); });
  for (const TraceExport::Input& input : trace.inputs) {
    if (!s.ok()) break;
    s = write_npy(absl::StrCat(folder, "/inputs/", input.name, ".npy"), input.type, *input.data);
  }
  return s;
}

std::string dump_sync_trace(const std::vector<detail::Node*>& outputs) {
  std::string folder = new_folder();
  absl::Status s = write_trace_folder(folder, outputs);
  if (!s.ok()) report(std::string(s.message()));
  return folder;
}

void dump_sync_plan(std::string* folder, const LaunchPlan& plan, Device device) {
  namespace fs = std::filesystem;
  if (folder->empty()) *folder = new_folder();
  std::error_code ec;
  fs::create_directories(fs::path(*folder) / "kernels", ec);
  if (ec) {
    report(absl::StrCat("cannot create ", *folder, ": ", ec.message()));
    return;
  }
  if (base::env_options().dump_plan) {
    std::ofstream(fs::path(*folder) / "plan.txt")
        << plan.description << jit::describe_plan_on(device, plan);
  }
  if (!base::env_options().dump_kernels) return;
  // Each kernel's device source too (CUDA C++), whether or not that device can run here.
  const jit::SourceRenderer* renderer = jit::dump_source_renderer();
  for (size_t k = 0; k < plan.kernels.size(); ++k) {
    const PlannedKernel& pk = plan.kernels[k];
    std::ofstream(fs::path(*folder) / "kernels" / absl::StrCat(k, "_", pk.program->name, ".txt"))
        << pk.program->to_string();
    if (renderer == nullptr) continue;
    std::ofstream(fs::path(*folder) / "kernels" /
                  absl::StrCat(k, "_", pk.program->name, renderer->file_extension()))
        << renderer->render(*pk.program);
  }
}

void dump_sync_outputs(const std::string& folder, const std::vector<detail::Node*>& outputs) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(folder) / "expected", ec);
  for (size_t i = 0; i < outputs.size(); ++i) {
    absl::Status s = write_npy(absl::StrCat(folder, "/expected/out", i, ".npy"), outputs[i]->type,
                               *jit::host_view(outputs[i]->buffer));
    if (!s.ok()) report(std::string(s.message()));
  }
}

void set_cuda_recording_paused(bool paused) { recording_paused = paused; }

namespace {

// KILN_RECORD_CUDA_DIR: each program a plan build adds to the kernel cache, recorded as it is
// added (jit::set_new_kernel_observer), whichever path built the plan. A collective is no
// kernel: the communicator moves its bytes. Installed during static initialization: this
// file is in every program that syncs.
void record_new_kernel(const KernelProgram& program) {
  if (recording_paused || base::env_options().record_cuda_dir.empty()) return;
  if (program.anchor != AnchorKind::kCollective) record_cuda_source(program);
}
[[maybe_unused]] const bool recorder_installed =
    (set_new_kernel_observer(&record_new_kernel), true);

}  // namespace

}  // namespace kiln::jit
