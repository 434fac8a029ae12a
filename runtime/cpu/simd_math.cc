// Compiled once per instruction set by hwy/foreach_target.h; HWY_DYNAMIC_DISPATCH picks one.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/cpu/simd_math.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must follow foreach_target.h.
#include <algorithm>
#include <cmath>
#include <limits>

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::runtime::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Applies `op` to every lane of in[0, n); the tail goes through a padded buffer.
template <class Op>
HWY_INLINE void apply(const float* HWY_RESTRICT in, float* HWY_RESTRICT out, size_t n, Op op) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) hn::StoreU(op(d, hn::LoadU(d, in + i)), d, out + i);
  if (i < n) {
    HWY_ALIGN float buffer[HWY_MAX_BYTES / sizeof(float)] = {};
    for (size_t k = 0; k < n - i; ++k) buffer[k] = in[i + k];
    hn::Store(op(d, hn::Load(d, buffer)), d, buffer);
    for (size_t k = 0; k < n - i; ++k) out[i + k] = buffer[k];
  }
}

// out = op(a, b) lane by lane; the tail goes through padded buffers (padding lanes are 1, so
// a division there raises nothing).
template <class Op>
HWY_INLINE void apply2(const float* a, const float* b, float* out, size_t n, Op op) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    hn::StoreU(op(hn::LoadU(d, a + i), hn::LoadU(d, b + i)), d, out + i);
  }
  if (i < n) {
    HWY_ALIGN float x[HWY_MAX_BYTES / sizeof(float)], y[HWY_MAX_BYTES / sizeof(float)];
    std::fill_n(x, lanes, 1.0f);
    std::fill_n(y, lanes, 1.0f);
    for (size_t k = 0; k < n - i; ++k) x[k] = a[i + k], y[k] = b[i + k];
    hn::Store(op(hn::Load(d, x), hn::Load(d, y)), d, x);
    for (size_t k = 0; k < n - i; ++k) out[i + k] = x[k];
  }
}

void AddImpl(const float* a, const float* b, float* out, size_t n) {
  apply2(a, b, out, n, [](auto x, auto y) { return hn::Add(x, y); });
}
void SubImpl(const float* a, const float* b, float* out, size_t n) {
  apply2(a, b, out, n, [](auto x, auto y) { return hn::Sub(x, y); });
}
void MulImpl(const float* a, const float* b, float* out, size_t n) {
  apply2(a, b, out, n, [](auto x, auto y) { return hn::Mul(x, y); });
}
void DivImpl(const float* a, const float* b, float* out, size_t n) {
  apply2(a, b, out, n, [](auto x, auto y) { return hn::Div(x, y); });
}
void MulScalarImpl(const float* in, float s, float* out, size_t n) {
  apply(in, out, n, [s](auto d, auto x) HWY_ATTR { return hn::Mul(x, hn::Set(d, s)); });
}
void DivScalarImpl(const float* in, float s, float* out, size_t n) {
  apply(in, out, n, [s](auto d, auto x) HWY_ATTR { return hn::Div(x, hn::Set(d, s)); });
}

// c[0] + c[1] x + c[2] x^2 + ..., by Horner's rule.
template <class D, class V, size_t N>
HWY_INLINE V polynomial(D d, V x, const float (&c)[N]) {
  V y = hn::Set(d, c[N - 1]);
  for (size_t i = N - 1; i-- > 0;) y = hn::MulAdd(y, x, hn::Set(d, c[i]));
  return y;
}

// exp with libm's special values: inf past the overflow threshold, NaN stays NaN.
template <class D, class V>
HWY_INLINE V exp_kernel(D d, V x) {
  const V y = hn::Exp(d, hn::Min(x, hn::Set(d, 89.0f)));
  const V inf_or_y = hn::IfThenElse(hn::Gt(x, hn::Set(d, 88.72283f)), hn::Inf(d), y);
  return hn::IfThenElse(hn::IsNaN(x), x, inf_or_y);
}

// erf(x) for |x| <= 1 as x + x Q(x^2): a relative least-squares fit whose float coefficients
// were chosen one at a time (rounding each before fitting the rest), 1.5e-9 relative error.
// The x + x Q form keeps erf's leading 2/sqrt(pi) out of a rounded coefficient.
template <class D, class V>
HWY_INLINE V erf_small(D d, V x) {
  static constexpr float kQ[] = {1.283791661e-01f,  -3.761262596e-01f, 1.128358245e-01f,
                                 -2.685364336e-02f, 5.187962670e-03f,  -8.006793214e-04f,
                                 7.842288323e-05f};
  return hn::MulAdd(x, polynomial(d, hn::Mul(x, x), kQ), x);
}

// exp(-(hi + lo)) for hi >= 0 and |lo| <= ulp(hi) / 2: Highway's Exp, built from the same
// hn::impl pieces, with lo taken off the reduced argument (|r| <= ln2 / 2), where subtracting
// it rounds far less than forming hi + lo would.
template <class D, class V>
HWY_INLINE V exp_of_negative_sum(D d, V hi, V lo) {
  hn::impl::ExpImpl<float> impl;
  const V x = hn::Neg(hi);
  // q = round(x / ln2): x <= 0, and the conversion truncates.
  const auto q =
      impl.ToInt32(d, hn::MulAdd(x, hn::Set(d, 1.442695040888963407f), hn::Set(d, -0.5f)));
  const V r = hn::Sub(impl.ExpReduce(d, x, q), lo);
  const V y = impl.LoadExpShortRange(d, hn::Add(impl.ExpPoly(d, r), hn::Set(d, 1.0f)), q);
  return hn::IfThenElseZero(hn::Ge(x, hn::Set(d, -104.0f)), y);  // Highway's Exp's bound
}

// c[0] + c[1] x + ... with c = near where `near` is set and c = far elsewhere.
template <class D, class M, class V, size_t N>
HWY_INLINE V polynomial2(D d, M near, V x, const float (&c_near)[N], const float (&c_far)[N]) {
  auto coefficient = [&](size_t i) HWY_ATTR {
    return hn::IfThenElse(near, hn::Set(d, c_near[i]), hn::Set(d, c_far[i]));
  };
  V y = coefficient(N - 1);
  for (size_t i = N - 1; i-- > 0;) y = hn::MulAdd(y, x, coefficient(i));
  return y;
}

// erfc(u) for u in [0.5, 10.5] as exp(-u^2) F(u), returned as F(u) with exp(-u^2) in *scale:
// gelu multiplies x / 2 in before the scale, since in the other order a subnormal erfc
// (u > 9.2) would round before being multiplied by up to 7.
// F = erfc(u) exp(u^2) is a polynomial in u - 1.2499 below u = 2 and 1/u times one in
// 1/u - 0.29999 above (F ~ 1 / (u sqrt(pi)) there), fitted for relative error with float
// coefficients chosen one at a time (2.5e-9 and 7e-11). The centers make the constant terms
// floats to 1e-10 and the near argument exact (Sterbenz) for u >= 0.625.
// u^2 is held as hi + lo, since rounding it to one float would cost up to 6e-6 relative in
// exp at u = 10. Dekker's product splits u into 12-bit halves, so it is exact without an FMA
// (SSE4 has none).
template <class D, class V>
HWY_INLINE V erfc_tail(D d, V u, V* scale) {
  static constexpr float kNear[] = {3.678350151e-01f,  -2.088342607e-01f, 1.068042889e-01f,
                                    -5.022299662e-02f, 2.201412618e-02f,  -9.086810984e-03f,
                                    3.553528106e-03f,  -1.309636049e-03f, 4.718439304e-04f,
                                    -1.919286588e-04f, 6.093657794e-05f};
  static constexpr float kFar[] = {5.416343808e-01f, -1.345986426e-01f, -1.355893016e-01f,
                                   2.080755979e-01f, -8.154173195e-02f, -1.584955156e-01f,
                                   3.416547179e-01f, -2.654441297e-01f, -1.950137019e-01f,
                                   8.680285811e-01f, -9.511135817e-01f};
  const auto near = hn::Lt(u, hn::Set(d, 2.0f));
  const V inv_u = hn::Div(hn::Set(d, 1.0f), u);
  const V w = hn::IfThenElse(near, hn::Sub(u, hn::Set(d, 1.249942064e+00f)),
                             hn::Sub(inv_u, hn::Set(d, 2.999912500e-01f)));
  const V p = polynomial2(d, near, w, kNear, kFar);
  const V f = hn::IfThenElse(near, p, hn::Mul(p, inv_u));
  const hn::RebindToUnsigned<D> du;
  const V u_hi = hn::And(u, hn::BitCast(d, hn::Set(du, 0xFFFFF000u)));
  const V u_lo = hn::Sub(u, u_hi);
  const V hi = hn::Mul(u, u);
  const V lo =
      hn::Add(hn::Add(hn::Sub(hn::Mul(u_hi, u_hi), hi), hn::Mul(hn::Add(u_hi, u_hi), u_lo)),
              hn::Mul(u_lo, u_lo));
  *scale = exp_of_negative_sum(d, hi, lo);
  return f;
}

void ExpImpl(const float* in, float* out, size_t n) {
  apply(in, out, n, [](auto d, auto x) HWY_ATTR { return exp_kernel(d, x); });
}

void LogImpl(const float* in, float* out, size_t n) {
  apply(in, out, n, [](auto d, auto x) HWY_ATTR {
    const auto inf = hn::Inf(d);
    const auto zero = hn::Zero(d);
    auto y = hn::Log(d, hn::Max(x, hn::Set(d, std::numeric_limits<float>::denorm_min())));
    y = hn::IfThenElse(hn::Eq(x, zero), hn::Neg(inf), y);
    y = hn::IfThenElse(hn::Eq(x, inf), inf, y);
    return hn::IfThenElse(hn::Or(hn::Lt(x, zero), hn::IsNaN(x)), hn::NaN(d), y);
  });
}

void TanhImpl(const float* in, float* out, size_t n) {
  apply(in, out, n,
        [](auto d, auto x) HWY_ATTR { return hn::IfThenElse(hn::IsNaN(x), x, hn::Tanh(d, x)); });
}

void SinImpl(const float* in, float* out, size_t n) {
  apply(in, out, n, [](auto d, auto x) HWY_ATTR { return hn::Sin(d, x); });
}

void CosImpl(const float* in, float* out, size_t n) {
  apply(in, out, n, [](auto d, auto x) HWY_ATTR { return hn::Cos(d, x); });
}

// 1 / (1 + exp(-x)) and x / (1 + exp(-x)), the functors' formulas, so the special values
// come out the same: sigmoid(-inf) = 0, silu(-inf) = -inf / inf = NaN.
void SigmoidImpl(const float* in, float* out, size_t n) {
  apply(in, out, n, [](auto d, auto x) HWY_ATTR {
    const auto one = hn::Set(d, 1.0f);
    return hn::Div(one, hn::Add(one, exp_kernel(d, hn::Neg(x))));
  });
}

void SiluImpl(const float* in, float* out, size_t n) {
  apply(in, out, n, [](auto d, auto x) HWY_ATTR {
    return hn::Div(x, hn::Add(hn::Set(d, 1.0f), exp_kernel(d, hn::Neg(x))));
  });
}

void ErfImpl(const float* in, float* out, size_t n) {
  apply(in, out, n, [](auto d, auto x) HWY_ATTR {
    const auto one = hn::Set(d, 1.0f);
    const auto a = hn::Abs(x);
    // Past 10.5 erfc is below every float, so the clamp also gives erf(+-inf) = +-1.
    hn::Vec<decltype(d)> scale;
    const auto tail = erfc_tail(d, hn::Min(hn::Max(a, one), hn::Set(d, 10.5f)), &scale);
    const auto large = hn::CopySign(hn::NegMulAdd(tail, scale, one), x);
    const auto y = hn::IfThenElse(hn::Lt(a, one), erf_small(d, x), large);
    return hn::IfThenElse(hn::IsNaN(x), x, y);
  });
}

// The functor's 0.5 x erfc(-x / sqrt(2)), with erfc(-t) taken where each form is accurate:
// erfc(|t|) for t < -0.5 (so x near -10 keeps its tiny result), 1 + erf(t) near zero, and
// 2 - erfc(t) for t >= 1. gelu(-inf) = -inf * 0 = NaN, as in the functor.
void GeluImpl(const float* in, float* out, size_t n) {
  apply(in, out, n, [](auto d, auto x) HWY_ATTR {
    const auto one = hn::Set(d, 1.0f);
    const auto half_x = hn::Mul(hn::Set(d, 0.5f), x);
    const auto t = hn::Mul(x, hn::Set(d, 0.70710678118654752440f));
    hn::Vec<decltype(d)> scale;
    const auto tail =
        erfc_tail(d, hn::Min(hn::Max(hn::Abs(t), hn::Set(d, 0.5f)), hn::Set(d, 10.5f)), &scale);
    auto y = hn::Mul(half_x, hn::Add(one, erf_small(d, t)));
    y = hn::IfThenElse(hn::Lt(t, hn::Set(d, -0.5f)), hn::Mul(hn::Mul(half_x, tail), scale), y);
    const auto two_minus_tail = hn::NegMulAdd(tail, scale, hn::Set(d, 2.0f));
    return hn::IfThenElse(hn::Ge(t, one), hn::Mul(half_x, two_minus_tail), y);
  });
}

// log1p(x) = log(u) + (x - (u - 1)) / u with u = 1 + x: the second term is what rounding
// 1 + x lost. 1.4 ulp, where Highway's Log1p (log(u) x / (u - 1)) has 2.5.
void Log1pImpl(const float* in, float* out, size_t n) {
  apply(in, out, n, [](auto d, auto x) HWY_ATTR {
    const auto one = hn::Set(d, 1.0f);
    const auto inf = hn::Inf(d);
    const auto u = hn::Add(x, one);
    auto y = hn::Add(hn::Log(d, u), hn::Div(hn::Sub(x, hn::Sub(u, one)), u));
    y = hn::IfThenElse(hn::Eq(x, hn::Set(d, -1.0f)), hn::Neg(inf), y);
    y = hn::IfThenElse(hn::Eq(x, inf), inf, y);
    y = hn::IfThenElse(hn::Eq(x, hn::Zero(d)), x, y);  // keeps -0
    return hn::IfThenElse(hn::Or(hn::Lt(x, hn::Set(d, -1.0f)), hn::IsNaN(x)), hn::NaN(d), y);
  });
}

// Highway's exp reduction (x = q ln2 + r, p = e^r - 1, from hn::impl), reassembled as
// e^x - 1 = 2^q (p + (1 - 2^-q)): for q in [-1, 24] the constant is exact and the one
// rounding of the sum is relative to the result. (Highway's Expm1 computes 2^q (p + 1) - 1,
// 3.4 ulp near x = 0.35.) Other q: 2^q (p + 1) - 1, where the -1 dominates or vanishes.
template <class D, class V>
HWY_INLINE V expm1_kernel(D d, V x) {
  hn::impl::ExpImpl<float> impl;
  const hn::Rebind<int32_t, D> di;
  const V one = hn::Set(d, 1.0f);
  const V xc = hn::Min(hn::Max(x, hn::Set(d, -88.0f)), hn::Set(d, 89.0f));
  const V half_away = hn::Or(hn::Set(d, 0.5f), hn::And(xc, hn::Set(d, -0.0f)));
  const auto q = impl.ToInt32(d, hn::MulAdd(xc, hn::Set(d, 1.442695040888963407f), half_away));
  const V p = impl.ExpPoly(d, impl.ExpReduce(d, xc, q));
  const auto exact =
      hn::RebindMask(d, hn::And(hn::Gt(q, hn::Set(di, -2)), hn::Lt(q, hn::Set(di, 25))));
  const auto q_exact = hn::Min(hn::Max(q, hn::Set(di, -1)), hn::Set(di, 24));
  const V c = hn::IfThenElse(exact, hn::Sub(one, impl.Pow2I(d, hn::Neg(q_exact))), one);
  return hn::Add(impl.LoadExpShortRange(d, hn::Add(p, c), q),
                 hn::IfThenZeroElse(exact, hn::Set(d, -1.0f)));
}

void Expm1Impl(const float* in, float* out, size_t n) {
  apply(in, out, n, [](auto d, auto x) HWY_ATTR {
    auto y = expm1_kernel(d, x);
    y = hn::IfThenElse(hn::Gt(x, hn::Set(d, 88.72283f)), hn::Inf(d), y);
    // x - 0 would turn -0 into +0; NaN stays NaN.
    return hn::IfThenElse(hn::Or(hn::Eq(x, hn::Zero(d)), hn::IsNaN(x)), x, y);
  });
}

// Whether powf(a, b) needs a case the vector formula leaves out: a zero, infinite or NaN
// base, or an infinite or NaN exponent.
inline bool pow_special(float a, float b) {
  return !(std::fabs(a) > 0.0f && std::isfinite(a) && std::isfinite(b));
}

#if HWY_HAVE_FLOAT64
// |a|^b = exp(b log|a|) in f64, whose error is far below a float ulp even where b log|a|
// is near +-100 (in f32 it would cost 1e-5 relative). A negative base takes the sign of an
// odd integer exponent and gives NaN for a non-integer one, as powf does.
template <class DD, class DF>
HWY_INLINE hn::Vec<DF> pow_lanes(DD dd, DF df, hn::Vec<DF> a, hn::Vec<DF> b) {
  const auto t = hn::Mul(hn::PromoteTo(dd, b), hn::Log(dd, hn::PromoteTo(dd, hn::Abs(a))));
  auto m = hn::Exp(dd, hn::Min(hn::Max(t, hn::Set(dd, -200.0)), hn::Set(dd, 200.0)));
  // Beyond FLT_MAX plus half an ulp the float is inf. Some targets' DemoteTo clamps to
  // FLT_MAX instead, so those lanes travel as NaN (no other lane is NaN here).
  m = hn::IfThenElse(hn::Ge(m, hn::Set(dd, 3.4028235677973366e38)), hn::NaN(dd), m);
  auto r = hn::DemoteTo(df, m);
  r = hn::IfThenElse(hn::IsNaN(r), hn::Inf(df), r);
  const auto half_b = hn::Mul(b, hn::Set(df, 0.5f));
  const auto is_integer = hn::Eq(hn::Floor(b), b);
  const auto is_odd = hn::And(is_integer, hn::Ne(hn::Floor(half_b), half_b));
  const auto negative = hn::Lt(a, hn::Zero(df));
  r = hn::IfThenElse(hn::And(negative, is_odd), hn::Neg(r), r);
  return hn::IfThenElse(hn::AndNot(is_integer, negative), hn::NaN(df), r);
}

// One vector of pow; lanes with special operands are recomputed by powf.
template <class DD, class DF>
HWY_INLINE void pow_vector(DD dd, DF df, const float* a, const float* b, float* out) {
  const auto va = hn::LoadU(df, a);
  const auto vb = hn::LoadU(df, b);
  hn::StoreU(pow_lanes(dd, df, va, vb), df, out);
  const auto ordinary =
      hn::And(hn::And(hn::Gt(hn::Abs(va), hn::Zero(df)), hn::IsFinite(va)), hn::IsFinite(vb));
  if (hn::AllTrue(df, ordinary)) return;
  for (size_t k = 0; k < hn::Lanes(df); ++k) {
    if (pow_special(a[k], b[k])) out[k] = std::pow(a[k], b[k]);
  }
}

void PowImpl(const float* a, const float* b, float* out, size_t n) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;
  const size_t lanes = hn::Lanes(dd);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) pow_vector(dd, df, a + i, b + i, out + i);
  if (i < n) {
    float pa[HWY_MAX_BYTES / sizeof(double)], pb[HWY_MAX_BYTES / sizeof(double)],
        po[HWY_MAX_BYTES / sizeof(double)];
    for (size_t k = 0; k < lanes; ++k) {
      pa[k] = i + k < n ? a[i + k] : 1.0f;
      pb[k] = i + k < n ? b[i + k] : 1.0f;
    }
    pow_vector(dd, df, pa, pb, po);
    for (size_t k = 0; k < n - i; ++k) out[i + k] = po[k];
  }
}
#else
// No f64 vectors on this target: libm.
void PowImpl(const float* a, const float* b, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = std::pow(a[i], b[i]);
}
#endif  // HWY_HAVE_FLOAT64

// One key tile of attention's online softmax, row by row: the row's max (NaN skipped, as
// `m < x ? x : m` does), out = exp(in - base) with base the new running max (0 while it is
// -inf, so an all -inf row gives zeros and no NaN), alpha = exp(old max - base) to rescale
// what came before, and the running sum rescaled plus the row's sum of out.
void OnlineSoftmaxTileImpl(const float* in, float* out, int64_t rows, int64_t cols, int64_t ld,
                           float* max, float* sum, float* alpha) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const auto neg_inf = hn::Set(d, -std::numeric_limits<float>::infinity());
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = in + r * ld;
    float* y = out + r * ld;
    auto m = neg_inf;
    int64_t j = 0;
    for (; j + lanes <= cols; j += lanes) {
      const auto v = hn::LoadU(d, x + j);
      m = hn::IfThenElse(hn::Lt(m, v), v, m);
    }
    float row_max = hn::GetLane(hn::MaxOfLanes(d, m));  // lanes are never NaN here
    for (; j < cols; ++j) row_max = row_max < x[j] ? x[j] : row_max;
    const float new_max = max[r] < row_max ? row_max : max[r];
    const float base = std::isinf(new_max) && new_max < 0 ? 0.0f : new_max;
    const auto vbase = hn::Set(d, base);
    auto total = hn::Zero(d);
    j = 0;
    for (; j + lanes <= cols; j += lanes) {
      const auto e = exp_kernel(d, hn::Sub(hn::LoadU(d, x + j), vbase));
      hn::StoreU(e, d, y + j);
      total = hn::Add(total, e);
    }
    if (j < cols) {  // the tail through a buffer padded with -inf, whose exp adds 0
      HWY_ALIGN float tail[HWY_MAX_BYTES / sizeof(float)];
      std::fill_n(tail, lanes, -std::numeric_limits<float>::infinity());
      std::copy(x + j, x + cols, tail);
      const auto e = exp_kernel(d, hn::Sub(hn::Load(d, tail), vbase));
      hn::Store(e, d, tail);
      std::copy(tail, tail + (cols - j), y + j);
      total = hn::Add(total, e);
    }
    const float a = std::exp(max[r] - base);
    alpha[r] = a;
    sum[r] = sum[r] * a + hn::GetLane(hn::SumOfLanes(d, total));
    max[r] = new_max;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace kiln::runtime::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "runtime/cpu/simd_math.h"

namespace kiln::runtime::cpu {

HWY_EXPORT(ExpImpl);
HWY_EXPORT(LogImpl);
HWY_EXPORT(TanhImpl);
HWY_EXPORT(SinImpl);
HWY_EXPORT(CosImpl);
HWY_EXPORT(SigmoidImpl);
HWY_EXPORT(SiluImpl);
HWY_EXPORT(ErfImpl);
HWY_EXPORT(GeluImpl);
HWY_EXPORT(Log1pImpl);
HWY_EXPORT(Expm1Impl);
HWY_EXPORT(PowImpl);
HWY_EXPORT(AddImpl);
HWY_EXPORT(SubImpl);
HWY_EXPORT(MulImpl);
HWY_EXPORT(DivImpl);
HWY_EXPORT(MulScalarImpl);
HWY_EXPORT(DivScalarImpl);
HWY_EXPORT(OnlineSoftmaxTileImpl);

namespace {
// Highway's sin/cos are accurate for |x| <= 39000; anything else (or inf/NaN) uses libm.
bool in_trig_range(const float* in, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (!(std::fabs(in[i]) <= 39000.0f)) return false;
  }
  return true;
}
}  // namespace

void simd_add(const float* a, const float* b, float* out, size_t n) {
  HWY_DYNAMIC_DISPATCH(AddImpl)(a, b, out, n);
}
void simd_sub(const float* a, const float* b, float* out, size_t n) {
  HWY_DYNAMIC_DISPATCH(SubImpl)(a, b, out, n);
}
void simd_mul(const float* a, const float* b, float* out, size_t n) {
  HWY_DYNAMIC_DISPATCH(MulImpl)(a, b, out, n);
}
void simd_div(const float* a, const float* b, float* out, size_t n) {
  HWY_DYNAMIC_DISPATCH(DivImpl)(a, b, out, n);
}
void simd_mul_scalar(const float* in, float s, float* out, size_t n) {
  HWY_DYNAMIC_DISPATCH(MulScalarImpl)(in, s, out, n);
}
void simd_div_scalar(const float* in, float s, float* out, size_t n) {
  HWY_DYNAMIC_DISPATCH(DivScalarImpl)(in, s, out, n);
}
void simd_exp(const float* in, float* out, size_t n) { HWY_DYNAMIC_DISPATCH(ExpImpl)(in, out, n); }
void simd_log(const float* in, float* out, size_t n) { HWY_DYNAMIC_DISPATCH(LogImpl)(in, out, n); }
void simd_tanh(const float* in, float* out, size_t n) {
  HWY_DYNAMIC_DISPATCH(TanhImpl)(in, out, n);
}
void simd_sin(const float* in, float* out, size_t n) {
  if (!in_trig_range(in, n)) {
    for (size_t i = 0; i < n; ++i) out[i] = std::sin(in[i]);
    return;
  }
  HWY_DYNAMIC_DISPATCH(SinImpl)(in, out, n);
}
void simd_cos(const float* in, float* out, size_t n) {
  if (!in_trig_range(in, n)) {
    for (size_t i = 0; i < n; ++i) out[i] = std::cos(in[i]);
    return;
  }
  HWY_DYNAMIC_DISPATCH(CosImpl)(in, out, n);
}
void simd_sigmoid(const float* in, float* out, size_t n) {
  HWY_DYNAMIC_DISPATCH(SigmoidImpl)(in, out, n);
}
void simd_silu(const float* in, float* out, size_t n) {
  HWY_DYNAMIC_DISPATCH(SiluImpl)(in, out, n);
}
void simd_erf(const float* in, float* out, size_t n) { HWY_DYNAMIC_DISPATCH(ErfImpl)(in, out, n); }
void simd_gelu(const float* in, float* out, size_t n) {
  HWY_DYNAMIC_DISPATCH(GeluImpl)(in, out, n);
}
void simd_log1p(const float* in, float* out, size_t n) {
  HWY_DYNAMIC_DISPATCH(Log1pImpl)(in, out, n);
}
void simd_expm1(const float* in, float* out, size_t n) {
  HWY_DYNAMIC_DISPATCH(Expm1Impl)(in, out, n);
}
void simd_pow(const float* a, const float* b, float* out, size_t n) {
  HWY_DYNAMIC_DISPATCH(PowImpl)(a, b, out, n);
}

void online_softmax_tile(const float* in, float* out, int64_t rows, int64_t cols, int64_t ld,
                         float* max, float* sum, float* alpha) {
  HWY_DYNAMIC_DISPATCH(OnlineSoftmaxTileImpl)(in, out, rows, cols, ld, max, sum, alpha);
}

const char* simd_target_name() { return hwy::TargetName(hwy::SupportedAndGeneratedTargets()[0]); }

}  // namespace kiln::runtime::cpu
#endif  // HWY_ONCE
