#include "base/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "kiln/error.h"

namespace kiln::base {
namespace {

thread_local bool inside_pool_job = false;

// How long a worker polls for the next job, and a caller for its job's end, before
// sleeping. The kernels of one sync come microseconds apart; a futex wake-up costs about as
// much as a small kernel, and dominated batch-1 inference before workers spun.
// Short enough that an idle process stops using the cores at once.
constexpr auto kSpin = std::chrono::microseconds(100);

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Polls `ready` for up to kSpin; true once it holds.
template <class Ready>
bool spin_until(Ready ready) {
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  while (!ready()) {
    for (int i = 0; i < 64; ++i) cpu_relax();
    if (std::chrono::steady_clock::now() > deadline) return ready();
  }
  return true;
}

// One parallel_for call: chunks are claimed through `next` by the caller and the workers.
struct Job {
  const std::function<void(int64_t)>* run_chunk = nullptr;
  int64_t chunks = 0;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
  std::mutex mutex;
  std::condition_variable finished;
  std::exception_ptr error;  // the first chunk's exception, guarded by mutex

  // Runs chunks until none is left.
  void work() {
    for (int64_t c = next++; c < chunks; c = next++) {
      std::exception_ptr failure;
      inside_pool_job = true;
      try {
        (*run_chunk)(c);
      } catch (...) {
        failure = std::current_exception();
      }
      inside_pool_job = false;
      if (failure) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!error) error = failure;
      }
      if (done.fetch_add(1) + 1 == chunks) {
        std::lock_guard<std::mutex> lock(mutex);  // orders the notify after a waiter's check
        finished.notify_all();
      }
    }
  }

  void wait() {
    if (!spin_until([&] { return done.load() == chunks; })) {
      std::unique_lock<std::mutex> lock(mutex);
      finished.wait(lock, [&] { return done.load() == chunks; });
    }
    std::lock_guard<std::mutex> lock(mutex);
    if (error) std::rethrow_exception(error);
  }
};

class ThreadPool {
 public:
  explicit ThreadPool(int workers) {
    for (int i = 0; i < workers; ++i) std::thread([this] { loop(); }).detach();
  }

  void run(int64_t chunks, const std::function<void(int64_t)>& run_chunk) {
    auto job = std::make_shared<Job>();
    job->run_chunk = &run_chunk;
    job->chunks = chunks;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(job);
      pushed_.fetch_add(1);
    }
    // Sleepers are counted under mutex_, so one that went to sleep before the push is seen.
    if (sleepers_.load() > 0) wake_.notify_all();
    job->work();
    job->wait();
  }

 private:
  void loop() {
    uint64_t seen = 0;
    while (true) {
      if (std::shared_ptr<Job> job = take_job(&seen)) {
        job->work();
        continue;
      }
      // Nothing to do: poll briefly for the next job, then sleep until one is queued.
      if (spin_until([&] { return pushed_.load() != seen; })) continue;
      std::unique_lock<std::mutex> lock(mutex_);
      sleepers_.fetch_add(1);
      wake_.wait(lock, [&] { return !queue_.empty(); });
      sleepers_.fetch_sub(1);
    }
  }

  // The oldest job with chunks left, or null; jobs whose chunks are all claimed leave the
  // queue (their callers wait for them). `*seen` becomes the push count looked at.
  std::shared_ptr<Job> take_job(uint64_t* seen) {
    std::lock_guard<std::mutex> lock(mutex_);
    *seen = pushed_.load();
    while (!queue_.empty()) {
      std::shared_ptr<Job> job = queue_.front();
      if (job->next.load() < job->chunks) return job;
      queue_.pop_front();
    }
    return nullptr;
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::atomic<uint64_t> pushed_{0};  // jobs ever queued, for polling without the lock
  std::atomic<int> sleepers_{0};     // workers waiting on wake_
};

int default_worker_count();

std::atomic<int>& requested_worker_count() {
  static std::atomic<int> n{0};  // 0: none set
  return n;
}

ThreadPool& pool() {
  // Never destroyed: workers may still be parked in it while the process exits.
  static ThreadPool* p = new ThreadPool(std::max(worker_count(), default_worker_count()) - 1);
  return *p;
}

}  // namespace

namespace {

// A positive integer from environment variable `name`, or 0 when it is unset or empty.
int positive_env(const char* name) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return 0;
  int value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < 1) {
    throw Error(absl::StrCat(name, "=\"", text, "\" is not a positive whole number"));
  }
  return value;
}

// The cores this process may run on (its affinity mask, which a launcher's binding narrows).
int usable_cores() {
  const int machine = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return machine;
  return std::clamp(CPU_COUNT(&set), 1, machine);
}

// KILN_NUM_THREADS (at most 1024), else the cores this process may use. When a launcher
// started several processes on this machine without binding each to its own cores, they
// share the cores evenly (as torchrun sets OMP_NUM_THREADS): two ranks each spinning a pool
// over every core would take turns on them instead of computing.
int default_worker_count() {
  if (int n = positive_env("KILN_NUM_THREADS"); n > 0) return std::min(n, 1024);
  const int machine = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int cores = usable_cores();
  if (cores < machine) return cores;  // bound by the launcher: these cores are its own
  int local_ranks = 1;
  for (const char* name :
       {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"}) {
    const char* text = std::getenv(name);
    int value = 0;
    if (text != nullptr && absl::SimpleAtoi(text, &value) && value > 1) local_ranks = value;
  }
  return std::max(1, cores / local_ranks);
}

}  // namespace

int worker_count() {
  if (const int set = requested_worker_count().load(std::memory_order_relaxed); set > 0) {
    return set;
  }
  static const int n = default_worker_count();
  return n;
}

void set_worker_count(int n) {
  if (n < 1 || n > 1024) {
    throw Error(absl::StrCat("[set_num_threads] ", n, " threads: expected 1 to 1024"));
  }
  requested_worker_count().store(n, std::memory_order_relaxed);
}

void parallel_for(int64_t count, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (count <= 0) return;
  const int64_t chunks =
      std::min<int64_t>(worker_count(), (count + std::max<int64_t>(grain, 1) - 1) / grain);
  if (chunks <= 1 || inside_pool_job) {
    fn(0, count);
    return;
  }
  const int64_t per = (count + chunks - 1) / chunks;
  const std::function<void(int64_t)> run_chunk = [&](int64_t c) {
    const int64_t begin = c * per, end = std::min(count, begin + per);
    if (begin < end) fn(begin, end);
  };
  pool().run(chunks, run_chunk);
}

}  // namespace kiln::base
