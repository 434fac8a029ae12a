// The registry of custom functions and kernels: checks, registration by name and lookup.
#include "ops/custom_functions.h"

#include <deque>
#include <mutex>

#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace kiln::ops {
namespace {

struct Registry {
  std::mutex mutex;
  std::deque<CustomFunction> functions;  // deques: references stay valid as they grow
  std::deque<CustomKernel> kernels;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: kernels may refer to it at exit
  return *r;
}

bool is_identifier(const std::string& s) {
  if (s.empty() || absl::ascii_isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

// The checks every definition shares: a C identifier for a name, an arity in range.
absl::Status check_name_and_arity(const std::string& name, int arity, int max_arity) {
  if (!is_identifier(name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the name '", name, "' is not a C identifier (letters, digits and _, not a digit first)"));
  }
  if (arity < 1 || arity > max_arity) {
    return absl::InvalidArgumentError(
        absl::StrCat("arity ", arity, " is out of range: 1 to ", max_arity, " inputs"));
  }
  return absl::OkStatus();
}

// Registration shared by functions and kernels (`what` names which): an equal definition
// (name, source and arity) gets its id back; the same name with another one is refused.
template <class Def>
absl::StatusOr<int> add_definition(std::deque<Def>& defs, Def def, const char* what) {
  def.source_hash = absl::HashOf(def.cuda_source, def.arity);
  std::lock_guard<std::mutex> lock(registry().mutex);
  for (size_t id = 0; id < defs.size(); ++id) {
    const Def& old = defs[id];
    if (old.name != def.name) continue;
    if (old.source_hash == def.source_hash && old.cuda_source == def.cuda_source &&
        old.arity == def.arity) {
      return static_cast<int>(id);
    }
    return absl::AlreadyExistsError(
        absl::StrCat("a different ", what, " named '", def.name, "' is already registered"));
  }
  defs.push_back(std::move(def));
  return static_cast<int>(defs.size() - 1);
}

template <class Def>
const Def* definition(const std::deque<Def>& defs, int id) {
  std::lock_guard<std::mutex> lock(registry().mutex);
  if (id < 0 || static_cast<size_t>(id) >= defs.size()) return nullptr;
  return &defs[id];
}

template <class Def>
std::optional<int> id_by_name(const std::deque<Def>& defs, std::string_view name) {
  std::lock_guard<std::mutex> lock(registry().mutex);
  for (size_t id = 0; id < defs.size(); ++id) {
    if (defs[id].name == name) return static_cast<int>(id);
  }
  return std::nullopt;
}

}  // namespace

absl::Status check_custom_function(const CustomFunction& f) {
  if (absl::Status s = check_name_and_arity(f.name, f.arity, kMaxCustomArity); !s.ok()) return s;
  if (!f.cpu) return absl::InvalidArgumentError("the C++ (CPU) definition is empty");
  if (f.cuda_source.empty()) return absl::InvalidArgumentError("the CUDA source is empty");
  return absl::OkStatus();
}

absl::StatusOr<int> register_custom_function(CustomFunction f) {
  if (absl::Status s = check_custom_function(f); !s.ok()) return s;
  return add_definition(registry().functions, std::move(f), "function");
}

const CustomFunction* custom_function(int id) { return definition(registry().functions, id); }

std::optional<int> custom_function_id(std::string_view name) {
  return id_by_name(registry().functions, name);
}

absl::Status check_custom_kernel(const CustomKernel& k) {
  if (absl::Status s = check_name_and_arity(k.name, k.arity, kMaxCustomKernelInputs); !s.ok()) {
    return s;
  }
  if (!k.infer) return absl::InvalidArgumentError("the shape rule is empty");
  if (!k.cpu) return absl::InvalidArgumentError("the C++ (CPU) fallback is empty");
  // A CPU-only kernel has no CUDA source and needs no launch rule.
  if (!k.cuda_source.empty() && !k.launch) {
    return absl::InvalidArgumentError(
        "the launch rule is empty (a kernel with a CUDA source "
        "needs one)");
  }
  return absl::OkStatus();
}

std::string cpu_only_kernel_error(const CustomKernel& k, const std::string& device_name) {
  return absl::StrCat("[custom_kernel ", k.name,
                      "] has no CUDA source, so it runs only on the "
                      "CPU, not on ",
                      device_name,
                      " (give KernelFunction::cuda and a launch rule to run it there)");
}

absl::StatusOr<int> register_custom_kernel(CustomKernel k) {
  if (absl::Status s = check_custom_kernel(k); !s.ok()) return s;
  return add_definition(registry().kernels, std::move(k), "kernel");
}

const CustomKernel* custom_kernel(int id) { return definition(registry().kernels, id); }

std::optional<int> custom_kernel_id(std::string_view name) {
  return id_by_name(registry().kernels, name);
}

}  // namespace kiln::ops
