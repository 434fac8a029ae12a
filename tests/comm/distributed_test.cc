// kiln/distributed.h in one process (no launcher): the world of one rank, collectives that
// return their operand but still check it, shard loading from .safetensors, and replaying
// a trace with collectives outside its group. tests/comm/distributed_ops_test.cc runs the
// collectives on several processes (mpirun).
#include "kiln/distributed.h"

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "ops/collective.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

namespace dist = kiln::distributed;
using testing::expect_error;

TEST(DistributedSingleProcess, TheWorldIsThisProcessAlone) {
  dist::Group world = dist::init();
  EXPECT_EQ(world.rank(), 0);
  EXPECT_EQ(world.size(), 1);
  EXPECT_EQ(world.backend(), "single process");
  EXPECT_EQ(world.world_ranks(), std::vector<int>{0});
  EXPECT_EQ(dist::init().id(), world.id());  // idempotent
  world.barrier();
  dist::Group sub = world.split(7);
  EXPECT_EQ(sub.size(), 1);
  EXPECT_NE(sub.id(), world.id());
}

TEST(DistributedSingleProcess, CollectivesReturnTheirOperand) {
  std::mt19937_64 rng(testing::test_seed());
  Tensor x = Tensor::from_vector(testing::random_floats(24, rng), {4, 6});
  const std::vector<double> want = testing::values(x);
  for (dist::Reduction r : {dist::Reduction::kSum, dist::Reduction::kMean, dist::Reduction::kMax,
                            dist::Reduction::kMin}) {
    EXPECT_EQ(testing::values(dist::all_reduce(x, r)), want);
    EXPECT_EQ(testing::values(dist::reduce_scatter(x, r, 1)), want);
  }
  EXPECT_EQ(testing::values(dist::all_gather(x, 1)), want);
  EXPECT_EQ(testing::values(dist::broadcast(x, 0)), want);
  EXPECT_EQ(dist::all_gather(x, -1).shape(), x.shape());
}

TEST(DistributedSingleProcess, CollectivesStillCheckTheirOperands) {
  Tensor ints = Tensor::from_vector(std::vector<int32_t>{1, 2, 3}, {3});
  expect_error([&] { dist::all_reduce(ints, dist::Reduction::kMean); },
               {"[all_reduce]", "mean needs a floating dtype", "x: i32[3]"});
  expect_error([&] { dist::all_reduce(Tensor::ones({2}, DType::Bool)); }, {"[all_reduce]", "bool"});
  expect_error([&] { dist::all_gather(Tensor::zeros({2, 3}), 2); }, {"[all_gather]", "axis 2"});
  expect_error([&] { dist::broadcast(ints, 1); }, {"[broadcast]", "root rank 1", "ranks 0 to 0"});
  expect_error([&] { dist::send(ints, 1); }, {"[send]", "destination rank 1", "ranks 0 to 0"});
  expect_error([&] { dist::recv(DType::F32, {2}, 0); },
               {"[recv]", "own rank 0", "expected another rank"});
}

class DistributedShardTest : public testing::ScratchDirTest {};

TEST_F(DistributedShardTest, EveryPartOfEveryAxisIsTheMatchingSlice) {
  std::mt19937_64 rng(testing::test_seed());
  const std::vector<int64_t> shape = {6, 4, 12};
  std::map<std::string, Tensor> tensors;
  tensors["w"] = Tensor::from_vector(testing::random_floats(6 * 4 * 12, rng), shape);
  tensors["h"] = tensors["w"].astype(DType::BF16);
  tensors["other"] = Tensor::from_vector(testing::random_floats(5, rng), {5});
  save_safetensors(path("m.safetensors"), tensors);
  for (const std::string name : {"w", "h"}) {
    for (int axis = -1; axis < 3; ++axis) {
      const int a = axis < 0 ? axis + 3 : axis;
      for (int parts : {1, 2, 3, 6}) {
        if (shape[a] % parts != 0) continue;
        for (int part = 0; part < parts; ++part) {
          SCOPED_TRACE(absl::StrCat(name, " axis ", axis, " part ", part, "/", parts));
          const int64_t k = shape[a] / parts;
          Tensor got = load_safetensors_shard(path("m.safetensors"), name, axis, part, parts);
          Tensor want = tensors[name].slice(a, part * k, (part + 1) * k);
          EXPECT_EQ(got.dtype(), want.dtype());
          EXPECT_EQ(got.shape(), want.shape());
          EXPECT_EQ(testing::values(got), testing::values(want));
        }
      }
    }
  }
}

// Bytes this process has read through read(2)/pread(2) so far (Linux's rchar).
int64_t bytes_read_by_this_process() {
  std::ifstream io("/proc/self/io");
  std::string key;
  int64_t value = 0;
  while (io >> key >> value) {
    if (key == "rchar:") return value;
  }
  return -1;
}

TEST_F(DistributedShardTest, ReadsOnlyTheShardsBytes) {
  if (bytes_read_by_this_process() < 0) GTEST_SKIP() << "no /proc/self/io here";
  const int64_t rows = 1024, cols = 1024;  // 4 MiB
  std::map<std::string, Tensor> tensors{{"w", Tensor::arange(rows * cols).reshape({rows, cols})}};
  save_safetensors(path("big.safetensors"), tensors);
  for (int axis : {0, 1}) {
    const int64_t before = bytes_read_by_this_process();
    Tensor shard = load_safetensors_shard(path("big.safetensors"), "w", axis, 3, 4);
    const int64_t read = bytes_read_by_this_process() - before;
    SCOPED_TRACE(absl::StrCat("axis ", axis, ": read ", read, " bytes"));
    EXPECT_GE(read, rows * cols * 4 / 4);
    EXPECT_LT(read, rows * cols * 4 / 4 + 4096);  // the shard, the header, nothing else
    Tensor want = tensors["w"].slice(axis, 3 * 256, 4 * 256);
    EXPECT_EQ(testing::values(shard), testing::values(want));
  }
}

TEST_F(DistributedShardTest, BadRequestsNameTheTensorAndTheProblem) {
  save_safetensors(path("m.safetensors"), {{"w", Tensor::zeros({6, 4})}});
  expect_error([&] { load_safetensors_shard(path("m.safetensors"), "w", 1, 0, 3); },
               {"[load_safetensors_shard]", "'w'", "f32[6, 4]", "extent 4", "3 parts"});
  expect_error([&] { load_safetensors_shard(path("m.safetensors"), "v", 0, 0, 2); },
               {"'v'", "no tensor of that name"});
  expect_error([&] { load_safetensors_shard(path("m.safetensors"), "w", 2, 0, 2); },
               {"has no axis 2"});
  expect_error([&] { load_safetensors_shard(path("m.safetensors"), "w", 0, 2, 2); },
               {"0 <= part < parts"});
  expect_error([&] { load_safetensors_shard(path("missing.safetensors"), "w", 0, 0, 2); },
               {"cannot open"});
}

TEST(DistributedSingleProcess, ShardOfSplitsEvenlyOrSaysWhy) {
  dist::Shard s = dist::shard_of(12);
  EXPECT_EQ(s.start, 0);
  EXPECT_EQ(s.size, 12);
  expect_error([&] { dist::shard_of(-4); }, {"[shard_of]", "extent -4", "group of 1"});
}

TEST(DistributedSingleProcess, ReplayingACollectiveOutsideItsGroupIsAClearError) {
  const std::string trace = R"({"format": "kiln.trace", "version": 1,
    "nodes": [
      {"id": 0, "op": "input", "name": "x", "dtype": "f32", "shape": [2, 3]},
      {"id": 1, "op": "all_reduce", "args": [0], "attrs": {"ranks": [0, 1], "reduction": "sum"},
       "dtype": "f32", "shape": [2, 3]}],
    "outputs": [1]})";
  expect_error([&] { load_trace(trace); },
               {"all_reduce", "world ranks [0, 1]", "rank 0 of a world of 1", "mpirun -np 2"});
}

// The shape rule reads the group's size and this rank from the attributes the op was recorded
// with: a group of four is inferred as four ranks in a process that has only a world of one.
TEST(DistributedSingleProcess, TheShapeRuleReadsTheRecordedGroupNotTheRegistry) {
  const std::vector<ops::ValueType> in = {{{6, 4}, DType::F32}};
  ops::Attrs attrs;
  attrs.group = 12345;  // no such group in this process
  attrs.group_size = 4;
  attrs.group_rank = 1;
  attrs.axis = 0;
  absl::StatusOr<ops::ValueType> gathered =
      ops::infer_collective(ops::OpKind::AllGather, in, attrs);
  ASSERT_TRUE(gathered.ok()) << gathered.status();
  EXPECT_EQ(gathered->shape, (std::vector<int64_t>{24, 4}));
  attrs.axis = 1;
  absl::StatusOr<ops::ValueType> scattered =
      ops::infer_collective(ops::OpKind::ReduceScatter, in, attrs);
  ASSERT_TRUE(scattered.ok()) << scattered.status();
  EXPECT_EQ(scattered->shape, (std::vector<int64_t>{6, 1}));
  attrs.peer = 1;  // this rank
  absl::StatusOr<ops::ValueType> sent = ops::infer_collective(ops::OpKind::Send, in, attrs);
  ASSERT_FALSE(sent.ok());
  EXPECT_NE(sent.status().message().find("own rank 1"), std::string_view::npos) << sent.status();
  attrs.peer = 4;
  sent = ops::infer_collective(ops::OpKind::Send, in, attrs);
  ASSERT_FALSE(sent.ok());
  EXPECT_NE(sent.status().message().find("ranks 0 to 3"), std::string_view::npos) << sent.status();

  ops::Attrs unset;  // never given a group
  absl::StatusOr<ops::ValueType> bad = ops::infer_collective(ops::OpKind::AllReduce, in, unset);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("all_reduce"), std::string_view::npos) << bad.status();
  EXPECT_NE(bad.status().message().find("recorded through kiln/distributed.h"),
            std::string_view::npos)
      << bad.status();
}

}  // namespace
}  // namespace kiln
