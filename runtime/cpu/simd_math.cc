// Compiled once per instruction set by hwy/foreach_target.h; HWY_DYNAMIC_DISPATCH picks one.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/cpu/simd_math.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must follow foreach_target.h.
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

void ExpImpl(const float* in, float* out, size_t n) {
  apply(in, out, n, [](auto d, auto x) HWY_ATTR {
    const auto inf = hn::Set(d, std::numeric_limits<float>::infinity());
    auto y = hn::Exp(d, hn::Min(x, hn::Set(d, 89.0f)));
    y = hn::IfThenElse(hn::Gt(x, hn::Set(d, 88.72283f)), inf, y);
    return hn::IfThenElse(hn::IsNaN(x), x, y);
  });
}

void LogImpl(const float* in, float* out, size_t n) {
  apply(in, out, n, [](auto d, auto x) HWY_ATTR {
    const auto inf = hn::Set(d, std::numeric_limits<float>::infinity());
    const auto zero = hn::Zero(d);
    auto y = hn::Log(d, hn::Max(x, hn::Set(d, std::numeric_limits<float>::denorm_min())));
    y = hn::IfThenElse(hn::Eq(x, zero), hn::Neg(inf), y);
    y = hn::IfThenElse(hn::Eq(x, inf), inf, y);
    const auto nan = hn::Set(d, std::numeric_limits<float>::quiet_NaN());
    return hn::IfThenElse(hn::Or(hn::Lt(x, zero), hn::IsNaN(x)), nan, y);
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

namespace {
// Highway's sin/cos are accurate for |x| <= 39000; anything else (or inf/NaN) uses libm.
bool in_trig_range(const float* in, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (!(std::fabs(in[i]) <= 39000.0f)) return false;
  }
  return true;
}
}  // namespace

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

const char* simd_target_name() { return hwy::TargetName(hwy::SupportedAndGeneratedTargets()[0]); }

}  // namespace kiln::runtime::cpu
#endif  // HWY_ONCE
