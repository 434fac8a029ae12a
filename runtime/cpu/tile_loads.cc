// The tile evaluator's leaves that read buffers or positions (tile_evaluator.h): loads
// through views (in place, by runs, broadcast or per element), gathers with their checked
// positions, and index leaves (arange, rand, randn).
#include <algorithm>
#include <bit>
#include <cstdint>

#include "kiln/error.h"
#include "ops/gather.h"
#include "ops/scalar_math.h"
#include "runtime/cpu/register_io.h"
#include "runtime/cpu/tile_evaluator.h"
#include "runtime/cpu/view_runs.h"

namespace kiln::runtime::cpu {
namespace {

using jit::Instr;
using jit::InstrKind;
using ops::OpKind;
using ops::Shape;

// Rows this short are copied element by element rather than by a call per run.
constexpr int64_t kShortRun = 16;

}  // namespace

void TileEvaluator::eval_load(int k, const Instr& in, int64_t begin, int64_t n) {
  const RegisterClass c = register_class(in.dtype);
  const int64_t start = contiguous_start(in.view, begin);
  if (start >= 0) {
    dispatch(c, [&](auto t) {
      using T = decltype(t);
      const DType dt = program_.input_dtypes[in.input];
      if (dt == register_dtype<T>()) {  // read where it lies
        regs_.alias[k] = inputs_[in.input]->as<T>() + start;
        return;
      }
      load_run<T>(*inputs_[in.input], dt, start, n, alloc<T>(k, n));
    });
    return;
  }
  const jit::ViewParams& view = launch_.views[in.view];
  const Shape& space = launch_.spaces[in.space];
  if (!space.empty() && view.strides.back() == 1) {
    // Contiguous rows (a bias broadcast over rows, a slice): each run loads as a block. A
    // tile within one row (a stencil's offset slice, tiled by rows) is read where it lies.
    dispatch(c, [&](auto t) {
      using T = decltype(t);
      const bool same_type = program_.input_dtypes[in.input] == register_dtype<T>();
      const int64_t row = space.back();
      if (same_type && row > 0 && n <= row - begin % row) {
        for_each_run(space, view, begin, n, [&](int64_t, int64_t, int64_t base) {
          regs_.alias[k] = inputs_[in.input]->as<T>() + base;
        });
        return;
      }
      T* out = alloc<T>(k, n);
      if (same_type && row <= kShortRun) {
        // Short rows (a point's coordinates broadcast against every center): copied inline,
        // as a call per run would cost more than the copy.
        const T* src = inputs_[in.input]->as<T>();
        for_each_run(space, view, begin, n, [&](int64_t e, int64_t run, int64_t base) {
          for (int64_t j = 0; j < run; ++j) out[e + j] = src[base + j];
        });
        return;
      }
      for_each_run(space, view, begin, n, [&](int64_t e, int64_t run, int64_t base) {
        load_run<T>(*inputs_[in.input], program_.input_dtypes[in.input], base, run, out + e);
      });
    });
    return;
  }
  if (!space.empty() && view.strides.back() == 0) {
    // Broadcast along the last dim (token ids over the hidden size): one value per run.
    dispatch(c, [&](auto t) {
      using T = decltype(t);
      T* out = alloc<T>(k, n);
      for_each_run(space, view, begin, n, [&](int64_t e, int64_t run, int64_t base) {
        load_with<T>(*inputs_[in.input], program_.input_dtypes[in.input], 1, out + e,
                     [base](int64_t) { return base; });
        std::fill_n(out + e + 1, run - 1, out[e]);
      });
    });
    return;
  }
  if (!space.empty()) {
    // Any other step along the last dim (a coordinate of interleaved points, a column): each
    // run steps through the buffer from its base, with no offset per element.
    dispatch(c, [&](auto t) {
      using T = decltype(t);
      T* out = alloc<T>(k, n);
      const int64_t step = view.strides.back();
      const DType dt = program_.input_dtypes[in.input];
      if (dt == register_dtype<T>()) {
        // A whole row read again (the rows of a view broadcast over an outer dim: every
        // center's coordinate for each point) is copied from where it was just loaded.
        const T* src = inputs_[in.input]->as<T>();
        const int64_t row = space.back();
        int64_t last_row = -1, last_base = -1;
        for_each_run(space, view, begin, n, [&](int64_t e, int64_t run, int64_t base) {
          if (run == row && base == last_base) {
            std::copy_n(out + last_row, run, out + e);
          } else {
            for (int64_t j = 0; j < run; ++j) out[e + j] = src[base + j * step];
          }
          if (run == row) {
            last_row = e;
            last_base = base;
          }
        });
        return;
      }
      for_each_run(space, view, begin, n, [&](int64_t e, int64_t run, int64_t base) {
        load_with<T>(*inputs_[in.input], dt, run, out + e,
                     [base, step](int64_t j) { return base + j * step; });
      });
    });
    return;
  }
  const int64_t* off = offsets(in.view, in.space, begin, n);
  dispatch(c, [&](auto t) {
    using T = decltype(t);
    load_with<T>(*inputs_[in.input], program_.input_dtypes[in.input], n, alloc<T>(k, n),
                 [off](int64_t e) { return off[e]; });
  });
}

void TileEvaluator::eval_gather(int k, const Instr& in, int64_t begin, int64_t n) {
  const jit::ViewParams& view = launch_.views[in.view];
  const Shape& space = launch_.spaces[in.space];
  const int64_t* index = regs_.get<int64_t>(in.operands[0]);
  // Each element's checked position along the gathered axis, before anything is read there
  // (the kernel's outputs are never realized when it throws).
  const bool slice = in.op == ops::OpKind::DynamicSlice;
  auto position = [&](int64_t e) {
    const int64_t p = slice ? math::slice_start_position<int64_t>(index[e], view.gather_extent)
                            : math::gather_position<int64_t>(index[e], view.gather_extent);
    if (p < 0) throw Error(ops::index_error_message(in.op, index[e], view.gather_extent));
    return p;
  };
  const base::Buffer& input = *inputs_[in.input];
  const DType dt = program_.input_dtypes[in.input];
  const int64_t stride = space.empty() ? 0 : view.strides.back();
  dispatch(register_class(in.dtype), [&](auto t) {
    using T = decltype(t);
    T* out = alloc<T>(k, n);
    if (space.empty()) {
      load_with<T>(input, dt, n, out,
                   [&](int64_t e) { return view.offset + position(e) * view.gather_stride; });
      return;
    }
    // The view's runs along the innermost dim, with the gathered axis at 0. A run with one
    // index throughout and unit stride is a stretch of one table row (an embedding lookup)
    // and loads as a block; any other run element by element.
    const bool uniform_index = constant_along_last_dim(in.operands[0]);
    for_each_run(space, view, begin, n, [&](int64_t e, int64_t run, int64_t base) {
      bool one_row = stride == 1 && run > 1;
      for (int64_t j = 1; one_row && !uniform_index && j < run; ++j) {
        one_row = index[e + j] == index[e];
      }
      if (one_row) {
        load_run<T>(input, dt, base + position(e) * view.gather_stride, run, out + e);
        return;
      }
      load_with<T>(input, dt, run, out + e, [&](int64_t j) {
        return base + j * stride + position(e + j) * view.gather_stride;
      });
    });
  });
}

bool TileEvaluator::constant_along_last_dim(int instr) const {
  const Instr& in = program_.instrs[instr];
  switch (in.kind) {
    case InstrKind::kParam:
      return true;
    case InstrKind::kLoad:
    case InstrKind::kIndexLeaf: {
      const Shape& space = launch_.spaces[in.space];
      return !space.empty() && launch_.views[in.view].strides.back() == 0;
    }
    case InstrKind::kCast:
    case InstrKind::kUnary:
      return constant_along_last_dim(in.operands[0]);
    default:
      return false;
  }
}

void TileEvaluator::eval_index_leaf(int k, const Instr& in, int64_t begin, int64_t n) {
  const Shape& space = launch_.spaces[in.space];
  const jit::ViewParams& view = launch_.views[in.view];
  if (in.op == OpKind::Arange && !space.empty()) {
    // Positions along a run step by the view's last stride (0 for an arange broadcast along
    // the run, 1 along it, any other through a transpose or a stepped slice): each run is
    // its base plus a multiple of the step, with no offset per element.
    dispatch(register_class(in.dtype), [&](auto t) {
      using T = decltype(t);
      T* out = alloc<T>(k, n);
      const int64_t step = view.strides.back();
      for_each_run(space, view, begin, n, [&](int64_t e, int64_t run, int64_t base) {
        for (int64_t j = 0; j < run; ++j) {
          out[e + j] = convert<T>(base + j * step, DType::I64, in.dtype);
        }
      });
    });
    return;
  }
  const int64_t* off = offsets(in.view, in.space, begin, n);
  const uint64_t seed = in.param >= 0 ? std::bit_cast<uint64_t>(params_[in.param]) : 0;
  const int bits = math::uniform_bits(in.dtype);
  auto value_at = [&](int64_t i) -> double {
    return in.op == OpKind::Rand ? math::rand_uniform(i, seed, bits) : math::rand_normal(i, seed);
  };
  dispatch(register_class(in.dtype), [&](auto t) {
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

}  // namespace kiln::runtime::cpu
