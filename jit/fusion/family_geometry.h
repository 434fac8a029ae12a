// Family geometry: the shape facts of a kernel that both devices derive the same way, kept
// beside the Kernel IR (kernel_ir.h) so the CPU executor and the CUDA renderer/launcher read
// them from one place instead of recomputing them: how a view walks its buffer (the typed
// view access pattern), the register class a dtype computes in, a row op's rows, a
// reduction's kept and reduced axes, and a matmul's matrix sizes.
//
// kernel_ir.h includes this header (KernelProgram holds ViewPatterns), so it only forward
// declares the Kernel IR types it takes.
#ifndef KILN_JIT_FUSION_FAMILY_GEOMETRY_H_
#define KILN_JIT_FUSION_FAMILY_GEOMETRY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/dtype.h"
#include "ops/value_type.h"

namespace kiln::jit {

struct ViewParams;
struct KernelProgram;
struct KernelLaunch;

// How a view walks its buffer over its space.
enum class ViewAccess {
  kContiguous,  // row-major over its whole source, from offset 0
  kBroadcast,   // some dims of size > 1 have stride 0
  kStrided,     // anything else (a transpose, a slice)
  kGathered,    // a kGather's view: strided, plus a data-dependent position along one axis
};

// A view's access pattern: what a renderer specializes on. It never holds sizes.
struct ViewPattern {
  int rank = 0;
  ViewAccess access = ViewAccess::kStrided;
  std::vector<int> broadcast_dims;  // kBroadcast: the stride-0 dims of size > 1

  // "r2:contiguous", "r3:broadcast(0,2)" or "r1:strided": the printed form (part of the
  // kernel cache key, of dumps and of CUDA source comments).
  std::string to_string() const;
};

// The access pattern of `view` over `space`, reading a source of `source_numel` elements.
// (Lowering marks a kGather's view kGathered itself.)
ViewPattern view_pattern(const ops::Shape& space, const ViewParams& view, int64_t source_numel);

// The register class a dtype computes in: f16/bf16/f32 in float, f64 in double, integers and
// bool in int64.
enum class RegisterClass { kFloat, kDouble, kInt };

// The register class `dt` computes in.
inline RegisterClass register_class(DType dt) {
  if (dt == DType::F64) return RegisterClass::kDouble;
  return is_floating(dt) ? RegisterClass::kFloat : RegisterClass::kInt;
}

// A row op's operand space (space 1: a row norm's, a scan's or a topk's) seen as rows along
// the anchor axis: `outer` rows before the axis, `extent` elements along it, `inner`
// positions after it (the row's stride).
struct RowShape {
  int64_t outer = 1;
  int64_t extent = 1;
  int64_t inner = 1;

  // The number of rows (outer * inner); 0 when the rows are empty (extent 0).
  int64_t rows() const { return extent > 0 ? outer * inner : 0; }
};

// The row shape of row op `program` under `launch` (a rank-0 space is one row of one).
RowShape row_norm_shape(const KernelProgram& program, const KernelLaunch& launch);

// A reduction's (or arg-reduction's) operand dims, in order, split into those it folds and
// those it keeps.
struct ReductionAxes {
  std::vector<int> reduced;
  std::vector<int> kept;
  std::vector<bool> is_reduced;  // per dim
};

// The reduced and kept dims of reduction `program`'s operand space, of rank `rank`: the
// anchor's axes, or for an arg-reduction its one axis.
ReductionAxes reduction_axes(const KernelProgram& program, int rank);

// The elements one output of a reduction folds: numel(space 1) / numel(space 0), 0 when it has
// no outputs.
int64_t reduced_extent(const KernelLaunch& launch);

// A matmul's operand shapes with a 1-D operand made a matrix (a: a row [1, k], b: a column
// [k, 1]), its matrix sizes, and the number of batch matrices in its output.
struct MatmulShape {
  ops::Shape a, b;
  int64_t m = 0;
  int64_t k = 0;
  int64_t n = 0;
  int64_t batches = 0;  // numel(space 0) / (m * n); 0 when m * n is 0
};

// The matrix shape of matmul launch `launch` (spaces 1 and 2 are its operands).
MatmulShape matmul_shape(const KernelLaunch& launch);

// Matmul batch broadcasting (numpy): an operand's batch dims (all but its last two) are
// right-aligned to the output's `out_batch_rank` batch dims, and a batch dim of extent 1 is
// read at index 0. Batch dim j of an operand of rank `operand_rank` follows output batch dim
// matmul_batch_dim(operand_rank, out_batch_rank, j). The CUDA renderer emits this rule; the
// CPU executor applies it through matmul_batch_offsets.
inline int matmul_batch_dim(int operand_rank, int out_batch_rank, int j) {
  return out_batch_rank - (operand_rank - 2) + j;
}

// Where each of the output's batch matrices (in row-major batch order) starts in operands a
// and b, contiguous row-major arrays of shapes mm.a and mm.b: mm.batches offsets each.
struct MatmulBatchOffsets {
  std::vector<int64_t> a, b;
};
MatmulBatchOffsets matmul_batch_offsets(const MatmulShape& mm);

}  // namespace kiln::jit

#endif  // KILN_JIT_FUSION_FAMILY_GEOMETRY_H_
