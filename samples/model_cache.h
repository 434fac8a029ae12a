// Where scripts/fetch-minilm.sh and scripts/fetch-smollm2.sh put the models they fetch, by the
// scripts' own rule: $KILN_MODEL_CACHE, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln.
#ifndef KILN_SAMPLES_MODEL_CACHE_H_
#define KILN_SAMPLES_MODEL_CACHE_H_

#include <cstdlib>
#include <string>

namespace kiln::samples {

inline std::string model_cache_dir() {
  if (const char* cache = std::getenv("KILN_MODEL_CACHE")) return cache;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME")) return std::string(xdg) + "/kiln";
  const char* home = std::getenv("HOME");
  return std::string(home ? home : ".") + "/.cache/kiln";
}

}  // namespace kiln::samples

#endif  // KILN_SAMPLES_MODEL_CACHE_H_
