// Neural-network building blocks. Each is recorded as one op (so a later planner can run it
// as one persistent-row kernel); all need floating dtypes.
#ifndef KILN_NN_H_
#define KILN_NN_H_

#include <optional>

#include "kiln/tensor.h"

namespace kiln {

Tensor softmax(const Tensor& x, int axis = -1);
Tensor log_softmax(const Tensor& x, int axis = -1);
// Normalizes over the last axis; weight and bias have shape [x.shape[-1]].
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps = 1e-6);
// x @ w.T + b with PyTorch's layout: w is [out, in], b is [out].
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b);
Tensor linear(const Tensor& x, const Tensor& w);  // no bias (Llama's projections)
// Rows of `table` [vocabulary, ...] for each id of `ids` (I32 or I64): take(table, ids, 0),
// of shape ids.shape + table.shape[1:].
Tensor embedding(const Tensor& table, const Tensor& ids);

// Attention as PyTorch's scaled_dot_product_attention: softmax(q kᵀ · scale + mask) v over the
// last axis, one fused kernel whose scores never reach memory (docs/attention.md).
// - q [..., Hq, Sq, D], k [..., Hkv, Sk, D], v [..., Hkv, Sk, Dv], one floating dtype; Hq a
//   multiple of Hkv (grouped-query attention). The result is [..., Hq, Sq, Dv].
// - mask (optional) broadcasts to the scores [..., Hq, Sq, Sk]: bool keeps where true, a
//   floating mask is added to the scores.
// - causal: query i sees keys j <= i (top-left aligned, as PyTorch's is_causal).
// - scale defaults to 1 / sqrt(D).
// The same kernel also comes from the hand-written form, softmax(q @ kᵀ * c + mask) @ v.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& mask = Tensor(), bool causal = false,
                                    std::optional<double> scale = std::nullopt);

// Where a causal cut puts query i among the keys when Sq != Sk.
enum class CausalAlignment {
  TopLeft,  // at key i: query i sees keys j <= i (PyTorch's is_causal)
  // At key Sk - Sq + i: query i sees keys j <= Sk - Sq + i, so the last query sees every key
  // (PyTorch's causal_lower_right). This is a chunk of a prompt prefilled after a cached
  // prefix of Sk - Sq keys, or a decode step (Sq = 1). With Sq > Sk the first Sq - Sk
  // queries see no key, and their rows are NaN (a fully masked row).
  BottomRight,
};

// Causal attention with the cut aligned as `causal` says, computed by the kernels from the
// positions (no mask in memory); `mask`, when defined, applies as well. The rest as above:
// scaled_dot_product_attention(q, k, v, Tensor(), CausalAlignment::BottomRight).
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& mask, CausalAlignment causal,
                                    std::optional<double> scale = std::nullopt);

}  // namespace kiln

#endif  // KILN_NN_H_
