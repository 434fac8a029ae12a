#include "runtime/cpu/kernel_executor.h"

#include <Eigen/Core>
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "kiln/error.h"
#include "ops/custom_functions.h"
#include "ops/element_access.h"
#include "ops/philox.h"
#include "ops/scalar_math.h"
#include "runtime/cpu/simd_math.h"
#include "runtime/cpu/thread_pool.h"

namespace kiln::runtime::cpu {
namespace {

using jit::Instr;
using jit::InstrKind;
using jit::KernelLaunch;
using jit::KernelProgram;
using ops::OpKind;
using ops::Shape;

constexpr int64_t kTile = 2048;

// The register class a dtype computes in: f16/bf16/f32 in float, f64 in double, integers and
// bool in int64.
enum class Cls { kFloat, kDouble, kInt };
Cls cls_of(DType dt) {
  if (dt == DType::F64) return Cls::kDouble;
  return is_floating(dt) ? Cls::kFloat : Cls::kInt;
}

// Rounds a value held in a register to what `dt` can hold.
inline float round_float(DType dt, float v) {
  if (dt == DType::F16) return static_cast<float>(Half(v));
  if (dt == DType::BF16) return static_cast<float>(BFloat16(v));
  return v;
}
// round_float over n values, one loop per dtype so that each vectorizes.
inline void round_all(DType dt, float* v, int64_t n) {
  if (dt == DType::BF16) {
    for (int64_t e = 0; e < n; ++e) v[e] = static_cast<float>(BFloat16(v[e]));
  } else if (dt == DType::F16) {
    for (int64_t e = 0; e < n; ++e) v[e] = static_cast<float>(Half(v[e]));
  }
}
inline int64_t wrap_int(DType dt, int64_t v) {
  if (dt == DType::I32) return static_cast<int32_t>(v);
  if (dt == DType::Bool) return v != 0;
  return v;
}

// Converts one value between dtypes under the cast rules (docs/semantics.md).
// A 16-bit float value may carry f32 precision inside a kernel; converting it to another
// dtype first rounds it to what it is (as an astype of a stored value would see).
template <class To, class From>
To convert(From v, DType from, DType to) {
  if constexpr (std::is_same_v<From, float>) v = round_float(from, v);
  if constexpr (std::is_same_v<To, int64_t>) {
    if constexpr (std::is_floating_point_v<From>) {
      if (to == DType::Bool) return (v != 0 || std::isnan(v)) ? 1 : 0;
      if (to == DType::I32) return ops::saturate_to<int32_t>(static_cast<double>(v));
      return ops::saturate_to<int64_t>(static_cast<double>(v));
    } else {
      return wrap_int(to, v);
    }
  } else if constexpr (std::is_same_v<To, float>) {
    return round_float(to, static_cast<float>(v));
  } else {
    return static_cast<double>(v);
  }
}

// One space's registers for one tile, per thread.
struct Registers {
  std::vector<std::vector<float>> f;
  std::vector<std::vector<double>> d;
  std::vector<std::vector<int64_t>> i;
  std::vector<std::vector<int64_t>> offsets;  // per view
  template <class T>
  T* get(int instr);
};
template <>
float* Registers::get<float>(int instr) {
  return f[instr].data();
}
template <>
double* Registers::get<double>(int instr) {
  return d[instr].data();
}
template <>
int64_t* Registers::get<int64_t>(int instr) {
  return i[instr].data();
}

// Offsets of a strided view for flat positions [begin, begin + n) of `shape`.
void view_offsets(const Shape& shape, const jit::ViewParams& v, int64_t begin, int64_t n,
                  int64_t* out) {
  const int rank = static_cast<int>(shape.size());
  if (rank == 0) {
    std::fill(out, out + n, v.offset);
    return;
  }
  int64_t idx[64];
  int64_t rest = begin;
  int64_t base = v.offset;
  for (int d = rank - 1; d >= 0; --d) {
    idx[d] = shape[d] == 0 ? 0 : rest % shape[d];
    rest = shape[d] == 0 ? 0 : rest / shape[d];
    base += idx[d] * v.strides[d];
  }
  const int last = rank - 1;
  const int64_t stride = v.strides[last];
  int64_t e = 0;
  while (e < n) {
    int64_t run = std::min(n - e, shape[last] - idx[last]);
    for (int64_t k = 0; k < run; ++k) out[e + k] = base + k * stride;
    e += run;
    base += run * stride;
    idx[last] += run;
    if (idx[last] < shape[last]) continue;
    base -= shape[last] * stride;
    idx[last] = 0;
    for (int d = last - 1; d >= 0; --d) {
      ++idx[d];
      base += v.strides[d];
      if (idx[d] < shape[d]) break;
      base -= shape[d] * v.strides[d];
      idx[d] = 0;
    }
  }
}

// Reads n elements of a buffer of dtype `dt` into a register of class T; element e is at
// offset index(e). One switch per tile; the loop inlines `index`.
template <class T, class Index>
void load_with(const Buffer& b, DType dt, int64_t n, T* out, Index index) {
  auto run = [&](auto* src, auto&& to_value) {
    for (int64_t e = 0; e < n; ++e) out[e] = to_value(src[index(e)]);
  };
  switch (dt) {
    case DType::Bool:
      return run(b.as<uint8_t>(), [](uint8_t v) { return static_cast<T>(v != 0); });
    case DType::I32:
      return run(b.as<int32_t>(), [](int32_t v) { return static_cast<T>(v); });
    case DType::I64:
      return run(b.as<int64_t>(), [](int64_t v) { return static_cast<T>(v); });
    case DType::F16:
      return run(b.as<Half>(), [](Half v) { return static_cast<T>(static_cast<float>(v)); });
    case DType::BF16:
      return run(b.as<BFloat16>(),
                 [](BFloat16 v) { return static_cast<T>(static_cast<float>(v)); });
    case DType::F32:
      return run(b.as<float>(), [](float v) { return static_cast<T>(v); });
    case DType::F64:
      return run(b.as<double>(), [](double v) { return static_cast<T>(v); });
  }
}

template <class T>
void store_values(Buffer& b, DType dt, int64_t begin, int64_t n, const T* in) {
  auto run = [&](auto* dst, auto&& convert_one) {
    for (int64_t e = 0; e < n; ++e) dst[begin + e] = convert_one(in[e]);
  };
  switch (dt) {
    case DType::Bool:
      return run(b.as<uint8_t>(), [](T v) -> uint8_t {
        if constexpr (std::is_floating_point_v<T>) return (v != 0 || std::isnan(v)) ? 1 : 0;
        return v != 0;
      });
    case DType::I32:
      return run(b.as<int32_t>(), [](T v) -> int32_t {
        if constexpr (std::is_floating_point_v<T>) return ops::saturate_to<int32_t>(v);
        return static_cast<int32_t>(v);
      });
    case DType::I64:
      return run(b.as<int64_t>(), [](T v) -> int64_t {
        if constexpr (std::is_floating_point_v<T>) return ops::saturate_to<int64_t>(v);
        return v;
      });
    case DType::F16:
      return run(b.as<Half>(), [](T v) { return Half(static_cast<float>(v)); });
    case DType::BF16:
      return run(b.as<BFloat16>(), [](T v) { return BFloat16(static_cast<float>(v)); });
    case DType::F32:
      return run(b.as<float>(), [](T v) { return static_cast<float>(v); });
    case DType::F64:
      return run(b.as<double>(), [](T v) { return static_cast<double>(v); });
  }
}

template <class T>
void unary_loop_scalar(OpKind op, const T* a, T* out, int64_t n);

// f32 transcendental functions go through Highway; the rest vectorize as plain loops.
template <class T>
void unary_loop(OpKind op, const T* a, T* out, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    const size_t count = static_cast<size_t>(n);
    switch (op) {
      case OpKind::Exp:
        return simd_exp(a, out, count);
      case OpKind::Log:
        return simd_log(a, out, count);
      case OpKind::Tanh:
        return simd_tanh(a, out, count);
      case OpKind::Sin:
        return simd_sin(a, out, count);
      case OpKind::Cos:
        return simd_cos(a, out, count);
      case OpKind::Sigmoid:
      case OpKind::Silu: {
        for (int64_t e = 0; e < n; ++e) out[e] = -a[e];
        simd_exp(out, out, count);
        if (op == OpKind::Sigmoid) {
          for (int64_t e = 0; e < n; ++e) out[e] = 1.0f / (1.0f + out[e]);
        } else {
          for (int64_t e = 0; e < n; ++e) out[e] = a[e] / (1.0f + out[e]);
        }
        return;
      }
      default:
        break;
    }
  }
  unary_loop_scalar<T>(op, a, out, n);
}

template <class T>
void unary_loop_scalar(OpKind op, const T* a, T* out, int64_t n) {
  // One switch per tile; the loop body is a single known function, so it vectorizes.
#define KILN_UNARY_CASE(kind)                                                         \
  case OpKind::kind:                                                                  \
    for (int64_t e = 0; e < n; ++e) out[e] = ops::unary_float<T>(OpKind::kind, a[e]); \
    return;
  switch (op) {
    KILN_UNARY_CASE(Neg)
    KILN_UNARY_CASE(Abs)
    KILN_UNARY_CASE(Exp)
    KILN_UNARY_CASE(Log)
    KILN_UNARY_CASE(Sqrt)
    KILN_UNARY_CASE(Rsqrt)
    KILN_UNARY_CASE(Sin)
    KILN_UNARY_CASE(Cos)
    KILN_UNARY_CASE(Tanh)
    KILN_UNARY_CASE(Sigmoid)
    KILN_UNARY_CASE(Relu)
    KILN_UNARY_CASE(Gelu)
    KILN_UNARY_CASE(Silu)
    KILN_UNARY_CASE(Erf)
    KILN_UNARY_CASE(Floor)
    KILN_UNARY_CASE(Ceil)
    KILN_UNARY_CASE(Reciprocal)
    KILN_UNARY_CASE(Square)
    default:
      for (int64_t e = 0; e < n; ++e) out[e] = std::numeric_limits<T>::quiet_NaN();
  }
#undef KILN_UNARY_CASE
}

template <class T>
void binary_loop(OpKind op, const T* a, const T* b, T* out, int64_t n) {
  switch (op) {
    case OpKind::Add:
      for (int64_t e = 0; e < n; ++e) out[e] = a[e] + b[e];
      return;
    case OpKind::Sub:
      for (int64_t e = 0; e < n; ++e) out[e] = a[e] - b[e];
      return;
    case OpKind::Mul:
      for (int64_t e = 0; e < n; ++e) out[e] = a[e] * b[e];
      return;
    case OpKind::Div:
      for (int64_t e = 0; e < n; ++e) out[e] = a[e] / b[e];
      return;
    case OpKind::Pow:
      for (int64_t e = 0; e < n; ++e) out[e] = std::pow(a[e], b[e]);
      return;
    case OpKind::Maximum:
      for (int64_t e = 0; e < n; ++e) {
        out[e] = (std::isnan(a[e]) || std::isnan(b[e])) ? std::numeric_limits<T>::quiet_NaN()
                                                        : (a[e] > b[e] ? a[e] : b[e]);
      }
      return;
    case OpKind::Minimum:
      for (int64_t e = 0; e < n; ++e) {
        out[e] = (std::isnan(a[e]) || std::isnan(b[e])) ? std::numeric_limits<T>::quiet_NaN()
                                                        : (a[e] < b[e] ? a[e] : b[e]);
      }
      return;
    default:
      return;
  }
}

template <class T>
void compare_loop(OpKind op, const T* a, const T* b, int64_t* out, int64_t n) {
  for (int64_t e = 0; e < n; ++e) out[e] = ops::compare(op, a[e], b[e]);
}

// Evaluates the instructions of one space over tiles of it.
class TileEvaluator {
 public:
  TileEvaluator(const KernelProgram& p, const KernelLaunch& l,
                const std::vector<const Buffer*>& inputs, const std::vector<double>& params,
                const void* anchor)
      : p_(p), l_(l), inputs_(inputs), params_(params), anchor_(anchor) {
    const size_t n = p_.instrs.size();
    regs_.f.resize(n);
    regs_.d.resize(n);
    regs_.i.resize(n);
    regs_.offsets.resize(l_.views.size());
    for (size_t v = 0; v < l_.views.size(); ++v) {
      contiguous_.push_back(p_.view_patterns[v].find(":contiguous") != std::string::npos ||
                            is_row_major(l_.views[v], v));
    }
  }

  // A view is row-major over its space when its strides are the space's own strides.
  bool is_row_major(const jit::ViewParams& view, size_t v) const {
    for (size_t i = 0; i < p_.instrs.size(); ++i) {
      const Instr& in = p_.instrs[i];
      if (in.view != static_cast<int>(v)) continue;
      const Shape& space = l_.spaces[in.space];
      std::vector<int64_t> strides = ops::contiguous_strides(space);
      for (size_t d = 0; d < space.size(); ++d) {
        if (space[d] != 1 && strides[d] != view.strides[d]) return false;
      }
      return true;
    }
    return false;
  }

  // Computes every instruction of `space` for its flat positions [begin, begin + n).
  void run(int space, int64_t begin, int64_t n) {
    for (size_t k = 0; k < p_.instrs.size(); ++k) {
      if (p_.instrs[k].space == space) eval(static_cast<int>(k), begin, n);
    }
  }

  template <class T>
  const T* values(int instr) {
    return regs_.get<T>(instr);
  }
  Cls cls(int instr) const { return cls_of(p_.instrs[instr].dtype); }

  // Stores `instr` (space 0) into `out` of dtype `dt` at [begin, begin + n).
  void store(int instr, Buffer& out, DType dt, int64_t begin, int64_t n) {
    visit(instr, [&](const auto* values) { store_values(out, dt, begin, n, values); });
  }

  // Calls f with `instr`'s register as a typed pointer (float, double or int64).
  template <class F>
  void visit(int instr, F&& f) {
    switch (cls(instr)) {
      case Cls::kFloat:
        return f(static_cast<const float*>(regs_.get<float>(instr)));
      case Cls::kDouble:
        return f(static_cast<const double*>(regs_.get<double>(instr)));
      case Cls::kInt:
        return f(static_cast<const int64_t*>(regs_.get<int64_t>(instr)));
    }
  }

 private:
  template <class T>
  T* alloc(int instr, int64_t n) {
    auto& v = reg_vector<T>(instr);
    if (static_cast<int64_t>(v.size()) < n) v.resize(n);
    return v.data();
  }
  template <class T>
  std::vector<T>& reg_vector(int instr) {
    if constexpr (std::is_same_v<T, float>) return regs_.f[instr];
    if constexpr (std::is_same_v<T, double>) return regs_.d[instr];
    if constexpr (std::is_same_v<T, int64_t>) return regs_.i[instr];
  }

  const int64_t* offsets(int view, int space, int64_t begin, int64_t n) {
    auto& v = regs_.offsets[view];
    if (static_cast<int64_t>(v.size()) < n) v.resize(n);
    view_offsets(l_.spaces[space], l_.views[view], begin, n, v.data());
    return v.data();
  }

  // Where a view walks its buffer contiguously (the common case), the first offset of the
  // tile; -1 otherwise.
  int64_t contiguous_start(int view, int64_t begin) const {
    if (!contiguous_[view]) return -1;
    return l_.views[view].offset + begin;
  }

  template <class F>
  void dispatch(Cls c, F&& f) {
    switch (c) {
      case Cls::kFloat:
        return f(float{});
      case Cls::kDouble:
        return f(double{});
      case Cls::kInt:
        return f(int64_t{});
    }
  }

  void eval(int k, int64_t begin, int64_t n) {
    const Instr& in = p_.instrs[k];
    const Cls c = cls_of(in.dtype);
    switch (in.kind) {
      case InstrKind::kLoad: {
        const int64_t start = contiguous_start(in.view, begin);
        if (start >= 0) {
          dispatch(c, [&](auto t) {
            using T = decltype(t);
            load_with<T>(*inputs_[in.input], p_.input_dtypes[in.input], n, alloc<T>(k, n),
                         [start](int64_t e) { return start + e; });
          });
          return;
        }
        const int64_t* off = offsets(in.view, in.space, begin, n);
        dispatch(c, [&](auto t) {
          using T = decltype(t);
          load_with<T>(*inputs_[in.input], p_.input_dtypes[in.input], n, alloc<T>(k, n),
                       [off](int64_t e) { return off[e]; });
        });
        return;
      }
      case InstrKind::kParam: {
        double v = params_[in.param];
        dispatch(c, [&](auto t) {
          using T = decltype(t);
          T value = convert<T>(v, DType::F64, in.dtype);
          std::fill_n(alloc<T>(k, n), n, value);
        });
        return;
      }
      case InstrKind::kIndexLeaf:
        return eval_index_leaf(k, in, begin, n);
      case InstrKind::kAnchor:
        dispatch(c, [&](auto t) {
          using T = decltype(t);
          const T* src = static_cast<const T*>(anchor_) + begin;
          std::copy(src, src + n, alloc<T>(k, n));
        });
        return;
      case InstrKind::kCast:
        return eval_cast(k, in, n);
      case InstrKind::kUnary:
        eval_unary(k, in, n);
        return round_to_dtype(k, in.dtype, n);
      case InstrKind::kBinary:
        eval_binary(k, in, n);
        return round_to_dtype(k, in.dtype, n);
      case InstrKind::kCustom: {
        // Operands are F32 registers; the user's C++ definition runs over the whole tile.
        const float* operands[ops::kMaxCustomArity] = {};
        int arity = 0;
        for (int operand : {in.a, in.b, in.c}) {
          if (operand >= 0) operands[arity++] = regs_.get<float>(operand);
        }
        const ops::CustomFunction* f = ops::custom_function(in.function);
        float* out = alloc<float>(k, n);
        try {
          f->cpu(n, operands, out);
        } catch (const std::exception& e) {
          throw Error(absl::StrCat("[custom ", f->name, "] its C++ definition failed: ", e.what()));
        }
        return;
      }
      case InstrKind::kWhere:
        dispatch(c, [&](auto t) {
          using T = decltype(t);
          const int64_t* cond = regs_.get<int64_t>(in.a);
          const T* a = regs_.get<T>(in.b);
          const T* b = regs_.get<T>(in.c);
          T* out = alloc<T>(k, n);
          for (int64_t e = 0; e < n; ++e) out[e] = cond[e] ? a[e] : b[e];
        });
        return;
    }
  }

  // Each f16/bf16 op rounds its result to 16 bits, as if stored: fusing ops never changes
  // what they compute (only float-versus-double rounding differs from the reference).
  void round_to_dtype(int k, DType dt, int64_t n) { round_all(dt, regs_.get<float>(k), n); }

  void eval_index_leaf(int k, const Instr& in, int64_t begin, int64_t n) {
    const int64_t* off = offsets(in.view, in.space, begin, n);
    const uint64_t seed = in.param >= 0 ? std::bit_cast<uint64_t>(params_[in.param]) : 0;
    const int bits = in.dtype == DType::F16 ? 11 : (in.dtype == DType::BF16 ? 8 : 24);
    auto value_at = [&](int64_t i) -> double {
      if (in.op == OpKind::Rand) {
        return ops::uniform_from_bits(ops::philox_block(i, seed)[0], bits);
      }
      std::array<uint32_t, 4> block = ops::philox_block(i, seed);
      double u1 = (static_cast<double>(block[0] >> 8) + 1.0) / 16777216.0;
      double u2 = static_cast<double>(block[1] >> 8) / 16777216.0;
      return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
    };
    dispatch(cls_of(in.dtype), [&](auto t) {
      using T = decltype(t);
      T* out = alloc<T>(k, n);
      for (int64_t e = 0; e < n; ++e) {
        if (in.op == OpKind::Arange) {
          out[e] = convert<T>(off[e], DType::I64, in.dtype);
        } else {
          out[e] = convert<T>(value_at(off[e]), DType::F64, in.dtype);
        }
      }
    });
  }

  void eval_cast(int k, const Instr& in, int64_t n) {
    const DType from = p_.instrs[in.a].dtype;
    dispatch(cls_of(from), [&](auto s) {
      using S = decltype(s);
      const S* a = regs_.get<S>(in.a);
      dispatch(cls_of(in.dtype), [&](auto t) {
        using T = decltype(t);
        T* out = alloc<T>(k, n);
        if constexpr (std::is_same_v<S, float> && std::is_same_v<T, float>) {
          // Between f16, bf16 and f32: round to the source, then to the target (what
          // convert does), one vectorizable loop each.
          std::copy(a, a + n, out);
          round_all(from, out, n);
          round_all(in.dtype, out, n);
          return;
        }
        for (int64_t e = 0; e < n; ++e) out[e] = convert<T>(a[e], from, in.dtype);
      });
    });
  }

  void eval_unary(int k, const Instr& in, int64_t n) {
    if (cls_of(in.dtype) != Cls::kInt) {
      dispatch(cls_of(in.dtype), [&](auto t) {
        using T = decltype(t);
        if constexpr (!std::is_same_v<T, int64_t>) {
          unary_loop<T>(in.op, regs_.get<T>(in.a), alloc<T>(k, n), n);
        }
      });
      return;
    }
    const int64_t* a = regs_.get<int64_t>(in.a);
    int64_t* out = alloc<int64_t>(k, n);
    for (int64_t e = 0; e < n; ++e) out[e] = wrap_int(in.dtype, ops::unary_int(in.op, a[e]));
  }

  void eval_binary(int k, const Instr& in, int64_t n) {
    const Cls operands = cls_of(p_.instrs[in.a].dtype);
    if (ops::is_comparison(in.op)) {
      dispatch(operands, [&](auto t) {
        using T = decltype(t);
        compare_loop<T>(in.op, regs_.get<T>(in.a), regs_.get<T>(in.b), alloc<int64_t>(k, n), n);
      });
      return;
    }
    if (in.op == OpKind::LogicalAnd || in.op == OpKind::LogicalOr) {
      const int64_t* a = regs_.get<int64_t>(in.a);
      const int64_t* b = regs_.get<int64_t>(in.b);
      int64_t* out = alloc<int64_t>(k, n);
      for (int64_t e = 0; e < n; ++e) {
        out[e] = in.op == OpKind::LogicalAnd ? (a[e] && b[e]) : (a[e] || b[e]);
      }
      return;
    }
    if (operands == Cls::kInt) {
      const int64_t* a = regs_.get<int64_t>(in.a);
      const int64_t* b = regs_.get<int64_t>(in.b);
      int64_t* out = alloc<int64_t>(k, n);
      for (int64_t e = 0; e < n; ++e)
        out[e] = wrap_int(in.dtype, ops::binary_int(in.op, a[e], b[e]));
      return;
    }
    dispatch(operands, [&](auto t) {
      using T = decltype(t);
      if constexpr (!std::is_same_v<T, int64_t>) {
        binary_loop<T>(in.op, regs_.get<T>(in.a), regs_.get<T>(in.b), alloc<T>(k, n), n);
      }
    });
  }

  const KernelProgram& p_;
  const KernelLaunch& l_;
  const std::vector<const Buffer*>& inputs_;
  const std::vector<double>& params_;
  const void* anchor_;
  Registers regs_;
  std::vector<bool> contiguous_;  // per view
};

// Runs space 0 (pointwise body or epilogue) over tiles and stores every output.
void run_stores(const KernelProgram& p, const KernelLaunch& l, const std::vector<const Buffer*>& in,
                const std::vector<Buffer*>& out, const std::vector<double>& params,
                const void* anchor) {
  const int64_t total = ops::numel(l.spaces[0]);
  const int64_t tiles = (total + kTile - 1) / kTile;
  parallel_for(tiles, 16, [&](int64_t t0, int64_t t1) {
    TileEvaluator ev(p, l, in, params, anchor);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t begin = t * kTile, n = std::min(kTile, total - begin);
      ev.run(0, begin, n);
      for (const jit::Store& s : p.stores) {
        ev.store(s.value, *out[s.output], p.output_dtypes[s.output], begin, n);
      }
    }
  });
}

// Evaluates operand `k` over its whole space into a contiguous array of class T.
template <class T>
std::vector<T> evaluate_operand(const KernelProgram& p, const KernelLaunch& l,
                                const std::vector<const Buffer*>& in,
                                const std::vector<double>& params, int k) {
  const int space = k + 1;
  const int instr = p.anchor_operands[k];
  const int64_t total = ops::numel(l.spaces[space]);
  std::vector<T> values(total);
  const int64_t tiles = (total + kTile - 1) / kTile;
  parallel_for(tiles, 16, [&](int64_t t0, int64_t t1) {
    TileEvaluator ev(p, l, in, params, nullptr);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t begin = t * kTile, n = std::min(kTile, total - begin);
      ev.run(space, begin, n);
      ev.visit(instr, [&](const auto* src) {
        for (int64_t e = 0; e < n; ++e) values[begin + e] = static_cast<T>(src[e]);
      });
    }
  });
  return values;
}

// Sum/mean/max/min (and argmax/argmin) of operand 0 over the reduced axes, into `result`.
// Whether `axes` (sorted) are exactly the last axes of a rank-`rank` space.
bool trailing_axes(const std::vector<int>& axes, int rank) {
  if (axes.empty()) return false;
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] != rank - static_cast<int>(axes.size()) + static_cast<int>(i)) return false;
  }
  return true;
}

// A contiguous run summed in double with eight independent accumulators (the additions
// pipeline and vectorize; double keeps the result as accurate as a sequential sum).
template <class T>
double sum_in_double(const T* x, int64_t n) {
  double acc[8] = {};
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    for (int j = 0; j < 8; ++j) acc[j] += static_cast<double>(x[k + j]);
  }
  for (; k < n; ++k) acc[0] += static_cast<double>(x[k]);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

template <class Acc, class Result>
void reduce(const KernelProgram& p, const KernelLaunch& l, const std::vector<const Buffer*>& in,
            const std::vector<double>& params, Result* result) {
  const Shape& space = l.spaces[1];
  const int64_t out_n = ops::numel(l.spaces[0]);
  const std::vector<int>& axes = p.anchor_attrs.axes;
  const bool arg = p.anchor == jit::AnchorKind::kArgReduce;
  // Output position of each input element (reduced dims stride 0), and, for arg-reductions,
  // its index along the axis.
  jit::ViewParams to_out, along_axis;
  {
    Shape kept;
    for (size_t d = 0; d < space.size(); ++d) {
      bool reduced = arg ? static_cast<int>(d) == p.anchor_attrs.axis
                         : std::find(axes.begin(), axes.end(), static_cast<int>(d)) != axes.end();
      if (!reduced) kept.push_back(space[d]);
    }
    std::vector<int64_t> ks = ops::contiguous_strides(kept);
    size_t k = 0;
    for (size_t d = 0; d < space.size(); ++d) {
      bool reduced = arg ? static_cast<int>(d) == p.anchor_attrs.axis
                         : std::find(axes.begin(), axes.end(), static_cast<int>(d)) != axes.end();
      to_out.strides.push_back(reduced ? 0 : ks[k++]);
      along_axis.strides.push_back(arg && reduced ? 1 : 0);
    }
  }
  const OpKind op = p.anchor_op;
  const bool is_sum = op == OpKind::Sum || op == OpKind::Mean;
  const bool want_max = op == OpKind::Max || op == OpKind::Argmax;
  if constexpr (std::is_floating_point_v<Acc>) {
    // Floating sums over the trailing axes: each output is one contiguous run of the
    // operand, so rows go to threads whole and add with independent accumulators instead
    // of scattering every element into its output.
    const int64_t extent = out_n == 0 ? 0 : ops::numel(space) / out_n;
    if (!arg && is_sum && trailing_axes(axes, static_cast<int>(space.size())) && extent > 0 &&
        extent <= (int64_t{1} << 16)) {
      const int operand = p.anchor_operands[0];
      parallel_for(out_n, std::max<int64_t>(1, 16384 / extent), [&](int64_t r0, int64_t r1) {
        TileEvaluator ev(p, l, in, params, nullptr);
        for (int64_t r = r0; r < r1; ++r) {
          ev.run(1, r * extent, extent);
          double total = 0;
          ev.visit(operand, [&](auto* v) { total = sum_in_double(v, extent); });
          result[r] =
              static_cast<Result>(op == OpKind::Mean ? total / static_cast<double>(extent) : total);
        }
      });
      return;
    }
  }
  struct Partial {
    std::vector<Acc> value;
    std::vector<int64_t> index;
    std::vector<char> seen;
  };
  const int64_t total = ops::numel(space);
  const int64_t tiles = (total + kTile - 1) / kTile;
  const int threads =
      static_cast<int>(std::min<int64_t>(worker_count(), std::max<int64_t>(1, tiles / 16)));
  std::vector<Partial> partials(threads);
  const int operand = p.anchor_operands[0];
  auto better = [&](Acc v, Acc best) {
    if constexpr (std::is_floating_point_v<Acc>) {
      if (std::isnan(best)) return false;
      if (std::isnan(v)) return true;
    }
    return want_max ? v > best : v < best;
  };
  parallel_for(threads, 1, [&](int64_t w0, int64_t w1) {
    for (int64_t w = w0; w < w1; ++w) {
      Partial& part = partials[w];
      part.value.assign(out_n, Acc{});
      part.index.assign(arg ? out_n : 0, 0);
      part.seen.assign(out_n, 0);
      TileEvaluator ev(p, l, in, params, nullptr);
      std::vector<int64_t> out_off(kTile), axis_off(kTile);
      const int64_t per = (tiles + threads - 1) / threads;
      for (int64_t t = w * per; t < std::min(tiles, (w + 1) * per); ++t) {
        const int64_t begin = t * kTile, n = std::min(kTile, total - begin);
        ev.run(1, begin, n);
        view_offsets(space, to_out, begin, n, out_off.data());
        if (arg) view_offsets(space, along_axis, begin, n, axis_off.data());
        auto accumulate = [&](auto* v) {
          for (int64_t e = 0; e < n; ++e) {
            const int64_t o = out_off[e];
            const Acc x = static_cast<Acc>(v[e]);
            if (is_sum) {
              if constexpr (std::is_floating_point_v<Acc>) {
                part.value[o] += x;
              } else {
                part.value[o] = ops::wrap_add(part.value[o], x);
              }
            } else if (!part.seen[o] || better(x, part.value[o])) {
              part.value[o] = x;
              if (arg) part.index[o] = axis_off[e];
            }
            part.seen[o] = 1;
          }
        };
        ev.visit(operand, accumulate);
      }
    }
  });
  // Merge in thread order: earlier threads hold earlier elements, so ties keep the first.
  Partial& merged = partials[0];
  for (int w = 1; w < threads; ++w) {
    for (int64_t o = 0; o < out_n; ++o) {
      const Partial& part = partials[w];
      if (!part.seen[o]) continue;
      if (is_sum) {
        if constexpr (std::is_floating_point_v<Acc>) {
          merged.value[o] += part.value[o];
        } else {
          merged.value[o] = ops::wrap_add(merged.value[o], part.value[o]);
        }
      } else if (!merged.seen[o] || better(part.value[o], merged.value[o])) {
        merged.value[o] = part.value[o];
        if (arg) merged.index[o] = part.index[o];
      }
      merged.seen[o] = 1;
    }
  }
  const int64_t extent = out_n == 0 ? 0 : total / out_n;
  for (int64_t o = 0; o < out_n; ++o) {
    if (arg) {
      result[o] = static_cast<Result>(merged.index[o]);
    } else if (op == OpKind::Mean) {
      result[o] =
          static_cast<Result>(static_cast<double>(merged.value[o]) / static_cast<double>(extent));
    } else {
      result[o] = static_cast<Result>(merged.value[o]);
    }
  }
}

// Sums over a row with eight independent accumulators, so the additions pipeline (and, for
// unit stride, vectorize). f32 rows add in f32 within blocks of 512 elements and in double
// across blocks: the error stays near double's while the work stays in SIMD registers.
template <class T, class F>
double row_sum(const T* x, int64_t n, int64_t stride, F&& term) {
  double total = 0;
  constexpr int64_t kBlock = 512;
  for (int64_t begin = 0; begin < n; begin += kBlock) {
    const int64_t end = std::min(n, begin + kBlock);
    T acc[8] = {};
    int64_t k = begin;
    for (; k + 8 <= end; k += 8) {
      for (int j = 0; j < 8; ++j) acc[j] += term(x[(k + j) * stride]);
    }
    for (; k < end; ++k) acc[0] += term(x[k * stride]);
    total += static_cast<double>((acc[0] + acc[1]) + (acc[2] + acc[3])) +
             static_cast<double>((acc[4] + acc[5]) + (acc[6] + acc[7]));
  }
  return total;
}

template <class T>
T row_max(const T* x, int64_t n, int64_t stride) {
  T acc[8];
  std::fill_n(acc, 8, -std::numeric_limits<T>::infinity());
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    for (int j = 0; j < 8; ++j)
      acc[j] = x[(k + j) * stride] > acc[j] ? x[(k + j) * stride] : acc[j];
  }
  for (; k < n; ++k) acc[0] = x[k * stride] > acc[0] ? x[k * stride] : acc[0];
  return *std::max_element(acc, acc + 8);
}

// One row of a row norm: `x` holds the row (contiguous), `y` receives the result.
template <class T>
void norm_row(OpKind op, const T* x, T* y, int64_t extent, int64_t stride, const T* w, const T* b,
              double eps, T* scratch) {
  if (op == OpKind::Softmax || op == OpKind::LogSoftmax) {
    T max = row_max(x, extent, stride);  // NaN is skipped here and poisons the sum below
    if (std::isinf(max)) max = 0;
    for (int64_t k = 0; k < extent; ++k) scratch[k] = x[k * stride] - max;
    if constexpr (std::is_same_v<T, float>) {
      simd_exp(scratch, scratch, static_cast<size_t>(extent));
    } else {
      for (int64_t k = 0; k < extent; ++k) scratch[k] = std::exp(scratch[k]);
    }
    const double total = row_sum(scratch, extent, 1, [](T v) { return v; });
    if (op == OpKind::Softmax) {
      const T scale = static_cast<T>(1.0 / total);
      for (int64_t k = 0; k < extent; ++k) y[k * stride] = scratch[k] * scale;
    } else {
      const T shift = max + static_cast<T>(std::log(total));
      for (int64_t k = 0; k < extent; ++k) y[k * stride] = x[k * stride] - shift;
    }
    return;
  }
  const double mean = op == OpKind::LayerNorm ? row_sum(x, extent, stride, [](T v) { return v; }) /
                                                    static_cast<double>(extent)
                                              : 0.0;
  const double sq = row_sum(x, extent, stride, [center = static_cast<T>(mean)](T v) {
    return (v - center) * (v - center);
  });
  const T scale = static_cast<T>(1.0 / std::sqrt(sq / static_cast<double>(extent) + eps));
  const T shift = static_cast<T>(op == OpKind::LayerNorm ? mean : 0.0);
  if (op == OpKind::LayerNorm) {
    for (int64_t k = 0; k < extent; ++k)
      y[k * stride] = (x[k * stride] - shift) * scale * w[k] + b[k];
  } else {
    for (int64_t k = 0; k < extent; ++k) y[k * stride] = x[k * stride] * scale * w[k];
  }
}

// softmax / log_softmax / layer_norm / rms_norm along the anchor axis, in T. Rows along the
// last axis are computed one at a time straight from the prologue, so x is read once.
template <class T>
void row_norm(const KernelProgram& p, const KernelLaunch& l, const std::vector<const Buffer*>& in,
              const std::vector<double>& params, T* result) {
  std::vector<T> w, b;
  if (p.anchor_operands.size() > 1) w = evaluate_operand<T>(p, l, in, params, 1);
  if (p.anchor_operands.size() > 2) b = evaluate_operand<T>(p, l, in, params, 2);
  const Shape& shape = l.spaces[1];
  const int axis = p.anchor_attrs.axis;
  int64_t outer = 1, extent = shape.empty() ? 1 : shape[axis], inner = 1;
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
    if (d < axis) outer *= shape[d];
    if (d > axis) inner *= shape[d];
  }
  if (extent == 0) return;
  const double eps = p.anchor_param >= 0 ? params[p.anchor_param] : 0.0;
  const int operand = p.anchor_operands[0];
  if (inner == 1) {
    parallel_for(outer, std::max<int64_t>(1, 16384 / extent), [&](int64_t r0, int64_t r1) {
      TileEvaluator ev(p, l, in, params, nullptr);
      std::vector<T> scratch(extent);
      for (int64_t r = r0; r < r1; ++r) {
        ev.run(1, r * extent, extent);
        // Lowering casts the operand to the anchor's dtype, whose register class is T.
        const T* x = ev.template values<T>(operand);
        norm_row<T>(p.anchor_op, x, result + r * extent, extent, 1, w.data(), b.data(), eps,
                    scratch.data());
      }
    });
    return;
  }
  std::vector<T> x = evaluate_operand<T>(p, l, in, params, 0);
  parallel_for(outer * inner, 64, [&](int64_t r0, int64_t r1) {
    std::vector<T> scratch(extent);
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t base = (r / inner) * extent * inner + (r % inner);
      norm_row<T>(p.anchor_op, x.data() + base, result + base, extent, inner, w.data(), b.data(),
                  eps, scratch.data());
    }
  });
}

template <class T>
void matmul(const KernelProgram& p, const KernelLaunch& l, const std::vector<const Buffer*>& in,
            const std::vector<double>& params, T* result) {
  std::vector<T> a = evaluate_operand<T>(p, l, in, params, 0);
  std::vector<T> b = evaluate_operand<T>(p, l, in, params, 1);
  Shape sa = l.spaces[1], sb = l.spaces[2];
  if (sa.size() == 1) sa.insert(sa.begin(), 1);
  if (sb.size() == 1) sb.push_back(1);
  const int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
  const int64_t batches = m * n == 0 ? 0 : ops::numel(l.spaces[0]) / (m * n);
  // Broadcast batch index -> operand batch offsets.
  Shape batch_shape;
  const size_t rank = std::max(sa.size(), sb.size()) - 2;
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - (sa.size() - 2) ? 1 : sa[i - (rank - (sa.size() - 2))];
    int64_t db = i < rank - (sb.size() - 2) ? 1 : sb[i - (rank - (sb.size() - 2))];
    batch_shape.push_back(std::max(da, db));
  }
  auto batch_view = [&](const Shape& s, int64_t matrix) {
    Shape bs(s.begin(), s.end() - 2);
    std::vector<int64_t> cs = ops::contiguous_strides(bs);
    jit::ViewParams v;
    v.strides.assign(rank, 0);
    for (size_t i = 0; i < bs.size(); ++i) {
      size_t j = rank - bs.size() + i;
      v.strides[j] = bs[i] == 1 ? 0 : cs[i] * matrix;
    }
    return v;
  };
  std::vector<int64_t> a_off(std::max<int64_t>(batches, 1)), b_off(std::max<int64_t>(batches, 1));
  view_offsets(batch_shape, batch_view(sa, m * k), 0, batches, a_off.data());
  view_offsets(batch_shape, batch_view(sb, k * n), 0, batches, b_off.data());
  std::fill_n(result, ops::numel(l.spaces[0]), T{});
  using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  for (int64_t bi = 0; bi < batches; ++bi) {
    Eigen::Map<const RowMajor> ma(a.data() + a_off[bi], m, k);
    Eigen::Map<const RowMajor> mb(b.data() + b_off[bi], k, n);
    Eigen::Map<RowMajor> mc(result + bi * m * n, m, n);
    if (k == 0) continue;
    // Rows split across cores; Eigen's kernel does each block.
    parallel_for(m, std::max<int64_t>(1, 65536 / std::max<int64_t>(1, n * k)),
                 [&](int64_t r0, int64_t r1) {
                   mc.middleRows(r0, r1 - r0).noalias() = ma.middleRows(r0, r1 - r0) * mb;
                 });
  }
}

template <class T>
void concat(const KernelProgram& p, const KernelLaunch& l, const std::vector<const Buffer*>& in,
            const std::vector<double>& params, T* result) {
  const Shape& out = l.spaces[0];
  const int axis = p.anchor_attrs.axis;
  std::vector<int64_t> strides = ops::contiguous_strides(out);
  int64_t offset = 0;
  for (size_t k = 0; k < p.anchor_operands.size(); ++k) {
    std::vector<T> v = evaluate_operand<T>(p, l, in, params, static_cast<int>(k));
    const Shape& s = l.spaces[k + 1];
    jit::ViewParams place{strides, offset * strides[axis]};
    std::vector<int64_t> dst(v.size());
    view_offsets(s, place, 0, static_cast<int64_t>(v.size()), dst.data());
    for (size_t e = 0; e < v.size(); ++e) result[dst[e]] = v[e];
    offset += s[axis];
  }
}

template <class T>
void run_anchor(const KernelProgram& p, const KernelLaunch& l, const std::vector<const Buffer*>& in,
                const std::vector<Buffer*>& out, const std::vector<double>& params) {
  const int64_t count = ops::numel(l.spaces[0]);
  // When the kernel only stores the anchor's result in its own representation, the anchor
  // writes straight into the output; otherwise into scratch that the epilogue reads.
  constexpr DType kNative = std::is_same_v<T, float>    ? DType::F32
                            : std::is_same_v<T, double> ? DType::F64
                                                        : DType::I64;
  const bool direct = p.stores.size() == 1 &&
                      p.instrs[p.stores[0].value].kind == InstrKind::kAnchor &&
                      p.output_dtypes[p.stores[0].output] == kNative && p.anchor_dtype == kNative;
  std::vector<T> scratch;
  if (!direct) scratch.resize(count);
  T* result = direct ? out[p.stores[0].output]->as<T>() : scratch.data();
  switch (p.anchor) {
    case jit::AnchorKind::kReduce:
    case jit::AnchorKind::kArgReduce: {
      const Cls operand = cls_of(p.instrs[p.anchor_operands[0]].dtype);
      if (operand == Cls::kInt) {
        reduce<int64_t, T>(p, l, in, params, result);
      } else {
        reduce<double, T>(p, l, in, params, result);
      }
      break;
    }
    case jit::AnchorKind::kRowNorm:
      if constexpr (std::is_floating_point_v<T>) row_norm<T>(p, l, in, params, result);
      break;
    case jit::AnchorKind::kMatmul:
      matmul<T>(p, l, in, params, result);
      break;
    case jit::AnchorKind::kConcat:
      concat<T>(p, l, in, params, result);
      break;
    case jit::AnchorKind::kNone:
    case jit::AnchorKind::kCustomKernel:  // run by run_custom_kernel
      break;
  }
  if (direct) return;
  // The anchor's result is what a stored one would be: i32 wraps, f16/bf16 rounds.
  if constexpr (std::is_same_v<T, int64_t>) {
    for (int64_t& v : scratch) v = wrap_int(p.anchor_dtype, v);
  } else if constexpr (std::is_same_v<T, float>) {
    round_all(p.anchor_dtype, scratch.data(), static_cast<int64_t>(scratch.size()));
  }
  run_stores(p, l, in, out, params, scratch.data());
}

}  // namespace

// A user's kernel runs its C++ fallback once over the whole (dense) buffers.
void run_custom_kernel(const KernelProgram& p, const KernelLaunch& l,
                       const std::vector<const Buffer*>& inputs,
                       const std::vector<Buffer*>& outputs) {
  std::vector<const void*> data;
  std::vector<ops::ValueType> types;
  for (size_t k = 0; k < inputs.size(); ++k) {
    data.push_back(inputs[k]->data());
    types.push_back(ops::ValueType{l.spaces[k + 1], p.input_dtypes[k]});
  }
  const ops::CustomKernel* k = ops::custom_kernel(p.anchor_attrs.function);
  try {
    k->cpu(data, types, outputs[0]->data(), ops::ValueType{l.spaces[0], p.anchor_dtype});
  } catch (const std::exception& e) {
    throw Error(absl::StrCat("[custom_kernel ", k->name, "] its CPU fallback failed: ", e.what()));
  }
}

void execute_kernel(const KernelProgram& p, const KernelLaunch& l,
                    const std::vector<const Buffer*>& inputs, const std::vector<Buffer*>& outputs,
                    const std::vector<double>& params) {
  if (p.anchor == jit::AnchorKind::kCustomKernel) return run_custom_kernel(p, l, inputs, outputs);
  switch (p.anchor == jit::AnchorKind::kNone ? Cls::kFloat : cls_of(p.anchor_dtype)) {
    case Cls::kFloat:
      if (p.anchor == jit::AnchorKind::kNone)
        return run_stores(p, l, inputs, outputs, params, nullptr);
      return run_anchor<float>(p, l, inputs, outputs, params);
    case Cls::kDouble:
      return run_anchor<double>(p, l, inputs, outputs, params);
    case Cls::kInt:
      return run_anchor<int64_t>(p, l, inputs, outputs, params);
  }
}

}  // namespace kiln::runtime::cpu
