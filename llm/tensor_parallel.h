// Tensor parallelism (Megatron-LM style) for kiln::llm: each rank of a group keeps a slice of
// every layer, by attention head and by MLP feature, so that a layer's two matrix products
// on the residual stream's input need no communication and its two on the way out are each
// summed over the ranks by one all_reduce.
#ifndef KILN_LLM_TENSOR_PARALLEL_H_
#define KILN_LLM_TENSOR_PARALLEL_H_

#include <string>

#include "kiln/distributed.h"
#include "llm/model_data.h"

namespace kiln::llm {

// Keeps rank `group.rank()`'s share of `data`'s layers, as contiguous copies:
// - the rows of W_q, W_k, W_v (and their biases): its query heads and the key/value heads
//   they read (heads / size and kv_heads / size of them, consecutive);
// - the rows of W_gate and W_up: its hidden / size MLP features;
// - the columns of W_o and W_down that multiply those heads and features (in f32 when the
//   file's are block-quantized: Kiln's views of those keep whole rows).
// Norms, the embedding and the output stay whole; the configuration's head counts and MLP
// width become the rank's. A group size that does not divide the key/value heads or the MLP
// width is a kiln::Error naming the file (`path`) and what does not divide; `data` is then
// unchanged.
void keep_tensor_parallel_share(Model::Data& data, const distributed::Group& group,
                                const std::string& path);

// The sum over the group's ranks of a partial product (attention's W_o, the MLP's W_down);
// `partial` itself when the model is not sharded.
Tensor sum_over_shards(const Model::Data& data, const Tensor& partial);

}  // namespace kiln::llm

#endif  // KILN_LLM_TENSOR_PARALLEL_H_
