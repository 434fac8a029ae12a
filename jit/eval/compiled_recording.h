// What kiln::compile keeps per input signature (compiled_function.cc), shared with the
// bundles that save and load it (compiled_bundle.cc).
#ifndef KILN_JIT_EVAL_COMPILED_RECORDING_H_
#define KILN_JIT_EVAL_COMPILED_RECORDING_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "base/buffer.h"
#include "jit/fusion/launch_plan.h"
#include "kiln/compile.h"
#include "kiln/tensor.h"
#include "ops/value_type.h"

namespace kiln {
namespace jit {

// The number of inputs, then per input its dtype, device type and index, rank and shape.
using Signature = std::vector<int64_t>;

// `inputs`' signature; throws kiln::Error for an undefined tensor.
Signature signature_of(const std::vector<Tensor>& inputs);

// "(f32[2, 3] on cpu, i64[4] on cpu)": a signature as messages show it.
std::string describe_signature(const Signature& signature);

// Where a plan input comes from on replay: argument `arg` of the call, or a buffer the
// function captured (a constant of the recording).
struct InputBinding {
  int arg = -1;
  std::shared_ptr<base::Buffer> fixed;
};

// Where an output of the function comes from on replay.
struct OutputSource {
  int plan_output = -1;  // the plan's output k
  int arg = -1;          // or the call's argument (the function returned an input)
  Tensor fixed;          // or a captured, already computed tensor
};

// One recorded signature.
struct Recording {
  bool replayable = false;
  std::shared_ptr<const LaunchPlan> plan;  // null when no output needed computing
  Device device;
  std::vector<InputBinding> inputs;  // per plan input slot
  std::vector<double> params;
  std::vector<ops::ValueType> output_types;  // per plan output
  std::vector<OutputSource> outputs;         // per function output
  std::vector<int64_t> trace_key;            // for check_every_call
  // Loaded from a bundle: there is no recorded program to check a call against, and the
  // function (a fallback) may not be the one that was recorded.
  bool from_bundle = false;
};

}  // namespace jit

struct Compiled::State {
  Fn fn;
  CompileOptions options;
  mutable std::mutex mutex;
  absl::flat_hash_map<jit::Signature, std::shared_ptr<const jit::Recording>> recordings;
  std::deque<jit::Signature> order;  // oldest first, for dropping beyond max_signatures

  std::shared_ptr<const jit::Recording> find(const jit::Signature& sig);
  void add(const jit::Signature& sig, const std::shared_ptr<const jit::Recording>& rec);
};

}  // namespace kiln

#endif  // KILN_JIT_EVAL_COMPILED_RECORDING_H_
