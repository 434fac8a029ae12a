#include "runtime/stats_counters.h"

namespace kiln::runtime {

Counters& counters() {
  static Counters instance;
  return instance;
}

}  // namespace kiln::runtime
