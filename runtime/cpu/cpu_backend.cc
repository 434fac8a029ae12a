#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "jit/stats_counters.h"
#include "kiln/error.h"
#include "ops/reference_evaluator.h"
#include "runtime/backend.h"

namespace kiln::runtime {
namespace {

using detail::Node;

class CpuBackend final : public Backend {
 public:
  std::vector<std::shared_ptr<Buffer>> run(const std::vector<Node*>& order,
                                           const std::vector<Node*>& outputs) override {
    // How many users inside this plan each node has; an intermediate's buffer is dropped
    // when the count reaches zero (outputs are kept).
    absl::flat_hash_map<const Node*, int> remaining_uses;
    for (const Node* node : order) {
      for (const auto& input : node->inputs) ++remaining_uses[input.get()];
    }
    for (const Node* out : outputs) remaining_uses[out] += 1;  // never dropped

    absl::flat_hash_map<const Node*, std::shared_ptr<const Buffer>> computed;
    for (const Node* node : order) {
      std::vector<ops::HostValue> inputs;
      inputs.reserve(node->inputs.size());
      for (const auto& input : node->inputs) {
        inputs.push_back({input->type, value_of(*input, computed)});
      }
      if (node->op == ops::OpKind::Input) {
        throw Error(absl::StrCat("[input] '", node->attrs.name, "' is a placeholder without data (",
                                 ops::format_type(node->type),
                                 "); give it a tensor before evaluating"));
      }
      computed[node] = ops::evaluate_reference(node->op, node->attrs, node->type, inputs);
      jit::counters().kernels_launched += 1;
      for (const auto& input : node->inputs) {
        if (--remaining_uses[input.get()] == 0) computed.erase(input.get());
      }
    }
    std::vector<std::shared_ptr<Buffer>> results;
    results.reserve(outputs.size());
    for (const Node* out : outputs) {
      // Outputs were computed here, so the buffer is ours to hand over as mutable.
      results.push_back(std::const_pointer_cast<Buffer>(value_of(*out, computed)));
    }
    return results;
  }

 private:
  static std::shared_ptr<const Buffer> value_of(
      const Node& node,
      const absl::flat_hash_map<const Node*, std::shared_ptr<const Buffer>>& computed) {
    if (node.realized()) return node.buffer;
    return computed.at(&node);
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace kiln::runtime
