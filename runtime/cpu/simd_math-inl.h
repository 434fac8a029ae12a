// Kiln's f32 math, one vector at a time: the functions the executor's elementwise loops
// (simd_math.cc) and the CPU code generator's compiled kernels (compiled_pointwise.cc) both
// apply, so that a fused loop computes the same bits as the op-at-a-time evaluator.
// Highway's per-target "-inl.h" form: simd_math.cc includes it once per instruction set; a
// compiled kernel's source holds its text (generated into simd_math_inl_source.cc) and is
// built for the machine it runs on. Only Highway headers may be included here.
#if defined(KILN_RUNTIME_CPU_SIMD_MATH_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KILN_RUNTIME_CPU_SIMD_MATH_INL_H_
#undef KILN_RUNTIME_CPU_SIMD_MATH_INL_H_
#else
#define KILN_RUNTIME_CPU_SIMD_MATH_INL_H_
#endif

#include <stddef.h>
#include <stdint.h>

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::runtime::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

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

// erfc(u) for u in [0, 10.5] as exp(-u^2) F(u), returned as F(u) with exp(-u^2) in *scale:
// gelu multiplies x / 2 in before the scale, since in the other order a subnormal erfc
// (u > 9.2) would round before being multiplied by up to 7.
// F = erfc(u) exp(u^2) is a polynomial in u - 1.5 below u = 3 and 1/u times one in
// 1/u - 0.29999 above (F ~ 1 / (u sqrt(pi)) there), fitted for relative error with float
// coefficients chosen one at a time (2.4e-9 and 7e-11). The near argument is exact
// (Sterbenz) for u >= 0.75. The near fit reaches u = 3 (it reached 2, 11 coefficients,
// until 2026-12-05) so that gelu's far fit, with its division, runs for few vectors: in
// MiniLM's MLP 2-6% of 16-lane vectors have a lane past 3, 18-55% had one past 2.
// u^2 is held as hi + lo, since rounding it to one float would cost up to 6e-6 relative in
// exp at u = 10: lo = u·u - hi exactly, by one FMA where the target has it, else by Dekker's
// product, which splits u into 12-bit halves (SSE4 has no FMA); both give the same bits.
template <class D, class V>
HWY_INLINE V erfc_tail(D d, V u, V* scale) {
  static constexpr float kNear[] = {
      3.215854168e-01f, -1.636229157e-01f, 7.615104318e-02f, -3.293091059e-02f,
      1.337724179e-02f, -5.145976786e-03f, 1.886626240e-03f, -6.618784973e-04f,
      2.222936164e-04f, -7.265233580e-05f, 2.392339593e-05f, -7.072929748e-06f,
      1.488965268e-06f, -5.049400897e-07f, 3.195927718e-07f, -7.784706213e-08f};
  static constexpr float kFar[] = {5.416343808e-01f, -1.345986426e-01f, -1.355893016e-01f,
                                   2.080755979e-01f, -8.154173195e-02f, -1.584955156e-01f,
                                   3.416547179e-01f, -2.654441297e-01f, -1.950137019e-01f,
                                   8.680285811e-01f, -9.511135817e-01f};
  const auto near = hn::Lt(u, hn::Set(d, 3.0f));
  V f = polynomial(d, hn::Sub(u, hn::Set(d, 1.5f)), kNear);
  if (!hn::AllTrue(d, near)) {
    // The far fit only for vectors that have a far lane: its division is the dearest
    // instruction here (a 512-bit divide issues once per 10 cycles or so on Intel cores).
    // Each fit is its own Horner chain of constants, which costs fewer instructions than
    // one chain of per-lane selected coefficients would (their broadcasts and blends).
    const V inv_u = hn::Div(hn::Set(d, 1.0f), u);
    const V far = polynomial(d, hn::Sub(inv_u, hn::Set(d, 2.999912500e-01f)), kFar);
    f = hn::IfThenElse(near, f, hn::Mul(far, inv_u));
  }
  const V hi = hn::Mul(u, u);
#if HWY_NATIVE_FMA
  const V lo = hn::MulSub(u, u, hi);  // exact, as Dekker's product below
#else
  const hn::RebindToUnsigned<D> du;
  const V u_hi = hn::And(u, hn::BitCast(d, hn::Set(du, 0xFFFFF000u)));
  const V u_lo = hn::Sub(u, u_hi);
  const V lo =
      hn::Add(hn::Add(hn::Sub(hn::Mul(u_hi, u_hi), hi), hn::Mul(hn::Add(u_hi, u_hi), u_lo)),
              hn::Mul(u_lo, u_lo));
#endif
  *scale = exp_of_negative_sum(d, hi, lo);
  return f;
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

// ---- one function per op, each the op functor's special values (ops/scalar_math.inc) ----

template <class D, class V>
HWY_INLINE V exp_vec(D d, V x) {
  return exp_kernel(d, x);
}

template <class D, class V>
HWY_INLINE V log_vec(D d, V x) {
  const V inf = hn::Inf(d);
  const V zero = hn::Zero(d);
  V y = hn::Log(d, hn::Max(x, hn::Set(d, 1.40129846e-45f)));  // the smallest subnormal
  y = hn::IfThenElse(hn::Eq(x, zero), hn::Neg(inf), y);
  y = hn::IfThenElse(hn::Eq(x, inf), inf, y);
  return hn::IfThenElse(hn::Or(hn::Lt(x, zero), hn::IsNaN(x)), hn::NaN(d), y);
}

// tanh(x) = x P(x^2) / Q(x^2) on [-9, 9], a rational fit for relative error (6.6e-9 before
// rounding the coefficients to floats), and +-1 past 9, where tanh rounds to 1. In floats
// 4.6 ulps at most with FMA and 5.7 without (tests/ops/scalar_math_test.cc), and never past +-1.
// One division and nine multiply-adds, where Highway's Tanh spends an expm1 and a division: the
// 8-op chain benchmark went from 12.4 to 7.4 ms with it. Odd, so tanh(-0) = -0.
template <class D, class V>
HWY_INLINE V tanh_vec(D d, V x) {
  static constexpr float kP[] = {1.000000000e+00f, 1.308401078e-01f,  3.103956580e-03f,
                                 1.115431223e-05f, -2.022524548e-08f, 5.277958973e-11f,
                                 -8.488739225e-14f};
  static constexpr float kQ[] = {1.000000000e+00f, 4.641733766e-01f, 2.449518070e-02f,
                                 2.546145697e-04f};
  const V c = hn::Min(hn::Max(x, hn::Set(d, -9.0f)), hn::Set(d, 9.0f));
  const V t = hn::Mul(c, c);
  const V y = hn::Div(hn::Mul(c, polynomial(d, t, kP)), polynomial(d, t, kQ));
  // The fit's few ulps may carry a result near +-1 past it (1.0000001 at x = 8.84); tanh
  // itself never leaves [-1, 1], and clamping only moves such a result closer to the truth.
  const V one = hn::Set(d, 1.0f);
  return hn::IfThenElse(hn::IsNaN(x), x, hn::Min(hn::Max(y, hn::Neg(one)), one));
}

// 1 / (1 + exp(-x)) and x / (1 + exp(-x)), the functors' formulas, so the special values
// come out the same: sigmoid(-inf) = 0, silu(-inf) = -inf / inf = NaN.
template <class D, class V>
HWY_INLINE V sigmoid_vec(D d, V x) {
  const V one = hn::Set(d, 1.0f);
  return hn::Div(one, hn::Add(one, exp_kernel(d, hn::Neg(x))));
}

template <class D, class V>
HWY_INLINE V silu_vec(D d, V x) {
  return hn::Div(x, hn::Add(hn::Set(d, 1.0f), exp_kernel(d, hn::Neg(x))));
}

template <class D, class V>
HWY_INLINE V erf_vec(D d, V x) {
  const V one = hn::Set(d, 1.0f);
  const V a = hn::Abs(x);
  // Past 10.5 erfc is below every float, so the clamp also gives erf(+-inf) = +-1.
  V scale;
  const V tail = erfc_tail(d, hn::Min(hn::Max(a, one), hn::Set(d, 10.5f)), &scale);
  const V large = hn::CopySign(hn::NegMulAdd(tail, scale, one), x);
  const V y = hn::IfThenElse(hn::Lt(a, one), erf_small(d, x), large);
  return hn::IfThenElse(hn::IsNaN(x), x, y);
}

// The functor's 0.5 x erfc(-x / sqrt(2)), with erfc(-t) taken where each form is accurate:
// erfc(|t|) for t < 0 (so x near -10 keeps its tiny result) and 2 - erfc(t) for t >= 0,
// both from erfc_tail. Past t = 3.9 the result is x itself (0.5 erfc(3.9) = 1.7e-8 is below
// half an ulp of 1), and those lanes take u = 0 so that they do not call for the far fit.
// gelu(-inf) = -inf * 0 = NaN, as in the functor.
template <class D, class V>
HWY_INLINE V gelu_vec(D d, V x) {
  const V half_x = hn::Mul(hn::Set(d, 0.5f), x);
  const V t = hn::Mul(x, hn::Set(d, 0.70710678118654752440f));
  const auto saturated = hn::Ge(t, hn::Set(d, 3.9f));
  const V u = hn::IfThenZeroElse(saturated, hn::Min(hn::Abs(t), hn::Set(d, 10.5f)));
  V scale;
  const V tail = erfc_tail(d, u, &scale);
  const V below = hn::Mul(hn::Mul(half_x, tail), scale);
  const V above = hn::Mul(half_x, hn::NegMulAdd(tail, scale, hn::Set(d, 2.0f)));
  return hn::IfThenElse(saturated, x, hn::IfThenElse(hn::Lt(t, hn::Zero(d)), below, above));
}

// log1p(x) = log(u) + (x - (u - 1)) / u with u = 1 + x: the second term is what rounding
// 1 + x lost. 1.4 ulp, where Highway's Log1p (log(u) x / (u - 1)) has 2.5.
template <class D, class V>
HWY_INLINE V log1p_vec(D d, V x) {
  const V one = hn::Set(d, 1.0f);
  const V inf = hn::Inf(d);
  const V u = hn::Add(x, one);
  V y = hn::Add(hn::Log(d, u), hn::Div(hn::Sub(x, hn::Sub(u, one)), u));
  y = hn::IfThenElse(hn::Eq(x, hn::Set(d, -1.0f)), hn::Neg(inf), y);
  y = hn::IfThenElse(hn::Eq(x, inf), inf, y);
  y = hn::IfThenElse(hn::Eq(x, hn::Zero(d)), x, y);  // keeps -0
  return hn::IfThenElse(hn::Or(hn::Lt(x, hn::Set(d, -1.0f)), hn::IsNaN(x)), hn::NaN(d), y);
}

template <class D, class V>
HWY_INLINE V expm1_vec(D d, V x) {
  V y = expm1_kernel(d, x);
  y = hn::IfThenElse(hn::Gt(x, hn::Set(d, 88.72283f)), hn::Inf(d), y);
  // x - 0 would turn -0 into +0; NaN stays NaN.
  return hn::IfThenElse(hn::Or(hn::Eq(x, hn::Zero(d)), hn::IsNaN(x)), x, y);
}

// NaN stays NaN (as the functor's x > 0 ? x : (x != x ? x : 0)).
template <class D, class V>
HWY_INLINE V relu_vec(D d, V x) {
  const V zero = hn::Zero(d);
  return hn::IfThenElse(hn::Gt(x, zero), x, hn::IfThenElse(hn::IsNaN(x), x, zero));
}

// NaN wins, else the functor's a > b ? a : b (so max(+0, -0) is -0, as there).
template <class V>
HWY_INLINE V maximum_vec(V a, V b) {
  const V y = hn::IfThenElse(hn::Gt(a, b), a, b);
  return hn::IfThenElse(hn::IsNaN(a), a, hn::IfThenElse(hn::IsNaN(b), b, y));
}

template <class V>
HWY_INLINE V minimum_vec(V a, V b) {
  const V y = hn::IfThenElse(hn::Lt(a, b), a, b);
  return hn::IfThenElse(hn::IsNaN(a), a, hn::IfThenElse(hn::IsNaN(b), b, y));
}

}  // namespace HWY_NAMESPACE
}  // namespace kiln::runtime::cpu
HWY_AFTER_NAMESPACE();

#endif  // KILN_RUNTIME_CPU_SIMD_MATH_INL_H_
