#include "jit/graph/record.h"

#include <atomic>
#include <cstdlib>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "jit/graph/node.h"
#include "jit/graph/sync_claims.h"
#include "kiln/error.h"
#include "ops/custom_functions.h"
#include "ops/infer.h"

namespace kiln::jit {
namespace {

using detail::Node;
using detail::TensorAccess;

int64_t read_max_trace() {
  const char* env = std::getenv("KILN_MAX_TRACE");
  int64_t value = 0;
  if (env != nullptr && absl::SimpleAtoi(env, &value) && value > 0) return value;
  return 4096;
}

Device common_device(ops::OpKind op, const std::vector<Tensor>& inputs) {
  if (inputs.empty()) return default_device();
  Device d = inputs[0].device();
  for (const Tensor& t : inputs) {
    if (!(t.device() == d)) {
      throw Error(absl::StrCat("[", ops::op_name(op), "] inputs are on different devices (",
                               device_name(d), " and ", device_name(t.device()), ")"));
    }
  }
  return d;
}

std::atomic<TraceCapSync> trace_cap_sync{nullptr};

// Keeps pending graphs bounded: pending_bound overcounts shared subgraphs, so only when it
// passes the cap, and the process holds more pending nodes than the cap, is the exact size
// counted (and the bound tightened to it). The second test matters for a model's step,
// where a residual stream feeds every layer twice: its bound multiplies with each layer,
// and a walk of the whole graph at every few ops made recording quadratic.
void enforce_trace_cap(const std::shared_ptr<Node>& node) {
  const int64_t cap = max_trace_nodes();
  if (node->pending_bound.load(std::memory_order_relaxed) <= cap) return;
  if (Node::pending_nodes().load(std::memory_order_relaxed) <= cap) return;
  int64_t exact = count_pending_nodes(node.get(), cap);
  if (exact > cap) {
    TraceCapSync sync = trace_cap_sync.load(std::memory_order_acquire);
    if (sync == nullptr) throw Error("[record] no sync is installed to cut the pending graph");
    sync(node.get());
  } else {
    node->pending_bound.store(exact, std::memory_order_relaxed);
  }
}

}  // namespace

void set_trace_cap_sync(TraceCapSync sync) {
  trace_cap_sync.store(sync, std::memory_order_release);
}

int64_t max_trace_nodes() {
  static const int64_t cap = read_max_trace();
  return cap;
}

ops::ValueType check_op(ops::OpKind op, const std::vector<Tensor>& inputs, ops::Attrs& attrs) {
  std::vector<ops::ValueType> types;
  types.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    if (!t.defined()) {
      throw Error(absl::StrCat("[", ops::op_name(op), "] an input tensor is empty (undefined)"));
    }
    types.push_back({t.shape(), t.dtype()});
  }
  absl::StatusOr<ops::ValueType> type = ops::infer_output(op, types, attrs);
  if (!type.ok()) throw Error(std::string(type.status().message()));
  return *std::move(type);
}

void check_runs_on(ops::OpKind op, const ops::Attrs& attrs, Device device) {
  if (op != ops::OpKind::CustomKernel || device.type == DeviceType::CPU) return;
  const ops::CustomKernel* k = ops::custom_kernel(attrs.function);
  if (k != nullptr && k->cuda_source.empty()) {
    throw Error(ops::cpu_only_kernel_error(*k, device_name(device)));
  }
}

namespace {
std::atomic<bool> collective_recorded{false};
}  // namespace

bool any_collective_recorded() { return collective_recorded.load(std::memory_order_relaxed); }

Tensor record(ops::OpKind op, const std::vector<Tensor>& inputs, ops::Attrs attrs) {
  ops::ValueType type = check_op(op, inputs, attrs);
  if (ops::op_class(op) == ops::OpClass::kCollective) collective_recorded = true;
  const Device device = common_device(op, inputs);
  check_runs_on(op, attrs, device);
  auto node = std::make_shared<Node>();
  node->op = op;
  node->device = device;
  node->type = std::move(type);
  node->attrs = std::move(attrs);
  node->inputs.reserve(inputs.size());
  constexpr int64_t kBoundLimit = int64_t{1} << 60;  // saturate instead of overflowing
  for (const Tensor& t : inputs) {
    const std::shared_ptr<Node>& input = TensorAccess::node(t);
    const int64_t bound = node->pending_bound.load(std::memory_order_relaxed) +
                          input->pending_bound.load(std::memory_order_relaxed);
    node->pending_bound.store(std::min(kBoundLimit, bound), std::memory_order_relaxed);
    node->inputs.push_back(input);
  }
  enforce_trace_cap(node);
  return TensorAccess::wrap(std::move(node));
}

Tensor make_realized(const ops::ValueType& type, const std::shared_ptr<base::Buffer>& data,
                     Device device) {
  auto node = std::make_shared<Node>();
  node->op = ops::OpKind::Input;
  node->type = type;
  node->attrs.shape = type.shape;
  node->attrs.dtype = type.dtype;
  node->device = device;
  // A computed tensor's data lives on its device: callers place it there first
  // (jit::place_on), since recording cannot reach the devices.
  const bool on_device = data == nullptr || (data->on_device() ? data->device() == device
                                                               : device.type == DeviceType::CPU);
  if (!on_device) {
    throw Error(
        absl::StrCat("[make_realized] the data is not in ", device_name(device), "'s memory"));
  }
  node->realize(data);
  return TensorAccess::wrap(std::move(node));
}

Tensor make_placeholder(const ops::ValueType& type, const std::string& name) {
  auto node = std::make_shared<Node>();
  node->op = ops::OpKind::Input;
  node->type = type;
  node->attrs.shape = type.shape;
  node->attrs.dtype = type.dtype;
  node->attrs.name = name;
  node->device = default_device();
  return TensorAccess::wrap(std::move(node));
}

}  // namespace kiln::jit
