// Neural-network building blocks. Each is recorded as one op (so a later planner can run it
// as one persistent-row kernel); all need floating dtypes.
#ifndef KILN_NN_H_
#define KILN_NN_H_

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

}  // namespace kiln

#endif  // KILN_NN_H_
