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
#include "runtime/cpu/simd_math-inl.h"
#include "runtime/cpu/simd_math.h"

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

// <Enum>Impl of each op with a vector function: <name>_vec over every lane.
#define KILN_VECTOR_IMPL(Enum, name)                                             \
  void Enum##Impl(const float* in, float* out, size_t n) {                       \
    apply(in, out, n, [](auto d, auto x) HWY_ATTR { return name##_vec(d, x); }); \
  }
KILN_SIMD_UNARY_VECTOR_OPS(KILN_VECTOR_IMPL)
#undef KILN_VECTOR_IMPL

#if HWY_HAVE_FLOAT64
// Applies `op` to every lane of in[0, n) in f64 and rounds each result once to float.
// Highway's f32 sin and cos are 3 ulps from the truth and reach 1.0000001; in f64 the same
// 3 ulps are far below a float's half ulp, so the one rounding is what remains, and a result
// can never leave [-1, 1].
template <class Op>
HWY_INLINE void apply_in_double(const float* in, float* out, size_t n, Op op) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;
  const size_t lanes = hn::Lanes(dd);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    hn::StoreU(hn::DemoteTo(df, op(dd, hn::PromoteTo(dd, hn::LoadU(df, in + i)))), df, out + i);
  }
  if (i < n) {
    float buffer[HWY_MAX_BYTES / sizeof(double)] = {};
    for (size_t k = 0; k < n - i; ++k) buffer[k] = in[i + k];
    hn::StoreU(hn::DemoteTo(df, op(dd, hn::PromoteTo(dd, hn::LoadU(df, buffer)))), df, buffer);
    for (size_t k = 0; k < n - i; ++k) out[i + k] = buffer[k];
  }
}

void SinImpl(const float* in, float* out, size_t n) {
  apply_in_double(in, out, n, [](auto d, auto x) HWY_ATTR { return hn::Sin(d, x); });
}

void CosImpl(const float* in, float* out, size_t n) {
  apply_in_double(in, out, n, [](auto d, auto x) HWY_ATTR { return hn::Cos(d, x); });
}
#else
// No f64 vectors on this target: libm's double sin and cos, rounded once to float.
void SinImpl(const float* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(std::sin(double{in[i]}));
}

void CosImpl(const float* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(std::cos(double{in[i]}));
}
#endif  // HWY_HAVE_FLOAT64

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

void DotRowsImpl(const float* q, const float* rows, int64_t ld, int64_t n, int64_t depth,
                 float* out) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  for (int64_t j = 0; j < n; ++j) {
    const float* row = rows + j * ld;
    auto total = hn::Zero(d);
    int64_t i = 0;
    for (; i + lanes <= depth; i += lanes) {
      total = hn::MulAdd(hn::LoadU(d, q + i), hn::LoadU(d, row + i), total);
    }
    float dot = hn::GetLane(hn::SumOfLanes(d, total));
    for (; i < depth; ++i) dot += q[i] * row[i];
    out[j] = dot;
  }
}

void WeightedRowsImpl(const float* p, const float* rows, int64_t ld, int64_t n, int64_t depth,
                      float* acc) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + lanes <= depth; i += lanes) {  // one accumulator a column of lanes, over every row
    auto total = hn::LoadU(d, acc + i);
    for (int64_t j = 0; j < n; ++j) {
      total = hn::MulAdd(hn::Set(d, p[j]), hn::LoadU(d, rows + j * ld + i), total);
    }
    hn::StoreU(total, d, acc + i);
  }
  for (; i < depth; ++i) {
    float total = acc[i];
    for (int64_t j = 0; j < n; ++j) total += p[j] * rows[j * ld + i];
    acc[i] = total;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace kiln::runtime::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::runtime::cpu {

#define KILN_EXPORT_IMPL(Enum, name) HWY_EXPORT(Enum##Impl);
KILN_SIMD_UNARY_OPS(KILN_EXPORT_IMPL)
#undef KILN_EXPORT_IMPL
HWY_EXPORT(PowImpl);
HWY_EXPORT(AddImpl);
HWY_EXPORT(SubImpl);
HWY_EXPORT(MulImpl);
HWY_EXPORT(DivImpl);
HWY_EXPORT(MulScalarImpl);
HWY_EXPORT(DivScalarImpl);
HWY_EXPORT(OnlineSoftmaxTileImpl);
HWY_EXPORT(DotRowsImpl);
HWY_EXPORT(WeightedRowsImpl);

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
// simd_<name> of each op with a vector function: its <Enum>Impl for this machine.
#define KILN_DISPATCH_IMPL(Enum, name)                      \
  void simd_##name(const float* in, float* out, size_t n) { \
    HWY_DYNAMIC_DISPATCH(Enum##Impl)(in, out, n);           \
  }
KILN_SIMD_UNARY_VECTOR_OPS(KILN_DISPATCH_IMPL)
#undef KILN_DISPATCH_IMPL
void simd_sin(const float* in, float* out, size_t n) {
  if (!in_trig_range(in, n)) {  // in double, as the vectors: sinf itself is 0.52 ulp off
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(std::sin(double{in[i]}));
    return;
  }
  HWY_DYNAMIC_DISPATCH(SinImpl)(in, out, n);
}
void simd_cos(const float* in, float* out, size_t n) {
  if (!in_trig_range(in, n)) {
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(std::cos(double{in[i]}));
    return;
  }
  HWY_DYNAMIC_DISPATCH(CosImpl)(in, out, n);
}
void simd_pow(const float* a, const float* b, float* out, size_t n) {
  HWY_DYNAMIC_DISPATCH(PowImpl)(a, b, out, n);
}

void online_softmax_tile(const float* in, float* out, int64_t rows, int64_t cols, int64_t ld,
                         float* max, float* sum, float* alpha) {
  HWY_DYNAMIC_DISPATCH(OnlineSoftmaxTileImpl)(in, out, rows, cols, ld, max, sum, alpha);
}

void simd_dot_rows(const float* q, const float* rows, int64_t ld, int64_t n, int64_t depth,
                   float* out) {
  HWY_DYNAMIC_DISPATCH(DotRowsImpl)(q, rows, ld, n, depth, out);
}

void simd_weighted_rows(const float* p, const float* rows, int64_t ld, int64_t n, int64_t depth,
                        float* acc) {
  HWY_DYNAMIC_DISPATCH(WeightedRowsImpl)(p, rows, ld, n, depth, acc);
}

const char* simd_target_name() { return hwy::TargetName(hwy::SupportedAndGeneratedTargets()[0]); }

}  // namespace kiln::runtime::cpu
#endif  // HWY_ONCE
