// Opening cuBLASLt with dlopen (cublaslt.h): the files tried, the entry points resolved, the
// test hook and its generation counter, and cuBLASLt's status names in messages.
#include "runtime/cuda/cublaslt.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/cuda/library_loader.h"

namespace kiln::runtime::cuda {
namespace {

std::atomic<const CublasLtApi*> api_for_testing{nullptr};
std::atomic<uint64_t> generation{0};

// Resolves every entry point of `lib` into `api`; the first one missing becomes its status.
void resolve(void* lib, const std::string& name, CublasLtApi& api) {
  auto sym = [&](auto& entry, const char* symbol) {
    entry = reinterpret_cast<std::remove_reference_t<decltype(entry)>>(dlsym(lib, symbol));
    if (entry == nullptr && api.status.ok()) {
      api.status = absl::UnavailableError(absl::StrCat(name, " lacks ", symbol));
    }
  };
  sym(api.get_version, "cublasLtGetVersion");
  sym(api.create, "cublasLtCreate");
  sym(api.destroy, "cublasLtDestroy");
  sym(api.matmul_desc_create, "cublasLtMatmulDescCreate");
  sym(api.matmul_desc_set_attribute, "cublasLtMatmulDescSetAttribute");
  sym(api.matmul_desc_destroy, "cublasLtMatmulDescDestroy");
  sym(api.matrix_layout_create, "cublasLtMatrixLayoutCreate");
  sym(api.matrix_layout_set_attribute, "cublasLtMatrixLayoutSetAttribute");
  sym(api.matrix_layout_destroy, "cublasLtMatrixLayoutDestroy");
  sym(api.preference_create, "cublasLtMatmulPreferenceCreate");
  sym(api.preference_set_attribute, "cublasLtMatmulPreferenceSetAttribute");
  sym(api.preference_destroy, "cublasLtMatmulPreferenceDestroy");
  sym(api.algo_get_heuristic, "cublasLtMatmulAlgoGetHeuristic");
  sym(api.matmul, "cublasLtMatmul");
  // Only for messages: an older library without it still runs.
  api.status_name =
      reinterpret_cast<decltype(api.status_name)>(dlsym(lib, "cublasLtGetStatusName"));
}

}  // namespace

std::vector<std::string> cublaslt_library_candidates() {
  const char* chosen = std::getenv("KILN_CUBLASLT_LIBRARY");
  if (chosen != nullptr && *chosen != '\0') return {chosen};
  return {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so",
          "/usr/local/cuda/lib64/libcublasLt.so"};
}

CublasLtApi load_cublaslt_api(const std::vector<std::string>& candidates) {
  std::vector<std::string> passed_over;  // each file tried, and why it was not used
  if (std::optional<CublasLtApi> api =
          open_first_usable<CublasLtApi>(candidates, resolve, passed_over)) {
    return *std::move(api);
  }
  CublasLtApi api;
  api.status = absl::UnavailableError(
      absl::StrCat("cuBLASLt not found (tried ", absl::StrJoin(passed_over, ", "), ")"));
  return api;
}

const CublasLtApi& cublaslt_api() {
  if (const CublasLtApi* api = api_for_testing.load(std::memory_order_acquire)) return *api;
  static const CublasLtApi* const loaded =
      new CublasLtApi(load_cublaslt_api(cublaslt_library_candidates()));  // never destroyed
  return *loaded;
}

void set_cublaslt_api_for_testing(const CublasLtApi* api) {
  api_for_testing.store(api, std::memory_order_release);
  generation.fetch_add(1, std::memory_order_acq_rel);
}

uint64_t cublaslt_api_generation() { return generation.load(std::memory_order_acquire); }

bool cublaslt_disabled_by_environment() {
  const char* v = std::getenv("KILN_CUBLASLT");
  return v != nullptr && std::string(v) == "0";
}

absl::Status check_cublas(const CublasLtApi& api, CublasStatus status, const char* call) {
  if (status == kCublasStatusSuccess) return absl::OkStatus();
  const char* name = api.status_name != nullptr ? api.status_name(status) : nullptr;
  return absl::InternalError(
      absl::StrCat(call, " failed: ", name != nullptr ? name : "cuBLAS status", " (", status, ")"));
}

}  // namespace kiln::runtime::cuda
