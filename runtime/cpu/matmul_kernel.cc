// Matmul kernels: the operands are evaluated whole, multiplied per batch matrix by Eigen's
// GEMM on all cores, then the epilogue runs over the product.
#include <Eigen/Core>
#include <algorithm>

#include "runtime/cpu/kernel_families.h"
#include "runtime/cpu/tile_evaluator.h"
#include "runtime/thread_pool.h"

namespace kiln::runtime::cpu {
namespace {

using jit::KernelLaunch;
using jit::KernelProgram;
using ops::Shape;

template <class T>
void matmul(const KernelProgram& program, const KernelLaunch& launch,
            const std::vector<const Buffer*>& inputs, const std::vector<double>& params,
            T* result) {
  std::vector<T> a = evaluate_operand<T>(program, launch, inputs, params, 0);
  std::vector<T> b = evaluate_operand<T>(program, launch, inputs, params, 1);
  const jit::MatmulShape mm = jit::matmul_shape(launch);
  const Shape &sa = mm.a, &sb = mm.b;
  const int64_t m = mm.m, k = mm.k, n = mm.n, batches = mm.batches;
  // Broadcast batch index -> operand batch offsets.
  Shape batch_shape;
  const size_t rank = std::max(sa.size(), sb.size()) - 2;
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - (sa.size() - 2) ? 1 : sa[i - (rank - (sa.size() - 2))];
    int64_t db = i < rank - (sb.size() - 2) ? 1 : sb[i - (rank - (sb.size() - 2))];
    batch_shape.push_back(std::max(da, db));
  }
  auto batch_view = [&](const Shape& s, int64_t matrix) {
    Shape bs(s.begin(), s.end() - 2);
    std::vector<int64_t> cs = ops::contiguous_strides(bs);
    jit::ViewParams v;
    v.strides.assign(rank, 0);
    for (size_t i = 0; i < bs.size(); ++i) {
      size_t j = rank - bs.size() + i;
      v.strides[j] = bs[i] == 1 ? 0 : cs[i] * matrix;
    }
    return v;
  };
  std::vector<int64_t> a_off(std::max<int64_t>(batches, 1)), b_off(std::max<int64_t>(batches, 1));
  view_offsets(batch_shape, batch_view(sa, m * k), 0, batches, a_off.data());
  view_offsets(batch_shape, batch_view(sb, k * n), 0, batches, b_off.data());
  std::fill_n(result, ops::numel(launch.spaces[0]), T{});
  using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  for (int64_t bi = 0; bi < batches; ++bi) {
    Eigen::Map<const RowMajor> ma(a.data() + a_off[bi], m, k);
    Eigen::Map<const RowMajor> mb(b.data() + b_off[bi], k, n);
    Eigen::Map<RowMajor> mc(result + bi * m * n, m, n);
    if (k == 0) continue;
    // Rows split across cores; Eigen's kernel does each block.
    parallel_for(m, std::max<int64_t>(1, 65536 / std::max<int64_t>(1, n * k)),
                 [&](int64_t r0, int64_t r1) {
                   mc.middleRows(r0, r1 - r0).noalias() = ma.middleRows(r0, r1 - r0) * mb;
                 });
  }
}

}  // namespace

void run_matmul(const KernelProgram& program, const KernelLaunch& launch,
                const std::vector<const Buffer*>& inputs, const std::vector<Buffer*>& outputs,
                const std::vector<double>& params) {
  run_anchored(program, launch, inputs, outputs, params, [&](auto* result) {
    using T = std::remove_pointer_t<decltype(result)>;
    matmul<T>(program, launch, inputs, params, result);
  });
}

}  // namespace kiln::runtime::cpu
