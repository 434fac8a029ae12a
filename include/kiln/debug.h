// Looking inside: trace dumps, trace files that load and replay, and counters.
#ifndef KILN_DEBUG_H_
#define KILN_DEBUG_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kiln/tensor.h"

namespace kiln {

enum class DumpFormat { Text, Json, Dot };

// The pending graph behind `outputs`, without evaluating anything. Json is the `kiln.trace`
// version 1 format; already-computed tensors appear as "input" nodes named in0, in1, ...
std::string dump_trace(const std::vector<Tensor>& outputs, DumpFormat f);

// How Kiln will compute `outputs` at their next sync, without computing anything: the plan
// (each kernel, the trace nodes it computes, and every stored intermediate with the reason it
// is stored), then with kKernels each kernel's Kernel IR, and with kCuda its CUDA C++ too.
// The plan is cached, so the sync that follows builds nothing.
enum class ExplainDetail { kPlan, kKernels, kCuda };
std::string explain_plan(const std::vector<Tensor>& outputs,
                         ExplainDetail detail = ExplainDetail::kKernels);

// Writes the graph behind `outputs` as a replayable trace folder, the format KILN_DUMP=trace
// writes: FOLDER/trace.json and FOLDER/inputs/<name>.npy for its computed inputs. Computes
// nothing. `kiln replay FOLDER/trace.json --inputs FOLDER/inputs --out DIR` (or
// replay_trace) runs it again. Throws kiln::Error if a file cannot be written.
void save_trace_folder(const std::vector<Tensor>& outputs, const std::string& folder);

// Counters since start or reset_stats().
struct Stats {
  int64_t syncs = 0;              // sync points that had work to do
  int64_t plans_built = 0;        // plans made for a sync point
  int64_t plan_cache_hits = 0;    // sync points served by a cached plan
  int64_t kernels_compiled = 0;   // kernels generated (Kernel IR lowered; on CUDA, NVRTC run)
  int64_t kernel_cache_hits = 0;  // kernels found already generated, in memory
  int64_t disk_cache_hits = 0;
  int64_t kernels_launched = 0;  // kernels run
  int64_t bytes_allocated = 0;   // bytes of buffers allocated for results
  int64_t compiled_records = 0;  // compiled-function calls that recorded the function
  int64_t compiled_replays = 0;  // compiled-function calls that replayed a recorded plan
  // Packed weights (the CPU GEMM's reordered copies of a matmul's B, and the decoded panels
  // of a block-quantized weight in products of fewer than 64 rows) dropped because the
  // packed-weight budget was full; each one is packed again at its next use. Weights that
  // fit the budget are packed once and live as long as their tensor.
  int64_t packed_weight_evictions = 0;
};
Stats stats();
void reset_stats();

// The bytes of packed weights the CPU may keep (default: KILN_PACKED_WEIGHT_MB, else half of
// the machine's memory). Past it the least recently used are dropped and counted in
// Stats::packed_weight_evictions; setting a smaller budget drops them at once.
void set_packed_weight_budget(int64_t bytes);
int64_t packed_weight_budget();

// A trace file (`kiln.trace` version 1), checked and ready to run on new inputs.
class LoadedTrace {
 public:
  struct Input {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
  };
  const std::vector<Input>& inputs() const;
  size_t num_outputs() const;
  // Records the trace over `inputs` (one tensor per input name, matching dtype and shape)
  // and returns its outputs, lazily, in the order of the file's "outputs".
  std::vector<Tensor> run(const std::map<std::string, Tensor>& inputs) const;

  struct Impl;

 private:
  explicit LoadedTrace(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
  friend LoadedTrace load_trace(const std::string& json_text);
};

// Parses and checks a trace: every node's dtype and shape against inference; malformed,
// cyclic or inconsistent files throw kiln::Error naming the node.
LoadedTrace load_trace(const std::string& json_text);
LoadedTrace load_trace_file(const std::string& path);

// Runs a trace folder's trace on DIR/<name>.npy inputs and writes out0.npy, out1.npy, ...
// into out_dir (created if missing). Throws kiln::Error with a one-line reason.
void replay_trace(const std::string& trace_path, const std::string& inputs_dir,
                  const std::string& out_dir);

}  // namespace kiln

#endif  // KILN_DEBUG_H_
