// The `kiln` command.
//   kiln replay TRACE.json --inputs DIR --out DIR [--device cpu|cuda]
//   kiln dump TRACE.json [--format text|json|dot]
// Exits 0 on success; on bad input prints one line "kiln: <reason>" and exits 1 (2 for usage).
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "kiln/kiln.h"

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: kiln replay TRACE.json --inputs DIR --out DIR [--device cpu|cuda]\n"
               "       kiln dump TRACE.json [--format text|json|dot]\n");
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

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return usage();
  const std::string command = argv[1];
  std::map<std::string, std::string> flags;
  if (!parse_flags(argc, argv, 3, flags)) return usage();
  try {
    if (command == "replay") return replay(argv[2], flags);
    if (command == "dump") return dump(argv[2], flags);
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
