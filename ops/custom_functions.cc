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

}  // namespace

absl::Status check_custom_function(const CustomFunction& f) {
  if (!is_identifier(f.name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the name '", f.name,
                     "' is not a C identifier (letters, digits and _, not a digit first)"));
  }
  if (f.arity < 1 || f.arity > kMaxCustomArity) {
    return absl::InvalidArgumentError(
        absl::StrCat("arity ", f.arity, " is out of range: 1 to ", kMaxCustomArity, " inputs"));
  }
  if (!f.cpu) return absl::InvalidArgumentError("the C++ (CPU) definition is empty");
  if (f.cuda_source.empty()) return absl::InvalidArgumentError("the CUDA source is empty");
  return absl::OkStatus();
}

absl::StatusOr<int> register_custom_function(CustomFunction f) {
  if (absl::Status s = check_custom_function(f); !s.ok()) return s;
  f.source_hash = absl::HashOf(f.cuda_source, f.arity);
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (size_t id = 0; id < r.functions.size(); ++id) {
    const CustomFunction& old = r.functions[id];
    if (old.name != f.name) continue;
    if (old.source_hash == f.source_hash && old.cuda_source == f.cuda_source &&
        old.arity == f.arity) {
      return static_cast<int>(id);
    }
    return absl::AlreadyExistsError(
        absl::StrCat("a different function named '", f.name, "' is already registered"));
  }
  r.functions.push_back(std::move(f));
  return static_cast<int>(r.functions.size() - 1);
}

const CustomFunction* custom_function(int id) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (id < 0 || static_cast<size_t>(id) >= r.functions.size()) return nullptr;
  return &r.functions[id];
}

std::optional<int> custom_function_id(std::string_view name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (size_t id = 0; id < r.functions.size(); ++id) {
    if (r.functions[id].name == name) return static_cast<int>(id);
  }
  return std::nullopt;
}

const char* const kCustomKernelArgsSource =
    R"(// Kiln passes every custom kernel this struct by value: dense row-major inputs and output.
struct KilnKernelArgs {
  const void* in[8];
  void* out;
  long long in_shape[8][8];
  int in_rank[8];
  long long out_shape[8];
  int out_rank;
  long long out_numel;
};
)";

absl::Status check_custom_kernel(const CustomKernel& k) {
  if (!is_identifier(k.name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the name '", k.name,
                     "' is not a C identifier (letters, digits and _, not a digit first)"));
  }
  if (k.arity < 1 || k.arity > kMaxCustomKernelInputs) {
    return absl::InvalidArgumentError(absl::StrCat("arity ", k.arity, " is out of range: 1 to ",
                                                   kMaxCustomKernelInputs, " inputs"));
  }
  if (!k.infer) return absl::InvalidArgumentError("the shape rule is empty");
  if (!k.launch) return absl::InvalidArgumentError("the launch rule is empty");
  if (!k.cpu) return absl::InvalidArgumentError("the C++ (CPU) fallback is empty");
  if (k.cuda_source.empty()) return absl::InvalidArgumentError("the CUDA source is empty");
  return absl::OkStatus();
}

absl::StatusOr<int> register_custom_kernel(CustomKernel k) {
  if (absl::Status s = check_custom_kernel(k); !s.ok()) return s;
  k.source_hash = absl::HashOf(k.cuda_source, k.arity);
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (size_t id = 0; id < r.kernels.size(); ++id) {
    if (r.kernels[id].name != k.name) continue;
    if (r.kernels[id].cuda_source == k.cuda_source && r.kernels[id].arity == k.arity) {
      return static_cast<int>(id);
    }
    return absl::AlreadyExistsError(
        absl::StrCat("a different kernel named '", k.name, "' is already registered"));
  }
  r.kernels.push_back(std::move(k));
  return static_cast<int>(r.kernels.size() - 1);
}

const CustomKernel* custom_kernel(int id) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (id < 0 || static_cast<size_t>(id) >= r.kernels.size()) return nullptr;
  return &r.kernels[id];
}

std::optional<int> custom_kernel_id(std::string_view name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (size_t id = 0; id < r.kernels.size(); ++id) {
    if (r.kernels[id].name == name) return static_cast<int>(id);
  }
  return std::nullopt;
}

}  // namespace kiln::ops
