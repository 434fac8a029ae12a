#include "jit/sync.h"

#include <chrono>
#include <cstdio>
#include <new>
#include <string>

#include "absl/strings/str_cat.h"
#include "jit/env_options.h"
#include "jit/pending_graph.h"
#include "jit/stats_counters.h"
#include "jit/sync_dump.h"
#include "kiln/error.h"
#include "runtime/backend.h"

namespace kiln::jit {

void sync(const std::vector<detail::Node*>& outputs) {
  std::vector<detail::Node*> order = collect_pending(outputs);
  if (order.empty()) return;  // everything is already computed
  const auto start = std::chrono::steady_clock::now();
  const EnvOptions& options = env_options();
  std::string dump_folder;
  if (options.dump_trace) dump_folder = dump_sync_trace(outputs);

  // Outputs that still need computing, each once.
  std::vector<detail::Node*> targets;
  for (detail::Node* out : outputs) {
    if (!out->realized() && std::find(targets.begin(), targets.end(), out) == targets.end()) {
      targets.push_back(out);
    }
  }
  Device device = targets.front()->device;
  std::vector<std::shared_ptr<runtime::Buffer>> buffers;
  try {
    buffers = runtime::backend_for(device).run(order, targets);
  } catch (const std::bad_alloc&) {
    throw Error(absl::StrCat("out of memory while computing ", order.size(), " nodes on ",
                             device_name(device)));
  }
  counters().syncs += 1;
  counters().plans_built += 1;
  // Only now, with every result in hand, does any node change.
  for (size_t i = 0; i < targets.size(); ++i) targets[i]->realize(std::move(buffers[i]));

  if (options.dump_trace) dump_sync_outputs(dump_folder, outputs);
  if (options.log_level >= 1) {
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "kiln: sync on %s: %zu nodes, %zu outputs, plan built, %.3f ms\n",
                 device_name(device).c_str(), order.size(), targets.size(), ms);
  }
}

}  // namespace kiln::jit
