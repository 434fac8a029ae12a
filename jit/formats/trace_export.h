// Turning the graph behind some nodes into a trace: ids in topological order, realized
// values as named inputs. Feeds dump_trace and the KILN_DUMP=trace folder writer.
#ifndef KILN_JIT_FORMATS_TRACE_EXPORT_H_
#define KILN_JIT_FORMATS_TRACE_EXPORT_H_

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "jit/graph/node.h"
#include "kiln/debug.h"

namespace kiln::jit {

struct TraceExport {
  nlohmann::ordered_json json;  // the kiln.trace document (keys in reading order)
  // The realized inputs by the names the document gives them (in0, in1, ... unless the
  // node has a name of its own), holding their data so it outlives the graph.
  struct Input {
    std::string name;
    ops::ValueType type;
    std::shared_ptr<const base::Buffer> data;
  };
  std::vector<Input> inputs;
};

TraceExport export_trace(const std::vector<detail::Node*>& outputs);
// The document as text, one node per line.
std::string trace_json_text(const nlohmann::ordered_json& doc);
std::string format_trace(const std::vector<detail::Node*>& outputs, DumpFormat format);

}  // namespace kiln::jit

#endif  // KILN_JIT_FORMATS_TRACE_EXPORT_H_
