// Family geometry (jit/fusion/family_geometry.h) against independently computed values: the
// facts both devices derive from it must be right on their own.
#include "jit/fusion/family_geometry.h"

#include <gtest/gtest.h>

#include <vector>

#include "jit/fusion/kernel_ir.h"

namespace kiln {
namespace {

// a [2, 1, 3, 4, 5] @ b [3, 5, 6]: the output's batch shape is [2, 1, 3]; a's batch dims
// follow the output's, b's single batch dim is the output's last. Offsets counted by hand.
TEST(FamilyGeometryTest, MatmulBatchOffsetsBroadcastRightAligned) {
  jit::KernelLaunch launch;
  launch.spaces = {{2, 1, 3, 4, 6}, {2, 1, 3, 4, 5}, {3, 5, 6}};
  const jit::MatmulShape mm = jit::matmul_shape(launch);
  ASSERT_EQ(mm.batches, 6);
  const jit::MatmulBatchOffsets offsets = jit::matmul_batch_offsets(mm);
  std::vector<int64_t> want_a, want_b;
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t j = 0; j < 3; ++j) {
      want_a.push_back((i * 3 + j) * 4 * 5);
      want_b.push_back(j * 5 * 6);
    }
  }
  EXPECT_EQ(offsets.a, want_a);
  EXPECT_EQ(offsets.b, want_b);
}

// a [4, 1, 2, 3] @ b [5, 3, 2]: a broadcasts along the output's dim 1, b along dim 0.
TEST(FamilyGeometryTest, MatmulBatchOffsetsBroadcastBothWays) {
  jit::KernelLaunch launch;
  launch.spaces = {{4, 5, 2, 2}, {4, 1, 2, 3}, {5, 3, 2}};
  const jit::MatmulBatchOffsets offsets = jit::matmul_batch_offsets(jit::matmul_shape(launch));
  ASSERT_EQ(offsets.a.size(), 20u);
  for (int64_t i = 0; i < 4; ++i) {
    for (int64_t j = 0; j < 5; ++j) {
      EXPECT_EQ(offsets.a[i * 5 + j], i * 6) << i << "," << j;
      EXPECT_EQ(offsets.b[i * 5 + j], j * 6) << i << "," << j;
    }
  }
  // The rule the CUDA renderer emits: a's batch dim 0 (rank 4) is output batch dim 0, b's
  // (rank 3) is output batch dim 1.
  EXPECT_EQ(jit::matmul_batch_dim(4, 2, 0), 0);
  EXPECT_EQ(jit::matmul_batch_dim(4, 2, 1), 1);
  EXPECT_EQ(jit::matmul_batch_dim(3, 2, 0), 1);
}

// 1-D operands are made a row and a column; no batch dims.
TEST(FamilyGeometryTest, MatmulVectorOperands) {
  jit::KernelLaunch launch;
  launch.spaces = {{}, {7}, {7}};
  const jit::MatmulShape mm = jit::matmul_shape(launch);
  EXPECT_EQ(mm.m, 1);
  EXPECT_EQ(mm.k, 7);
  EXPECT_EQ(mm.n, 1);
  const jit::MatmulBatchOffsets offsets = jit::matmul_batch_offsets(mm);
  EXPECT_EQ(offsets.a, std::vector<int64_t>{0});
  EXPECT_EQ(offsets.b, std::vector<int64_t>{0});
}

}  // namespace
}  // namespace kiln
