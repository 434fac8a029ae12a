// libFuzzer target: random op sequences over the public API, driven by the fuzzer's bytes.
// Every op either records or throws kiln::Error (recording nothing); what records must
// compute, and integer and bool results must equal the reference evaluator's exactly.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "jit/backend/backend.h"
#include "jit/eval/reference_graph.h"
#include "jit/graph/node.h"
#include "jit/graph/pending_graph.h"
#include "kiln/kiln.h"
#include "ops/value_type.h"

namespace {

using kiln::DType;
using kiln::Tensor;

// Every dtype; the last index of kAllDTypes, for the fuzzer's choice among them.
constexpr int kLastDtype = static_cast<int>(std::size(kiln::kAllDTypes)) - 1;

std::vector<int64_t> small_shape(FuzzedDataProvider& in) {
  std::vector<int64_t> shape(in.ConsumeIntegralInRange<int>(0, 3));
  for (int64_t& d : shape) d = in.ConsumeIntegralInRange<int64_t>(0, 4);
  return shape;
}

// `shape` with 1-dims inserted at fuzzer-chosen places up to a rank from 0 to a few past
// ops::kMaxRank, so views of every legal rank and the rank limit itself are exercised.
std::vector<int64_t> with_many_ones(FuzzedDataProvider& in, std::vector<int64_t> shape) {
  const size_t rank = in.ConsumeIntegralInRange<size_t>(0, kiln::ops::kMaxRank + 4);
  while (shape.size() < rank) {
    shape.insert(shape.begin() + in.ConsumeIntegralInRange<size_t>(0, shape.size()), 1);
  }
  return shape;
}

// A fuzzer-chosen permutation of `rank` axes.
std::vector<int> permutation(FuzzedDataProvider& in, int rank) {
  std::vector<int> axes(rank);
  for (int i = 0; i < rank; ++i) axes[i] = i;
  for (int i = rank - 1; i > 0; --i) std::swap(axes[i], axes[in.ConsumeIntegralInRange<int>(0, i)]);
  return axes;
}

Tensor new_leaf(FuzzedDataProvider& in) {
  const DType dt = kiln::kAllDTypes[in.ConsumeIntegralInRange<int>(0, kLastDtype)];
  std::vector<int64_t> shape = small_shape(in);
  switch (in.ConsumeIntegralInRange<int>(0, 2)) {
    case 0:
      return Tensor::full(shape, in.ConsumeFloatingPointInRange<double>(-4, 4), dt);
    case 1:
      return Tensor::rand(shape, in.ConsumeIntegral<uint64_t>(), dt);
    default:
      return Tensor::arange(in.ConsumeIntegralInRange<int64_t>(0, 12), dt);
  }
}

Tensor apply_random_op(FuzzedDataProvider& in, const std::vector<Tensor>& pool) {
  auto pick = [&]() -> const Tensor& {
    return pool[in.ConsumeIntegralInRange<size_t>(0, pool.size() - 1)];
  };
  const Tensor& a = pick();
  const int axis = in.ConsumeIntegralInRange<int>(-3, 3);
  switch (in.ConsumeIntegralInRange<int>(0, 36)) {
    case 0:
      return kiln::exp(a);
    case 1:
      return kiln::log(kiln::abs(a) + 1.0);
    case 2:
      return kiln::relu(a) - kiln::neg(a);
    case 3:
      return kiln::gelu(a) * kiln::tanh(a);
    case 4:
      return a + pick();
    case 5:
      return a * pick();
    case 6:
      return a / pick();
    case 7:
      return kiln::maximum(a, pick());
    case 8:
      return kiln::where(a > 0.5, pick(), pick());
    case 9:
      return kiln::sum(a, {axis}, in.ConsumeBool());
    case 10:
      return kiln::max(a, {axis}, in.ConsumeBool());
    case 11:
      return kiln::argmin(a, axis, in.ConsumeBool());
    case 12:
      return kiln::matmul(a, pick());
    case 13:
      return kiln::concat({a, pick()}, axis);
    case 14:
      return kiln::softmax(a, axis);
    case 15:
      return kiln::layer_norm(a, pick(), pick());
    case 16:
      return a.astype(kiln::kAllDTypes[in.ConsumeIntegralInRange<int>(0, kLastDtype)]);
    case 17:
      return a.reshape(small_shape(in));
    case 18:
      return a.transpose(axis, in.ConsumeIntegralInRange<int>(-3, 3));
    case 19:
      return a.slice(axis, in.ConsumeIntegralInRange<int64_t>(-5, 5),
                     in.ConsumeIntegralInRange<int64_t>(-5, 5),
                     in.ConsumeIntegralInRange<int64_t>(-3, 3));  // 0 is an error
    case 20:
      return a.broadcast_to(small_shape(in));
    case 21:
      return a.reshape(with_many_ones(in, a.shape()));
    case 22: {
      Tensor p = a.permute(permutation(in, a.ndim()));
      return in.ConsumeBool() ? p.contiguous() : p;
    }
    case 23:  // indices from the pool: often not integers, often out of range
      return kiln::take(a, pick(), axis);
    case 24:
      return kiln::take_along_axis(a, pick(), axis);
    case 25:  // rank < 2 is an error
      return kiln::tril(a, axis);
    case 26:
      return kiln::triu(a, axis);
    case 27:  // mismatched shapes and ranges are errors
      return kiln::update_slice(a, pick(), axis, in.ConsumeIntegralInRange<int64_t>(-2, 6));
    case 28:
      return kiln::cumsum(a, axis);
    case 32: {  // a write in place: a fresh cache whose only handle the write replaces
      std::vector<int64_t> shape = a.shape();
      if (!shape.empty()) shape[0] += in.ConsumeIntegralInRange<int64_t>(0, 3);
      Tensor cache = Tensor::zeros(shape, a.dtype()).eval();
      if (in.ConsumeBool()) {  // first a lazy constant's write, itself in place
        std::vector<int64_t> row = shape;
        if (!row.empty()) row[0] = 1;
        cache = kiln::update_slice(cache, Tensor::full(row, 1.5, a.dtype()), 0,
                                   in.ConsumeIntegralInRange<int64_t>(0, 3));
      }
      return kiln::update_slice(cache, a, 0, in.ConsumeIntegralInRange<int64_t>(0, 3));
    }
    case 29: {  // k past the extent, bool x and 0-d x are errors
      kiln::TopK t =
          kiln::topk(a, in.ConsumeIntegralInRange<int64_t>(-1, 6), axis, in.ConsumeBool());
      return in.ConsumeBool() ? t.values : t.indices;
    }
    case 30:  // mismatched shapes, dtypes and masks are errors
      return kiln::scaled_dot_product_attention(
          a, pick(), pick(), in.ConsumeBool() ? pick() : kiln::Tensor(), in.ConsumeBool());
    case 33:  // a start from the pool (often not an integer, often outside x); any length
      return kiln::slice(a, axis, pick(), in.ConsumeIntegralInRange<int64_t>(-1, 6));
    case 34:  // indices from the pool (often not integers, often out of range), any source
      return kiln::index_add(a, axis, pick(), pick());
    case 35:  // segment ids from the pool; a negative count is an error
      return kiln::segment_sum(a, pick(), in.ConsumeIntegralInRange<int64_t>(-1, 6));
    case 31:  // attention written by hand, fused by the planner when the shapes allow
      return kiln::matmul(kiln::softmax(kiln::matmul(a, a.transpose(-2, -1)) * 0.5, -1), pick());
    default:
      return kiln::mean(a, {}, false);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  std::vector<Tensor> pool;
  try {
    pool.push_back(new_leaf(in));
    pool.push_back(new_leaf(in));
  } catch (const kiln::Error&) {
    return 0;
  }
  for (int step = 0; step < 24 && in.remaining_bytes() > 0; ++step) {
    try {
      pool.push_back(in.ConsumeBool() ? apply_random_op(in, pool) : new_leaf(in));
    } catch (const kiln::Error&) {
      // A rejected op records nothing; the pool stays valid.
    }
  }
  const Tensor& out = pool.back();
  const auto& node = kiln::detail::TensorAccess::node(out);
  // Gathers and broadcasts can multiply sizes step after step. Past a few hundred thousand
  // elements a program only runs slowly under the sanitizers (a libFuzzer timeout fails the
  // run) without reaching code that smaller ones do not.
  for (const kiln::detail::Node* n : kiln::jit::collect_all({node.get()})) {
    if (kiln::ops::numel(n->type.shape) > (int64_t{1} << 18)) return 0;
  }
  const std::string program = kiln::dump_trace({out}, kiln::DumpFormat::Text);
  // An out-of-range index is an error at the sync. The reference evaluates every node whole;
  // Kiln checks the indices it reads, so it may accept a program whose bad index feeds no
  // output element (sliced away), but it must never fail one the reference accepts.
  std::vector<std::shared_ptr<kiln::base::Buffer>> want;
  try {
    want = kiln::ops::reference_run({node.get()});
  } catch (const kiln::Error&) {
    try {
      out.eval();
    } catch (const kiln::Error&) {
    }
    return 0;
  }
  // Exact comparison only where no floating-point value feeds the result: a float op may
  // differ from the reference by an ulp (the SIMD tanh, say), and a cast to an integer or a
  // comparison turns that ulp into a different integer (gelu(9) * tanh(9) -> 8 or 9).
  bool exact = true;
  for (const kiln::detail::Node* n : kiln::jit::collect_all({node.get()})) {
    exact = exact && !kiln::is_floating(n->type.dtype);
  }
  try {
    out.eval();
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "the sync failed where the reference did not: %s\n%s\n", e.what(),
                 program.c_str());
    __builtin_trap();
  }
  const DType dt = out.dtype();
  if (exact && (dt == DType::Bool || dt == DType::I32 || dt == DType::I64)) {
    const int64_t bytes = out.numel() * kiln::dtype_size(dt);
    if (std::memcmp(want[0]->data(), kiln::jit::host_view(node->buffer)->data(), bytes) != 0) {
      // Say what differed before stopping: the program and both results.
      std::fprintf(stderr, "integer result differs from the reference\n%s\n", program.c_str());
      const auto* got =
          reinterpret_cast<const unsigned char*>(kiln::jit::host_view(node->buffer)->data());
      const auto* ref = reinterpret_cast<const unsigned char*>(want[0]->data());
      for (int64_t i = 0; i < bytes; ++i) {
        if (got[i] != ref[i]) {
          std::fprintf(stderr, "first differing byte %lld: kiln %d, reference %d\n",
                       static_cast<long long>(i), got[i], ref[i]);
          break;
        }
      }
      __builtin_trap();
    }
  }
  return 0;
}
