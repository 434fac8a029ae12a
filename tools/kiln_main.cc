// The `kiln` command.
//   kiln replay TRACE.json --inputs DIR --out DIR [--device cpu|cuda]
//   kiln dump TRACE.json [--format text|json|dot]
//   kiln compile-cuda DIR [--arch 80,90] [--check cubin|syntax] [--every N]
//                                          compile every DIR/*.cu (or every Nth, by name)
//                                          with NVRTC to cubins, or run NVRTC's front end
//                                          alone on each (syntax)
//   kiln bundle DIR                         a compiled bundle's signatures, kernels and
//                                          machine code (after checking every file)
//   kiln info                               devices, NVRTC, SIMD target, cache location
//   kiln generate --model M.gguf --prompt TEXT [...]   text from a language model
//                                          (tools/generate_command.h lists the flags)
// Exits 0 on success; on bad input prints one line "kiln: <reason>" and exits 1 (2 for usage).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/cache_dir.h"
#include "base/thread_pool.h"
#include "jit/eval/compiled_bundle.h"
#include "kiln/kiln.h"
#include "runtime/cpu/simd_math.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/nvrtc_compiler.h"
#include "runtime/cuda/parallel_compile.h"  // KernelSource
#include "tools/generate_command.h"
#include "tools/syntax_batches.h"

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: kiln replay TRACE.json --inputs DIR --out DIR [--device cpu|cuda]\n"
               "       kiln dump TRACE.json [--format text|json|dot]\n"
               "       kiln compile-cuda DIR [--arch 80,90] [--check cubin|syntax] [--every N]\n"
               "       kiln bundle DIR\n"
               "       kiln info\n"
               "       kiln generate --model M.gguf --prompt TEXT [--max-tokens N] ...\n");
  return 2;
}

// Parses "--flag value" pairs after the positional argument; false on anything else.
bool parse_flags(int argc, char** argv, int first, std::map<std::string, std::string>& flags) {
  for (int i = first; i < argc; i += 2) {
    if (std::strncmp(argv[i], "--", 2) != 0 || i + 1 >= argc) return false;
    flags[argv[i] + 2] = argv[i + 1];
  }
  return true;
}

int replay(const std::string& trace, std::map<std::string, std::string>& flags) {
  if (!flags.count("inputs") || !flags.count("out")) return usage();
  if (flags.count("device")) {
    const std::string& d = flags["device"];
    if (d == "cpu") {
      kiln::set_default_device({kiln::DeviceType::CPU, 0});
    } else if (d == "cuda") {
      kiln::set_default_device({kiln::DeviceType::CUDA, 0});
    } else {
      throw kiln::Error("--device must be cpu or cuda, got '" + d + "'");
    }
  }
  kiln::replay_trace(trace, flags["inputs"], flags["out"]);
  return 0;
}

int dump(const std::string& trace, std::map<std::string, std::string>& flags) {
  std::string format = flags.count("format") ? flags["format"] : "text";
  kiln::LoadedTrace loaded = kiln::load_trace_file(trace);
  std::map<std::string, kiln::Tensor> inputs;
  for (const auto& in : loaded.inputs()) inputs[in.name] = kiln::Tensor::zeros(in.shape, in.dtype);
  kiln::DumpFormat f = format == "json"  ? kiln::DumpFormat::Json
                       : format == "dot" ? kiln::DumpFormat::Dot
                                         : kiln::DumpFormat::Text;
  std::fputs(kiln::dump_trace(loaded.run(inputs), f).c_str(), stdout);
  return 0;
}

// For every architecture and kernel, in that order (kernels[i % n] for arch i / n): NVRTC's
// whole compile to a cubin. On all cores.
std::vector<absl::Status> compile_kernels(
    const std::vector<kiln::runtime::cuda::KernelSource>& kernels, const std::vector<int>& archs) {
  namespace cuda = kiln::runtime::cuda;
  const int64_t n = static_cast<int64_t>(kernels.size());
  std::vector<absl::Status> results(archs.size() * kernels.size());
  kiln::base::parallel_for(static_cast<int64_t>(results.size()), 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const cuda::KernelSource& k = kernels[i % n];
      results[i] = cuda::compile_to_cubin(k.source, k.name, archs[i / n]).status();
    }
  });
  return results;
}

// Compiles every DIR/*.cu for each architecture (--check syntax: NVRTC's front end alone;
// --every N: the first file and every Nth after it, in name order); the first failure's
// NVRTC log is printed and the exit status is 1.
int compile_cuda(const std::string& dir, std::map<std::string, std::string>& flags) {
  std::vector<int> archs;
  for (absl::string_view a : absl::StrSplit(flags.count("arch") ? flags["arch"] : "80,90", ',')) {
    int arch = 0;
    if (!absl::SimpleAtoi(a, &arch)) throw kiln::Error("--arch takes numbers like 80,90");
    archs.push_back(arch);
  }
  const std::string check = flags.count("check") ? flags["check"] : "cubin";
  if (check != "cubin" && check != "syntax") {
    throw kiln::Error("--check takes cubin or syntax, got '" + check + "'");
  }
  int every = 1;
  if (flags.count("every") && (!absl::SimpleAtoi(flags["every"], &every) || every < 1)) {
    throw kiln::Error("--every takes a count of at least 1, got '" + flags["every"] + "'");
  }
  std::vector<std::filesystem::path> all;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() == ".cu") all.push_back(e.path());
  }
  std::sort(all.begin(), all.end());
  std::vector<std::filesystem::path> files;
  for (size_t i = 0; i < all.size(); i += every) files.push_back(all[i]);
  std::vector<kiln::runtime::cuda::KernelSource> kernels;
  for (const std::filesystem::path& file : files) {
    std::ifstream in(file);
    std::stringstream source;
    source << in.rdbuf();
    kernels.push_back({file.stem().string(), source.str()});
  }
  const auto start = std::chrono::steady_clock::now();
  const std::vector<absl::Status> results =
      check == "syntax" ? kiln::tools::check_syntax_in_batches(kernels, archs)
                        : compile_kernels(kernels, archs);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (size_t i = 0; i < results.size(); ++i) {
    if (results[i].ok()) continue;
    std::fprintf(stderr, "kiln: %s\nsource: %s\n", std::string(results[i].message()).c_str(),
                 files[i % files.size()].c_str());
    return 1;
  }
  std::string targets;
  for (int arch : archs) absl::StrAppend(&targets, targets.empty() ? "sm_" : ", sm_", arch);
  std::printf("%s %zu kernels %s for %s in %.1f s\n", check == "syntax" ? "checked" : "compiled",
              files.size(), check == "syntax" ? "with NVRTC's front end" : "to cubins",
              targets.c_str(), seconds);
  return 0;
}

int info() {
  std::printf("kiln %s\n", "0.1.0");
  std::printf("default device: %s\n", kiln::device_name(kiln::default_device()).c_str());
  auto devices = kiln::runtime::cuda::query_devices();
  if (!devices.ok()) {
    std::printf("CUDA devices: none (%s)\n", std::string(devices.status().message()).c_str());
  } else {
    for (const auto& d : *devices) {
      std::printf("CUDA device %d: %s, compute capability %d.%d, %.1f GiB\n", d.index,
                  d.name.c_str(), d.compute_major, d.compute_minor,
                  static_cast<double>(d.memory_bytes) / (1 << 30));
    }
  }
  const absl::Status cuda = kiln::runtime::cuda::cuda_available();
  std::printf("CUDA backend: %s\n",
              cuda.ok()
                  ? "usable (KILN_DEVICE=auto runs on cuda:0)"
                  : ("not usable, kernels run on the CPU: " + std::string(cuda.message())).c_str());
  auto nvrtc = kiln::runtime::cuda::nvrtc_version();
  std::printf("NVRTC: %s\n",
              nvrtc.ok() ? nvrtc->c_str() : std::string(nvrtc.status().message()).c_str());
  std::printf("CPU SIMD target: %s, %u threads\n", kiln::runtime::cpu::simd_target_name(),
              std::thread::hardware_concurrency());
  const std::string where = kiln::base::default_cache_dir();
  std::printf("kernel cache: %s (KILN_CACHE_DIR)\n",
              where.empty() ? "none, no home directory" : where.c_str());
  return 0;
}

int bundle(const std::string& dir) {
  absl::StatusOr<std::string> listing = kiln::jit::describe_bundle(dir);
  if (!listing.ok()) throw std::runtime_error(std::string(listing.status().message()));
  std::fputs(listing->c_str(), stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "info") return info();
  if (argc < 3) return usage();
  const std::string command = argv[1];
  std::map<std::string, std::string> flags;
  if (command != "generate" && !parse_flags(argc, argv, 3, flags)) return usage();
  try {
    if (command == "generate") return kiln::tools::generate_command(argc - 1, argv + 1);
    if (command == "replay") return replay(argv[2], flags);
    if (command == "dump") return dump(argv[2], flags);
    if (command == "compile-cuda") return compile_cuda(argv[2], flags);
    if (command == "bundle" && flags.empty()) return bundle(argv[2]);
    return usage();
  } catch (const std::exception& e) {
    std::string reason = e.what();
    for (char& c : reason) {
      if (c == '\n') c = ' ';  // one line, always
    }
    std::fprintf(stderr, "kiln: %s\n", reason.c_str());
    return 1;
  }
}
