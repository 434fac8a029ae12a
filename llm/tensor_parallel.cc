#include "llm/tensor_parallel.h"

#include <cstdint>
#include <string>

#include "kiln/error.h"
#include "kiln/kiln.h"

namespace kiln::llm {
namespace {

// The rank's share of `whole` along `axis`: `width` of them starting at rank · width, copied
// so that the rest of the file's pages are never read and the products read it in place.
// A block-quantized tensor's views keep whole rows, so its share of columns (W_o's, W_down's)
// is decoded to f32: the file's values exactly, at 4 bytes each. (An undefined tensor, a
// missing bias, stays undefined.)
Tensor share(const Tensor& whole, int axis, int64_t width, int rank) {
  if (!whole.defined()) return whole;
  const Tensor from =
      axis == 1 && is_block_quantized(whole.dtype()) ? whole.astype(DType::F32) : whole;
  return from.slice(axis, rank * width, (rank + 1) * width).eval();
}

// Throws unless `parts` divides `total`: "<what> (<total>) over <parts> ranks".
void check_divides(int64_t total, int parts, const std::string& what, const std::string& path) {
  if (total % parts != 0) {
    throw Error("[llm::Model::load] " + path + ": " + std::to_string(parts) +
                " tensor-parallel ranks do not divide the " + std::to_string(total) + " " + what);
  }
}

}  // namespace

void keep_tensor_parallel_share(Model::Data& data, const distributed::Group& group,
                                const std::string& path) {
  ModelConfig& c = data.config;
  const int parts = group.size(), rank = group.rank();
  if (parts == 1) return;  // the whole model, and no collective to run
  check_divides(c.kv_heads, parts, "key/value heads (attention.head_count_kv)", path);
  check_divides(c.hidden, parts, "MLP features (feed_forward_length)", path);
  const int64_t heads = c.heads / parts, kv_heads = c.kv_heads / parts, hidden = c.hidden / parts;
  const int64_t q = heads * c.head_dim, kv = kv_heads * c.head_dim;
  for (LayerWeights& l : data.layers) {
    l.wq = share(l.wq, 0, q, rank);
    l.bq = share(l.bq, 0, q, rank);
    l.wk = share(l.wk, 0, kv, rank);
    l.bk = share(l.bk, 0, kv, rank);
    l.wv = share(l.wv, 0, kv, rank);
    l.bv = share(l.bv, 0, kv, rank);
    l.wo = share(l.wo, 1, q, rank);
    l.w_gate = share(l.w_gate, 0, hidden, rank);
    l.w_up = share(l.w_up, 0, hidden, rank);
    l.w_down = share(l.w_down, 1, hidden, rank);
  }
  c.heads = heads;
  c.kv_heads = kv_heads;
  c.hidden = hidden;
  data.tensor_parallel = group;
}

Tensor sum_over_shards(const Model::Data& data, const Tensor& partial) {
  return data.tensor_parallel
             ? distributed::all_reduce(partial, distributed::Reduction::kSum, *data.tensor_parallel)
             : partial;
}

}  // namespace kiln::llm
