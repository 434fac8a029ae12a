#include "ops/op_catalog.h"

#include <iterator>

namespace kiln::ops {
namespace {

constexpr OpInfo kOps[] = {
#define KILN_OP_INFO(e, name, cls, arity) {OpKind::e, name, OpClass::cls, arity},
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
  switch (op) {
    case OpKind::Eq:
    case OpKind::Ne:
    case OpKind::Lt:
    case OpKind::Le:
    case OpKind::Gt:
    case OpKind::Ge:
      return true;
    default:
      return false;
  }
}

}  // namespace kiln::ops
