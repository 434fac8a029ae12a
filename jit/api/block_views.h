// Views of block-quantized tensors that keep whole rows (a slice that is not along the last
// axis, a reshape that keeps it), made at once from a realized tensor, so the view is
// realized too: astype, save_gguf and every kernel read it as blocks of its own. Private
// to the API layer (Tensor::reshape and Tensor::slice call it).
#ifndef KILN_JIT_API_BLOCK_VIEWS_H_
#define KILN_JIT_API_BLOCK_VIEWS_H_

#include <optional>

#include "kiln/tensor.h"
#include "ops/attrs.h"
#include "ops/op_catalog.h"

namespace kiln::jit {

// View `op` (reshape or slice) of x, a block-quantized tensor, as a realized tensor: the same
// buffer for a reshape, a range of it for rows that lie together, else the rows copied.
// nullopt when x is not realized (a view of a permuted weight, recorded as usual). Throws
// kiln::Error as record() does for a view that cuts blocks.
std::optional<Tensor> block_row_view(const Tensor& x, ops::OpKind op, ops::Attrs attrs);

}  // namespace kiln::jit

#endif  // KILN_JIT_API_BLOCK_VIEWS_H_
