// Sync points: computing pending nodes and making them realized.
#ifndef KILN_JIT_SYNC_H_
#define KILN_JIT_SYNC_H_

#include <vector>

#include "jit/node.h"

namespace kiln::jit {

// Computes every output that is not realized yet, in one plan, and realizes them. Nothing
// changes when it throws: every node keeps its recipe and every tensor stays valid.
void sync(const std::vector<detail::Node*>& outputs);

}  // namespace kiln::jit

#endif  // KILN_JIT_SYNC_H_
