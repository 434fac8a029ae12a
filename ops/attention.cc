#include "ops/attention.h"

#include <cmath>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "ops/element_access.h"
#include "ops/infer.h"

namespace kiln::ops {
namespace {

constexpr OpKind kOp = OpKind::Attention;

// The check of one dim that must match: `what` names it for the error.
absl::Status dims_equal(const std::vector<ValueType>& in, int64_t got, int64_t want,
                        const std::string& what) {
  if (got == want) return absl::OkStatus();
  return op_error(kOp, in, absl::StrCat(what, " is ", got, ", expected ", want));
}

}  // namespace

AttentionShape attention_shape(const Shape& q, const Shape& k, const Shape& v) {
  AttentionShape s;
  const size_t r = q.size();
  for (size_t d = 0; d + 2 < r; ++d) s.batches *= q[d];
  if (r >= 3 && k[r - 3] > 0) s.group = q[r - 3] / k[r - 3];
  s.sq = q[r - 2];
  s.d = q[r - 1];
  s.sk = k[r - 2];
  s.dv = v[r - 1];
  return s;
}

absl::StatusOr<ValueType> infer_attention(const std::vector<ValueType>& in, const Attrs& attrs) {
  if (in.size() != 3 && in.size() != 4) {
    return op_error(kOp, in,
                    absl::StrCat("takes q, k, v and an optional mask, got ", in.size(), " inputs"));
  }
  const ValueType &q = in[0], &k = in[1], &v = in[2];
  if (!is_floating(q.dtype) || k.dtype != q.dtype || v.dtype != q.dtype) {
    return op_error(kOp, in, "q, k and v must share one floating dtype");
  }
  const size_t r = q.shape.size();
  if (r < 2 || k.shape.size() != r || v.shape.size() != r) {
    return op_error(kOp, in, "q, k and v must have one rank >= 2 ([..., S, D])");
  }
  for (size_t d = 0; d + 3 < r; ++d) {
    absl::Status s = dims_equal(in, k.shape[d], q.shape[d], absl::StrCat("k's dim ", d));
    if (s.ok()) s = dims_equal(in, v.shape[d], q.shape[d], absl::StrCat("v's dim ", d));
    if (!s.ok()) return s;
  }
  if (r >= 3) {
    const int64_t hq = q.shape[r - 3], hkv = k.shape[r - 3];
    absl::Status s = dims_equal(in, v.shape[r - 3], hkv, "v's heads");
    if (!s.ok()) return s;
    if (hkv == 0 ? hq != 0 : hq % hkv != 0) {
      return op_error(kOp, in,
                      absl::StrCat("q's ", hq, " heads must be a multiple of k's ", hkv,
                                   " (grouped-query attention)"));
    }
  }
  absl::Status s = dims_equal(in, k.shape[r - 1], q.shape[r - 1], "k's last dim (D)");
  if (s.ok()) s = dims_equal(in, v.shape[r - 2], k.shape[r - 2], "v's keys (dim -2)");
  if (!s.ok()) return s;
  Shape scores = q.shape;
  scores[r - 1] = k.shape[r - 2];
  if (in.size() == 4) {
    const ValueType& mask = in[3];
    if (!is_floating(mask.dtype) || mask.shape != scores) {
      return op_error(kOp, in,
                      absl::StrCat("the mask must be floating with the scores' shape ",
                                   format_shape(scores), " (the API broadcasts it)"));
    }
  }
  if (!std::isfinite(attrs.scale)) {
    return op_error(kOp, in, absl::StrCat("scale ", attrs.scale, " is not finite"));
  }
  Shape out = q.shape;
  out[r - 1] = v.shape[r - 1];
  return ValueType{out, q.dtype};
}

void evaluate_attention(const Attrs& attrs, const ValueType& out, const std::vector<HostValue>& in,
                        base::Buffer& result) {
  const AttentionShape s = attention_shape(in[0].type.shape, in[1].type.shape, in[2].type.shape);
  const DType dt = in[0].type.dtype;
  const bool has_mask = in.size() == 4;
  const int64_t offset = causal_offset(attrs, s);
  std::vector<double> scores(s.sk), acc(s.dv);
  for (int64_t b = 0; b < s.batches; ++b) {
    const int64_t kvb = s.kv_batch(b);
    for (int64_t i = 0; i < s.sq; ++i) {
      double max = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < s.sk; ++j) {
        double dot = 0;
        for (int64_t c = 0; c < s.d; ++c) {
          dot += load_double(*in[0].buffer, dt, (b * s.sq + i) * s.d + c) *
                 load_double(*in[1].buffer, dt, (kvb * s.sk + j) * s.d + c);
        }
        double score = dot * attrs.scale;
        if (has_mask) {
          score += load_double(*in[3].buffer, in[3].type.dtype, (b * s.sq + i) * s.sk + j);
        }
        if (attrs.causal && j > i + offset) score = -std::numeric_limits<double>::infinity();
        scores[j] = score;
        max = std::max(max, score);
      }
      double sum = 0;
      for (int64_t j = 0; j < s.sk; ++j) {
        scores[j] = std::exp(scores[j] - max);  // NaN for a row of -inf, as the composed form
        sum += scores[j];
      }
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = 0; j < s.sk; ++j) {
        for (int64_t c = 0; c < s.dv; ++c) {
          acc[c] += scores[j] * load_double(*in[2].buffer, dt, (kvb * s.sk + j) * s.dv + c);
        }
      }
      for (int64_t c = 0; c < s.dv; ++c) {
        store_double(result, out.dtype, (b * s.sq + i) * s.dv + c, acc[c] / sum);
      }
    }
  }
}

}  // namespace kiln::ops
