// The CPU executor's tile evaluator: computes the Kernel IR instructions of one iteration
// space over a tile of flat positions at a time, each instruction over the whole tile (so
// fused values stay in cache), into per-instruction registers. Every kernel family
// (kernel_families.h) builds on it.
#ifndef KILN_RUNTIME_CPU_TILE_EVALUATOR_H_
#define KILN_RUNTIME_CPU_TILE_EVALUATOR_H_

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "base/buffer.h"
#include "jit/fusion/kernel_ir.h"
#include "kiln/dtype.h"
#include "ops/element_access.h"
#include "ops/value_type.h"
#include "runtime/cpu/simd_convert.h"

namespace kiln::runtime::cpu {

// Flat positions per tile.
inline constexpr int64_t kTile = 2048;

// The register class a dtype computes in (jit/fusion/family_geometry.h, shared with CUDA).
using jit::register_class;
using jit::RegisterClass;

// Rounds n float-register values to what `dt` holds, one loop per dtype so that each
// vectorizes (f32 values are left as they are).
inline void round_all(DType dt, float* v, int64_t n) {
  if (dt == DType::BF16) {
    round_floats_to_bf16(v, static_cast<size_t>(n));
  } else if (dt == DType::F16) {
    round_floats_to_f16(v, static_cast<size_t>(n));
  } else if (dt == DType::F8E4M3) {
    for (int64_t e = 0; e < n; ++e) v[e] = static_cast<float>(Float8E4M3(v[e]));
  } else if (dt == DType::F8E5M2) {
    for (int64_t e = 0; e < n; ++e) v[e] = static_cast<float>(Float8E5M2(v[e]));
  }
}

// Wraps an int64 register value to what integer or bool dtype `dt` holds.
inline int64_t wrap_int(DType dt, int64_t v) {
  switch (dt) {
    case DType::Bool:
      return v != 0;
    case DType::I8:
      return static_cast<int8_t>(v);
    case DType::U8:
      return static_cast<uint8_t>(v);
    case DType::I16:
      return static_cast<int16_t>(v);
    case DType::I32:
      return static_cast<int32_t>(v);
    default:
      return v;
  }
}

// A float value converted to integer or bool dtype `dt` under the cast rules: truncated toward
// zero and saturated at the dtype's range, NaN gives 0; to bool, nonzero (NaN included).
inline int64_t saturate_int(DType dt, double v) {
  switch (dt) {
    case DType::Bool:
      return (v != 0 || std::isnan(v)) ? 1 : 0;
    case DType::I8:
      return ops::saturate_to<int8_t>(v);
    case DType::U8:
      return ops::saturate_to<uint8_t>(v);
    case DType::I16:
      return ops::saturate_to<int16_t>(v);
    case DType::I32:
      return ops::saturate_to<int32_t>(v);
    default:
      return ops::saturate_to<int64_t>(v);
  }
}

// Writes to `out` the offsets of strided view `v` for flat positions [begin, begin + n) of
// `shape`. Any rank.
void view_offsets(const ops::Shape& shape, const jit::ViewParams& v, int64_t begin, int64_t n,
                  int64_t* out);

// One space's registers for one tile, per thread.
struct Registers {
  std::vector<std::vector<float>> f;
  std::vector<std::vector<double>> d;
  std::vector<std::vector<int64_t>> i;
  std::vector<std::vector<int64_t>> offsets;  // per view
  // Per instr: where its values lie when they are read in place (a contiguous load of the
  // register's own type, the anchor's values) rather than copied into its register; null
  // otherwise. Only ever read through: an instruction that computes allocates its register.
  std::vector<const void*> alias;

  // The register vector of `instr` for its class T.
  template <class T>
  std::vector<T>& of(int instr) {
    if constexpr (std::is_same_v<T, float>) return f[instr];
    if constexpr (std::is_same_v<T, double>) return d[instr];
    if constexpr (std::is_same_v<T, int64_t>) return i[instr];
  }
  // The values of `instr` for its class T, to read.
  template <class T>
  const T* get(int instr) {
    if (alias[instr] != nullptr) return static_cast<const T*>(alias[instr]);
    return of<T>(instr).data();
  }
  // The register of `instr` for class T, to write in place (never an alias).
  template <class T>
  T* own(int instr) {
    return of<T>(instr).data();
  }
};

// Evaluates the instructions of one space over tiles of it. One per thread.
class TileEvaluator {
 public:
  // `anchor` is the anchor's result (read by kAnchor instructions), or null.
  TileEvaluator(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                const std::vector<const base::Buffer*>& inputs, const std::vector<double>& params,
                const void* anchor);

  // Computes every instruction of `space` for its flat positions [begin, begin + n).
  void run(int space, int64_t begin, int64_t n);

  // The flat position the anchor pointer's element 0 holds (0: the anchor covers space 0).
  void set_anchor_origin(int64_t origin) { anchor_origin_ = origin; }

  // Space-0 instruction `instr` reads its values from the anchor pointer instead of being
  // computed (a matmul whose core already added the bias row that `instr` adds), and the
  // instructions only it used are no longer evaluated. -1 restores the program as it is.
  void read_as_anchor(int instr);

  // run() with kAnchor reading anchor_values[0, n) (an attention's raw scores for a run of
  // keys) instead of the anchor's result.
  void run_with_anchor(int space, int64_t begin, int64_t n, const void* anchor_values) {
    const void* kept = anchor_;
    const int64_t kept_origin = anchor_origin_;
    anchor_ = anchor_values;
    anchor_origin_ = begin;
    run(space, begin, n);
    anchor_ = kept;
    anchor_origin_ = kept_origin;
  }

  // The values of `instr` from the last run of its space; T is its register class.
  template <class T>
  const T* values(int instr) {
    return regs_.get<T>(instr);
  }

  // Stores `instr` (space 0) into `out` of dtype `dt` at [begin, begin + n).
  void store(int instr, base::Buffer& out, DType dt, int64_t begin, int64_t n);

  // Calls f with `instr`'s register as a typed pointer (float, double or int64).
  template <class F>
  void visit(int instr, F&& f) {
    switch (register_class(program_.instrs[instr].dtype)) {
      case RegisterClass::kFloat:
        return f(static_cast<const float*>(regs_.get<float>(instr)));
      case RegisterClass::kDouble:
        return f(static_cast<const double*>(regs_.get<double>(instr)));
      case RegisterClass::kInt:
        return f(static_cast<const int64_t*>(regs_.get<int64_t>(instr)));
    }
  }

 private:
  // A view is row-major over its space when its strides are the space's own strides.
  bool is_row_major(const jit::ViewParams& view, size_t v) const;

  // The register of `instr` for class T, grown to at least n values.
  template <class T>
  T* alloc(int instr, int64_t n) {
    regs_.alias[instr] = nullptr;
    auto& v = regs_.of<T>(instr);
    if (static_cast<int64_t>(v.size()) < n) v.resize(n);
    return v.data();
  }

  // Calls f with a value of the C++ type of register class c.
  template <class F>
  void dispatch(RegisterClass c, F&& f) {
    switch (c) {
      case RegisterClass::kFloat:
        return f(float{});
      case RegisterClass::kDouble:
        return f(double{});
      case RegisterClass::kInt:
        return f(int64_t{});
    }
  }

  // Offsets of `view` for flat positions [begin, begin + n) of `space`.
  const int64_t* offsets(int view, int space, int64_t begin, int64_t n);
  // Where a view walks its buffer contiguously (the common case), the first offset of the
  // tile; -1 otherwise.
  int64_t contiguous_start(int view, int64_t begin) const;

  // Computes instruction k for flat positions [begin, begin + n) of its space.
  void eval(int k, int64_t begin, int64_t n);
  // Points register k at the anchor's values for the tile starting at `begin` (no copy).
  void alias_anchor(int k, int64_t begin);
  // Each f16/bf16 op rounds its result to 16 bits, as if stored: fusing ops never changes
  // what they compute (only float-versus-double rounding differs from the reference).
  void round_to_dtype(int k, DType dt, int64_t n);
  void eval_cast(int k, const jit::Instr& in, int64_t n);
  void eval_unary(int k, const jit::Instr& in, int64_t n);
  void eval_binary(int k, const jit::Instr& in, int64_t n);

  // The leaves that read buffers or positions (tile_loads.cc). A load goes through its
  // view: read in place where the view is contiguous and the buffer holds the register's
  // type, else converted by runs or element by element.
  void eval_load(int k, const jit::Instr& in, int64_t begin, int64_t n);
  void eval_index_leaf(int k, const jit::Instr& in, int64_t begin, int64_t n);
  // A gather: loads through its view plus each element's checked position (throws
  // kiln::Error for an out-of-range index).
  void eval_gather(int k, const jit::Instr& in, int64_t begin, int64_t n);
  // Whether `instr`'s values never change along the last dim of its space (a parameter, or
  // a load or index leaf whose view has last stride 0, through casts and unary ops), so each
  // run of the last dim holds one value.
  bool constant_along_last_dim(int instr) const;

  // Integer results wrap to their dtype, as if stored.
  void wrap_all(int k, DType dt, int64_t n);

  const jit::KernelProgram& program_;
  const jit::KernelLaunch& launch_;
  const std::vector<const base::Buffer*>& inputs_;
  const std::vector<double>& params_;
  const void* anchor_;
  int64_t anchor_origin_ = 0;  // the flat position anchor_[0] holds
  Registers regs_;
  std::vector<bool> contiguous_;       // per view
  std::vector<int64_t> param_filled_;  // per instr: values a kParam register holds
  int anchor_instr_ = -1;              // read_as_anchor's instruction, or -1
  std::vector<bool> skipped_;          // per instr: left out by read_as_anchor
};

// Evaluates anchor operand `k` over its whole space (space k + 1) into a contiguous array
// of class T, on all cores (evaluate_operand.cc). Defined for float, double and int64_t.
template <class T>
std::vector<T> evaluate_operand(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                                const std::vector<const base::Buffer*>& inputs,
                                const std::vector<double>& params, int k);

// Evaluates anchor operand `k` as evaluate_operand does, but writes each tile straight to
// its place in `dst`: position p of the operand's space goes to the offset `place` maps it
// to (a concat's slice of its result). No copy of the whole operand is made.
template <class T>
void evaluate_operand_into(const jit::KernelProgram& program, const jit::KernelLaunch& launch,
                           const std::vector<const base::Buffer*>& inputs,
                           const std::vector<double>& params, int k, const jit::ViewParams& place,
                           T* dst);

}  // namespace kiln::runtime::cpu

#endif  // KILN_RUNTIME_CPU_TILE_EVALUATOR_H_
