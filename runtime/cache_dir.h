// Where Kiln keeps what it compiles across processes: CUDA cubins (runtime/cuda/cubin_cache.h)
// and compiled CPU kernels (runtime/cpu/host_compiler.h), each in files of its own kind.
#ifndef KILN_RUNTIME_CACHE_DIR_H_
#define KILN_RUNTIME_CACHE_DIR_H_

#include <string>

namespace kiln::runtime {

// KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln.
std::string default_cache_dir();

}  // namespace kiln::runtime

#endif  // KILN_RUNTIME_CACHE_DIR_H_
