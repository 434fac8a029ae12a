// scaled_dot_product_attention (ops/attention.h): values against a long-double loop written
// here from PyTorch's definition, every element checked on fresh random inputs (masks, causal,
// grouped-query heads, ranks 2 to 5, several key tiles, f16 and bf16); a fully masked row is
// NaN; the hand-written softmax(q kᵀ · c + mask) v fuses into the same single kernel unless
// its probabilities are kept; errors at record time; plan reuse across scales; trace files.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// The operands' shapes; mask empty means no mask (no case uses a 0-d mask).
struct Shapes {
  std::vector<int64_t> q, k, v;
  std::vector<int64_t> mask = {};
};

// PyTorch's attention in long double, straight from the definition: for each batch and query
// head, scores = q·kᵀ · scale + mask (already additive: a bool mask as 0 / -inf), key j > i
// cut when causal (key j > Sk - Sq + i when bottom_right, PyTorch's causal_lower_right),
// softmax over the keys, times v. Query head h reads kv head h / (Hq / Hkv); rank 2 has no
// heads. A row with nothing to attend to is NaN.
std::vector<long double> reference_attention(const std::vector<float>& q,
                                             const std::vector<float>& k,
                                             const std::vector<float>& v, const Shapes& s,
                                             const std::vector<float>* mask, bool causal,
                                             double scale, bool bottom_right = false) {
  const size_t r = s.q.size();
  const int64_t sq = s.q[r - 2], d = s.q[r - 1], sk = s.k[r - 2], dv = s.v[r - 1];
  const int64_t hq = r >= 3 ? s.q[r - 3] : 1, hkv = r >= 3 ? s.k[r - 3] : 1;
  const int64_t outer = testing::count(s.q) / (hq * sq * d);  // the dims before the heads
  std::vector<int64_t> scores_shape = s.q;
  scores_shape.back() = sk;
  const long double inf = std::numeric_limits<long double>::infinity();
  std::vector<long double> out(outer * hq * sq * dv), w(sk);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t h = 0; h < hq; ++h) {
      const int64_t qb = o * hq + h, kb = o * hkv + h / (hq / hkv);
      for (int64_t i = 0; i < sq; ++i) {
        long double top = -inf;
        for (int64_t j = 0; j < sk; ++j) {
          long double dot = 0;
          for (int64_t c = 0; c < d; ++c) {
            dot += static_cast<long double>(q[(qb * sq + i) * d + c]) * k[(kb * sk + j) * d + c];
          }
          w[j] = dot * scale;
          if (mask != nullptr) {
            const std::vector<int64_t> at = testing::unravel((qb * sq + i) * sk + j, scores_shape);
            w[j] += (*mask)[testing::broadcast_source(at, s.mask)];
          }
          const int64_t position = bottom_right ? sk - sq + i : i;  // the query's key position
          if (causal && j > position) w[j] = -inf;
          top = std::max(top, w[j]);
        }
        long double* row = &out[(qb * sq + i) * dv];
        if (top == -inf) {
          std::fill(row, row + dv, std::numeric_limits<long double>::quiet_NaN());
          continue;
        }
        long double total = 0;
        for (int64_t j = 0; j < sk; ++j) total += (w[j] = std::exp(w[j] - top));
        for (int64_t c = 0; c < dv; ++c) {
          long double acc = 0;
          for (int64_t j = 0; j < sk; ++j) acc += w[j] * v[(kb * sk + j) * dv + c];
          row[c] = acc / total;
        }
      }
    }
  }
  return out;
}

// Every element of `got` against `want` (relative-or-absolute tol; NaN only where want is
// NaN). Reports the first few misses and their count rather than thousands of lines.
void expect_all_close(const std::vector<double>& got, const std::vector<long double>& want,
                      double tol) {
  ASSERT_EQ(got.size(), want.size());
  int bad = 0;
  for (size_t e = 0; e < got.size(); ++e) {
    const ::testing::AssertionResult ok = testing::close(want[e], got[e], tol, /*nan_ok=*/true);
    if (!ok && ++bad <= 5) ADD_FAILURE() << "element " << e << ": " << ok.message();
  }
  EXPECT_EQ(bad, 0) << "elements out of tolerance";
}

// A random keep-mask (true = attend) that always keeps key 0 (the last dim is the keys), so
// no row is fully masked, even with causal.
std::vector<bool> random_keep(const std::vector<int64_t>& shape, std::mt19937_64& rng) {
  std::bernoulli_distribution keep(0.7);
  std::vector<bool> v(testing::count(shape));
  for (size_t i = 0; i < v.size(); ++i) v[i] = i % shape.back() == 0 || keep(rng);
  return v;
}

std::vector<float> additive(const std::vector<bool>& keep) {
  std::vector<float> out(keep.size());
  for (size_t i = 0; i < keep.size(); ++i) out[i] = keep[i] ? 0.0f : -kInf;
  return out;
}

// Fresh random operands: host copies for the reference and realized tensors for Kiln.
struct Operands {
  std::vector<float> q, k, v;
  std::vector<float> mask;   // additive, as the reference reads it; empty: no mask
  Tensor tq, tk, tv, tmask;  // tmask is bool or f32 as asked; undefined without a mask
  const std::vector<float>* mask_or_null() const { return mask.empty() ? nullptr : &mask; }
};

Operands make_operands(const Shapes& s, bool bool_mask, std::mt19937_64& rng) {
  Operands o;
  o.q = testing::random_floats(testing::count(s.q), rng);
  o.k = testing::random_floats(testing::count(s.k), rng);
  o.v = testing::random_floats(testing::count(s.v), rng);
  o.tq = Tensor::from_vector(o.q, s.q);
  o.tk = Tensor::from_vector(o.k, s.k);
  o.tv = Tensor::from_vector(o.v, s.v);
  if (s.mask.empty()) return o;
  if (bool_mask) {
    const std::vector<bool> keep = random_keep(s.mask, rng);
    o.mask = additive(keep);
    o.tmask = Tensor::from_vector(keep, s.mask);
  } else {
    o.mask = testing::random_floats(testing::count(s.mask), rng, -3, 1);
    o.tmask = Tensor::from_vector(o.mask, s.mask);
  }
  return o;
}

std::vector<int64_t> output_shape(const Shapes& s) {
  std::vector<int64_t> out = s.q;
  out.back() = s.v.back();
  return out;
}

struct Case {
  const char* name;
  Shapes shapes;
  bool bool_mask = false;
  bool causal = false;
  std::optional<double> scale = std::nullopt;
  bool bottom_right = false;  // with causal: CausalAlignment::BottomRight
  double scale_or_default() const {
    return scale.value_or(1.0 / std::sqrt(static_cast<double>(shapes.q.back())));
  }
};

// The "kernel N: NAME (ANCHOR)" lines of explain_plan's kPlan text, one per kernel.
std::vector<std::string> kernel_lines(const std::string& plan) {
  std::vector<std::string> lines;
  std::istringstream in(plan);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("kernel ", 0) == 0) lines.push_back(line);
  }
  return lines;
}

TEST(Attention, MatchesReferenceWithMasksCausalAndGqa) {
  std::mt19937_64 rng(testing::test_seed());
  SCOPED_TRACE(testing::test_seed());
  const std::vector<Case> cases = {
      {.name = "no mask, Sk != Sq", .shapes = {{2, 4, 6, 8}, {2, 4, 9, 8}, {2, 4, 9, 8}}},
      {.name = "causal, Sq == Sk",
       .shapes = {{2, 4, 7, 8}, {2, 4, 7, 8}, {2, 4, 7, 8}},
       .causal = true},
      {.name = "causal, Sq > Sk (top-left aligned)",
       .shapes = {{1, 2, 9, 8}, {1, 2, 4, 8}, {1, 2, 4, 8}},
       .causal = true},
      {.name = "gqa, 6 query heads on 2", .shapes = {{2, 6, 5, 8}, {2, 2, 9, 8}, {2, 2, 9, 8}}},
      {.name = "float mask [1, 1, Sq, Sk]",
       .shapes = {{2, 4, 6, 8}, {2, 4, 9, 8}, {2, 4, 9, 8}, {1, 1, 6, 9}}},
      {.name = "bool padding mask [B, 1, 1, Sk]",
       .shapes = {{2, 4, 6, 8}, {2, 4, 9, 8}, {2, 4, 9, 8}, {2, 1, 1, 9}},
       .bool_mask = true},
      {.name = "bool padding mask and causal",
       .shapes = {{2, 2, 6, 8}, {2, 2, 6, 8}, {2, 2, 6, 8}, {2, 1, 1, 6}},
       .bool_mask = true,
       .causal = true},
      {.name = "Dv != D", .shapes = {{2, 3, 5, 8}, {2, 3, 7, 8}, {2, 3, 7, 12}}},
      {.name = "rank 5, one kv head",
       .shapes = {{2, 3, 2, 4, 8}, {2, 3, 1, 6, 8}, {2, 3, 1, 6, 8}}},
      {.name = "rank 3, gqa, Dv != D", .shapes = {{6, 5, 16}, {3, 6, 16}, {3, 6, 4}}},
      {.name = "rank 2, float mask [Sk], causal with Sq < Sk",
       .shapes = {{5, 8}, {7, 8}, {7, 6}, {7}},
       .causal = true},
      {.name = "explicit scale 0.3",
       .shapes = {{1, 2, 4, 8}, {1, 2, 6, 8}, {1, 2, 6, 8}},
       .scale = 0.3},
      // Big enough that the kernel loops over several key tiles (and query tiles).
      {.name = "several key tiles, gqa, bool mask",
       .shapes = {{1, 4, 70, 64}, {1, 2, 150, 64}, {1, 2, 150, 64}, {1, 1, 1, 150}},
       .bool_mask = true},
      {.name = "several key tiles, causal, float mask [Sq, Sk], Dv != D",
       .shapes = {{1, 2, 150, 64}, {1, 2, 150, 64}, {1, 2, 150, 48}, {150, 150}},
       .causal = true},
      // Blocks of a few query rows read the keys and values in place (a decode step's): head
      // sizes with a tail past the last whole vector, several key tiles.
      {.name = "decode: one query per head, gqa, float mask, D 20",
       .shapes = {{1, 6, 1, 20}, {1, 2, 200, 20}, {1, 2, 200, 20}, {1, 1, 1, 200}}},
      {.name = "three queries per head, causal, D 37, Dv 19",
       .shapes = {{2, 2, 3, 37}, {2, 2, 140, 37}, {2, 2, 140, 19}},
       .causal = true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Operands o = make_operands(c.shapes, c.bool_mask, rng);
    Tensor out = scaled_dot_product_attention(o.tq, o.tk, o.tv, o.tmask, c.causal, c.scale);
    EXPECT_EQ(out.shape(), output_shape(c.shapes));
    EXPECT_EQ(out.dtype(), DType::F32);
    expect_all_close(testing::values(out),
                     reference_attention(o.q, o.k, o.v, c.shapes, o.mask_or_null(), c.causal,
                                         c.scale_or_default()),
                     2e-5);
  }
}

// The values an f16 or bf16 tensor holds for x (round to nearest even): what the reference
// must see so that only the kernel's own rounding is measured.
std::vector<float> rounded(const std::vector<float>& x, DType dt) {
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    out[i] = dt == DType::F16 ? static_cast<float>(Half(x[i])) : static_cast<float>(BFloat16(x[i]));
  }
  return out;
}

TEST(Attention, F16AndBf16) {
  std::mt19937_64 rng(testing::test_seed() + 1);
  SCOPED_TRACE(testing::test_seed());
  const std::vector<Case> cases = {
      {.name = "float mask [1, 1, Sq, Sk]",
       .shapes = {{2, 4, 6, 8}, {2, 4, 9, 8}, {2, 4, 9, 8}, {1, 1, 6, 9}}},
      {.name = "several key tiles, gqa, causal, bool mask",
       .shapes = {{1, 4, 70, 64}, {1, 2, 150, 64}, {1, 2, 150, 64}, {1, 1, 1, 150}},
       .bool_mask = true,
       .causal = true},
  };
  for (DType dt : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dt));
    const double tol = dt == DType::F16 ? 1e-2 : 3e-2;
    for (const Case& c : cases) {
      SCOPED_TRACE(c.name);
      const Operands o = make_operands(c.shapes, c.bool_mask, rng);
      // A float mask goes in the same dtype; a bool mask stays bool (0 / -inf round exactly).
      Tensor mask = o.tmask.defined() && !c.bool_mask ? o.tmask.astype(dt) : o.tmask;
      Tensor out = scaled_dot_product_attention(o.tq.astype(dt), o.tk.astype(dt), o.tv.astype(dt),
                                                mask, c.causal, c.scale);
      EXPECT_EQ(out.dtype(), dt);
      EXPECT_EQ(out.shape(), output_shape(c.shapes));
      const std::vector<float> m = rounded(o.mask, dt);
      expect_all_close(
          testing::values(out),
          reference_attention(rounded(o.q, dt), rounded(o.k, dt), rounded(o.v, dt), c.shapes,
                              o.mask.empty() ? nullptr : &m, c.causal, c.scale_or_default()),
          tol);
    }
  }
}

// A query row whose keys are all masked has no softmax: NaN, as PyTorch's; the other rows
// are unaffected. Both a bool mask and a float mask of -inf.
TEST(Attention, FullyMaskedRowIsNan) {
  std::mt19937_64 rng(testing::test_seed() + 2);
  SCOPED_TRACE(testing::test_seed());
  const Shapes s = {{1, 2, 4, 8}, {1, 2, 6, 8}, {1, 2, 6, 8}, {1, 1, 4, 6}};
  const int64_t heads = 2, sq = 4, sk = 6, dv = 8, dead_row = 2;
  for (bool bool_mask : {true, false}) {
    SCOPED_TRACE(bool_mask ? "bool mask" : "float mask");
    Operands o = make_operands({s.q, s.k, s.v}, /*bool_mask=*/false, rng);  // mask made here
    std::vector<bool> keep = random_keep(s.mask, rng);
    for (int64_t j = 0; j < sk; ++j) keep[dead_row * sk + j] = false;
    o.mask = additive(keep);
    if (!bool_mask) {  // finite values elsewhere, -inf on the dead row and the masked keys
      const std::vector<float> noise = testing::random_floats(keep.size(), rng, -3, 1);
      for (size_t e = 0; e < keep.size(); ++e) o.mask[e] += noise[e];
    }
    Tensor mask =
        bool_mask ? Tensor::from_vector(keep, s.mask) : Tensor::from_vector(o.mask, s.mask);
    const std::vector<double> got =
        testing::values(scaled_dot_product_attention(o.tq, o.tk, o.tv, mask));
    ASSERT_EQ(got.size(), static_cast<size_t>(heads * sq * dv));
    for (int64_t e = 0; e < heads * sq * dv; ++e) {
      if (e / dv % sq == dead_row) {
        EXPECT_TRUE(std::isnan(got[e])) << "element " << e << " of the fully masked row";
      } else {
        EXPECT_TRUE(std::isfinite(got[e])) << "element " << e;
      }
    }
    expect_all_close(
        got, reference_attention(o.q, o.k, o.v, s, &o.mask, false, 1.0 / std::sqrt(8.0)), 2e-5);
  }
}

// Empty operands give empty results of the right shape, not a crash: values of width 0 (the
// accumulator has rows of no elements; taking row r by index asserted in Debug) and no
// queries.
TEST(Attention, EmptyValueRowsGiveAnEmptyResult) {
  Tensor q = Tensor::randn({1, 2, 4, 8}, 11), k = Tensor::randn({1, 2, 6, 8}, 12);
  Tensor no_width = scaled_dot_product_attention(q, k, Tensor::zeros({1, 2, 6, 0}));
  EXPECT_EQ(no_width.shape(), (std::vector<int64_t>{1, 2, 4, 0}));
  EXPECT_TRUE(testing::values(no_width).empty());
  Tensor no_queries =
      scaled_dot_product_attention(Tensor::zeros({1, 2, 0, 8}), k, Tensor::randn({1, 2, 6, 5}, 13));
  EXPECT_EQ(no_queries.shape(), (std::vector<int64_t>{1, 2, 0, 5}));
  EXPECT_TRUE(testing::values(no_queries).empty());
}

// softmax(q @ kᵀ · c + mask) @ v written out by hand is planned as the one attention kernel:
// one launch, and only the output is allocated (the scores, 8x its size, never reach
// memory). Also as `/ c` with where(bool_mask, s, -inf).
TEST(Attention, HandWrittenFormFusesIntoOneKernel) {
  std::mt19937_64 rng(testing::test_seed() + 3);
  SCOPED_TRACE(testing::test_seed());
  const int64_t b = 2, h = 4, sq = 200, sk = 250, d = 32;  // 250 keys: 128 + 122, a tail
  const int64_t scores_bytes = b * h * sq * sk * 4;
  // The third form is BERT's padding mask: a key bias (keep - 1) · 1e9 that the kernel
  // computes once per key row instead of once per score (over several query blocks and key
  // tiles here).
  enum class Form { kScaledPlusMask, kDividedWithWhere, kScaledPlusKeyBias };
  for (Form form : {Form::kScaledPlusMask, Form::kDividedWithWhere, Form::kScaledPlusKeyBias}) {
    const bool divided_with_where = form == Form::kDividedWithWhere;
    const bool key_bias = form == Form::kScaledPlusKeyBias;
    SCOPED_TRACE(divided_with_where ? "/ c and where(bool mask, s, -inf)"
                 : key_bias         ? "* c + (keep - 1) * 1e9 over keys"
                                    : "* c + float mask");
    const Shapes s = {{b, h, sq, d},
                      {b, h, sk, d},
                      {b, h, sk, d},
                      form == Form::kScaledPlusMask ? std::vector<int64_t>{1, 1, sq, sk}
                                                    : std::vector<int64_t>{b, 1, 1, sk}};
    const Operands o = make_operands(s, /*bool_mask=*/form != Form::kScaledPlusMask, rng);
    ASSERT_TRUE(o.tq.is_realized() && o.tk.is_realized() && o.tv.is_realized() &&
                o.tmask.is_realized());
    Tensor scores = matmul(o.tq, o.tk.transpose(-2, -1));
    const Tensor keep = key_bias ? o.tmask.astype(DType::F32) : Tensor();
    Tensor p = divided_with_where
                   ? softmax(where(o.tmask, scores / 4.0,
                                   scalar_like(scores, -std::numeric_limits<double>::infinity())),
                             -1)
               : key_bias ? softmax(scores * 0.2 + (keep - 1.0f) * 1e9f, -1)
                          : softmax(scores * 0.2 + o.tmask, -1);
    Tensor out = matmul(p, o.tv);
    const std::string plan = explain_plan({out}, ExplainDetail::kPlan);
    const std::vector<std::string> kernels = kernel_lines(plan);
    ASSERT_EQ(kernels.size(), 1u) << plan;
    EXPECT_NE(kernels[0].find(": scaled_dot_product_attention"), std::string::npos) << plan;
    reset_stats();
    out.eval();
    EXPECT_EQ(stats().kernels_launched, 1);
    EXPECT_LT(stats().bytes_allocated, scores_bytes) << "the scores reached memory";
    expect_all_close(
        testing::values(out),
        reference_attention(o.q, o.k, o.v, s, &o.mask, false, divided_with_where ? 0.25 : 0.2),
        2e-5);
  }
}

// One key/value head that matmul broadcasts over the query heads (multi-query attention
// written by hand) fuses without expanding k and v: the kernel reads the one head.
TEST(Attention, HandWrittenMultiQueryFusesWithoutExpandingKv) {
  std::mt19937_64 rng(testing::test_seed() + 7);
  SCOPED_TRACE(testing::test_seed());
  const Shapes s = {{2, 4, 6, 8}, {2, 1, 9, 8}, {2, 1, 9, 5}};
  const Operands o = make_operands(s, /*bool_mask=*/false, rng);
  Tensor out = matmul(softmax(matmul(o.tq, o.tk.transpose(-2, -1)) * 0.3, -1), o.tv);
  const std::string plan = explain_plan({out}, ExplainDetail::kPlan);
  const std::vector<std::string> kernels = kernel_lines(plan);
  ASSERT_EQ(kernels.size(), 1u) << plan;
  EXPECT_NE(kernels[0].find(": scaled_dot_product_attention"), std::string::npos) << plan;
  reset_stats();
  out.eval();
  EXPECT_EQ(stats().kernels_launched, 1);
  expect_all_close(testing::values(out), reference_attention(o.q, o.k, o.v, s, nullptr, false, 0.3),
                   2e-5);
}

// When the softmax's probabilities are an output too, fusing would compute them twice (or
// not at all): the plan keeps them, says why, and both values are right.
TEST(Attention, NotFusedWhenProbabilitiesAreKept) {
  std::mt19937_64 rng(testing::test_seed() + 4);
  SCOPED_TRACE(testing::test_seed());
  const Shapes s = {{1, 2, 16, 8}, {1, 2, 24, 8}, {1, 2, 24, 8}, {1, 1, 16, 24}};
  const Operands o = make_operands(s, /*bool_mask=*/false, rng);
  Tensor p = softmax(matmul(o.tq, o.tk.transpose(-2, -1)) * 0.3 + o.tmask, -1);
  Tensor out = matmul(p, o.tv);
  const std::string plan = explain_plan({out, p}, ExplainDetail::kPlan);
  bool noted = false;
  std::istringstream in(plan);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("kernel ", 0) == 0) {
      EXPECT_EQ(line.find("scaled_dot_product_attention"), std::string::npos) << plan;
    } else if (line.find("attention") != std::string::npos) {
      noted = true;
    }
  }
  EXPECT_TRUE(noted) << "no note on why the attention was not fused:\n" << plan;
  eval({out, p});
  expect_all_close(testing::values(out), reference_attention(o.q, o.k, o.v, s, &o.mask, false, 0.3),
                   2e-5);
  // Attention over an identity v gives the probabilities themselves (row i of P·I is P[i]).
  std::vector<float> eye(2 * 24 * 24, 0.0f);
  for (int64_t hd = 0; hd < 2; ++hd) {
    for (int64_t j = 0; j < 24; ++j) eye[(hd * 24 + j) * 24 + j] = 1.0f;
  }
  const Shapes eye_shapes = {s.q, s.k, {1, 2, 24, 24}, s.mask};
  expect_all_close(testing::values(p),
                   reference_attention(o.q, o.k, eye, eye_shapes, &o.mask, false, 0.3), 2e-5);
}

TEST(Attention, BadShapesAreClearErrors) {
  const char* op = "[scaled_dot_product_attention]";
  Tensor q = Tensor::zeros({1, 2, 4, 8}), kv = Tensor::zeros({1, 2, 6, 8});
  testing::expect_error(
      [&] {
        scaled_dot_product_attention(q, Tensor::zeros({1, 2, 6, 7}), kv);
      },
      {op, "last dim", "f32[1, 2, 6, 7]"});
  testing::expect_error(
      [&] {
        scaled_dot_product_attention(Tensor::zeros({1, 3, 4, 8}), kv, kv);
      },
      {op, "multiple", "f32[1, 3, 4, 8]"});
  testing::expect_error(
      [&] {
        scaled_dot_product_attention(q, kv, kv, Tensor::zeros({1, 1, 4, 5}, DType::Bool));
      },
      {op, "does not broadcast", "bool[1, 1, 4, 5]"});
  testing::expect_error([&] { scaled_dot_product_attention(q, kv.astype(DType::F16), kv); },
                        {op, "dtype", "f16[1, 2, 6, 8]"});
  testing::expect_error(
      [&] {
        scaled_dot_product_attention(q, kv, Tensor::zeros({1, 2, 5, 8}));
      },
      {op, "v's keys", "f32[1, 2, 5, 8]"});
  testing::expect_error(
      [&] {
        scaled_dot_product_attention(q.astype(DType::I32), kv.astype(DType::I32),
                                     kv.astype(DType::I32));
      },
      {op, "floating"});
  testing::expect_error(
      [&] {
        scaled_dot_product_attention(Tensor::zeros({8}), Tensor::zeros({8}), Tensor::zeros({8}));
      },
      {op, "rank"});
  EXPECT_EQ(q.to_vector<float>(), std::vector<float>(64, 0.0f)) << "q stays valid";
}

// The scale is a kernel parameter, not part of the plan: a second call with another scale
// (as a decode loop's) reuses the plan and compiles nothing. The mask's where and broadcast
// fuse in, so each call is one launch. Shapes unique to this test, so the first call builds.
TEST(Attention, ExplicitOpIsOneKernelAndReusesItsPlan) {
  std::mt19937_64 rng(testing::test_seed() + 5);
  SCOPED_TRACE(testing::test_seed());
  const Shapes s = {{1, 3, 11, 24}, {1, 3, 13, 24}, {1, 3, 13, 24}, {1, 1, 1, 13}};
  const Operands o = make_operands(s, /*bool_mask=*/true, rng);
  for (double scale : {0.5, 2.0}) {
    SCOPED_TRACE("scale " + std::to_string(scale));
    const bool first = scale == 0.5;
    const Stats before = stats();
    Tensor out = scaled_dot_product_attention(o.tq, o.tk, o.tv, o.tmask, false, scale);
    out.eval();
    const Stats after = stats();
    EXPECT_EQ(after.plans_built - before.plans_built, first ? 1 : 0);
    EXPECT_EQ(after.kernels_launched - before.kernels_launched, 1);
    if (!first) {
      EXPECT_EQ(after.plan_cache_hits - before.plan_cache_hits, 1);
      EXPECT_EQ(after.kernels_compiled - before.kernels_compiled, 0);
    }
    expect_all_close(testing::values(out),
                     reference_attention(o.q, o.k, o.v, s, &o.mask, false, scale), 2e-5);
  }
}

TEST(Attention, TraceFilesRoundTrip) {
  std::mt19937_64 rng(testing::test_seed() + 6);
  SCOPED_TRACE(testing::test_seed());
  // Every input has its own shape, so the trace's inputs are matched by type below.
  const Shapes s = {{1, 2, 3, 8}, {1, 2, 5, 8}, {1, 2, 5, 6}, {1, 1, 1, 5}};
  const Operands o = make_operands(s, /*bool_mask=*/true, rng);
  Tensor out = scaled_dot_product_attention(o.tq, o.tk, o.tv, o.tmask, true, 0.3);
  const std::string json = dump_trace({out}, DumpFormat::Json);  // before out is computed
  EXPECT_NE(json.find("\"op\":\"scaled_dot_product_attention\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"causal\":true"), std::string::npos) << json;
  EXPECT_NE(json.find("\"scale\":0.3"), std::string::npos) << json;
  LoadedTrace trace = load_trace(json);
  ASSERT_EQ(trace.inputs().size(), 4u) << json;
  ASSERT_EQ(trace.num_outputs(), 1u);
  std::map<std::string, Tensor> inputs;
  for (const auto& in : trace.inputs()) {
    for (const Tensor& t : {o.tq, o.tk, o.tv, o.tmask}) {
      if (t.dtype() == in.dtype && t.shape() == in.shape) inputs[in.name] = t;
    }
  }
  ASSERT_EQ(inputs.size(), 4u) << json;
  const std::vector<float> want = out.to_vector<float>();
  expect_all_close(testing::values(out), reference_attention(o.q, o.k, o.v, s, &o.mask, true, 0.3),
                   2e-5);
  std::vector<Tensor> again = trace.run(inputs);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].to_vector<float>(), want) << "the replay computes the same values";
}

// CausalAlignment::BottomRight: query i sees keys j <= Sk - Sq + i (PyTorch's
// causal_lower_right), computed by the kernels from the positions. A chunk of a prompt after a
// cached prefix (Sq < Sk), a decode step (Sq = 1), Sq == Sk (the same as top-left), Sq > Sk
// (the first Sq - Sk rows see no key: NaN), with masks, grouped-query heads, rank 2, and
// sizes past one CPU query block (64) and key tile (128).
TEST(Attention, BottomRightCausalMatchesReference) {
  std::mt19937_64 rng(testing::test_seed() + 7);
  SCOPED_TRACE(testing::test_seed());
  const std::vector<Case> cases = {
      {.name = "a chunk of 5 after a prefix of 7",
       .shapes = {{2, 4, 5, 8}, {2, 4, 12, 8}, {2, 4, 12, 8}}},
      {.name = "decode step, gqa", .shapes = {{1, 4, 1, 16}, {1, 2, 9, 16}, {1, 2, 9, 16}}},
      {.name = "Sq == Sk", .shapes = {{1, 2, 7, 8}, {1, 2, 7, 8}, {1, 2, 7, 8}}},
      {.name = "Sq > Sk: 5 rows without keys",
       .shapes = {{1, 2, 9, 8}, {1, 2, 4, 8}, {1, 2, 4, 8}}},
      {.name = "bool padding mask too",
       .shapes = {{2, 2, 6, 8}, {2, 2, 10, 8}, {2, 2, 10, 8}, {2, 1, 1, 10}},
       .bool_mask = true},
      {.name = "rank 2, float mask [Sk]", .shapes = {{5, 8}, {7, 8}, {7, 6}, {7}}},
      {.name = "several query blocks and key tiles, float mask, Dv != D",
       .shapes = {{1, 2, 70, 64}, {1, 2, 300, 64}, {1, 2, 300, 48}, {70, 300}}},
      {.name = "Sq > Sk across query blocks: 50 rows without keys",
       .shapes = {{1, 1, 150, 16}, {1, 1, 100, 16}, {1, 1, 100, 16}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Operands o = make_operands(c.shapes, c.bool_mask, rng);
    Tensor out = scaled_dot_product_attention(o.tq, o.tk, o.tv, o.tmask,
                                              CausalAlignment::BottomRight, c.scale);
    EXPECT_EQ(out.shape(), output_shape(c.shapes));
    const std::vector<double> got = testing::values(out);
    expect_all_close(got,
                     reference_attention(o.q, o.k, o.v, c.shapes, o.mask_or_null(), true,
                                         c.scale_or_default(), /*bottom_right=*/true),
                     2e-5);
    // Row i sees no key exactly when Sk - Sq + i < 0: NaN there, finite elsewhere.
    const size_t r = c.shapes.q.size();
    const int64_t sq = c.shapes.q[r - 2], sk = c.shapes.k[r - 2], dv = c.shapes.v.back();
    int64_t nan_rows = 0;
    for (size_t e = 0; e < got.size(); ++e) {
      const int64_t i = static_cast<int64_t>(e) / dv % sq;
      EXPECT_EQ(std::isnan(got[e]), sk - sq + i < 0) << "element " << e << " (row " << i << ")";
      nan_rows += e % dv == 0 && std::isnan(got[e]);
    }
    EXPECT_EQ(nan_rows,
              testing::count(c.shapes.q) / c.shapes.q.back() / sq * std::max<int64_t>(0, sq - sk));
  }
}

TEST(Attention, BottomRightInF64F16AndBf16) {
  std::mt19937_64 rng(testing::test_seed() + 8);
  SCOPED_TRACE(testing::test_seed());
  const Shapes s = {{1, 4, 70, 64}, {1, 2, 150, 64}, {1, 2, 150, 64}, {1, 1, 1, 150}};
  for (DType dt : {DType::F64, DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Operands o = make_operands(s, /*bool_mask=*/true, rng);
    Tensor out = scaled_dot_product_attention(o.tq.astype(dt), o.tk.astype(dt), o.tv.astype(dt),
                                              o.tmask, CausalAlignment::BottomRight);
    EXPECT_EQ(out.dtype(), dt);
    const bool f64 = dt == DType::F64;
    const double scale = 1.0 / 8.0;
    expect_all_close(testing::values(out),
                     f64 ? reference_attention(o.q, o.k, o.v, s, &o.mask, true, scale, true)
                         : reference_attention(rounded(o.q, dt), rounded(o.k, dt), rounded(o.v, dt),
                                               s, &o.mask, true, scale, true),
                     f64 ? 1e-12 : (dt == DType::F16 ? 1e-2 : 3e-2));
  }
}

// The use case: a prompt prefilled in chunks, each chunk's queries against the keys so far
// (a cached prefix and the chunk itself), with bottom-right alignment, gives the rows of
// causal attention over the whole prompt at once.
TEST(Attention, ChunkedPrefillEqualsCausalAttentionOverThePrompt) {
  std::mt19937_64 rng(testing::test_seed() + 9);
  SCOPED_TRACE(testing::test_seed());
  const int64_t tokens = 150, d = 32;
  const Shapes s = {{1, 4, tokens, d}, {1, 2, tokens, d}, {1, 2, tokens, d}};
  const Operands o = make_operands(s, false, rng);
  const std::vector<double> whole =
      testing::values(scaled_dot_product_attention(o.tq, o.tk, o.tv, Tensor(), true));
  int64_t first = 0;
  for (int64_t chunk : {64, 1, 70, 15}) {
    SCOPED_TRACE("queries " + std::to_string(first) + " to " + std::to_string(first + chunk));
    const int64_t end = first + chunk;
    Tensor part =
        scaled_dot_product_attention(o.tq.slice(2, first, end), o.tk.slice(2, 0, end),
                                     o.tv.slice(2, 0, end), Tensor(), CausalAlignment::BottomRight);
    const std::vector<double> got = testing::values(part);
    ASSERT_EQ(got.size(), static_cast<size_t>(4 * chunk * d));
    for (int64_t h = 0; h < 4; ++h) {
      for (int64_t e = 0; e < chunk * d; ++e) {
        const double want = whole[(h * tokens + first) * d + e];
        ASSERT_TRUE(testing::close(want, got[h * chunk * d + e], 1e-5)) << "head " << h << " " << e;
      }
    }
    first = end;
  }
  EXPECT_EQ(first, tokens);
}

// The alignment is part of the node, the plan and the kernel (a separate kernel from the
// top-left one); trace files carry it as "causal_alignment", and a file without it (as
// written before it existed) loads as top-left.
TEST(Attention, BottomRightIsItsOwnKernelAndTraceAttribute) {
  std::mt19937_64 rng(testing::test_seed() + 10);
  SCOPED_TRACE(testing::test_seed());
  const Shapes s = {{1, 2, 3, 8}, {1, 2, 7, 8}, {1, 2, 7, 6}};
  const Operands o = make_operands(s, false, rng);
  Tensor top = scaled_dot_product_attention(o.tq, o.tk, o.tv, Tensor(), true, 0.3);
  Tensor bottom =
      scaled_dot_product_attention(o.tq, o.tk, o.tv, Tensor(), CausalAlignment::BottomRight, 0.3);
  EXPECT_NE(explain_plan({bottom}).find("causal_bottom_right"), std::string::npos);
  EXPECT_EQ(explain_plan({top}).find("causal_bottom_right"), std::string::npos);
  const std::string json = dump_trace({bottom}, DumpFormat::Json);
  EXPECT_NE(json.find("\"causal_alignment\":\"bottom_right\""), std::string::npos) << json;
  EXPECT_NE(dump_trace({top}, DumpFormat::Json).find("\"causal_alignment\":\"top_left\""),
            std::string::npos);
  auto run = [&](const std::string& text) {
    LoadedTrace trace = load_trace(text);
    std::map<std::string, Tensor> inputs;
    for (const auto& in : trace.inputs()) {
      for (const Tensor& t : {o.tq, o.tk, o.tv}) {
        if (t.shape() == in.shape) inputs[in.name] = t;
      }
    }
    return trace.run(inputs).at(0).to_vector<float>();
  };
  const std::vector<float> want_bottom = bottom.to_vector<float>();
  const std::vector<float> want_top = top.to_vector<float>();
  EXPECT_NE(want_bottom, want_top);
  expect_all_close(testing::values(bottom),
                   reference_attention(o.q, o.k, o.v, s, nullptr, true, 0.3, true), 2e-5);
  EXPECT_EQ(run(json), want_bottom) << "the replay computes the same values";
  std::string old_file = json;
  const std::string attribute = ",\"causal_alignment\":\"bottom_right\"";
  ASSERT_NE(old_file.find(attribute), std::string::npos) << json;
  old_file.erase(old_file.find(attribute), attribute.size());
  EXPECT_EQ(run(old_file), want_top) << "a file without the attribute is top-left";
  std::string bad = json;
  bad.replace(bad.find("bottom_right"), std::string("bottom_right").size(), "diagonal");
  testing::expect_error([&] { load_trace(bad); },
                        {"causal_alignment", "diagonal", "top_left or bottom_right"});
}

}  // namespace
}  // namespace kiln
