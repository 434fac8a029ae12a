// kiln::compile: one recording per input signature, replayed without calling the function.
#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/stats_counters.h"
#include "jit/backend/backend.h"
#include "jit/eval/compiled_recording.h"
#include "jit/eval/sync.h"
#include "jit/fusion/launch_plan.h"
#include "jit/fusion/trace.h"
#include "jit/graph/node.h"
#include "jit/graph/record.h"
#include "kiln/compile.h"
#include "kiln/error.h"
#include "ops/value_type.h"

namespace kiln {
namespace {

using detail::Node;
using detail::TensorAccess;
using jit::InputBinding;
using jit::OutputSource;
using jit::Recording;
using jit::Signature;

bool env_check_every_call() {
  static const bool on = [] {
    const char* v = std::getenv("KILN_COMPILE_CHECK");
    return v != nullptr && *v != '\0' && *v != '0';
  }();
  return on;
}

// Fresh leaf tensors sharing the (computed) inputs' buffers: the recording tells arguments
// apart from captured tensors by these nodes, even when one tensor is passed twice.
std::vector<Tensor> argument_leaves(const std::vector<Tensor>& inputs) {
  std::vector<Tensor> args;
  args.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    const Node& n = *TensorAccess::node(t);
    args.push_back(jit::make_realized(n.type, n.buffer, n.device));
  }
  return args;
}

int arg_index(const std::vector<Tensor>& args, const Node* node) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (TensorAccess::node(args[i]).get() == node) return static_cast<int>(i);
  }
  return -1;
}

std::vector<Tensor> call_checked(const Fn& fn, const std::vector<Tensor>& args) {
  std::vector<Tensor> outs = fn(args);
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!outs[i].defined()) {
      throw Error(absl::StrCat("[compile] the function returned an empty tensor as output ", i));
    }
  }
  return outs;
}

// The distinct unrealized nodes behind `outs`, in first-seen order.
std::vector<Node*> pending_targets(const std::vector<Tensor>& outs) {
  std::vector<Node*> targets;
  for (const Tensor& t : outs) {
    Node* n = TensorAccess::node(t).get();
    if (!n->realized() && std::find(targets.begin(), targets.end(), n) == targets.end()) {
      targets.push_back(n);
    }
  }
  return targets;
}

// Calls `fn` on leaves over `inputs` (computed), runs it, and keeps what ran as a recording.
std::pair<std::vector<Tensor>, std::shared_ptr<Recording>> record_call(
    const Fn& fn, const std::vector<Tensor>& inputs) {
  auto rec = std::make_shared<Recording>();
  std::vector<Tensor> args = argument_leaves(inputs);
  const uint64_t syncs_before = jit::syncs_on_this_thread();
  std::vector<Tensor> outs = call_checked(fn, args);
  rec->replayable = jit::syncs_on_this_thread() == syncs_before;
  const std::vector<Node*> targets = pending_targets(outs);
  if (!rec->replayable) {
    eval(outs);
    return {std::move(outs), rec};
  }
  if (!targets.empty()) rec->trace_key = jit::build_trace(targets).key;
  for (const Node* t : targets) rec->output_types.push_back(t->type);
  for (const Tensor& t : outs) {
    const Node* n = TensorAccess::node(t).get();
    OutputSource src;
    const auto it = std::find(targets.begin(), targets.end(), n);
    if (it != targets.end()) {
      src.plan_output = static_cast<int>(it - targets.begin());
    } else if ((src.arg = arg_index(args, n)) < 0) {
      src.fixed = t;
    }
    rec->outputs.push_back(std::move(src));
  }
  if (targets.empty()) return {std::move(outs), rec};
  rec->device = targets.front()->device;
  jit::SyncCapture capture = jit::sync_and_capture(targets);
  rec->plan = std::move(capture.plan);
  rec->params = std::move(capture.args.params);
  for (size_t s = 0; s < capture.input_nodes.size(); ++s) {
    InputBinding b;
    b.arg = arg_index(args, capture.input_nodes[s]);
    if (b.arg < 0) b.fixed = capture.args.inputs[s];
    rec->inputs.push_back(std::move(b));
  }
  return {std::move(outs), rec};
}

std::vector<Tensor> replay(const Recording& rec, const std::vector<Tensor>& inputs) {
  std::vector<std::shared_ptr<base::Buffer>> results;
  if (rec.plan != nullptr) {
    jit::PlanArguments args;
    args.params = rec.params;
    args.inputs.reserve(rec.inputs.size());
    for (const InputBinding& b : rec.inputs) {
      args.inputs.push_back(b.arg >= 0 ? TensorAccess::node(inputs[b.arg])->buffer : b.fixed);
    }
    results = jit::backend_for(rec.device).replay(rec.plan, args);
    base::counters().syncs += 1;
  }
  std::vector<Tensor> outs;
  outs.reserve(rec.outputs.size());
  for (const OutputSource& src : rec.outputs) {
    if (src.plan_output >= 0) {
      outs.push_back(jit::make_realized(rec.output_types[src.plan_output], results[src.plan_output],
                                        rec.device));
    } else if (src.arg >= 0) {
      outs.push_back(inputs[src.arg]);
    } else {
      outs.push_back(src.fixed);
    }
  }
  return outs;
}

// check_every_call: records `fn` again (without running it) and compares the program, its
// scalars and its captured buffers with the recording.
void check_unchanged(const Fn& fn, const Recording& rec, const std::vector<Tensor>& inputs) {
  std::vector<Tensor> args = argument_leaves(inputs);
  const uint64_t syncs_before = jit::syncs_on_this_thread();
  std::vector<Tensor> outs = call_checked(fn, args);
  std::string why;
  const std::vector<Node*> targets = pending_targets(outs);
  if (jit::syncs_on_this_thread() != syncs_before) {
    why = "it read data this time";
  } else if (outs.size() != rec.outputs.size()) {
    why = absl::StrCat("it returned ", outs.size(), " outputs instead of ", rec.outputs.size());
  } else if (targets.empty() != rec.trace_key.empty()) {
    why = "its outputs changed between computed and already available";
  } else if (!targets.empty()) {
    jit::Trace trace = jit::build_trace(targets);
    if (trace.key != rec.trace_key) {
      why = "it recorded a different program";
    } else if (trace.params != rec.params) {
      why = "a scalar it captures changed";
    } else {
      for (size_t s = 0; s < trace.inputs.size() && why.empty(); ++s) {
        const InputBinding& b = rec.inputs[s];
        const int arg = arg_index(args, trace.inputs[s]);
        if (arg != b.arg || (arg < 0 && trace.inputs[s]->buffer != b.fixed)) {
          why = "a tensor it captures changed";
        }
      }
    }
  }
  if (!why.empty()) {
    throw Error(absl::StrCat("[compile] check_every_call: the function no longer matches its ",
                             "recording for this input signature: ", why,
                             ". Pass values that change between calls as inputs."));
  }
}

}  // namespace

namespace jit {

Signature signature_of(const std::vector<Tensor>& inputs) {
  Signature sig{static_cast<int64_t>(inputs.size())};
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) {
      throw Error(absl::StrCat("[compile] input ", i, " is an empty (undefined) tensor"));
    }
    const Tensor& t = inputs[i];
    sig.insert(sig.end(), {static_cast<int64_t>(t.dtype()), static_cast<int64_t>(t.device().type),
                           t.device().index, static_cast<int64_t>(t.shape().size())});
    sig.insert(sig.end(), t.shape().begin(), t.shape().end());
  }
  return sig;
}

std::string describe_signature(const Signature& signature) {
  std::vector<std::string> inputs;
  size_t at = 1;
  for (int64_t i = 0; i < signature.front() && at + 4 <= signature.size(); ++i) {
    const auto dtype = static_cast<DType>(signature[at]);
    const Device device{static_cast<DeviceType>(signature[at + 1]),
                        static_cast<int>(signature[at + 2])};
    const auto rank = static_cast<size_t>(signature[at + 3]);
    at += 4;
    const ops::Shape shape(
        signature.begin() + static_cast<int64_t>(at),
        signature.begin() + static_cast<int64_t>(std::min(at + rank, signature.size())));
    at += rank;
    inputs.push_back(absl::StrCat(ops::format_type({shape, dtype}), " on ", device_name(device)));
  }
  return absl::StrCat("(", absl::StrJoin(inputs, ", "), ")");
}

}  // namespace jit

std::shared_ptr<const Recording> Compiled::State::find(const Signature& sig) {
  std::lock_guard<std::mutex> lock(mutex);
  auto it = recordings.find(sig);
  return it == recordings.end() ? nullptr : it->second;
}

void Compiled::State::add(const Signature& sig, const std::shared_ptr<const Recording>& rec) {
  std::lock_guard<std::mutex> lock(mutex);
  if (!recordings.emplace(sig, rec).second) return;  // another thread was first
  order.push_back(sig);
  while (recordings.size() > std::max<size_t>(options.max_signatures, 1)) {
    recordings.erase(order.front());
    order.pop_front();
  }
}

Compiled::Compiled(Fn fn, CompileOptions options) : state_(std::make_shared<State>()) {
  if (!fn) throw Error("[compile] the function is empty");
  state_->fn = std::move(fn);
  state_->options = options;
}

std::vector<Tensor> Compiled::operator()(const std::vector<Tensor>& inputs) {
  const Signature sig = jit::signature_of(inputs);
  eval(inputs);  // a compiled call binds computed inputs
  std::shared_ptr<const Recording> rec = state_->find(sig);
  if (rec != nullptr && rec->replayable) {
    if (!rec->from_bundle && (state_->options.check_every_call || env_check_every_call())) {
      check_unchanged(state_->fn, *rec, inputs);
    }
    base::counters().compiled_replays += 1;
    return replay(*rec, inputs);
  }
  auto [outs, recorded] = record_call(state_->fn, inputs);
  base::counters().compiled_records += 1;
  if (rec == nullptr) state_->add(sig, recorded);
  return outs;
}

size_t Compiled::num_signatures() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->recordings.size();
}

Compiled compile(Fn fn, CompileOptions options) { return Compiled(std::move(fn), options); }

}  // namespace kiln
