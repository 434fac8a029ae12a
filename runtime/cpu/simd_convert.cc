// Compiled once per instruction set by hwy/foreach_target.h; HWY_DYNAMIC_DISPATCH picks one.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/cpu/simd_convert.cc"
#include "runtime/cpu/simd_convert.h"

#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kiln/dtype.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::runtime::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The bf16 bits of each float, in the low half of a u32 lane: the float plus 0x7fff plus the
// kept mantissa's lowest bit (ties to even), shifted down; a NaN keeps its top bits with
// the quiet bit set (rounding could carry a NaN's mantissa into infinity).
template <class D>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<D>> bf16_bits(D /*float tag*/, hn::Vec<D> v) {
  const hn::RebindToUnsigned<D> du;
  const hn::RebindToSigned<D> di;
  const auto f = hn::BitCast(du, v);
  const auto high = hn::ShiftRight<16>(f);
  const auto rounding = hn::Add(hn::Set(du, 0x7fffu), hn::And(high, hn::Set(du, 1u)));
  const auto rounded = hn::ShiftRight<16>(hn::Add(f, rounding));
  const auto magnitude = hn::BitCast(di, hn::And(f, hn::Set(du, 0x7fffffffu)));
  const auto is_nan = hn::RebindMask(du, hn::Gt(magnitude, hn::Set(di, 0x7f800000)));
  return hn::IfThenElse(is_nan, hn::Or(high, hn::Set(du, 0x40u)), rounded);
}

void RoundToBf16Impl(float* v, size_t n) {
  const hn::ScalableTag<float> df;
  const size_t lanes = hn::Lanes(df);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto bits = bf16_bits(df, hn::LoadU(df, v + i));
    hn::StoreU(hn::BitCast(df, hn::ShiftLeft<16>(bits)), df, v + i);
  }
  for (; i < n; ++i) v[i] = static_cast<float>(BFloat16(v[i]));
}

void ToBf16Impl(const float* in, BFloat16* out, size_t n) {
  // Vector stores go through uint16_t lanes (the intrinsics may alias any type).
  uint16_t* lanes_out = reinterpret_cast<uint16_t*>(out);
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<uint16_t, decltype(df)> d16;
  const size_t lanes = hn::Lanes(df);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    // Every lane holds 0..0xffff, so the saturating demotion is exact.
    const auto bits = hn::BitCast(di, bf16_bits(df, hn::LoadU(df, in + i)));
    hn::StoreU(hn::DemoteTo(d16, bits), d16, lanes_out + i);
  }
  for (; i < n; ++i) out[i] = BFloat16(in[i]);
}

// f16 in vectors only where Highway converts with F16C (x86 from AVX2 on): its emulation
// on other x86 targets truncates instead of rounding to nearest even.
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2 && !defined(HWY_DISABLE_F16C)
#define KILN_F16_VECTORS 1
#else
#define KILN_F16_VECTORS 0
#endif

void ToF16Impl(const float* in, Half* out, size_t n) {
  size_t i = 0;
#if KILN_F16_VECTORS
  const hn::ScalableTag<float> df;
  const hn::Rebind<hwy::float16_t, decltype(df)> d16;
  auto* lanes_out = reinterpret_cast<hwy::float16_t*>(out);
  const size_t lanes = hn::Lanes(df);
  for (; i + lanes <= n; i += lanes) {
    hn::StoreU(hn::DemoteTo(d16, hn::LoadU(df, in + i)), d16, lanes_out + i);
  }
#endif
  for (; i < n; ++i) out[i] = Half(in[i]);
}

void FromF16Impl(const Half* in, float* out, size_t n) {
  size_t i = 0;
#if KILN_F16_VECTORS
  const hn::ScalableTag<float> df;
  const hn::Rebind<hwy::float16_t, decltype(df)> d16;
  const auto* lanes_in = reinterpret_cast<const hwy::float16_t*>(in);
  const size_t lanes = hn::Lanes(df);
  for (; i + lanes <= n; i += lanes) {
    hn::StoreU(hn::PromoteTo(df, hn::LoadU(d16, lanes_in + i)), df, out + i);
  }
#endif
  for (; i < n; ++i) out[i] = static_cast<float>(in[i]);
}

void RoundToF16Impl(float* v, size_t n) {
  size_t i = 0;
#if KILN_F16_VECTORS
  const hn::ScalableTag<float> df;
  const hn::Rebind<hwy::float16_t, decltype(df)> d16;
  const size_t lanes = hn::Lanes(df);
  for (; i + lanes <= n; i += lanes) {
    hn::StoreU(hn::PromoteTo(df, hn::DemoteTo(d16, hn::LoadU(df, v + i))), df, v + i);
  }
#endif
  for (; i < n; ++i) v[i] = static_cast<float>(Half(v[i]));
}
#undef KILN_F16_VECTORS

}  // namespace HWY_NAMESPACE
}  // namespace kiln::runtime::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::runtime::cpu {

HWY_EXPORT(RoundToBf16Impl);
HWY_EXPORT(ToBf16Impl);
HWY_EXPORT(ToF16Impl);
HWY_EXPORT(FromF16Impl);
HWY_EXPORT(RoundToF16Impl);

void round_floats_to_bf16(float* v, size_t n) { HWY_DYNAMIC_DISPATCH(RoundToBf16Impl)(v, n); }

void floats_to_bf16(const float* in, BFloat16* out, size_t n) {
  HWY_DYNAMIC_DISPATCH(ToBf16Impl)(in, out, n);
}
void round_floats_to_f16(float* v, size_t n) { HWY_DYNAMIC_DISPATCH(RoundToF16Impl)(v, n); }
void floats_to_f16(const float* in, Half* out, size_t n) {
  HWY_DYNAMIC_DISPATCH(ToF16Impl)(in, out, n);
}
void f16_to_floats(const Half* in, float* out, size_t n) {
  HWY_DYNAMIC_DISPATCH(FromF16Impl)(in, out, n);
}

}  // namespace kiln::runtime::cpu
#endif  // HWY_ONCE
