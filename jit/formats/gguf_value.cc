// kiln::GgufValue: one GGUF metadata value as the file types it, and the checked ways to
// read it.
#include <bit>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kiln/error.h"
#include "kiln/io.h"

namespace kiln {
namespace {

using Type = GgufValue::Type;

bool is_integer(Type t) {
  switch (t) {
    case Type::kU8:
    case Type::kI8:
    case Type::kU16:
    case Type::kI16:
    case Type::kU32:
    case Type::kI32:
    case Type::kU64:
    case Type::kI64:
    case Type::kBool:
      return true;
    default:
      return false;
  }
}

bool is_signed(Type t) {
  return t == Type::kI8 || t == Type::kI16 || t == Type::kI32 || t == Type::kI64;
}

// The range an integer type holds, as [low, high] in int64 (u64 is checked apart).
std::pair<int64_t, int64_t> range_of(Type t) {
  switch (t) {
    case Type::kU8:
      return {0, 255};
    case Type::kI8:
      return {-128, 127};
    case Type::kU16:
      return {0, 65535};
    case Type::kI16:
      return {-32768, 32767};
    case Type::kU32:
      return {0, 4294967295LL};
    case Type::kI32:
      return {-2147483648LL, 2147483647LL};
    case Type::kBool:
      return {0, 1};
    case Type::kU64:
      return {0, std::numeric_limits<int64_t>::max()};
    default:
      return {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
  }
}

Error mismatch(const char* wanted, Type stored) {
  return Error(absl::StrCat("[gguf] the value is a ", gguf_type_name(stored), ", not ", wanted));
}

}  // namespace

const char* gguf_type_name(Type type) {
  switch (type) {
    case Type::kU8:
      return "u8";
    case Type::kI8:
      return "i8";
    case Type::kU16:
      return "u16";
    case Type::kI16:
      return "i16";
    case Type::kU32:
      return "u32";
    case Type::kI32:
      return "i32";
    case Type::kF32:
      return "f32";
    case Type::kBool:
      return "bool";
    case Type::kString:
      return "string";
    case Type::kArray:
      return "array";
    case Type::kU64:
      return "u64";
    case Type::kI64:
      return "i64";
    case Type::kF64:
      return "f64";
  }
  return "?";
}

GgufValue GgufValue::integer(Type type, int64_t value) {
  if (!is_integer(type)) throw mismatch("an integer type", type);
  const auto [low, high] = range_of(type);
  if (value < low || value > high) {
    throw Error(absl::StrCat("[gguf] ", value, " does not fit a ", gguf_type_name(type)));
  }
  GgufValue v;
  v.type_ = type;
  v.bits_ = static_cast<uint64_t>(value);
  return v;
}

GgufValue GgufValue::integer_u64(uint64_t value) {
  GgufValue v;
  v.type_ = Type::kU64;
  v.bits_ = value;
  return v;
}

GgufValue GgufValue::floating(Type type, double value) {
  if (type != Type::kF32 && type != Type::kF64) throw mismatch("f32 or f64", type);
  GgufValue v;
  v.type_ = type;
  v.float_ = type == Type::kF32 ? static_cast<float>(value) : value;
  return v;
}

GgufValue GgufValue::string(std::string value) {
  GgufValue v;
  v.type_ = Type::kString;
  v.string_ = std::move(value);
  return v;
}

GgufValue GgufValue::array(Type element_type, std::vector<GgufValue> elements) {
  for (const GgufValue& e : elements) {
    if (e.type_ != element_type) {
      throw Error(absl::StrCat("[gguf] an array of ", gguf_type_name(element_type), " holds a ",
                               gguf_type_name(e.type_)));
    }
  }
  GgufValue v;
  v.type_ = Type::kArray;
  v.element_type_ = element_type;
  v.array_ = std::move(elements);
  return v;
}

GgufValue::Type GgufValue::element_type() const {
  if (type_ != Type::kArray) throw mismatch("an array", type_);
  return element_type_;
}

int64_t GgufValue::as_int() const {
  if (!is_integer(type_)) throw mismatch("an integer", type_);
  if (type_ == Type::kU64 && bits_ > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    throw Error(absl::StrCat("[gguf] the u64 ", bits_, " does not fit an int64 (use as_u64)"));
  }
  return static_cast<int64_t>(bits_);
}

uint64_t GgufValue::as_u64() const {
  if (!is_integer(type_)) throw mismatch("an integer", type_);
  if (is_signed(type_) && static_cast<int64_t>(bits_) < 0) {
    throw Error(absl::StrCat("[gguf] the ", gguf_type_name(type_), " ", static_cast<int64_t>(bits_),
                             " is negative, not a u64"));
  }
  return bits_;
}

double GgufValue::as_double() const {
  if (type_ == Type::kF32 || type_ == Type::kF64) return float_;
  if (type_ == Type::kU64) return static_cast<double>(bits_);
  if (is_integer(type_)) return static_cast<double>(static_cast<int64_t>(bits_));
  throw mismatch("a number", type_);
}

bool GgufValue::as_bool() const {
  if (type_ != Type::kBool) throw mismatch("a bool", type_);
  return bits_ != 0;
}

const std::string& GgufValue::as_string() const {
  if (type_ != Type::kString) throw mismatch("a string", type_);
  return string_;
}

const std::vector<GgufValue>& GgufValue::as_array() const {
  if (type_ != Type::kArray) throw mismatch("an array", type_);
  return array_;
}

bool operator==(const GgufValue& a, const GgufValue& b) {
  if (a.type_ != b.type_) return false;
  switch (a.type_) {
    case Type::kF32:
    case Type::kF64:  // bit for bit, so that NaN equals itself and -0 differs from 0
      return std::bit_cast<uint64_t>(a.float_) == std::bit_cast<uint64_t>(b.float_);
    case Type::kString:
      return a.string_ == b.string_;
    case Type::kArray:
      return a.element_type_ == b.element_type_ && a.array_ == b.array_;
    default:
      return a.bits_ == b.bits_;
  }
}

}  // namespace kiln
