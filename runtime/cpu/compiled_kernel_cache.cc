#include "runtime/cpu/compiled_kernel_cache.h"

#include <pthread.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/cache_dir.h"
#include "runtime/cpu/compiled_expression.h"
#include "runtime/cpu/host_compiler.h"
#include "runtime/cpu/simd_math_inl_source.h"

namespace kiln::runtime::cpu {
namespace {

// Where a program's compiled function stands.
enum class State {
  kLooking,    // its first launch is generating the source and looking in the disk cache
  kNotCached,  // the disk cache had no library: the next launch queues a compile
  kQueued,     // compiling on the background thread
  kSettled,    // `function` is final: the loop, or null (no source, or the compile failed)
};

struct Entry {
  State state = State::kLooking;
  void* function = nullptr;
  std::string source;       // kept from the first look until the compile is queued
  std::string library_key;  // settled with a loop: its library's key in the disk cache
};

struct Compile {
  std::string key, source, symbol;
};

// Every program's entry (by symbol and program text), the queue of compiles and the
// background thread's state, under one mutex. Never destroyed: the background thread may
// still be compiling when the process exits.
struct KernelCache {
  std::mutex mutex;
  std::condition_variable settled;  // a queued compile has finished
  absl::flat_hash_map<std::string, Entry> entries;
  std::deque<Compile> queue;
  bool worker_running = false;
  bool stopping = false;   // the process is exiting: start no more compiles
  int64_t unfinished = 0;  // queued or compiling
  int64_t queued_total = 0;
};

KernelCache& kernel_cache();

// At exit: the background thread takes no more compiles (the one under way is stopped by
// the host compiler's own exit handler).
void stop_compiling() {
  KernelCache& c = kernel_cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.stopping = true;
}

// In a forked child, which has no background thread: the compiles its parent had queued or
// under way are forgotten, and their programs looked at again when launched.
void forget_parents_compiles() {
  KernelCache& c = kernel_cache();
  new (&c.mutex) std::mutex();  // as the forking thread saw it; only that thread runs here
  c.queue.clear();
  c.worker_running = false;
  c.unfinished = 0;
  absl::erase_if(c.entries, [](const auto& entry) {
    return entry.second.state == State::kQueued || entry.second.state == State::kLooking;
  });
}

KernelCache& kernel_cache() {
  static KernelCache* cache = [] {
    auto* made = new KernelCache();
    pthread_atfork(nullptr, nullptr, forget_parents_compiles);
    std::atexit(stop_compiling);
    return made;
  }();
  return *cache;
}

// A compile that failed, on stderr once per compiler and kind of failure in a process (a
// missing compiler fails every kernel alike), unless it was said already (a refused cache
// file).
void report(const absl::Status& status) {
  // Cancelled: the process is exiting, and nothing more needs saying.
  if (status.ok() || absl::IsCancelled(status) || base::reported_on_stderr(status)) return;
  static std::mutex mutex;
  static auto* said = new absl::flat_hash_set<std::string>();
  const absl::string_view message = status.message();
  // The message names the command in backquotes: its compiler, then how it failed.
  const size_t command = message.find('`'), end = message.find('`', command + 1);
  const absl::string_view compiler =
      command == absl::string_view::npos
          ? message
          : message.substr(command, message.find(' ', command) - command);
  const absl::string_view failure =
      end == absl::string_view::npos ? "" : message.substr(end, message.find(':', end) - end);
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!said->insert(absl::StrCat(compiler, failure)).second) return;
  }
  std::fprintf(stderr, "kiln: %s; the tile evaluator runs such kernels instead\n",
               std::string(message).c_str());
}

// Makes `key`'s function final: the compiled loop of `source`, or null (said on stderr when a
// compile failed). Returns it.
void* settle(const std::string& key, const absl::StatusOr<void*>& function,
             const std::string& source) {
  report(function.status());
  void* const loop = function.ok() ? *function : nullptr;
  KernelCache& c = kernel_cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  Entry& e = c.entries[key];
  e.state = State::kSettled;
  e.function = loop;
  e.source.clear();
  if (loop != nullptr) e.library_key = compiled_function_key(kSimdMathInlSource, source);
  return loop;
}

// The background thread: compiles the queue one at a time (the host compiler builds one
// library at a time anyway), then ends until the next compile is queued.
void compile_queued() {
  KernelCache& c = kernel_cache();
  for (;;) {
    Compile next;
    {
      std::lock_guard<std::mutex> lock(c.mutex);
      if (c.stopping) return;  // exiting: the thread ends with the process
      if (c.queue.empty()) {
        c.worker_running = false;
        return;
      }
      next = std::move(c.queue.front());
      c.queue.pop_front();
    }
    settle(next.key, compiled_function(kSimdMathInlSource, next.source, next.symbol), next.source);
    {
      std::lock_guard<std::mutex> lock(c.mutex);
      --c.unfinished;
    }
    c.settled.notify_all();
  }
}

// Queues `key`'s compile (the caller holds the mutex), starting the thread when none runs.
void queue_compile(KernelCache& c, const std::string& key, Entry& e, const std::string& symbol) {
  e.state = State::kQueued;
  c.queue.push_back({key, std::move(e.source), symbol});
  ++c.unfinished;
  ++c.queued_total;
  if (!c.worker_running) {
    c.worker_running = true;
    std::thread(compile_queued).detach();
  }
}

}  // namespace

void* compiled_kernel_function(
    const jit::KernelProgram& program, const std::string& symbol,
    const std::function<std::optional<std::string>(const jit::KernelProgram&)>& generate) {
  KernelCache& c = kernel_cache();
  const std::string key = absl::StrCat(symbol, "\n", program.to_string());
  const bool wait = host_compile_mode() == HostCompileMode::kWait;
  std::optional<std::string> source;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    auto [it, added] = c.entries.try_emplace(key);
    Entry& e = it->second;
    if (!added && e.state != State::kNotCached) return e.function;  // null until settled
    if (!added && !wait) {  // a second launch: compile it, on the background thread
      queue_compile(c, key, e, symbol);
      return nullptr;
    }
    if (!added) source = std::move(e.source);  // KILN_CPU_JIT=sync since the first launch
    e.state = State::kLooking;
  }
  if (!source) source = generate(program);
  if (!source) return settle(key, nullptr, "");
  const absl::StatusOr<void*> function =
      compiled_function(kSimdMathInlSource, *source, symbol, /*build=*/wait);
  if (absl::IsNotFound(function.status())) {  // not built yet: the evaluator runs this launch
    std::lock_guard<std::mutex> lock(c.mutex);
    Entry& e = c.entries[key];
    e.state = State::kNotCached;
    e.source = std::move(*source);
    return nullptr;
  }
  return settle(key, function, *source);
}

void wait_for_background_compiles() {
  KernelCache& c = kernel_cache();
  std::unique_lock<std::mutex> lock(c.mutex);
  c.settled.wait(lock, [&] { return c.unfinished == 0; });
}

int64_t background_compiles_queued() {
  KernelCache& c = kernel_cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.queued_total;
}

std::vector<std::string> compiled_library_keys(const jit::KernelProgram& program) {
  const std::string text = absl::StrCat("\n", program.to_string());
  KernelCache& c = kernel_cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  std::vector<std::string> keys;
  for (const auto& [key, entry] : c.entries) {
    if (!entry.library_key.empty() && absl::EndsWith(key, text)) keys.push_back(entry.library_key);
  }
  return keys;
}

}  // namespace kiln::runtime::cpu
