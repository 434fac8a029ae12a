#include "base/stats_counters.h"

namespace kiln::base {

Counters& counters() {
  static Counters instance;
  return instance;
}

}  // namespace kiln::base
