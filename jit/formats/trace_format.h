// The `kiln.trace` version 1 format, both directions, for one node's op-specific fields.
// The whole-document writer is in trace_dump.cc and the loader in trace_load.cc.
#ifndef KILN_JIT_FORMATS_TRACE_FORMAT_H_
#define KILN_JIT_FORMATS_TRACE_FORMAT_H_

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/statusor.h"
#include "ops/attrs.h"
#include "ops/op_catalog.h"

namespace kiln::jit {

inline constexpr const char* kTraceFormat = "kiln.trace";
inline constexpr int kTraceVersion = 1;

// Reads `j` into `out` only when the JSON value has exactly the right kind: an integer in
// range for integer types (never a float: converting 1e300 to int64 is undefined), a bool
// for bool, a number for floating types, a string, or an array of such. False otherwise.
template <class T>
bool json_to(const nlohmann::json& j, T& out) {
  if constexpr (std::is_same_v<T, bool>) {
    if (!j.is_boolean()) return false;
    out = j.get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    if (j.is_number_unsigned()) {
      const uint64_t v = j.get<uint64_t>();
      if (v > static_cast<uint64_t>(std::numeric_limits<T>::max())) return false;
      out = static_cast<T>(v);
    } else if (j.is_number_integer()) {
      const int64_t v = j.get<int64_t>();
      if constexpr (std::is_unsigned_v<T>) {
        if (v < 0) return false;
      } else if (v < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
                 v > static_cast<int64_t>(std::numeric_limits<T>::max())) {
        return false;
      }
      out = static_cast<T>(v);
    } else {
      return false;
    }
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!j.is_number()) return false;
    out = j.get<T>();
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!j.is_string()) return false;
    out = j.get<std::string>();
  } else {  // std::vector<E>
    if (!j.is_array()) return false;
    T values(j.size());
    for (size_t i = 0; i < j.size(); ++i) {
      typename T::value_type v{};
      if (!json_to(j[i], v)) return false;
      values[i] = std::move(v);
    }
    out = std::move(values);
  }
  return true;
}

// The "attrs" object of a node (empty when the op has none). Attribute names are the C++
// argument names: axes, keepdims, axis, shape, start, stop, step, dtype, eps, seed. One
// table in trace_format.cc lists every attribute; this and attrs_from_json both walk it.
nlohmann::json attrs_to_json(ops::OpKind op, const ops::Attrs& attrs);

// Reads the op's attributes from `attrs` (a JSON object, or null when absent). Missing
// optional attributes take the C++ defaults; a wrong type or missing required one is an error.
absl::StatusOr<ops::Attrs> attrs_from_json(ops::OpKind op, const nlohmann::json& attrs);

// A constant's value: a JSON number, or "nan", "inf", "-inf" (JSON has no such numbers).
nlohmann::json scalar_to_json(double value);
absl::StatusOr<double> scalar_from_json(const nlohmann::json& value);

}  // namespace kiln::jit

#endif  // KILN_JIT_FORMATS_TRACE_FORMAT_H_
