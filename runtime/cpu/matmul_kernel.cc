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

template <class T>
void matmul(const KernelProgram& program, const KernelLaunch& launch,
            const std::vector<const Buffer*>& inputs, const std::vector<double>& params,
            T* result) {
  std::vector<T> a = evaluate_operand<T>(program, launch, inputs, params, 0);
  std::vector<T> b = evaluate_operand<T>(program, launch, inputs, params, 1);
  const jit::MatmulShape mm = jit::matmul_shape(launch);
  const int64_t m = mm.m, k = mm.k, n = mm.n, batches = mm.batches;
  const jit::MatmulBatchOffsets offsets = jit::matmul_batch_offsets(mm);
  std::fill_n(result, ops::numel(launch.spaces[0]), T{});
  using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  for (int64_t bi = 0; bi < batches; ++bi) {
    Eigen::Map<const RowMajor> ma(a.data() + offsets.a[bi], m, k);
    Eigen::Map<const RowMajor> mb(b.data() + offsets.b[bi], k, n);
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
