#include "base/env_options.h"

#include <cstdlib>
#include <string_view>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace kiln::base {
namespace {

EnvOptions read_env_options() {
  EnvOptions o;
  if (const char* log = std::getenv("KILN_LOG"); log != nullptr) {
    if (!absl::SimpleAtoi(log, &o.log_level)) o.log_level = 0;
  }
  if (const char* dump = std::getenv("KILN_DUMP"); dump != nullptr) {
    for (absl::string_view item : absl::StrSplit(dump, ',')) {
      if (item == "trace") o.dump_trace = true;
      if (item == "plan") o.dump_plan = true;
      if (item == "kernels") o.dump_kernels = true;
    }
  }
  if (const char* record = std::getenv("KILN_RECORD_CUDA_DIR"); record != nullptr) {
    o.record_cuda_dir = record;
  }
  if (const char* fuse = std::getenv("KILN_FUSE_ATTENTION"); fuse != nullptr) {
    o.fuse_attention = std::string_view(fuse) != "0";
  }
  if (const char* store = std::getenv("KILN_STORE_HELD"); store != nullptr) {
    o.store_held = std::string_view(store) != "0";
  }
  const char* dir = std::getenv("KILN_DUMP_DIR");
  o.dump_dir = dir != nullptr && *dir != '\0' ? dir : "kiln_dump";
  return o;
}

}  // namespace

const EnvOptions& env_options() {
  static const EnvOptions options = read_env_options();
  return options;
}

}  // namespace kiln::base
