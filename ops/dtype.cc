// DType facts, promotion and the 16-bit float conversions.
#include "kiln/dtype.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kiln/error.h"

namespace kiln {

int dtype_size(DType dt) {
  switch (dt) {
    case DType::Bool:
    case DType::I8:
    case DType::U8:
    case DType::F8E4M3:
    case DType::F8E5M2:
      return 1;
    case DType::I16:
    case DType::F16:
    case DType::BF16:
      return 2;
    case DType::I32:
    case DType::F32:
      return 4;
    case DType::I64:
    case DType::F64:
      return 8;
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q8_0:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
      return 0;  // no per-element size: see storage_bytes
  }
  return 0;
}

bool is_block_quantized(DType dt) { return block_values(dt) > 1; }

int block_values(DType dt) {
  switch (dt) {
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q8_0:
      return 32;
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
      return 256;
    default:
      return 1;
  }
}

// ggml's block sizes: the f16 scales and the packed integers of one block.
int block_bytes(DType dt) {
  switch (dt) {
    case DType::Q4_0:
      return 18;
    case DType::Q4_1:
      return 20;
    case DType::Q5_0:
      return 22;
    case DType::Q5_1:
      return 24;
    case DType::Q8_0:
      return 34;
    case DType::Q4_K:
      return 144;
    case DType::Q5_K:
      return 176;
    case DType::Q6_K:
      return 210;
    default:
      return dtype_size(dt);
  }
}

int64_t storage_bytes(DType dt, int64_t count) {
  return count / block_values(dt) * block_bytes(dt);
}

bool is_floating(DType dt) {
  switch (dt) {
    case DType::F8E4M3:
    case DType::F8E5M2:
    case DType::F16:
    case DType::BF16:
    case DType::F32:
    case DType::F64:
      return true;
    default:
      return false;
  }
}

bool is_integral(DType dt) {
  switch (dt) {
    case DType::I8:
    case DType::U8:
    case DType::I16:
    case DType::I32:
    case DType::I64:
      return true;
    default:
      return false;
  }
}

const char* dtype_name(DType dt) {
  switch (dt) {
    case DType::Bool:
      return "bool";
    case DType::I8:
      return "i8";
    case DType::U8:
      return "u8";
    case DType::I16:
      return "i16";
    case DType::I32:
      return "i32";
    case DType::I64:
      return "i64";
    case DType::F8E4M3:
      return "f8e4m3";
    case DType::F8E5M2:
      return "f8e5m2";
    case DType::F16:
      return "f16";
    case DType::BF16:
      return "bf16";
    case DType::F32:
      return "f32";
    case DType::F64:
      return "f64";
    case DType::Q4_0:
      return "q4_0";
    case DType::Q4_1:
      return "q4_1";
    case DType::Q5_0:
      return "q5_0";
    case DType::Q5_1:
      return "q5_1";
    case DType::Q8_0:
      return "q8_0";
    case DType::Q4_K:
      return "q4_k";
    case DType::Q5_K:
      return "q5_k";
    case DType::Q6_K:
      return "q6_k";
  }
  return "?";
}

DType dtype_from_name(const std::string& name) {
  std::vector<std::string> names;
  for (DType dt : kAllDTypes) {
    if (name == dtype_name(dt)) return dt;
    names.emplace_back(dtype_name(dt));
  }
  for (DType dt : kBlockDTypes) {
    if (name == dtype_name(dt)) return dt;
    names.emplace_back(dtype_name(dt));
  }
  throw Error(absl::StrCat("unknown dtype '", name, "' (expected one of ",
                           absl::StrJoin(names, ", "), ")"));
}

namespace {

// Where a dtype stands among its kind: integers by width (U8 beside I8), floats by width
// (the 8-bit floats, then F16 beside BF16, then F32, F64).
int width_rank(DType dt) {
  switch (dt) {
    case DType::Bool:
    case DType::I8:
    case DType::U8:
    case DType::F8E4M3:
    case DType::F8E5M2:
      return 0;
    case DType::I16:
    case DType::F16:
    case DType::BF16:
      return 1;
    case DType::I32:
    case DType::F32:
      return 2;
    case DType::I64:
    case DType::F64:
      return 3;
    default:  // the block formats, which promote_types refuses first
      return 0;
  }
}

int kind_rank(DType dt) {
  if (dt == DType::Bool) return 0;
  return is_floating(dt) ? 2 : 1;
}

}  // namespace

DType promote_types(DType a, DType b) {
  if (is_block_quantized(a) || is_block_quantized(b)) {
    throw Error(absl::StrCat("cannot promote ", dtype_name(a), " with ", dtype_name(b),
                             ": a block-quantized tensor takes no arithmetic (astype it first)"));
  }
  if (a == b) return a;
  if (kind_rank(a) != kind_rank(b)) return kind_rank(a) > kind_rank(b) ? a : b;
  if (width_rank(a) != width_rank(b)) return width_rank(a) > width_rank(b) ? a : b;
  // Two different dtypes of one width, neither holding the other: the next wider one that
  // holds both (U8 and I8 give I16, the two 8-bit floats F16, F16 and BF16 give F32).
  switch (width_rank(a)) {
    case 0:
      return is_floating(a) ? DType::F16 : DType::I16;
    default:
      return DType::F32;
  }
}

}  // namespace kiln
