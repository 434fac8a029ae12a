// Where Kiln keeps what it compiles across processes: CUDA cubins (runtime/cuda/cubin_cache.h)
// and compiled CPU kernels (runtime/cpu/host_compiler.h), each in files of its own kind.
#ifndef KILN_RUNTIME_CACHE_DIR_H_
#define KILN_RUNTIME_CACHE_DIR_H_

#include <string>

namespace kiln::runtime {

// KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln.
std::string default_cache_dir();

// A cache file's name (without folder or extension) for `key`: its CRC-32 and its length,
// "0123abcd_4096". Two keys may share a name; each cache stores the key in or beside the
// file and compares it before trusting the file.
std::string cache_file_stem(const std::string& key);

}  // namespace kiln::runtime

#endif  // KILN_RUNTIME_CACHE_DIR_H_
