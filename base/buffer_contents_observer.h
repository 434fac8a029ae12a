// Telling a cache that a buffer's contents are gone: the buffer was freed, or written again
// (its version renewed). A cache of something derived from a buffer's contents (the CPU
// GEMM's packed weights) registers here, so what it derived lives no longer than the
// tensor it came from.
#ifndef KILN_BASE_BUFFER_CONTENTS_OBSERVER_H_
#define KILN_BASE_BUFFER_CONTENTS_OBSERVER_H_

#include <cstdint>

namespace kiln::base {

// Called with the version (Buffer::version) whose contents are gone. Runs on the thread
// that frees or writes the buffer; must be cheap and must not free buffers itself.
using ContentsDroppedFn = void (*)(uint64_t version);

// One observer per process (a later call replaces it); null turns it off.
void set_contents_dropped_observer(ContentsDroppedFn fn);

}  // namespace kiln::base

#endif  // KILN_BASE_BUFFER_CONTENTS_OBSERVER_H_
