// The `kiln.trace` version 1 format, both directions, for one node's op-specific fields.
// The whole-document writer is in trace_dump.cc and the loader in trace_load.cc.
#ifndef KILN_JIT_TRACE_FORMAT_H_
#define KILN_JIT_TRACE_FORMAT_H_

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "ops/attrs.h"
#include "ops/op_catalog.h"

namespace kiln::jit {

inline constexpr const char* kTraceFormat = "kiln.trace";
inline constexpr int kTraceVersion = 1;

// The "attrs" object of a node (empty when the op has none). Attribute names are the C++
// argument names: axes, keepdims, axis, shape, start, stop, step, dtype, eps, seed.
nlohmann::json attrs_to_json(ops::OpKind op, const ops::Attrs& attrs);

// Reads the op's attributes from `attrs` (a JSON object, or null when absent). Missing
// optional attributes take the C++ defaults; a wrong type or missing required one is an error.
absl::StatusOr<ops::Attrs> attrs_from_json(ops::OpKind op, const nlohmann::json& attrs);

// A constant's value: a JSON number, or "nan", "inf", "-inf" (JSON has no such numbers).
nlohmann::json scalar_to_json(double value);
absl::StatusOr<double> scalar_from_json(const nlohmann::json& value);

}  // namespace kiln::jit

#endif  // KILN_JIT_TRACE_FORMAT_H_
