// Devices behind one interface: a Backend computes the pending nodes of a sync point.
#ifndef KILN_RUNTIME_BACKEND_H_
#define KILN_RUNTIME_BACKEND_H_

#include <memory>
#include <vector>

#include "jit/node.h"
#include "kiln/dtype.h"
#include "runtime/buffer.h"

namespace kiln::runtime {

class Backend {
 public:
  virtual ~Backend() = default;
  // Computes the nodes of `order` (topologically sorted and all unrealized; each input is
  // realized or earlier in `order`) and returns the buffers of `outputs`, in their order.
  // Must not modify any node: the caller realizes the outputs once everything succeeded.
  virtual std::vector<std::shared_ptr<Buffer>> run(const std::vector<detail::Node*>& order,
                                                   const std::vector<detail::Node*>& outputs) = 0;
};

// The backend that executes on device `d`; throws kiln::Error if it is not usable.
Backend& backend_for(Device d);

// The CPU device: for now the reference evaluator, op by op, freeing intermediates as soon
// as their last user has run.
std::unique_ptr<Backend> make_cpu_backend();

}  // namespace kiln::runtime

#endif  // KILN_RUNTIME_BACKEND_H_
