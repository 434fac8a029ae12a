// The CPU's machine-code store for bundles (jit/backend/backend.h): the shared libraries of
// compiled loops, moved between disk caches under the host compiler's own keys. A key names
// the compiler and its flags, so a library lands only where the same compiler and
// instruction set would have built it; the target check keeps a bundle's libraries for
// another instruction set out of the cache altogether.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "jit/backend/backend.h"
#include "runtime/cpu/compiled_kernel_cache.h"
#include "runtime/cpu/cpu_backend.h"
#include "runtime/cpu/host_compiler.h"

namespace kiln::runtime::cpu {

std::shared_ptr<const jit::MachineCodeStore> cpu_machine_code_store() {
  auto store = std::make_shared<jit::MachineCodeStore>();
  store->target = [] { return host_compiler_target(); };
  store->finish_pending = [] { wait_for_background_compiles(); };
  store->code_for = [](const jit::KernelProgram& program) {
    std::vector<jit::MachineCode> code;
    for (const std::string& key : compiled_library_keys(program)) {
      absl::StatusOr<std::string> library = read_cached_library(key);
      if (library.ok()) code.push_back({key, *std::move(library)});
    }
    return code;
  };
  store->install = [](const jit::MachineCode& code) {
    return install_cached_library(code.key, code.code);
  };
  return store;
}

}  // namespace kiln::runtime::cpu
