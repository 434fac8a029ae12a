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
  }
  return 0;
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

bool is_integral(DType dt) { return !is_floating(dt) && dt != DType::Bool; }

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
  }
  return "?";
}

DType dtype_from_name(const std::string& name) {
  for (DType dt : kAllDTypes) {
    if (name == dtype_name(dt)) return dt;
  }
  std::vector<std::string> names;
  for (DType dt : kAllDTypes) names.emplace_back(dtype_name(dt));
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
  }
  return 0;
}

int kind_rank(DType dt) {
  if (dt == DType::Bool) return 0;
  return is_floating(dt) ? 2 : 1;
}

}  // namespace

DType promote_types(DType a, DType b) {
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
