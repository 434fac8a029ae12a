#include "jit/eval/reference_graph.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "jit/backend/backend.h"
#include "jit/graph/pending_graph.h"
#include "kiln/error.h"
#include "ops/quantized_blocks.h"
#include "ops/reference_evaluator.h"

namespace kiln::ops {

using base::Buffer;
using detail::Node;

namespace {

std::shared_ptr<const Buffer> dequantized(const ValueType& type, const Buffer& blocks) {
  auto values = std::make_shared<Buffer>(numel(type.shape) * 4);
  dequantize_row(type.dtype, blocks.as<uint8_t>(), values->as<float>(), numel(type.shape));
  return values;
}

}  // namespace

std::vector<std::shared_ptr<Buffer>> reference_run(const std::vector<Node*>& outputs) {
  std::vector<Node*> order = jit::collect_pending(outputs);
  absl::flat_hash_map<const Node*, std::shared_ptr<const Buffer>> computed;
  auto value_of = [&](const Node& node) -> std::shared_ptr<const Buffer> {
    if (node.realized()) return jit::host_view(node.buffer);
    return computed.at(&node);
  };
  // An operand as the evaluator reads it: a realized block-quantized tensor as the f32
  // values its blocks decode to (ops/reference_evaluator.h), decoded once.
  auto operand_of = [&](const Node& node) -> std::shared_ptr<const Buffer> {
    if (!node.realized() || !is_block_quantized(node.type.dtype)) return value_of(node);
    auto [at, fresh] = computed.try_emplace(&node);
    if (fresh) at->second = dequantized(node.type, *jit::host_view(node.buffer));
    return at->second;
  };
  for (const Node* node : order) {
    if (node->op == OpKind::Input) {
      throw Error(absl::StrCat("[input] '", node->attrs.name, "' is a placeholder without data"));
    }
    std::vector<HostValue> inputs;
    inputs.reserve(node->inputs.size());
    for (const auto& input : node->inputs) inputs.push_back({input->type, operand_of(*input)});
    computed[node] = evaluate_reference(node->op, node->attrs, node->type, inputs);
  }
  std::vector<std::shared_ptr<Buffer>> results;
  results.reserve(outputs.size());
  for (const Node* out : outputs)
    results.push_back(std::const_pointer_cast<Buffer>(value_of(*out)));
  return results;
}

}  // namespace kiln::ops
