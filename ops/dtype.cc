// DType facts, promotion and the 16-bit float conversions.
#include "kiln/dtype.h"

#include <bit>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kiln/error.h"

namespace kiln {

int dtype_size(DType dt) {
  switch (dt) {
    case DType::Bool:
      return 1;
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
  return dt == DType::F16 || dt == DType::BF16 || dt == DType::F32 || dt == DType::F64;
}

bool is_integral(DType dt) { return dt == DType::I32 || dt == DType::I64; }

const char* dtype_name(DType dt) {
  switch (dt) {
    case DType::Bool:
      return "bool";
    case DType::I32:
      return "i32";
    case DType::I64:
      return "i64";
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
  for (DType dt :
       {DType::Bool, DType::I32, DType::I64, DType::F16, DType::BF16, DType::F32, DType::F64}) {
    if (name == dtype_name(dt)) return dt;
  }
  throw Error(absl::StrCat("unknown dtype '", name,
                           "' (expected one of bool, i32, i64, f16, bf16, f32, f64)"));
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  // F16 with BF16: neither holds the other, so both go to F32 (as in PyTorch).
  if ((a == DType::F16 && b == DType::BF16) || (a == DType::BF16 && b == DType::F16)) {
    return DType::F32;
  }
  auto rank = [](DType dt) {
    switch (dt) {
      case DType::Bool:
        return 0;
      case DType::I32:
        return 1;
      case DType::I64:
        return 2;
      case DType::F16:
      case DType::BF16:
        return 3;
      case DType::F32:
        return 4;
      case DType::F64:
        return 5;
    }
    return 0;
  };
  return rank(a) >= rank(b) ? a : b;
}

}  // namespace kiln
