// The collective ops of kiln/distributed.h on several processes: run by ctest as
// `mpirun -np N kiln_distributed_ops_tests` for N = 2, 3 and 4 (tests/CMakeLists.txt).
// Every rank draws every rank's inputs from seeds all ranks know, so each checks every
// element of its result against values it computes itself, independently of MPI.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kiln/distributed.h"
#include "kiln/kiln.h"

namespace kiln {
namespace {

namespace dist = kiln::distributed;

// Rank r's operand: n values in [-2, 2), rounded to `dtype`, drawn from (seed, r).
std::vector<double> operand(int r, int64_t n, uint64_t seed, DType dtype) {
  std::mt19937_64 rng(seed * 1000 + static_cast<uint64_t>(r));
  std::uniform_real_distribution<double> u(-2, 2);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) {
    x = u(rng);
    if (is_integral(dtype)) x = std::round(x * (dtype_size(dtype) < 4 ? 10 : 50));
    if (dtype == DType::U8) x = std::abs(x);  // narrow integers: sums of 8 ranks still fit
    if (dtype == DType::F8E4M3) x = static_cast<float>(Float8E4M3(static_cast<float>(x)));
    if (dtype == DType::F32) x = static_cast<float>(x);
    if (dtype == DType::F16) x = static_cast<float>(Half(static_cast<float>(x)));
    if (dtype == DType::BF16) x = static_cast<float>(BFloat16(static_cast<float>(x)));
  }
  return v;
}

// A computed tensor (a trace input) holding v as `dtype`.
Tensor tensor_of(const std::vector<double>& v, const std::vector<int64_t>& shape, DType dtype) {
  return Tensor::from_vector(v, shape).astype(dtype).eval();
}

std::vector<double> values(const Tensor& t) { return t.astype(DType::F64).to_vector<double>(); }

// The tolerance of one element of a result of `dtype` near `value`.
double tolerance(DType dtype, double value) {
  switch (dtype) {
    case DType::F16:
      return 1e-3 * std::max(1.0, std::abs(value));
    case DType::BF16:
      return 8e-3 * std::max(1.0, std::abs(value));
    case DType::F32:
      return 1e-5 * std::max(1.0, std::abs(value));
    case DType::F8E4M3:  // half a step of a 3-bit mantissa: one rounding of the f32 result
      return 0.0625 * std::max(1.0, std::abs(value));
    default:
      return 1e-12 * std::max(1.0, std::abs(value));
  }
}

void expect_all_near(const std::vector<double>& got, const std::vector<double>& want, DType dtype) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tolerance(dtype, want[i])) << "element " << i;
  }
}

class Collectives : public ::testing::Test {
 protected:
  dist::Group world = dist::init();
  int rank = world.rank();
  int size = world.size();
};

TEST_F(Collectives, AllReduceCombinesEveryDtypeWithEveryReduction) {
  const std::vector<int64_t> shape = {5, 7};
  const int64_t n = 35;
  uint64_t seed = 1;
  // The narrow dtypes are combined in f32 or i32 (docs/distributed.md).
  for (DType dtype : {DType::F32, DType::F64, DType::I32, DType::I64, DType::F16, DType::BF16,
                      DType::I8, DType::U8, DType::I16, DType::F8E4M3}) {
    for (dist::Reduction r : {dist::Reduction::kSum, dist::Reduction::kMean, dist::Reduction::kMax,
                              dist::Reduction::kMin}) {
      if (r == dist::Reduction::kMean && is_integral(dtype)) continue;
      SCOPED_TRACE(absl::StrCat(dtype_name(dtype), " reduction ", static_cast<int>(r)));
      ++seed;
      std::vector<double> want(static_cast<size_t>(n));
      for (int q = 0; q < size; ++q) {
        std::vector<double> v = operand(q, n, seed, dtype);
        for (int64_t i = 0; i < n; ++i) {
          double& w = want[i];
          if (q == 0) {
            w = v[i];
          } else if (r == dist::Reduction::kMax) {
            w = std::max(w, v[i]);
          } else if (r == dist::Reduction::kMin) {
            w = std::min(w, v[i]);
          } else {
            w += v[i];
          }
        }
      }
      if (r == dist::Reduction::kMean) {
        for (double& w : want) w /= size;
      }
      Tensor x = tensor_of(operand(rank, n, seed, dtype), shape, dtype);
      Tensor y = dist::all_reduce(x, r);
      EXPECT_EQ(y.dtype(), dtype);
      EXPECT_EQ(y.shape(), shape);
      expect_all_near(values(y), want, dtype);
    }
  }
}

TEST_F(Collectives, FuseOnBothSidesOfTheBoundaryAndSaySo) {
  const int64_t n = 64;
  std::vector<double> want(n, 0.0);
  for (int q = 0; q < size; ++q) {
    std::vector<double> v = operand(q, n, 77, DType::F32);
    for (int64_t i = 0; i < n; ++i) want[i] += static_cast<float>(v[i] * 2 + 1);
  }
  for (double& w : want) w = std::max(w, 0.0) - 3;
  Tensor x = tensor_of(operand(rank, n, 77, DType::F32), {8, 8}, DType::F32);
  Tensor y = relu(dist::all_reduce(x * 2.0 + 1.0)) - 3.0;
  const std::string plan = explain_plan({y}, ExplainDetail::kPlan);
  EXPECT_NE(plan.find("all_reduce_sum_f32"), std::string::npos) << plan;
  EXPECT_NE(plan.find("fusion boundary"), std::string::npos) << plan;
  expect_all_near(values(y), want, DType::F32);
}

TEST_F(Collectives, AllGatherStacksRanksAlongAnyAxis) {
  const std::vector<int64_t> shape = {3, 4, 5};
  for (int axis : {0, 1, 2, -1}) {
    SCOPED_TRACE(absl::StrCat("axis ", axis));
    std::vector<Tensor> parts;
    parts.reserve(static_cast<size_t>(size));
    for (int q = 0; q < size; ++q) {
      parts.push_back(tensor_of(operand(q, 60, 5 + axis, DType::F32), shape, DType::F32));
    }
    Tensor want = concat(parts, axis);
    Tensor got = dist::all_gather(parts[rank] * 1.0, axis);
    EXPECT_EQ(got.shape(), want.shape());
    EXPECT_EQ(values(got), values(want));
  }
}

TEST_F(Collectives, ReduceScatterKeepsThisRanksBlockOfTheSum) {
  for (int axis : {0, 1}) {
    SCOPED_TRACE(absl::StrCat("axis ", axis));
    const std::vector<int64_t> shape =
        axis == 0 ? std::vector<int64_t>{size * 2, 3} : std::vector<int64_t>{2, size * 3, 4};
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    Tensor sum = Tensor::zeros(shape, DType::F64);
    for (int q = 0; q < size; ++q)
      sum = sum + tensor_of(operand(q, n, 9, DType::F64), shape, DType::F64);
    const int64_t block = shape[axis] / size;
    Tensor want = sum.slice(axis, rank * block, (rank + 1) * block);
    Tensor got = dist::reduce_scatter(tensor_of(operand(rank, n, 9, DType::F64), shape, DType::F64),
                                      dist::Reduction::kSum, axis);
    EXPECT_EQ(got.shape(), want.shape());
    expect_all_near(values(got), values(want), DType::F64);
  }
}

TEST_F(Collectives, ReduceScatterTakesEveryReductionAndSixteenBitFloats) {
  const int64_t n = 4 * size;
  for (DType dtype : {DType::F32, DType::BF16}) {
    for (dist::Reduction r :
         {dist::Reduction::kMax, dist::Reduction::kMin, dist::Reduction::kMean}) {
      SCOPED_TRACE(absl::StrCat(dtype_name(dtype), " reduction ", static_cast<int>(r)));
      std::vector<double> want(static_cast<size_t>(n));
      for (int q = 0; q < size; ++q) {
        const std::vector<double> v = operand(q, n, 31, dtype);
        for (int64_t i = 0; i < n; ++i) {
          want[i] = q == 0                       ? v[i]
                    : r == dist::Reduction::kMax ? std::max(want[i], v[i])
                    : r == dist::Reduction::kMin ? std::min(want[i], v[i])
                                                 : want[i] + v[i];
        }
      }
      if (r == dist::Reduction::kMean) {
        for (double& w : want) w /= size;
      }
      Tensor got = dist::reduce_scatter(tensor_of(operand(rank, n, 31, dtype), {n}, dtype), r);
      expect_all_near(values(got),
                      std::vector<double>(want.begin() + rank * 4, want.begin() + rank * 4 + 4),
                      dtype);
    }
  }
}

TEST_F(Collectives, TwoEqualSendsInOneSyncAreTwoMessages) {
  // Equal nodes are merged in a trace; two equal sends must not be, or rank 1's second
  // receive would wait for a message that never comes.
  Tensor x = tensor_of(operand(0, 6, 37, DType::F32), {2, 3}, DType::F32);
  if (rank == 0) {
    eval({dist::send(x, 1), dist::send(x, 1)});
  } else if (rank == 1) {
    Tensor a = dist::recv_like(x, 0), b = dist::recv_like(x, 0);
    eval({a, b});
    EXPECT_EQ(values(a), values(x));
    EXPECT_EQ(values(b), values(x));
  }
}

TEST_F(Collectives, BroadcastGivesEveryRankTheRootsTensor) {
  for (int root = 0; root < size; ++root) {
    Tensor mine = tensor_of(operand(rank, 12, 11, DType::I64), {3, 4}, DType::I64);
    Tensor got = dist::broadcast(mine, root);
    EXPECT_EQ(values(got), operand(root, 12, 11, DType::I64)) << "root " << root;
  }
}

TEST_F(Collectives, SendAndRecvPassTensorsAroundARing) {
  const int next = (rank + 1) % size, previous = (rank + size - 1) % size;
  Tensor mine = tensor_of(operand(rank, 1000, 13, DType::BF16), {10, 100}, DType::BF16);
  Tensor sent = dist::send(mine + 0.0, next);
  Tensor got = dist::recv(DType::BF16, {10, 100}, previous);
  // Even ranks send first: every send meets a posted receive, at any message size.
  if (rank % 2 == 0) {
    eval({sent});
    eval({got});
  } else {
    eval({got});
    eval({sent});
  }
  EXPECT_EQ(values(sent), values(mine));
  EXPECT_EQ(values(got), operand(previous, 1000, 13, DType::BF16));
}

TEST_F(Collectives, SubGroupsRunTheirOwnCollectives) {
  dist::Group half = world.split(rank % 2);
  std::vector<int> members;
  for (int q = rank % 2; q < size; q += 2) members.push_back(q);
  EXPECT_EQ(half.world_ranks(), members);
  EXPECT_EQ(half.size(), static_cast<int>(members.size()));
  double want = 0;
  for (int q : members) want += q + 1;
  Tensor got = dist::all_reduce(Tensor::full({3}, rank + 1.0), dist::Reduction::kSum, half);
  EXPECT_EQ(values(got), std::vector<double>(3, want));
}

TEST_F(Collectives, RanksThatDisagreeOnTheShapeAllFailNamingBoth) {
  const int64_t cols = rank == 0 ? 3 : 4;
  Tensor x = Tensor::ones({2, cols});
  try {
    eval({dist::all_reduce(x)});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("[all_reduce] the ranks of the group disagree"), std::string::npos) << m;
    EXPECT_NE(m.find("rank 0 called all_reduce of f32[2,3]"), std::string::npos) << m;
    EXPECT_NE(m.find("rank 1 called all_reduce of f32[2,4]"), std::string::npos) << m;
  }
  // The group is still usable: nothing was exchanged but the calls' descriptions.
  EXPECT_EQ(values(dist::all_reduce(Tensor::ones({2}))), std::vector<double>(2, size));
}

TEST_F(Collectives, ACollectiveRunsOnceThoughSyncsDiffer) {
  Tensor y = dist::all_reduce(Tensor::full({4}, rank + 1.0) * 1.0);
  Tensor a = y + 1.0, b = y * 2.0;
  // Rank 0 needs y twice, at two syncs; the others once: y must not run again on rank 0.
  if (rank == 0) {
    eval({a});
    eval({b});
  } else {
    eval({a, b});
  }
  const double sum = size * (size + 1) / 2.0;
  EXPECT_EQ(values(a), std::vector<double>(4, sum + 1));
  EXPECT_EQ(values(b), std::vector<double>(4, sum * 2));
}

// A compiled function replays its launch plan on later calls without calling the function:
// the collective in the plan runs again on every call, with that call's operand.
TEST_F(Collectives, CompiledFunctionsRunTheirCollectiveOnEveryCall) {
  int traced = 0;
  Compiled step = compile([&](const std::vector<Tensor>& in) {
    ++traced;
    return std::vector<Tensor>{dist::all_reduce(in[0] * 2.0) + in[1]};
  });
  for (uint64_t call = 0; call < 4; ++call) {
    SCOPED_TRACE(absl::StrCat("call ", call));
    const uint64_t seed = 300 + call;  // fresh operands each call
    std::vector<double> want = operand(rank, 12, seed + 50, DType::F32);
    for (int q = 0; q < size; ++q) {
      const std::vector<double> v = operand(q, 12, seed, DType::F32);
      for (size_t i = 0; i < v.size(); ++i) want[i] += static_cast<float>(v[i] * 2);
    }
    Tensor x = tensor_of(operand(rank, 12, seed, DType::F32), {3, 4}, DType::F32);
    Tensor b = tensor_of(operand(rank, 12, seed + 50, DType::F32), {3, 4}, DType::F32);
    const std::vector<Tensor> out = step({x, b});
    ASSERT_EQ(out.size(), 1u);
    expect_all_near(values(out[0]), want, DType::F32);
  }
  EXPECT_EQ(traced, 1) << "later calls replay the recorded plan";
}

TEST_F(Collectives, TraceFilesRecordAndReplayThem) {
  Tensor x = tensor_of(operand(rank, 6, 17, DType::F32), {2, 3}, DType::F32);
  Tensor y = dist::all_gather(dist::all_reduce(x * 3.0, dist::Reduction::kMax), 1);
  const std::string json = dump_trace({y}, DumpFormat::Json);
  EXPECT_NE(json.find("\"ranks\""), std::string::npos) << json;
  LoadedTrace trace = load_trace(json);
  ASSERT_EQ(trace.inputs().size(), 1u);
  std::vector<Tensor> replayed = trace.run({{trace.inputs()[0].name, x}});
  EXPECT_EQ(values(replayed[0]), values(y));
}

TEST_F(Collectives, TensorParallelLinearLayersEqualTheWholeLayer) {
  const int64_t in = 4 * size, out = 6 * size;
  std::mt19937_64 rng(23);
  std::normal_distribution<double> g;
  auto random = [&](const std::vector<int64_t>& shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<double> v(static_cast<size_t>(n));
    for (double& x : v) x = g(rng);
    return Tensor::from_vector(v, shape).astype(DType::F32);
  };
  Tensor x = random({3, in}), w = random({out, in}), b = random({out});
  Tensor whole = linear(x, w, b);
  const dist::Shard rows = dist::shard_of(out), cols = dist::shard_of(in);
  Tensor column = dist::column_parallel_linear(x, w.slice(0, rows.start, rows.start + rows.size),
                                               b.slice(0, rows.start, rows.start + rows.size),
                                               /*gather_output=*/true);
  expect_all_near(values(column), values(whole), DType::F32);
  Tensor row = dist::row_parallel_linear(x.slice(1, cols.start, cols.start + cols.size),
                                         w.slice(1, cols.start, cols.start + cols.size), b);
  expect_all_near(values(row), values(whole), DType::F32);
}

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  kiln::distributed::init();  // every rank, before any test: a missing MPI fails here
  // Every rank runs every test; mpirun's status is the worst rank's.
  return RUN_ALL_TESTS();
}
