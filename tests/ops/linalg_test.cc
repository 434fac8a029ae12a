// matmul (numpy semantics) and concat against loops written here.
#include "runtime/cpu/gemm.h"
#include "tests/reference_util.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

// [batch..., m, k] @ [batch..., k, n] with numpy broadcasting and vector promotion, in long
// double: returns the output shape and values.
std::pair<std::vector<int64_t>, std::vector<long double>> reference_matmul(
    std::vector<int64_t> sa, const std::vector<double>& a, std::vector<int64_t> sb,
    const std::vector<double>& b) {
  bool a_vec = sa.size() == 1, b_vec = sb.size() == 1;
  if (a_vec) sa.insert(sa.begin(), 1);
  if (b_vec) sb.push_back(1);
  int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
  std::vector<int64_t> ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  size_t rank = std::max(ba.size(), bb.size());
  std::vector<int64_t> batch(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - ba.size() ? 1 : ba[i - (rank - ba.size())];
    int64_t db = i < rank - bb.size() ? 1 : bb[i - (rank - bb.size())];
    batch[i] = std::max(da, db);
  }
  std::vector<long double> out;
  for (int64_t bi = 0; bi < testing::count(batch); ++bi) {
    std::vector<int64_t> idx = testing::unravel(bi, batch);
    int64_t oa = testing::broadcast_source(idx, ba) * m * k;
    int64_t ob = testing::broadcast_source(idx, bb) * k * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        long double acc = 0;
        for (int64_t p = 0; p < k; ++p) acc += (long double)a[oa + i * k + p] * b[ob + p * n + j];
        out.push_back(acc);
      }
  }
  std::vector<int64_t> shape = batch;
  if (!a_vec) shape.push_back(m);
  if (!b_vec) shape.push_back(n);
  return {shape, out};
}

TEST(Matmul, NumpySemanticsForVectorsMatricesAndBroadcastBatches) {
  std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{4}, {4}},
      {{3, 4}, {4}},
      {{4}, {4, 5}},
      {{3, 4}, {4, 5}},
      {{2, 3, 4}, {4, 5}},
      {{3, 4}, {2, 4, 5}},
      {{2, 1, 3, 4}, {3, 4, 2}},
      {{1, 4}, {4, 1}},
      {{0, 4}, {4, 3}},
      {{3, 0}, {0, 2}}};
  std::mt19937_64 rng(testing::test_seed());
  SCOPED_TRACE(testing::test_seed());
  for (const auto& [sa, sb] : cases) {
    for (DType dt : {DType::F32, DType::F64, DType::I32}) {
      SCOPED_TRACE(std::string(dtype_name(dt)));
      auto make = [&](const std::vector<int64_t>& s) {
        std::vector<float> v = testing::random_floats(testing::count(s), rng, -3, 3);
        if (dt == DType::I32) {
          for (float& x : v) x = std::round(x);
        }
        return Tensor::from_vector(v, s).astype(dt);
      };
      Tensor a = make(sa), b = make(sb);
      Tensor y = matmul(a, b);
      auto [want_shape, want] = reference_matmul(sa, testing::values(a), sb, testing::values(b));
      EXPECT_EQ(y.shape(), want_shape);
      EXPECT_EQ(y.dtype(), dt);
      std::vector<double> got = testing::values(y);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_TRUE(testing::close(want[i], got[i], dt == DType::F32 ? 1e-5 : 1e-12));
      }
    }
  }
}

// An f64 input whose rows are contiguous is read in place; other layouts (every other
// column, a reversed or transposed view) are evaluated first, where the planner has not
// copied them out already. Every layout, batches and vectors against the long-double loop.
TEST(Matmul, F64InputsInEveryLayoutMatchTheLoop) {
  std::mt19937_64 rng(testing::test_seed());
  SCOPED_TRACE(testing::test_seed());
  auto realized = [&](const std::vector<int64_t>& shape) {
    std::vector<double> v(testing::count(shape));
    std::uniform_real_distribution<double> u(-2, 2);
    for (double& x : v) x = u(rng);
    return Tensor::from_vector(v, shape);
  };
  const Tensor x = realized({9, 11}), y = realized({7, 5}), batched = realized({3, 6, 7});
  const Tensor v = realized({7});
  const std::vector<std::pair<Tensor, Tensor>> cases = {
      {x.slice(0, 0, 6).slice(1, 0, 7), y},                  // rows 11 apart
      {x.slice(1, 0, 6).transpose(0, 1).slice(1, 0, 7), y},  // a transposed view: columns
      {x.slice(1, 0, 7, 1).slice(0, 0, 6), y.transpose(0, 1).transpose(0, 1)},
      {x.slice(0, 0, 6).slice(1, 0, 11, 2).slice(1, 0, 5), y.slice(0, 0, 5)},  // stride 2
      {flip(x.slice(0, 0, 6).slice(1, 0, 7), {1}), y},                         // reversed
      {x.slice(0, 0, 6).slice(1, 0, 7), v},                                    // a vector
      {v, y},
      {batched, y.slice(1, 0, 4)},
      {batched, batched.transpose(1, 2)}};
  for (size_t c = 0; c < cases.size(); ++c) {
    SCOPED_TRACE("case " + std::to_string(c));
    const auto& [a, b] = cases[c];
    const Tensor product = matmul(a, b);
    auto [want_shape, want] =
        reference_matmul(a.shape(), testing::values(a), b.shape(), testing::values(b));
    ASSERT_EQ(product.shape(), want_shape);
    const std::vector<double> got = product.to_vector<double>();
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_TRUE(testing::close(want[i], got[i], 1e-12)) << "at " << i;
    }
  }
}

TEST(Matmul, MixedDtypesPromote) {
  Tensor a = Tensor::ones({2, 3}, DType::BF16);
  Tensor b = Tensor::ones({3, 2}, DType::F16);
  Tensor y = matmul(a, b);
  EXPECT_EQ(y.dtype(), DType::F32);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>(4, 3.0f)));
}

// bf16 and f16 matmuls read their operands in place and widen them as the GEMM core packs
// them (a weight once: it stays packed). Every element against a long-double product of the
// widened values, rounded once to the output dtype: an error over half an ulp of it (plus
// f32 accumulation) fails. Covers plain, batched-broadcast (small batches a task each, and
// batches that follow on as one product) and vector products, and linear's
// [out, in] weight called three times (packed, kept, then found in the packed-weight cache)
// against the reference evaluator within an ulp.
TEST(Matmul, SixteenBitOperandsMatchTheWidenedProduct) {
  std::mt19937_64 rng(testing::test_seed());
  SCOPED_TRACE(testing::test_seed());
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{5, 70}, {70, 33}},
      {{2, 3, 9, 17}, {17, 20}},
      {{40}, {40, 13}},
      {{7, 40}, {40}},
      // two batches of 100 rows over one B, large enough to run as one product of 200 rows
      {{2, 100, 200}, {200, 120}}};
  for (DType dt : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    const double ulp = dt == DType::BF16 ? 1.0 / 128 : 1.0 / 1024;
    auto make = [&](const std::vector<int64_t>& s) {
      return Tensor::from_vector(testing::random_floats(testing::count(s), rng, -1, 1), s)
          .astype(dt)
          .eval();
    };
    for (const auto& [sa, sb] : cases) {
      Tensor a = make(sa), b = make(sb);
      Tensor y = matmul(a, b);
      EXPECT_EQ(y.dtype(), dt);
      auto [want_shape, want] = reference_matmul(sa, testing::values(a), sb, testing::values(b));
      EXPECT_EQ(y.shape(), want_shape);
      const std::vector<double> got = testing::values(y);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_TRUE(testing::close(want[i], got[i], ulp / 2 + 1e-5)) << "element " << i;
      }
    }
    // linear: x [6, 48] · w [31, 48]ᵀ + bias, against the reference evaluator (which rounds
    // the product to the dtype before the bias is added, as the fused kernel does).
    Tensor x = make({6, 48}), w = make({31, 48}), bias = make({31});
    const std::vector<double> want = testing::values(testing::reference_tensor(linear(x, w, bias)));
    const int64_t hits = runtime::cpu::packed_weight_stats().hits;
    for (int call = 0; call < 3; ++call) {
      const std::vector<double> got = testing::values(linear(x, w, bias));
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_TRUE(testing::close(want[i], got[i], ulp))
            << "linear element " << i << ", call " << call;
      }
    }
    if (default_device().type == DeviceType::CPU) {  // the CPU GEMM core's packed weights
      EXPECT_GT(runtime::cpu::packed_weight_stats().hits, hits) << "the weight was never kept";
    }
  }
}

TEST(Concat, JoinsAlongAnyAxisAndPromotes) {
  Tensor a = Tensor::from_vector<int32_t>({1, 2, 3, 4}, {2, 2});
  Tensor b = Tensor::from_vector<float>({5.5f, 6.5f}, {2, 1});
  Tensor c = concat({a, b}, -1);
  EXPECT_EQ(c.shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(c.dtype(), DType::F32);
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{1, 2, 5.5f, 3, 4, 6.5f}));
  Tensor d = concat({a, a, Tensor::zeros({0, 2}, DType::I32)}, 0);
  EXPECT_EQ(d.to_vector<int32_t>(), (std::vector<int32_t>{1, 2, 3, 4, 1, 2, 3, 4}));
  EXPECT_EQ(concat({a}, 1).to_vector<int32_t>(), a.to_vector<int32_t>());
}

}  // namespace
}  // namespace kiln
