// Views: reshape, permute, transpose, broadcast_to, unsqueeze, squeeze, slice; and
// non-contiguous views feeding every kind of op.
#include <algorithm>
#include <numeric>
#include <random>

#include "kiln/debug.h"
#include "kiln/nn.h"
#include "ops/value_type.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

std::vector<float> iota_floats(int64_t n) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 0.0f);
  return v;
}

TEST(View, ReshapeWithMinusOne) {
  Tensor x = Tensor::from_vector(iota_floats(12), {3, 4});
  EXPECT_EQ(x.reshape({2, -1}).shape(), (std::vector<int64_t>{2, 6}));
  EXPECT_EQ(x.reshape({-1}).to_vector<float>(), iota_floats(12));
  EXPECT_EQ(x.reshape({2, 2, 3}).shape(), (std::vector<int64_t>{2, 2, 3}));
  EXPECT_EQ(Tensor::zeros({0, 3}).reshape({3, 0, 5}).numel(), 0);
  EXPECT_EQ(Tensor::full({}, 1.0).reshape({1, 1}).shape(), (std::vector<int64_t>{1, 1}));
}

TEST(View, PermuteAndTransposeMoveElements) {
  Tensor x = Tensor::from_vector(iota_floats(24), {2, 3, 4});
  Tensor p = x.permute({2, 0, 1});
  EXPECT_EQ(p.shape(), (std::vector<int64_t>{4, 2, 3}));
  std::vector<float> got = p.to_vector<float>();
  for (int64_t k = 0; k < 4; ++k)
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 3; ++j) EXPECT_EQ(got[(k * 2 + i) * 3 + j], (i * 3 + j) * 4 + k);
  Tensor t = x.transpose(0, -1);
  EXPECT_EQ(t.shape(), (std::vector<int64_t>{4, 3, 2}));
  std::vector<float> tv = t.to_vector<float>();
  EXPECT_EQ(tv[(1 * 3 + 2) * 2 + 1], (1 * 3 + 2) * 4 + 1);
  EXPECT_EQ(x.permute({-1, 0, 1}).shape(), p.shape());
}

TEST(View, BroadcastUnsqueezeSqueeze) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3}, {3, 1});
  Tensor b = x.broadcast_to({2, 3, 4});
  std::vector<float> v = b.to_vector<float>();
  for (int64_t i = 0; i < 24; ++i) EXPECT_EQ(v[i], (i / 4) % 3 + 1);
  EXPECT_EQ(x.squeeze(1).shape(), (std::vector<int64_t>{3}));
  EXPECT_EQ(x.unsqueeze(0).shape(), (std::vector<int64_t>{1, 3, 1}));
  EXPECT_EQ(x.unsqueeze(-1).shape(), (std::vector<int64_t>{3, 1, 1}));
  EXPECT_EQ(x.unsqueeze(2).shape(), (std::vector<int64_t>{3, 1, 1}));
}

TEST(View, SliceWithStepsAndPythonBounds) {
  Tensor x = Tensor::from_vector(iota_floats(10), {10});
  EXPECT_EQ(x.slice(0, 1, 8, 3).to_vector<float>(), (std::vector<float>{1, 4, 7}));
  EXPECT_EQ(x.slice(0, -3, 100).to_vector<float>(), (std::vector<float>{7, 8, 9}));
  EXPECT_EQ(x.slice(0, 5, 2).numel(), 0);
  EXPECT_EQ(x.slice(0, -100, 2).to_vector<float>(), (std::vector<float>{0, 1}));
  Tensor m = Tensor::from_vector(iota_floats(20), {4, 5});
  EXPECT_EQ(m.slice(1, 1, 5, 2).to_vector<float>(),
            (std::vector<float>{1, 3, 6, 8, 11, 13, 16, 18}));
}

// A non-contiguous view (transpose + strided slice) gives the same result as the same
// values made contiguous by hand, through every op kind.
TEST(View, NonContiguousViewsFeedEveryOpKind) {
  std::mt19937_64 rng(testing::test_seed());
  SCOPED_TRACE(testing::test_seed());
  std::vector<float> raw = testing::random_floats(6 * 8, rng, 0.1f, 2);
  Tensor base = Tensor::from_vector(raw, {6, 8});
  Tensor view = base.transpose(0, 1).slice(0, 1, 8, 2);  // [4, 6], element (i, j) = raw[j][1+2i]
  std::vector<float> by_hand(24);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 6; ++j) by_hand[i * 6 + j] = raw[j * 8 + 1 + 2 * i];
  ASSERT_EQ(view.to_vector<float>(), by_hand);    // the view itself, checked by hand
  view = base.transpose(0, 1).slice(0, 1, 8, 2);  // again unrealized, so ops see the view
  Tensor copy = Tensor::from_vector(by_hand, {4, 6});
  Tensor w = Tensor::from_vector(testing::random_floats(6 * 3, rng), {6, 3});
  Tensor g = Tensor::from_vector(testing::random_floats(6, rng), {6});
  Tensor bias = Tensor::from_vector(testing::random_floats(6, rng), {6});
  std::vector<std::function<Tensor(const Tensor&)>> uses = {
      [](const Tensor& t) { return exp(t) * 2 - t; },
      [](const Tensor& t) { return sum(t, {1}); },
      [](const Tensor& t) { return max(t, {0}, true); },
      [](const Tensor& t) { return argmax(t, 1); },
      [&](const Tensor& t) { return matmul(t, w); },
      [](const Tensor& t) { return softmax(t, 0); },
      [&](const Tensor& t) { return layer_norm(t, g, bias); },
      [&](const Tensor& t) { return rms_norm(t, g); },
      [](const Tensor& t) {
        return concat({t, t * 2}, 1);
      },
      [](const Tensor& t) { return where(t > 1.0, t, -t); },
      [](const Tensor& t) { return t.astype(DType::F16); },
      [](const Tensor& t) { return t.reshape({-1}).slice(0, 3, 20, 4); },
  };
  const size_t matmul_use = 4;  // on a GPU, cuBLASLt takes the copy and not the view
  for (size_t u = 0; u < uses.size(); ++u) {
    SCOPED_TRACE("use " + std::to_string(u));
    std::vector<double> from_view = testing::values(uses[u](view));
    std::vector<double> from_copy = testing::values(uses[u](copy));
    ASSERT_EQ(from_view.size(), from_copy.size());
    for (size_t i = 0; i < from_view.size(); ++i) {
      if (u == matmul_use && !testing::matmuls_run_one_gemm()) {
        EXPECT_TRUE(testing::close(from_copy[i], from_view[i], 1e-5)) << i;
      } else {
        EXPECT_EQ(from_view[i], from_copy[i]) << i;
      }
    }
  }
}

// contiguous(): a pending view becomes a row-major buffer of its own (one copy kernel), which
// consumers then read instead of recomputing the view; a computed tensor is returned as is.
TEST(View, ContiguousCopiesAViewOnceAndKeepsComputedTensors) {
  std::mt19937_64 rng(testing::test_seed());
  SCOPED_TRACE(testing::test_seed());
  const std::vector<float> wv = testing::random_floats(6 * 4, rng);
  Tensor w = Tensor::from_vector(wv, {6, 4});
  Tensor wt = w.transpose(0, 1).contiguous();
  EXPECT_EQ(wt.shape(), (std::vector<int64_t>{4, 6}));
  EXPECT_NE(explain_plan({wt * 2.0}, ExplainDetail::kPlan).find("contiguous() gives it"),
            std::string::npos)
      << explain_plan({wt * 2.0}, ExplainDetail::kPlan);
  reset_stats();
  wt.eval();
  EXPECT_EQ(stats().kernels_launched, 1);
  std::vector<float> got = wt.to_vector<float>();
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 6; ++j) EXPECT_EQ(got[i * 6 + j], wv[j * 4 + i]);
  // Computed: contiguous() is the same tensor and launches nothing.
  reset_stats();
  Tensor again = wt.contiguous();
  EXPECT_EQ(again.to_vector<float>(), got);
  EXPECT_EQ(stats().kernels_launched, 0);
  // Pending: the copy is stored even where a consumer could have fused the view (2 kernels,
  // not 1), and the values match the fused version.
  Tensor s = w.slice(0, 1, 6, 2);
  reset_stats();
  std::vector<float> copied = (s.contiguous() + 1.0).to_vector<float>();
  EXPECT_EQ(stats().kernels_launched, 2);
  EXPECT_EQ(copied, (s + 1.0).to_vector<float>());
  EXPECT_EQ(s.contiguous().contiguous().to_vector<float>(), s.to_vector<float>());
  EXPECT_THROW(Tensor().contiguous(), Error);
  // Trace files name it and replay it.
  const std::string json = dump_trace({w.transpose(0, 1).contiguous()}, DumpFormat::Json);
  EXPECT_NE(json.find("\"op\":\"contiguous\""), std::string::npos) << json;
  EXPECT_EQ(load_trace(json).run({{"in0", w}})[0].to_vector<float>(), got);
}

// A rank-70 view of 12 elements used to crash the CPU executor (a fixed 64-entry index
// array); ranks above ops::kMaxRank are now refused by inference, naming the op, the rank
// and the limit, and the failed op records nothing.
TEST(View, Rank70PermutedViewIsAClearErrorNotACrash) {
  Tensor x = Tensor::from_vector(iota_floats(12), {12});
  std::vector<int64_t> shape70(70, 1);
  shape70[0] = 2, shape70[1] = 2, shape70[2] = 3;
  std::vector<int> reversed(70);
  std::iota(reversed.rbegin(), reversed.rend(), 0);
  testing::expect_error(
      [&] { x.reshape(shape70).permute(reversed); },
      {"[reshape]", "rank 70", "limit of 32 dimensions", "[2, 2, 3, 1,", "x: f32[12]"});
  testing::expect_error([&] { x.broadcast_to(shape70); }, {"[broadcast_to]", "rank 70"});
  testing::expect_error([&] { Tensor::from_vector(iota_floats(12), shape70); },
                        {"[from_vector]", "rank 70", "limit of 32"});
  testing::expect_error([&] { Tensor::zeros(shape70); }, {"[constant]", "rank 70"});
  std::vector<int64_t> at_limit(ops::kMaxRank, 1);
  at_limit[0] = 12;
  Tensor y = x.reshape(at_limit) * 2;  // pending
  const std::string before = dump_trace({y}, DumpFormat::Text);
  testing::expect_error([&] { y.unsqueeze(0); }, {"rank 33", "limit of 32"});
  testing::expect_error([&] { y + Tensor::zeros(std::vector<int64_t>(ops::kMaxRank + 1, 1)); },
                        {"rank 33"});
  EXPECT_EQ(dump_trace({y}, DumpFormat::Text), before);  // the failed ops recorded nothing
  EXPECT_EQ(y.ndim(), ops::kMaxRank);
  EXPECT_EQ(x.to_vector<float>(), iota_floats(12));
  std::vector<float> doubled = iota_floats(12);
  for (float& v : doubled) v *= 2;
  EXPECT_EQ(y.to_vector<float>(), doubled);
}

// A rank of exactly ops::kMaxRank works end to end: a permuted (non-contiguous) view of it
// feeds an op, and every element lands where the permutation says.
TEST(View, MaxRankPermutedViewComputes) {
  std::mt19937_64 rng(testing::test_seed());
  SCOPED_TRACE(testing::test_seed());
  const int rank = ops::kMaxRank;
  std::vector<int64_t> shape(rank, 1);
  shape[0] = 2, shape[1] = 2, shape[2] = 3, shape[rank - 1] = 2;  // 24 elements
  std::vector<int> perm(rank);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<int64_t> out_shape(rank);
  for (int k = 0; k < rank; ++k) out_shape[k] = shape[perm[k]];
  Tensor x = Tensor::from_vector(iota_floats(24), {24});
  Tensor y = x.reshape(shape).permute(perm) + 1;
  ASSERT_EQ(y.shape(), out_shape);
  std::vector<float> got = y.to_vector<float>();
  ASSERT_EQ(got.size(), 24u);
  // Output element i: unravel i over out_shape; input index d is out index k where
  // perm[k] == d; ravel that over `shape`. x holds its own flat index, so that plus 1.
  for (int64_t i = 0; i < 24; ++i) {
    std::vector<int64_t> out_idx(rank), in_idx(rank);
    for (int64_t k = rank - 1, rest = i; k >= 0; --k) {
      out_idx[k] = rest % out_shape[k];
      rest /= out_shape[k];
    }
    for (int k = 0; k < rank; ++k) in_idx[perm[k]] = out_idx[k];
    int64_t flat = 0;
    for (int d = 0; d < rank; ++d) flat = flat * shape[d] + in_idx[d];
    EXPECT_EQ(got[i], static_cast<float>(flat + 1)) << "element " << i;
  }
}

// An arange read through a view fills each run from its base and the view's last stride
// (runtime/cpu/tile_loads.cc): a transpose steps by the row length, a stepped slice by its
// step, a broadcast by 0. Every element is checked against its position computed here.
TEST(View, ArangeThroughAnyLastStrideIsItsPositions) {
  for (DType dt : {DType::F32, DType::I64}) {
    Tensor a = Tensor::arange(4 * 6, dt).reshape({4, 6});
    Tensor t = a.transpose(0, 1);                         // [6, 4], last stride 6
    Tensor stepped = t.slice(1, 1, 4, 2);                 // [6, 2], last stride 12, offset 6
    Tensor thirds = a.slice(1, 0, 6, 3);                  // [4, 2], last stride 3
    Tensor wide = a.slice(1, 2, 3).broadcast_to({4, 5});  // [4, 5], last stride 0
    auto check = [&](const Tensor& view, int64_t offset, int64_t row_stride, int64_t col_stride) {
      const std::vector<double> got = testing::values((view + 1).astype(DType::F64));
      const int64_t rows = view.shape()[0], cols = view.shape()[1];
      ASSERT_EQ(got.size(), static_cast<size_t>(rows * cols));
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) {
          EXPECT_EQ(got[r * cols + c], offset + r * row_stride + c * col_stride + 1)
              << dtype_name(dt) << " row " << r << " column " << c;
        }
      }
    };
    check(t, 0, 1, 6);
    check(stepped, 6, 1, 12);
    check(thirds, 0, 6, 3);
    check(wide, 2, 6, 0);
  }
}

}  // namespace
}  // namespace kiln
