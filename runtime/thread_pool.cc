#include "runtime/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln::runtime {
namespace {

thread_local bool inside_pool_job = false;

// One parallel_for call: chunks are claimed through `next` by the caller and the workers.
struct Job {
  const std::function<void(int64_t)>* run_chunk = nullptr;
  int64_t chunks = 0;
  std::atomic<int64_t> next{0};
  std::mutex mutex;
  std::condition_variable finished;
  int64_t done = 0;          // guarded by mutex
  std::exception_ptr error;  // the first chunk's exception, guarded by mutex

  // Runs chunks until none is left; true if this call ran the last one to finish.
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
      std::lock_guard<std::mutex> lock(mutex);
      if (failure && !error) error = failure;
      if (++done == chunks) finished.notify_all();
    }
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
    }
    wake_.notify_all();
    job->work();
    std::unique_lock<std::mutex> lock(job->mutex);
    job->finished.wait(lock, [&] { return job->done == job->chunks; });
    if (job->error) std::rethrow_exception(job->error);
  }

 private:
  void loop() {
    while (true) {
      std::shared_ptr<Job> job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return !queue_.empty(); });
        job = queue_.front();
        // A job whose chunks are all claimed leaves the queue; its caller waits for it.
        if (job->next.load() >= job->chunks) {
          queue_.pop_front();
          continue;
        }
      }
      job->work();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> queue_;
};

ThreadPool& pool() {
  // Never destroyed: workers may still be parked in it while the process exits.
  static ThreadPool* p = new ThreadPool(worker_count() - 1);
  return *p;
}

}  // namespace

int worker_count() {
  static const int n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return n;
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

}  // namespace kiln::runtime
