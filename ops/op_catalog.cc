#include "ops/op_catalog.h"

#include <iterator>

namespace kiln::ops {
namespace {

constexpr OpInfo kOps[] = {
#define KILN_OP_INFO(e, name, cls, arity) {OpKind::e, #name, OpClass::cls, arity, #e},
    KILN_OPS(KILN_OP_INFO)
#undef KILN_OP_INFO
};

}  // namespace

const OpInfo& op_info(OpKind op) { return kOps[static_cast<int>(op)]; }

std::optional<OpKind> op_from_name(std::string_view name) {
  for (const OpInfo& info : kOps) {
    if (name == info.name) return info.kind;
  }
  return std::nullopt;
}

const OpInfo* all_ops(int* count) {
  *count = static_cast<int>(std::size(kOps));
  return kOps;
}

bool is_comparison(OpKind op) {
  return op == OpKind::Eq || op == OpKind::Ne || op == OpKind::Lt || op == OpKind::Le ||
         op == OpKind::Gt || op == OpKind::Ge;
}

}  // namespace kiln::ops
