// Neural-network building blocks. Each is recorded as one op (so a later planner can run it
// as one persistent-row kernel); all need floating dtypes.
#ifndef KILN_NN_H_
#define KILN_NN_H_

#include <optional>
#include <vector>

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

// Which dims of the last axis rotary position embedding turns together.
enum class RopePairs {
  Adjacent,  // (2j, 2j + 1): GPT-J, Meta's Llama code, llama.cpp's llama files
  Halves,    // (j, j + D / 2): GPT-NeoX, the Hugging Face checkpoints ("rotate_half")
};

// Rotary position embedding (Su et al., 2021). Each pair (a, b) of x's last axis (D dims, D
// even; `pairs` says which dims pair up) turns by the angle
//     theta = position / scale * base^(-2j / D)        for the pair's index j in [0, D / 2)
// into (a cos theta - b sin theta, b cos theta + a sin theta).
// - positions (integer or floating) holds one position per vector of x: its shape followed by
//   D must broadcast to x's shape. x [B, S, H, D] takes positions [S, 1]; x [B, H, S, D]
//   takes positions [S] or [B, 1, S].
// - Each angle is position * frequency in double, reduced to [-pi, pi] in double, so late
//   positions (thousands of radians) keep their precision; its sin and cos are taken in f32.
//   The result has x's dtype. scale > 1 is linear RoPE scaling (position interpolation).
// - Recorded as elementwise ops and one gather along the last axis, which the planner fuses
//   into the kernel that reads the result (an attention, a cache write): no rotated copy
//   reaches memory. Positions are a tensor, so a compiled step (kiln::compile) takes new
//   positions without re-recording.
Tensor rope(const Tensor& x, const Tensor& positions, RopePairs pairs, double base = 10000.0,
            double scale = 1.0);

// rope's factors for one set of positions, [positions' shape..., D] each, to share among
// several rope calls (a model's queries and keys in every layer): the planner computes them
// once per step into two small tables, which every rope kernel then reads, where rope(x,
// positions, ...) computes its angles inline in the kernel that reads it.
struct RopeFactors {
  Tensor cos;       // cos theta at both dims of a pair
  Tensor sin;       // -sin theta at a pair's first dim, +sin theta at its second
  Tensor partners;  // I32 [D]: each dim's partner in its pair
};
// `divisors`, when given, holds D / 2 values: pair j's angle is divided by divisors[j]
// (Llama 3's RoPE frequency factors, GGUF's rope_freqs.weight).
RopeFactors rope_factors(const Tensor& positions, int64_t dims, RopePairs pairs,
                         double base = 10000.0, double scale = 1.0, DType dtype = DType::F32,
                         const std::vector<double>& divisors = {});
// x * cos + take(x, partners, -1) * sin: rope(x, positions, ...) with the factors given.
Tensor rope(const Tensor& x, const RopeFactors& factors);

}  // namespace kiln

#endif  // KILN_NN_H_
