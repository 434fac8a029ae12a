#include "runtime/cpu/host_compiler.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <new>
#include <optional>
#include <sstream>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/atomic_file.h"
#include "base/cache_dir.h"
#include "base/env_options.h"
#include "hwy/targets.h"

extern char** environ;  // NOLINT: POSIX declares it nowhere else

namespace kiln::runtime::cpu {
namespace {

namespace fs = std::filesystem;

std::string compiler() {
  const char* cxx = std::getenv("KILN_CXX");
  return cxx != nullptr && *cxx != '\0' ? cxx : "c++";
}

// The instruction set to build for: the best x86-64 level whose Highway target the CPU
// runs, so that a compiled kernel uses the same vectors as the executor's dispatched loops
// (hwy::SupportedTargets() is what HWY_DYNAMIC_DISPATCH chooses from). Highway's x86 targets
// also require AES and carry-less multiply, which the levels leave out: without them its
// static target falls back to 128-bit SSSE3. Other CPUs build for the compiler's default.
std::string instruction_set_flag() {
#if defined(__x86_64__)
  const int64_t targets = hwy::SupportedTargets();
  if ((targets & HWY_AVX3) != 0) return "-march=x86-64-v4 -maes -mpclmul";
  if ((targets & HWY_AVX2) != 0) return "-march=x86-64-v3 -maes -mpclmul";
  if ((targets & HWY_SSE4) != 0) return "-march=x86-64-v2 -maes -mpclmul";
#endif
  return "";
}

// The cache key of what `text` builds into: the compiler and its flags, then the text.
std::string build_key(const std::string& text) {
  return absl::StrCat("compiler=", compiler(), "\nflags=", host_compiler_flags(), "\n", text);
}

std::string read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The compilers running now, each with the files it writes: at exit they are killed and
// their files removed, so that a process that ends mid-compile leaves nothing half-written.
struct RunningCompiler {
  pid_t group;
  std::vector<std::string> files;
};

std::mutex& running_mutex() {
  static auto* mutex = new std::mutex();  // never destroyed: the exit handler locks it
  return *mutex;
}

std::vector<RunningCompiler>& running_compilers() {
  static auto* running = new std::vector<RunningCompiler>();
  return *running;
}

// Set by the exit handler: from then on no compiler starts (a background compile still
// running would otherwise start its next step, after the handler is done).
bool exiting = false;  // guarded by running_mutex()
// The process whose compilers these are: a child forked from it inherits the list and the
// exit handler, and must neither kill nor wait for its parent's compilers.
pid_t owner = 0;  // guarded by running_mutex()

void kill_running_compilers() {
  std::lock_guard<std::mutex> lock(running_mutex());
  exiting = true;
  if (owner != getpid()) return;
  for (const RunningCompiler& r : running_compilers()) {
    kill(-r.group, SIGKILL);
    int status = 0;
    waitpid(r.group, &status, 0);
    for (const std::string& file : r.files) std::remove(file.c_str());
  }
  running_compilers().clear();
}

// In a forked child: the parent's compilers are not its own.
void forget_parents_compilers() {
  // The fork copied the mutex as the forking thread saw it; only that thread runs here.
  new (&running_mutex()) std::mutex();
  running_compilers().clear();
  owner = getpid();
}

// KILN_CPU_JIT_TIMEOUT: how long a compiler may run, in seconds (default 120).
std::chrono::milliseconds compiler_timeout() {
  const char* text = std::getenv("KILN_CPU_JIT_TIMEOUT");
  double seconds = 0;
  if (text == nullptr || !absl::SimpleAtod(text, &seconds) || !(seconds > 0)) seconds = 120;
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

// run_process's results besides an exit status.
constexpr int kNotStarted = -1, kTimedOut = -2, kProcessExiting = -3, kKilled = -4;

// Waits (polling) for compiler `pid` until `deadline`, then kills its group. Reaped and
// struck off the list under the lock the exit handler takes, so the handler never signals a
// group that is gone. Returns its exit status, or kTimedOut, kProcessExiting (the exit
// handler killed it) or kKilled (a signal).
int wait_for_compiler(pid_t pid, std::chrono::steady_clock::time_point deadline) {
  // Polled: a compile takes a fifth of a second or more, so waking every few milliseconds
  // costs it nothing, and no signal or second thread is needed to time it out.
  auto pause = std::chrono::microseconds(500);
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(running_mutex());
      if (exiting) return kProcessExiting;  // killed and reaped by the handler
      const bool late = std::chrono::steady_clock::now() >= deadline;
      if (late) kill(-pid, SIGKILL);
      int status = 0;
      const pid_t done = waitpid(pid, &status, late ? 0 : WNOHANG);
      if (done == pid || (done < 0 && errno != EINTR)) {
        std::erase_if(running_compilers(),
                      [&](const RunningCompiler& r) { return r.group == pid; });
        if (late) return kTimedOut;
        if (done < 0) return kNotStarted;
        return WIFEXITED(status) ? WEXITSTATUS(status) : kKilled;
      }
    }
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(2 * pause, std::chrono::milliseconds(10));
  }
}

// Runs `argv` in a process group of its own with its output into `log_path`, killing the
// group when it runs past the timeout; returns wait_for_compiler's result (kNotStarted when
// it could not start). `files` (what it writes, the log among them) are removed if this
// process exits meanwhile.
int run_process(const std::vector<std::string>& argv, const std::string& log_path,
                const std::vector<std::string>& files) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
#if defined(__GLIBC__)
#if __GLIBC_PREREQ(2, 34)
  // Nothing else of this process's: a compiler left running must not hold its pipes open.
  posix_spawn_file_actions_addclosefrom_np(&actions, STDERR_FILENO + 1);
#endif
#endif
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);  // its own group: a timeout kills all it started
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  static std::once_flag installed;
  std::call_once(installed, [] {
    {
      std::lock_guard<std::mutex> lock(running_mutex());
      owner = getpid();
    }
    pthread_atfork(nullptr, nullptr, forget_parents_compilers);
    std::atexit(kill_running_compilers);
  });
  pid_t pid = 0;
  int spawned = 0;
  {
    // Started and noted under the lock the exit handler takes, so that an exit meanwhile
    // finds it.
    std::lock_guard<std::mutex> lock(running_mutex());
    spawned = exiting ? ECANCELED
                      : posix_spawnp(&pid, args[0], &actions, &attributes, args.data(), environ);
    if (spawned == 0) running_compilers().push_back({pid, files});
  }
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (spawned == ECANCELED) return kProcessExiting;
  if (spawned != 0) return kNotStarted;
  return wait_for_compiler(pid, std::chrono::steady_clock::now() + compiler_timeout());
}

// A name no other process or thread writing into the same folder uses.
std::string temporary_suffix() {
  return absl::StrCat(".tmp.", getpid(), ".",
                      std::hash<std::thread::id>{}(std::this_thread::get_id()));
}

// The compiler's arguments: its name and the flags every build shares.
std::vector<std::string> compiler_command() {
  std::vector<std::string> argv = {compiler()};
  for (absl::string_view flag : absl::StrSplit(host_compiler_flags(), ' ', absl::SkipEmpty())) {
    argv.emplace_back(flag);
  }
  return argv;
}

// Runs the compiler with `argv` into `temporary`, gives it `mode` (the compiler makes it as
// the umask says, often writable by the group), then renames it to `target`. An error names
// the command and the compiler's first lines of output.
absl::Status run_compiler(const std::vector<std::string>& argv, const std::string& temporary,
                          const std::string& target, mode_t mode) {
  const std::string log = temporary + ".log";
  const int status = run_process(argv, log, {temporary, log});
  if (status == kProcessExiting) {
    return absl::CancelledError("compiled CPU kernel: the process is exiting");
  }
  const std::string output = read_whole_file(log);
  std::error_code ignored;
  fs::remove(log, ignored);
  if (status != 0) {
    fs::remove(temporary, ignored);
    std::vector<absl::string_view> lines =
        absl::StrSplit(absl::StripTrailingAsciiWhitespace(output), '\n', absl::SkipEmpty());
    if (lines.size() > 12) lines.resize(12);
    const std::string what =
        status == kTimedOut ? absl::StrCat("ran past ", compiler_timeout().count() / 1000.0,
                                           " s and was stopped (KILN_CPU_JIT_TIMEOUT)")
        : status == kNotStarted
            ? "could not be run (set KILN_CXX to a C++ compiler, or KILN_CPU_JIT=0)"
        : status == kKilled ? "was killed by a signal"
                            : absl::StrCat("exited with status ", status);
    return absl::FailedPreconditionError(
        absl::StrCat("compiled CPU kernel: `", absl::StrJoin(argv, " "), "` ", what,
                     lines.empty() ? "" : ":\n", absl::StrJoin(lines, "\n")));
  }
  if (chmod(temporary.c_str(), mode) != 0) {
    fs::remove(temporary, ignored);
    return absl::InternalError(absl::StrCat("compiled CPU kernel: cannot chmod ", temporary));
  }
  fs::rename(temporary, target, ignored);
  if (ignored) {
    fs::remove(temporary, ignored);
    return absl::InternalError(absl::StrCat("compiled CPU kernel: cannot move the output to ",
                                            target, ": ", ignored.message()));
  }
  return absl::OkStatus();
}

// Where compiled CPU kernels are kept: `root` is the cache's, `dir` its cpu/ folder.
struct CacheFolder {
  std::string root;
  std::string dir;
};

// Whether `root`/cpu/`name` may be used: the compiler reads the file by its name, so the
// check is on the file as it is now, in folders only this user can change.
absl::Status check_cached_file(const CacheFolder& cache, const std::string& name) {
  absl::StatusOr<base::FileDescriptor> file =
      base::open_trusted_file(cache.root, absl::StrCat("cpu/", name));
  if (file.ok() || !absl::IsPermissionDenied(file.status())) return file.status();
  return base::refuse_to_load(absl::StrCat(cache.dir, "/", name), file.status());
}

// The prelude's header in the cache, precompiled beside it (`.gch`) on first use: GCC reads the
// precompiled form whenever its flags match, which cuts each kernel's build from about 0.8 s
// to 0.2 s; any other compiler, or a failed precompile, just parses the header. Both files are
// checked like a library, since what they hold goes into every kernel built with them.
absl::StatusOr<std::string> prelude_header(const CacheFolder& cache, const std::string& prelude) {
  const std::string name =
      absl::StrCat("prelude_", base::cache_file_stem(build_key(prelude)), ".h");
  const std::string header = absl::StrCat(cache.dir, "/", name);
  std::error_code error;
  if (!fs::exists(header, error)) {
    absl::Status written = base::write_file_atomically(
        header, [&](std::ostream& out) { out << prelude; }, 0600);
    if (!written.ok()) return written;
  }
  const std::string precompiled = header + ".gch";
  if (!fs::exists(precompiled, error)) {
    std::vector<std::string> argv = compiler_command();
    std::erase(argv, std::string("-shared"));
    const std::string temporary = precompiled + temporary_suffix();
    argv.insert(argv.end(), {"-x", "c++-header", "-o", temporary, header});
    (void)run_compiler(argv, temporary, precompiled, 0600);  // without it, only slower
  }
  if (absl::Status trusted = check_cached_file(cache, name); !trusted.ok()) return trusted;
  if (fs::exists(precompiled, error)) {
    if (absl::Status trusted = check_cached_file(cache, name + ".gch"); !trusted.ok()) {
      return trusted;
    }
  }
  return header;
}

// Builds `source` (with `prelude`'s header included first, when there is one) into
// `library`, renamed into place only on success.
absl::Status build_library(const CacheFolder& cache, const std::string& prelude,
                           const std::string& source, const std::string& source_path,
                           const std::string& library) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> argv = compiler_command();
  if (!prelude.empty()) {
    absl::StatusOr<std::string> header = prelude_header(cache, prelude);
    if (!header.ok()) return header.status();
    argv.insert(argv.end(), {"-include", *header});
  }
  absl::Status written = base::write_file_atomically(
      source_path, [&](std::ostream& out) { out << source; }, 0600);
  if (!written.ok()) return written;
  const std::string temporary = library + temporary_suffix();
  argv.insert(argv.end(), {"-o", temporary, source_path});
  absl::Status built = run_compiler(argv, temporary, library, 0700);
  if (!built.ok()) return built;
  if (base::env_options().log_level >= 1) {
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "kiln: compiled CPU kernel %s in %.0f ms\n", source_path.c_str(), ms);
  }
  return absl::OkStatus();
}

// Loads the library `name` from the cache after checking it (open_trusted_file), through the
// descriptor that was checked, so that a file swapped in after the check is never what loads.
absl::StatusOr<void*> load_function(const CacheFolder& cache, const std::string& name,
                                    const std::string& symbol) {
  const std::string library = absl::StrCat(cache.dir, "/", name);
  absl::StatusOr<base::FileDescriptor> file =
      base::open_trusted_file(cache.root, absl::StrCat("cpu/", name));
  if (absl::IsPermissionDenied(file.status())) return base::refuse_to_load(library, file.status());
  if (!file.ok()) {
    return absl::InternalError(absl::StrCat("compiled CPU kernel: ", file.status().message()));
  }
  const std::string by_descriptor = absl::StrCat("/proc/self/fd/", file->get());
  void* handle = dlopen(by_descriptor.c_str(), RTLD_NOW | RTLD_LOCAL);  // kept for the process
  if (handle == nullptr) {
    return absl::InternalError(
        absl::StrCat("compiled CPU kernel: dlopen of ", library, ": ", dlerror()));
  }
  // The descriptor stays open as long as the library stays loaded (for the process): dlopen
  // knows a loaded library by the name it was opened under, and would take a later library
  // opened under the same /proc/self/fd/<n> for this one.
  (void)file->release();
  void* function = dlsym(handle, symbol.c_str());
  if (function == nullptr) {
    return absl::InternalError(
        absl::StrCat("compiled CPU kernel: ", library, " has no function ", symbol));
  }
  return function;
}

// The cache's cpu/ folder, created private when missing and checked: a folder someone else
// could write is refused (said once on stderr), and so is running without a cache at all,
// since a kernel is loaded from the file it was built into.
absl::StatusOr<CacheFolder> cache_folder() {
  CacheFolder cache{base::default_cache_dir(), ""};
  if (cache.root.empty()) {
    return absl::FailedPreconditionError(
        "compiled CPU kernel: no cache folder (KILN_CACHE_DIR, XDG_CACHE_HOME and HOME are "
        "unset and this user has no home directory)");
  }
  cache.dir = cache.root + "/cpu";
  if (absl::Status made = base::create_private_directories(cache.dir); !made.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("compiled CPU kernel: ", made.message()));
  }
  absl::Status trusted = base::check_trusted_directory(cache.root, "cpu");
  if (absl::IsPermissionDenied(trusted)) {
    return base::refuse_to_load(absl::StrCat("compiled CPU kernels from ", cache.dir), trusted);
  }
  if (!trusted.ok())
    return absl::InternalError(absl::StrCat("compiled CPU kernel: ", trusted.message()));
  return cache;
}

// Whether the cache holds the library of `key` at `path_stem` (.so, with its .key beside it
// naming exactly that key: two keys may share a stem).
bool cache_holds(const std::string& path_stem, const std::string& key) {
  std::error_code error;
  return fs::exists(path_stem + ".so", error) && read_whole_file(path_stem + ".key") == key;
}

// Loads the library for `key`, building it first when the cache holds none that matches
// (or, without `build`, a NotFound status then).
absl::StatusOr<void*> load_or_build(const std::string& key, const std::string& prelude,
                                    const std::string& source, const std::string& symbol,
                                    bool build) {
  absl::StatusOr<CacheFolder> cache = cache_folder();
  if (!cache.ok()) return cache.status();
  const std::string stem = base::cache_file_stem(key);
  const std::string path_stem = absl::StrCat(cache->dir, "/", stem);
  const std::string library = path_stem + ".so", key_path = path_stem + ".key";
  if (!cache_holds(path_stem, key)) {
    if (!build) return absl::NotFoundError("compiled CPU kernel: not in the cache");
    absl::Status built = build_library(*cache, prelude, source, path_stem + ".cc", library);
    if (!built.ok()) return built;
    built = base::write_file_atomically(
        key_path, [&](std::ostream& out) { out << key; }, 0600);
    if (!built.ok()) return built;
  }
  return load_function(*cache, stem + ".so", symbol);
}

std::atomic<int> mode_override{-1};  // a HostCompileMode, or -1: KILN_CPU_JIT's

}  // namespace

HostCompileMode host_compile_mode() {
  static const HostCompileMode from_environment = [] {
    const char* jit = std::getenv("KILN_CPU_JIT");
    if (jit != nullptr && std::string_view(jit) == "0") return HostCompileMode::kOff;
    if (jit != nullptr && std::string_view(jit) == "sync") return HostCompileMode::kWait;
    return HostCompileMode::kBackground;
  }();
  const int forced = mode_override.load();
  return forced < 0 ? from_environment : static_cast<HostCompileMode>(forced);
}

void set_host_compile_mode(std::optional<HostCompileMode> mode) {
  mode_override = mode ? static_cast<int>(*mode) : -1;
}

bool host_compiler_enabled() { return host_compile_mode() != HostCompileMode::kOff; }

const std::string& host_compiler_flags() {
  // -ffp-contract=off: a product and a sum stay two roundings, as in the executor's
  // op-at-a-time loops, so a compiled kernel computes the same bits.
  // Never destroyed: a background compile may still read it while the process exits.
  static const std::string& flags = *new std::string(
      absl::StrCat("-std=c++17 -O2 -fPIC -shared -fno-exceptions -ffp-contract=off -w ",
                   instruction_set_flag()));
  return flags;
}

absl::StatusOr<void*> compiled_function(const std::string& prelude, const std::string& source,
                                        const std::string& symbol, bool build) {
  static std::mutex mutex, building;
  static auto* loaded = new absl::flat_hash_map<std::string, absl::StatusOr<void*>>();
  const std::string key = compiled_function_key(prelude, source);
  auto known = [&]() -> std::optional<absl::StatusOr<void*>> {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = loaded->find(key); it != loaded->end()) return it->second;
    return std::nullopt;
  };
  if (auto function = known()) return *function;
  // One build at a time. A load from the cache alone does not wait for a build under way
  // (the launch that asked for it would wait for a compiler): the library is renamed into
  // place whole, and its .key file is written after it, so a load sees it complete or not
  // at all.
  std::unique_lock<std::mutex> one_build(building, std::defer_lock);
  if (build) {
    one_build.lock();
    if (auto function = known()) return *function;  // built while this one waited
  }
  absl::StatusOr<void*> function = load_or_build(key, prelude, source, symbol, build);
  if (!absl::IsNotFound(function.status())) {
    std::lock_guard<std::mutex> lock(mutex);
    loaded->emplace(key, function);
  }
  return function;
}

std::string host_compiler_target() { return absl::StrCat(compiler(), " ", host_compiler_flags()); }

std::string compiled_function_key(const std::string& prelude, const std::string& source) {
  return build_key(absl::StrCat("prelude=", prelude.size(), "\n", prelude, source));
}

absl::StatusOr<std::string> read_cached_library(const std::string& key) {
  absl::StatusOr<CacheFolder> cache = cache_folder();
  if (!cache.ok()) return cache.status();
  const std::string path_stem = absl::StrCat(cache->dir, "/", base::cache_file_stem(key));
  if (!cache_holds(path_stem, key)) {
    return absl::NotFoundError("compiled CPU kernel: not in the cache");
  }
  return read_whole_file(path_stem + ".so");
}

absl::Status install_cached_library(const std::string& key, const std::string& library) {
  absl::StatusOr<CacheFolder> cache = cache_folder();
  if (!cache.ok()) return cache.status();
  const std::string path_stem = absl::StrCat(cache->dir, "/", base::cache_file_stem(key));
  if (cache_holds(path_stem, key)) return absl::OkStatus();
  absl::Status written = base::write_file_atomically(
      path_stem + ".so", [&](std::ostream& out) { out << library; }, 0700);
  if (!written.ok()) return written;
  return base::write_file_atomically(
      path_stem + ".key", [&](std::ostream& out) { out << key; }, 0600);
}

}  // namespace kiln::runtime::cpu
