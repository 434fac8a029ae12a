// Debug options read from the environment once: KILN_LOG, KILN_DUMP, KILN_DUMP_DIR,
// KILN_RECORD_CUDA_DIR, KILN_FUSE_ATTENTION, KILN_STORE_HELD.
// docs/environment.md lists every variable with its default.
#ifndef KILN_BASE_ENV_OPTIONS_H_
#define KILN_BASE_ENV_OPTIONS_H_

#include <string>

namespace kiln::base {

struct EnvOptions {
  int log_level = 0;            // KILN_LOG: 0 quiet, 1 one line per sync, 2 per kernel too
  bool dump_trace = false;      // KILN_DUMP contains "trace"
  bool dump_plan = false;       // KILN_DUMP contains "plan"
  bool dump_kernels = false;    // KILN_DUMP contains "kernels"
  std::string dump_dir;         // KILN_DUMP_DIR, default "kiln_dump"
  std::string record_cuda_dir;  // KILN_RECORD_CUDA_DIR: write each new kernel's CUDA source
  bool fuse_attention = true;   // KILN_FUSE_ATTENTION=0 keeps hand-written attention composed
  bool store_held = true;       // KILN_STORE_HELD=0: a sync stores its outputs alone, not the
                                // pending values still held (jit/graph/held_values.h)
};

const EnvOptions& env_options();

}  // namespace kiln::base

#endif  // KILN_BASE_ENV_OPTIONS_H_
