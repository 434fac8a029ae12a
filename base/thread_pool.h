// The CPU device's worker threads: one pool for the process, started on first use, so a
// kernel launch costs a wake-up rather than creating threads.
//
// parallel_for may be called from several threads at once (each call is its own job) and
// from inside a job (it then runs inline, so a worker never waits on its own pool). An
// exception thrown by any chunk (a user's custom function, an allocation failure) is
// rethrown on the calling thread once every chunk has finished.
#ifndef KILN_BASE_THREAD_POOL_H_
#define KILN_BASE_THREAD_POOL_H_

#include <cstdint>
#include <functional>

namespace kiln::base {

// Splits [0, count) into at most one chunk per core, each at least `grain` long, and runs
// fn(begin, end) for every chunk, the calling thread taking a share.
void parallel_for(int64_t count, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

// The number of threads parallel_for uses (the calling thread included): set_worker_count's,
// else KILN_NUM_THREADS, else the cores this process may use.
int worker_count();
// Sets worker_count from now on (n >= 1). The pool starts its threads once, at first use, for
// the larger of this and the default count; a count above that splits work into more chunks
// than there are threads.
void set_worker_count(int n);

}  // namespace kiln::base

#endif  // KILN_BASE_THREAD_POOL_H_
