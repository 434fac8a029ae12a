// Differential testing: thousands of random programs run through the planner and the CPU
// device and compared, element by element, with the reference evaluator. Outputs are
// poisoned first; NaN never passes unless the reference says NaN too. A failing program is
// written out as a replayable trace folder.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "base/buffer.h"
#include "jit/backend/backend.h"
#include "jit/eval/sync_dump.h"
#include "jit/formats/npy_file.h"
#include "jit/formats/trace_export.h"
#include "jit/fusion/launch_plan.h"
#include "jit/graph/pending_graph.h"
#include "ops/element_access.h"
#include "tests/random_program.h"
#include "tests/reference_util.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

// What the reference evaluator computes for a program, in one op-by-op run: the outputs,
// and the largest finite magnitude of any floating value on the way (rounding errors scale
// with it: a difference of two huge intermediates is only known to that absolute precision
// on any path).
struct Reference {
  std::vector<Tensor> outputs;
  double magnitude = 0;
};

Reference run_reference(const std::vector<detail::Node*>& outputs) {
  std::vector<detail::Node*> pending = jit::collect_pending(outputs);
  std::vector<std::shared_ptr<base::Buffer>> values = ops::reference_run(pending);
  Reference ref;
  for (size_t i = 0; i < pending.size(); ++i) {
    const ops::ValueType& type = pending[i]->type;
    if (!is_floating(type.dtype)) continue;
    for (int64_t k = 0; k < ops::numel(type.shape); ++k) {
      double v = std::fabs(ops::load_double(*values[i], type.dtype, k));
      if (std::isfinite(v)) ref.magnitude = std::max(ref.magnitude, v);
    }
  }
  for (detail::Node* out : outputs) {
    const size_t i = std::find(pending.begin(), pending.end(), out) - pending.begin();
    ref.outputs.push_back(jit::realized_on(out->type, values[i], out->device));
  }
  return ref;
}

// A host copy of `b`'s bytes.
std::shared_ptr<const base::Buffer> copy_of(const std::shared_ptr<const base::Buffer>& b) {
  const std::shared_ptr<const base::Buffer> host = jit::host_view(b);
  auto copy = std::make_shared<base::Buffer>(host->nbytes());
  std::memcpy(copy->data(), host->data(), static_cast<size_t>(host->nbytes()));
  return copy;
}

// An output is only as precise as the least precise value it was computed from.
double program_tolerance(const jit::TraceExport& trace) {
  double tol = 0;
  for (const auto& node : trace.json.at("nodes")) {
    tol = std::max(
        tol, testing::reference_tolerance(dtype_from_name(node.at("dtype").get<std::string>())));
  }
  return tol;
}

// Writes the program as a folder `kiln replay` can run, with what each side computed.
std::string write_failure(const std::vector<Tensor>& outputs, const jit::TraceExport& trace,
                          const std::vector<Tensor>& want, uint64_t seed) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("kiln_differential_failure_" + std::to_string(seed));
  fs::create_directories(dir / "inputs");
  fs::create_directories(dir / "expected");
  fs::create_directories(dir / "got");
  std::ofstream(dir / "trace.json") << jit::trace_json_text(trace.json);
  for (const jit::TraceExport::Input& input : trace.inputs) {
    (void)jit::write_npy((dir / "inputs" / (input.name + ".npy")).string(), input.type,
                         *input.data);
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    save_npy((dir / "expected" / ("out" + std::to_string(i) + ".npy")).string(), want[i]);
    save_npy((dir / "got" / ("out" + std::to_string(i) + ".npy")).string(), outputs[i]);
  }
  return dir.string();
}

TEST(Differential, RandomProgramsMatchTheReferenceEvaluator) {
  const uint64_t base_seed = testing::test_seed();
  const int programs = 3000;
  // KILN_DIFFERENTIAL_SLICE=i/n runs programs i, i + n, ... only: on a GPU, where every
  // program compiles its kernels with NVRTC, scripts/gpu-check.sh runs the n slices at once.
  int slice = 0, slices = 1;
  if (const char* s = std::getenv("KILN_DIFFERENTIAL_SLICE"); s != nullptr) {
    ASSERT_EQ(std::sscanf(s, "%d/%d", &slice, &slices), 2) << "KILN_DIFFERENTIAL_SLICE=" << s;
    ASSERT_TRUE(slices > 0 && slice >= 0 && slice < slices) << "KILN_DIFFERENTIAL_SLICE=" << s;
  }
  base::set_poison_new_buffers(true);
  int compared = 0;
  for (int p = 0; p < programs; ++p) {
    if (p % slices != slice) continue;
    // scripts/test.sh compiles every recorded kernel with NVRTC; a sample of 300 random
    // programs covers the families without thousands of near-duplicate compiles.
    jit::set_cuda_recording_paused(p >= 300);
    const uint64_t seed = base_seed * 1000003 + p;
    testing::ProgramGenerator generator(seed);
    std::vector<Tensor> outputs = generator.generate(4 + p % 16);
    if (outputs.empty()) continue;
    std::vector<detail::Node*> nodes;
    for (const Tensor& t : outputs) nodes.push_back(detail::TensorAccess::node(t).get());
    jit::TraceExport trace = jit::export_trace(nodes);
    // The export keeps copies of the inputs, not the inputs themselves: a held buffer is
    // never written in place, and the generator's cache writes must be.
    for (jit::TraceExport::Input& input : trace.inputs) input.data = copy_of(input.data);
    const Reference reference = run_reference(nodes);
    const std::vector<Tensor>& want = reference.outputs;
    const double magnitude = reference.magnitude;
    eval(outputs);
    bool ok = true;
    std::string detail;
    const double tol = program_tolerance(trace);
    for (size_t i = 0; i < outputs.size() && ok; ++i) {
      ok = outputs[i].dtype() == want[i].dtype() && outputs[i].shape() == want[i].shape();
      std::vector<double> got = testing::values(outputs[i]), ref = testing::values(want[i]);
      for (size_t k = 0; k < got.size() && ok; ++k) {
        ::testing::AssertionResult r =
            testing::close(ref[k], got[k], is_floating(want[i].dtype()) ? tol : 0.0,
                           /*nan_ok=*/true);
        if (!r && is_floating(want[i].dtype()) && std::isfinite(ref[k]) &&
            std::fabs(ref[k] - got[k]) <= tol * magnitude) {
          r = ::testing::AssertionSuccess();
        }
        if (!r) {
          ok = false;
          detail =
              "output " + std::to_string(i) + " element " + std::to_string(k) + ": " + r.message();
        }
      }
    }
    ++compared;
    if (!ok) {
      std::string folder = write_failure(outputs, trace, want, seed);
      ADD_FAILURE() << "program " << p << " (seed " << seed << ") differs: " << detail
                    << "\nreplay it: kiln replay " << folder << "/trace.json --inputs " << folder
                    << "/inputs --out /tmp/out\n"
                    << dump_trace(want, DumpFormat::Text);
      break;
    }
  }
  base::set_poison_new_buffers(false);
  jit::set_cuda_recording_paused(false);
  EXPECT_GT(compared, programs / slices / 2);
  RecordProperty("programs_compared", compared);
  std::printf("differential: %d programs compared, %lld kernels run\n", compared,
              static_cast<long long>(stats().kernels_launched));
}

}  // namespace
}  // namespace kiln
