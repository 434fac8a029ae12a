// save_compiled and load_compiled (kiln/compile.h), and `kiln bundle`'s listing. A bundle is
// a folder (docs/bundles.md):
//   bundle.json    the manifest: format, version, the Kiln version, and every other file
//                  with its size and CRC-32, which loading checks before reading anything
//   plans.json     the Kernel IR programs, the signatures with their launch plans, the
//                  captured tensors' places in constants.bin, the machine code's files
//   constants.bin  the captured tensors' bytes, each at a 64-byte boundary
//   code/<device>/<n>.key, <n>.bin   compiled kernels, under their compile cache's keys
#include "jit/eval/compiled_bundle.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/atomic_file.h"
#include "base/buffer.h"
#include "base/checksum.h"
#include "jit/backend/backend.h"
#include "jit/eval/compiled_recording.h"
#include "jit/formats/plan_format.h"
#include "jit/formats/trace_format.h"
#include "jit/graph/node.h"
#include "jit/graph/record.h"
#include "kiln/compile.h"
#include "kiln/error.h"

namespace kiln {
namespace jit {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kKilnVersion = KILN_VERSION_STRING;
constexpr int64_t kConstantAlignment = 64;

// The whole file in one read into storage of its size (a bundle's constants are the model's
// weights: hundreds of megabytes, which a growing stream would copy several times).
std::string read_file(const std::string& path, bool* ok) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  *ok = static_cast<bool>(in);
  if (!*ok) return {};
  const std::streamoff size = in.tellg();
  std::string bytes(size > 0 ? static_cast<size_t>(size) : 0, '\0');
  in.seekg(0);
  if (size > 0 && !in.read(bytes.data(), size)) *ok = false;
  return bytes;
}

// JSON nested deeper than any bundle nests (plans.json reaches 6 levels): refused before
// parsing, since copying or printing a JSON value recurses as deep as it nests.
constexpr int kMaxJsonDepth = 32;

bool nests_too_deep(const std::string& text) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

// `text` parsed, or a discarded value when it is not JSON or nests too deep.
json parse_json(const std::string& text) {
  if (nests_too_deep(text)) return json(json::value_t::discarded);
  return json::parse(text, nullptr, /*allow_exceptions=*/false);
}

// The parts of a bundle, every file read and checked against the manifest.
struct BundleFiles {
  std::string dir;
  json manifest;
  json plans;
  std::map<std::string, std::string> files;  // by name, plans.json's among them

  Error error(const std::string& what) const {
    return Error(absl::StrCat("[load_compiled] bundle ", dir, ": ", what));
  }
  const std::string& file(const std::string& name) const {
    const auto it = files.find(name);
    if (it == files.end()) throw error(absl::StrCat("the manifest does not list ", name));
    return it->second;
  }
};

// Whether the manifest is of this format and Kiln version; the reason when not.
std::string version_mismatch(const json& manifest) {
  std::string format, kiln;
  int version = 0;
  if (!manifest.is_object() || !manifest.contains("format") ||
      !json_to(manifest["format"], format) || format != kBundleFormat) {
    return "bundle.json is not a kiln.bundle manifest";
  }
  if (!manifest.contains("version") || !json_to(manifest["version"], version) ||
      version != kBundleVersion) {
    return absl::StrCat("it is of bundle format version ", manifest.value("version", json()).dump(),
                        "; this Kiln reads version ", kBundleVersion);
  }
  if (!manifest.contains("kiln") || !json_to(manifest["kiln"], kiln) || kiln != kKilnVersion) {
    return absl::StrCat("it was written by Kiln ", manifest.value("kiln", json()).dump(),
                        "; this is Kiln ", kKilnVersion, " (rebuild the bundle with it)");
  }
  return "";
}

// Reads bundle.json and checks its format and version: the reason in *mismatch when it is of
// another version (the caller may fall back), an Error when it cannot be read at all.
json read_manifest(const std::string& dir, std::string* mismatch) {
  bool ok = false;
  const std::string text = read_file(dir + "/bundle.json", &ok);
  if (!ok) throw Error(absl::StrCat("[load_compiled] ", dir, "/bundle.json cannot be read"));
  json manifest = parse_json(text);
  if (manifest.is_discarded()) {
    throw Error(absl::StrCat("[load_compiled] ", dir, "/bundle.json is not valid JSON"));
  }
  *mismatch = version_mismatch(manifest);
  return manifest;
}

BundleFiles read_files(const std::string& dir, json manifest) {
  BundleFiles b;
  b.dir = dir;
  b.manifest = std::move(manifest);
  if (!b.manifest.contains("files") || !b.manifest["files"].is_array()) {
    throw b.error("bundle.json lists no files");
  }
  for (const json& entry : b.manifest["files"]) {
    std::string name;
    int64_t bytes = -1;
    uint32_t crc = 0;
    if (!entry.is_object() || !entry.contains("name") || !json_to(entry["name"], name) ||
        !entry.contains("bytes") || !json_to(entry["bytes"], bytes) || !entry.contains("crc32") ||
        !json_to(entry["crc32"], crc)) {
      throw b.error(absl::StrCat("bundle.json: a malformed file entry ", entry.dump()));
    }
    // Names are the writer's own: no way out of the folder.
    if (name.empty() || name.front() == '/' || name.find("..") != std::string::npos) {
      throw b.error(absl::StrCat("bundle.json names the file \"", name, "\" outside the bundle"));
    }
    bool ok = false;
    std::string data = read_file(absl::StrCat(dir, "/", name), &ok);
    if (!ok) throw b.error(absl::StrCat(name, " is missing"));
    if (static_cast<int64_t>(data.size()) != bytes || base::crc32_of(data) != crc) {
      throw b.error(absl::StrCat(name, " is corrupt or truncated: ", data.size(),
                                 " bytes with CRC-32 ", base::crc32_of(data),
                                 ", the manifest says ", bytes, " bytes with CRC-32 ", crc));
    }
    b.files.emplace(name, std::move(data));
  }
  b.plans = parse_json(b.file("plans.json"));
  if (!b.plans.is_object()) throw b.error("plans.json is not a JSON object");
  return b;
}

// ---- Writing ----

// The tables a bundle's plans.json indexes, built while walking the recordings.
class BundleWriter {
 public:
  explicit BundleWriter(std::string dir) : dir_(std::move(dir)) {}

  json signature(const Signature& sig, const Recording& rec) {
    json j{{"signature", sig},
           {"inputs", describe_signature(sig)},
           {"device", device_name(rec.device)},
           {"device_type", static_cast<int>(rec.device.type)},
           {"device_index", rec.device.index}};
    j["plan"] = rec.plan == nullptr ? json() : plan(*rec.plan, rec.device);
    json bindings = json::array(), params = json::array(), types = json::array();
    for (const InputBinding& b : rec.inputs) {
      bindings.push_back(b.arg >= 0 ? json{{"arg", b.arg}} : json{{"constant", constant(b.fixed)}});
    }
    for (double p : rec.params) params.push_back(scalar_to_json(p));
    for (const ops::ValueType& t : rec.output_types) types.push_back(type_json(t));
    j["bindings"] = bindings;
    j["params"] = params;
    j["output_types"] = types;
    json outputs = json::array();
    for (const OutputSource& src : rec.outputs) {
      if (src.plan_output >= 0) {
        outputs.push_back({{"plan_output", src.plan_output}});
      } else if (src.arg >= 0) {
        outputs.push_back({{"arg", src.arg}});
      } else {
        const detail::Node& n = *detail::TensorAccess::node(src.fixed);
        json out = type_json(n.type);
        out["constant"] = constant(n.buffer);
        outputs.push_back(out);
      }
    }
    j["outputs"] = outputs;
    return j;
  }

  // Writes every file into `staging` and returns the manifest.
  json write(const std::string& staging, json signatures) {
    json constants = json::array();
    std::string blob;
    for (const auto& buffer : constant_buffers_) {
      const std::shared_ptr<const base::Buffer> host = host_view(buffer);
      blob.resize((blob.size() + kConstantAlignment - 1) / kConstantAlignment * kConstantAlignment);
      constants.push_back({{"offset", blob.size()}, {"bytes", host->nbytes()}});
      blob.append(reinterpret_cast<const char*>(host->data()), static_cast<size_t>(host->nbytes()));
    }
    json plans{{"programs", programs_},
               {"constants", constants},
               {"signatures", std::move(signatures)},
               {"machine_code", machine_code_}};
    add_file(staging, "plans.json", plans.dump(1));
    add_file(staging, "constants.bin", blob);
    for (auto& [name, data] : code_files_) add_file(staging, name, data);
    return json{{"format", kBundleFormat},
                {"version", kBundleVersion},
                {"kiln", kKilnVersion},
                {"files", files_}};
  }

 private:
  static json type_json(const ops::ValueType& t) {
    return {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}};
  }

  int constant(const std::shared_ptr<base::Buffer>& buffer) {
    const auto [it, added] = constant_index_.try_emplace(buffer.get(), constant_buffers_.size());
    if (added) constant_buffers_.push_back(buffer);
    return static_cast<int>(it->second);
  }

  json plan(const LaunchPlan& plan, Device device) {
    std::vector<int> index;
    for (const PlannedKernel& k : plan.kernels) index.push_back(program(*k.program, device));
    return plan_to_json(plan, index);
  }

  int program(const KernelProgram& p, Device device) {
    const std::string text = p.to_string();
    if (coded_.insert({text, static_cast<int>(device.type)}).second) add_machine_code(p, device);
    const auto [it, added] = program_index_.try_emplace(text, programs_.size());
    if (!added) return static_cast<int>(it->second);
    json j = program_to_json(p);
    // What loading will read must be what was written: a program that cannot be read back
    // (a custom function, a collective) is refused now rather than by the deployed program.
    absl::StatusOr<KernelProgram> back = program_from_json(j);
    if (!back.ok() || back->to_string() != text) {
      throw Error(absl::StrCat("[save_compiled] kernel ", p.name, " cannot be saved in a bundle",
                               back.ok() ? "" : absl::StrCat(": ", back.status().message())));
    }
    programs_.push_back(std::move(j));
    return static_cast<int>(it->second);
  }

  void add_machine_code(const KernelProgram& p, Device device) {
    const MachineCodeStore* store = machine_code_store(device.type);
    if (store == nullptr) return;
    if (store->finish_pending && finished_.insert(static_cast<int>(device.type)).second) {
      store->finish_pending();  // compiles still under way: their code belongs in the bundle
    }
    for (MachineCode& code : store->code_for(p)) {
      const std::string stem = absl::StrCat(
          "code/", device.type == DeviceType::CPU ? "cpu" : "cuda", "/", machine_code_.size());
      machine_code_.push_back({{"device_type", static_cast<int>(device.type)},
                               {"target", store->target()},
                               {"kernel", p.name},
                               {"key_file", stem + ".key"},
                               {"code_file", stem + ".bin"}});
      code_files_.emplace_back(stem + ".key", std::move(code.key));
      code_files_.emplace_back(stem + ".bin", std::move(code.code));
    }
  }

  void add_file(const std::string& staging, const std::string& name, const std::string& data) {
    const fs::path path = fs::path(staging) / name;
    std::error_code error;
    fs::create_directories(path.parent_path(), error);
    absl::Status written =
        base::write_file_atomically(path.string(), [&](std::ostream& out) { out << data; });
    if (!written.ok()) {
      throw Error(absl::StrCat("[save_compiled] ", dir_, ": ", written.message()));
    }
    files_.push_back({{"name", name}, {"bytes", data.size()}, {"crc32", base::crc32_of(data)}});
  }

  std::string dir_;
  json programs_ = json::array();
  json machine_code_ = json::array();
  json files_ = json::array();
  std::map<std::string, size_t> program_index_;
  std::set<std::pair<std::string, int>> coded_;  // (program, device type) asked for code
  std::set<int> finished_;                       // device types whose compiles were awaited
  std::map<const base::Buffer*, size_t> constant_index_;
  std::vector<std::shared_ptr<base::Buffer>> constant_buffers_;
  std::vector<std::pair<std::string, std::string>> code_files_;
};

// Whether `dir` holds a bundle (its manifest names the format), so that saving may replace it.
bool holds_bundle(const fs::path& dir) {
  bool ok = false;
  const json manifest = parse_json(read_file((dir / "bundle.json").string(), &ok));
  return ok && manifest.is_object() && manifest.value("format", json()) == kBundleFormat;
}

// Replaces `dir` with the finished `staging` folder: the old bundle is renamed aside first,
// so `dir` holds the old bundle or the new one at every moment but the two renames' gap.
void move_into_place(const fs::path& staging, const fs::path& dir) {
  std::error_code error;
  const bool exists = fs::exists(dir, error);
  if (exists && !fs::is_empty(dir, error) && !holds_bundle(dir)) {
    fs::remove_all(staging, error);
    throw Error(absl::StrCat("[save_compiled] ", dir.string(),
                             " exists and is not a bundle: refusing to replace it"));
  }
  const fs::path old = fs::path(staging).concat(".old");
  if (exists) fs::rename(dir, old, error);
  if (!error) fs::rename(staging, dir, error);
  if (error) {
    const std::string why = error.message();
    if (exists && !fs::exists(dir)) fs::rename(old, dir, error);  // put the old one back
    fs::remove_all(staging, error);
    throw Error(
        absl::StrCat("[save_compiled] cannot move the bundle into ", dir.string(), ": ", why));
  }
  fs::remove_all(old, error);
}

// ---- Reading ----

template <class T>
T field(const BundleFiles& b, const json& object, const char* key, const std::string& where) {
  T value{};
  if (!object.is_object() || !object.contains(key) || !json_to(object[key], value)) {
    throw b.error(absl::StrCat("plans.json: ", where, ": \"", key, "\" is missing or malformed"));
  }
  return value;
}

const json& array_field(const BundleFiles& b, const json& object, const char* key,
                        const std::string& where) {
  if (!object.is_object() || !object.contains(key) || !object[key].is_array()) {
    throw b.error(absl::StrCat("plans.json: ", where, ": \"", key, "\" must be an array"));
  }
  return object[key];
}

std::vector<std::shared_ptr<const KernelProgram>> read_programs(const BundleFiles& b) {
  std::vector<std::shared_ptr<const KernelProgram>> programs;
  const json& table = array_field(b, b.plans, "programs", "the bundle");
  for (size_t i = 0; i < table.size(); ++i) {
    absl::StatusOr<KernelProgram> p = program_from_json(table[i]);
    if (!p.ok()) throw b.error(absl::StrCat("plans.json: program ", i, ": ", p.status().message()));
    programs.push_back(std::make_shared<const KernelProgram>(*std::move(p)));
  }
  return programs;
}

// The number of inputs a signature describes, after checking that it is well formed.
int64_t signature_inputs(const BundleFiles& b, const Signature& sig, const std::string& where) {
  bool ok = !sig.empty() && sig.front() >= 0;
  size_t at = 1;
  for (int64_t i = 0; ok && i < sig.front(); ++i) {
    ok = at + 4 <= sig.size() && sig[at] >= 0 && sig[at] <= static_cast<int64_t>(DType::Q6_K) &&
         (sig[at + 1] == static_cast<int64_t>(DeviceType::CPU) ||
          sig[at + 1] == static_cast<int64_t>(DeviceType::CUDA)) &&
         sig[at + 3] >= 0 && sig[at + 3] <= ops::kMaxRank;
    if (ok) at += 4 + static_cast<size_t>(sig[at + 3]);
  }
  if (!ok || at != sig.size())
    throw b.error(absl::StrCat("plans.json: ", where, ": a bad signature"));
  return sig.front();
}

ops::ValueType value_type(const BundleFiles& b, const json& j, const std::string& where) {
  ops::ValueType t;
  t.shape = field<ops::Shape>(b, j, "shape", where);
  try {
    t.dtype = dtype_from_name(field<std::string>(b, j, "dtype", where));
  } catch (const Error&) {
    throw b.error(absl::StrCat("plans.json: ", where, ": an unknown dtype"));
  }
  const absl::StatusOr<int64_t> numel = ops::checked_numel(t.shape);
  // Far beyond any memory, and small enough that its bytes fit an int64_t.
  if (!ops::check_rank(t.shape).ok() || !numel.ok() || *numel > (int64_t{1} << 56)) {
    throw b.error(absl::StrCat("plans.json: ", where, ": a bad shape"));
  }
  return t;
}

// The captured tensors' bytes, each in its own buffer (in host memory).
std::vector<std::shared_ptr<base::Buffer>> read_constants(const BundleFiles& b) {
  const std::string& blob = b.file("constants.bin");
  std::vector<std::shared_ptr<base::Buffer>> out;
  const json& table = array_field(b, b.plans, "constants", "the bundle");
  for (size_t i = 0; i < table.size(); ++i) {
    const std::string where = absl::StrCat("constant ", i);
    const auto offset = field<int64_t>(b, table[i], "offset", where);
    const auto bytes = field<int64_t>(b, table[i], "bytes", where);
    if (offset < 0 || bytes < 0 || static_cast<uint64_t>(offset) > blob.size() ||
        static_cast<uint64_t>(bytes) > blob.size() - static_cast<uint64_t>(offset)) {
      throw b.error(absl::StrCat("plans.json: ", where, " lies outside constants.bin"));
    }
    auto buffer = std::make_shared<base::Buffer>(bytes);
    if (bytes > 0) std::memcpy(buffer->data(), blob.data() + offset, static_cast<size_t>(bytes));
    out.push_back(std::move(buffer));
  }
  return out;
}

// One signature's recording, checked against the tables it indexes.
class RecordingReader {
 public:
  // `place` false: only checks and describes; captured tensors stay in host memory and no
  // device is touched.
  RecordingReader(const BundleFiles& b, const std::vector<std::shared_ptr<const KernelProgram>>& p,
                  const std::vector<std::shared_ptr<base::Buffer>>& constants, bool place)
      : b_(b), programs_(p), constants_(constants), place_(place) {}

  std::pair<Signature, std::shared_ptr<Recording>> read(const json& j, size_t index) {
    const std::string where = absl::StrCat("signature ", index);
    auto sig = field<Signature>(b_, j, "signature", where);
    const int64_t args = signature_inputs(b_, sig, where);
    auto rec = std::make_shared<Recording>();
    rec->replayable = true;
    rec->from_bundle = true;
    const int type = field<int>(b_, j, "device_type", where);
    if (type != static_cast<int>(DeviceType::CPU) && type != static_cast<int>(DeviceType::CUDA)) {
      throw b_.error(absl::StrCat("plans.json: ", where, ": an unknown device"));
    }
    rec->device = Device{static_cast<DeviceType>(type), field<int>(b_, j, "device_index", where)};
    // A recording for a device this machine lacks is checked, then left out: no call here
    // can have its signature.
    const bool usable = !place_ || device_usable(rec->device).ok();
    const bool placing = place_;
    place_ = place_ && usable;
    for (const json& p : array_field(b_, j, "params", where)) {
      absl::StatusOr<double> v = scalar_from_json(p);
      if (!v.ok()) throw b_.error(absl::StrCat("plans.json: ", where, ": a bad parameter"));
      rec->params.push_back(*v);
    }
    if (j.contains("plan") && !j["plan"].is_null()) {
      absl::StatusOr<LaunchPlan> plan = plan_from_json(j["plan"], programs_);
      if (!plan.ok()) {
        throw b_.error(absl::StrCat("plans.json: ", where, "'s plan: ", plan.status().message()));
      }
      for (const PlannedKernel& k : plan->kernels) {
        for (int p : k.launch.params) {
          if (static_cast<size_t>(p) >= rec->params.size()) {
            throw b_.error(absl::StrCat("plans.json: ", where, ": a kernel's parameter"));
          }
        }
      }
      rec->plan = std::make_shared<const LaunchPlan>(*std::move(plan));
    }
    const size_t slots = rec->plan == nullptr ? 0 : rec->plan->input_nodes.size();
    const json& bindings = array_field(b_, j, "bindings", where);
    if (bindings.size() != slots) {
      throw b_.error(absl::StrCat("plans.json: ", where, ": one binding per plan input"));
    }
    for (const json& binding : bindings) {
      InputBinding in;
      if (binding.contains("arg")) {
        in.arg = below(field<int>(b_, binding, "arg", where), args, where);
      } else {
        in.fixed = constant(field<int>(b_, binding, "constant", where), rec->device, where);
      }
      rec->inputs.push_back(std::move(in));
    }
    for (const json& t : array_field(b_, j, "output_types", where)) {
      rec->output_types.push_back(value_type(b_, t, where));
    }
    if (rec->output_types.size() != (rec->plan == nullptr ? 0 : rec->plan->outputs.size())) {
      throw b_.error(absl::StrCat("plans.json: ", where, ": one type per plan output"));
    }
    for (const json& out : array_field(b_, j, "outputs", where)) {
      OutputSource src;
      if (out.contains("plan_output")) {
        src.plan_output = below(field<int>(b_, out, "plan_output", where),
                                static_cast<int64_t>(rec->output_types.size()), where);
      } else if (out.contains("arg")) {
        src.arg = below(field<int>(b_, out, "arg", where), args, where);
      } else {
        const ops::ValueType t = value_type(b_, out, where);
        auto buffer = constant(field<int>(b_, out, "constant", where), rec->device, where);
        if (buffer->nbytes() != storage_bytes(t.dtype, ops::numel(t.shape))) {
          throw b_.error(absl::StrCat("plans.json: ", where, ": a constant output's size"));
        }
        if (place_) src.fixed = realized_on(t, buffer, rec->device);
      }
      rec->outputs.push_back(std::move(src));
    }
    place_ = placing;
    if (!usable) rec = nullptr;
    return {std::move(sig), std::move(rec)};
  }

 private:
  int below(int value, int64_t bound, const std::string& where) const {
    if (value < 0 || value >= bound)
      throw b_.error(absl::StrCat("plans.json: ", where, ": an index"));
    return value;
  }

  // Constant k in `device`'s memory (copied there once per device).
  std::shared_ptr<base::Buffer> constant(int k, Device device, const std::string& where) {
    below(k, static_cast<int64_t>(constants_.size()), where);
    if (device.type == DeviceType::CPU || !place_) return constants_[k];
    auto [it, added] = placed_.try_emplace({k, device.index});
    if (added) it->second = place_on(constants_[k], device);
    return it->second;
  }

  const BundleFiles& b_;
  const std::vector<std::shared_ptr<const KernelProgram>>& programs_;
  const std::vector<std::shared_ptr<base::Buffer>>& constants_;
  bool place_;
  std::map<std::pair<int, int>, std::shared_ptr<base::Buffer>> placed_;
};

struct CodeEntry {
  DeviceType device;
  std::string target, kernel;
  const std::string* key;
  const std::string* code;
};

std::vector<CodeEntry> read_machine_code(const BundleFiles& b) {
  std::vector<CodeEntry> out;
  const json& table = array_field(b, b.plans, "machine_code", "the bundle");
  for (size_t i = 0; i < table.size(); ++i) {
    const std::string where = absl::StrCat("machine code ", i);
    const int type = field<int>(b, table[i], "device_type", where);
    if (type != static_cast<int>(DeviceType::CPU) && type != static_cast<int>(DeviceType::CUDA)) {
      throw b.error(absl::StrCat("plans.json: ", where, ": an unknown device"));
    }
    out.push_back({static_cast<DeviceType>(type), field<std::string>(b, table[i], "target", where),
                   field<std::string>(b, table[i], "kernel", where),
                   &b.file(field<std::string>(b, table[i], "key_file", where)),
                   &b.file(field<std::string>(b, table[i], "code_file", where))});
  }
  return out;
}

// Whether `entry` was built for what this machine's device runs.
bool fits_here(const CodeEntry& entry) {
  const MachineCodeStore* store = machine_code_store(entry.device);
  return store != nullptr && store->target() == entry.target;
}

std::vector<Tensor> no_fallback(const std::string& dir, const std::vector<Tensor>& inputs,
                                const std::string& held) {
  throw Error(absl::StrCat("[load_compiled] the bundle ", dir,
                           " holds no recording for the input signature ",
                           describe_signature(signature_of(inputs)), "; it holds ", held,
                           ". Pass load_compiled a fallback function to record new signatures."));
}

}  // namespace

absl::StatusOr<std::string> describe_bundle(const std::string& dir) {
  try {
    std::string mismatch;
    json manifest = read_manifest(dir, &mismatch);
    if (!mismatch.empty()) return absl::FailedPreconditionError(mismatch);
    const BundleFiles b = read_files(dir, std::move(manifest));
    const auto programs = read_programs(b);
    const auto constants = read_constants(b);
    int64_t constant_bytes = 0;
    for (const auto& c : constants) constant_bytes += c->nbytes();
    std::string out = absl::StrCat("bundle ", dir, ": format ", kBundleFormat, " version ",
                                   kBundleVersion, ", written by Kiln ", kKilnVersion, "\n");
    absl::StrAppend(&out, programs.size(), " kernels, ", constants.size(), " captured tensors (",
                    constant_bytes, " bytes)\n");
    RecordingReader reader(b, programs, constants, /*place=*/false);
    const json& signatures = array_field(b, b.plans, "signatures", "the bundle");
    for (size_t i = 0; i < signatures.size(); ++i) {
      auto [sig, rec] = reader.read(signatures[i], i);
      absl::StrAppend(&out, "signature ", i, ": ", describe_signature(sig), " on ",
                      device_name(rec->device), ", ", rec->outputs.size(), " outputs\n");
      if (rec->plan == nullptr) continue;
      for (const PlannedKernel& k : rec->plan->kernels) {
        absl::StrAppend(&out, "  kernel ", k.program->name, " [", anchor_name(k.program->anchor),
                        "]\n");
      }
    }
    std::map<std::pair<std::string, bool>, int> code;
    for (const CodeEntry& e : read_machine_code(b)) {
      code[{absl::StrCat(e.device == DeviceType::CPU ? "cpu" : "cuda", " (", e.target, ")"),
            fits_here(e)}] += 1;
    }
    for (const auto& [target, count] : code) {
      absl::StrAppend(&out, "machine code: ", count, " kernels for ", target.first,
                      target.second ? ", fits this machine\n" : ", not for this machine\n");
    }
    if (code.empty()) absl::StrAppend(&out, "machine code: none\n");
    return out;
  } catch (const Error& e) {
    return absl::InvalidArgumentError(e.what());
  }
}

// `plan` with each kernel's program replaced by the one the kernel cache shares.
std::shared_ptr<const LaunchPlan> with_shared_programs(
    const LaunchPlan& plan,
    std::map<const KernelProgram*, std::shared_ptr<const KernelProgram>>& shared) {
  auto out = std::make_shared<LaunchPlan>(plan);
  for (PlannedKernel& k : out->kernels) {
    std::shared_ptr<const KernelProgram>& s = shared[k.program.get()];
    if (s == nullptr) s = share_program(*k.program);
    k.program = s;
  }
  return out;
}

std::vector<BundleRecording> read_bundle_recordings(const std::string& dir) {
  std::string mismatch;
  json manifest = read_manifest(dir, &mismatch);
  if (!mismatch.empty()) throw Error(absl::StrCat("[load_compiled] bundle ", dir, ": ", mismatch));
  const BundleFiles b = read_files(dir, std::move(manifest));
  // Everything is read and checked before anything in the process changes.
  const auto programs = read_programs(b);
  const auto constants = read_constants(b);
  const std::vector<CodeEntry> code = read_machine_code(b);
  RecordingReader reader(b, programs, constants, /*place=*/true);
  std::vector<BundleRecording> recordings;
  const json& signatures = array_field(b, b.plans, "signatures", "the bundle");
  for (size_t i = 0; i < signatures.size(); ++i) {
    auto [sig, rec] = reader.read(signatures[i], i);
    if (rec != nullptr) recordings.push_back({std::move(sig), std::move(rec)});
  }
  std::map<const KernelProgram*, std::shared_ptr<const KernelProgram>> shared;
  for (BundleRecording& r : recordings) {
    if (r.recording->plan != nullptr) {
      r.recording->plan = with_shared_programs(*r.recording->plan, shared);
    }
  }
  for (const CodeEntry& e : code) {
    if (!fits_here(e)) continue;  // another instruction set: those kernels run uncompiled
    absl::Status installed = machine_code_store(e.device)->install({*e.key, *e.code});
    if (!installed.ok()) {  // no cache folder, say: the kernel compiles as it would have
      std::fprintf(stderr, "kiln: bundle %s: kernel %s not installed: %s\n", dir.c_str(),
                   e.kernel.c_str(), std::string(installed.message()).c_str());
    }
  }
  // The captured weights prepared as the kernels read them (the CPU GEMM's packed copies),
  // so the first call runs as fast as a warm one.
  for (const BundleRecording& r : recordings) {
    const Recording& rec = *r.recording;
    if (rec.plan == nullptr || !device_usable(rec.device).ok()) continue;
    PlanArguments bound;
    for (const InputBinding& in : rec.inputs) bound.inputs.push_back(in.fixed);
    bound.params = rec.params;
    backend_for(rec.device).prepare(*rec.plan, bound);
  }
  return recordings;
}

}  // namespace jit

void save_compiled(const Compiled& f, const std::string& dir) {
  namespace fs = std::filesystem;
  std::vector<std::pair<jit::Signature, std::shared_ptr<const jit::Recording>>> recordings;
  {
    std::lock_guard<std::mutex> lock(f.state_->mutex);
    for (const jit::Signature& sig : f.state_->order) {
      const auto it = f.state_->recordings.find(sig);
      if (it != f.state_->recordings.end() && it->second->replayable) {
        recordings.emplace_back(sig, it->second);
      }
    }
  }
  if (recordings.empty()) {
    throw Error(absl::StrCat("[save_compiled] ", dir,
                             ": the function has recorded no replayable signature yet; call it "
                             "with each input signature to deploy first"));
  }
  jit::BundleWriter writer(dir);
  nlohmann::json signatures = nlohmann::json::array();
  for (const auto& [sig, rec] : recordings) signatures.push_back(writer.signature(sig, *rec));
  // Beside `dir` ("out/b/" is out/b), under a name of this process and call alone.
  static std::atomic<int64_t> saves{0};
  fs::path target = fs::path(dir).lexically_normal();
  if (target.filename().empty()) target = target.parent_path();
  const fs::path staging =
      fs::path(target).concat(absl::StrCat(".partial-", ::getpid(), "-", saves.fetch_add(1)));
  std::error_code error;
  fs::remove_all(staging, error);
  if (!fs::create_directories(staging, error) || error) {
    throw Error(
        absl::StrCat("[save_compiled] cannot create ", staging.string(), ": ", error.message()));
  }
  try {
    const nlohmann::json manifest = writer.write(staging.string(), std::move(signatures));
    absl::Status written = base::write_file_atomically(
        (staging / "bundle.json").string(), [&](std::ostream& out) { out << manifest.dump(1); });
    if (!written.ok()) throw Error(absl::StrCat("[save_compiled] ", written.message()));
  } catch (...) {
    fs::remove_all(staging, error);
    throw;
  }
  jit::move_into_place(staging, target);
}

Compiled load_compiled(const std::string& dir, Fn fallback) {
  std::string mismatch;
  jit::read_manifest(dir, &mismatch);
  if (!mismatch.empty()) {
    if (!fallback) throw Error(absl::StrCat("[load_compiled] bundle ", dir, ": ", mismatch));
    std::fprintf(stderr, "kiln: bundle %s: %s; recording with the fallback instead\n", dir.c_str(),
                 mismatch.c_str());
    return compile(std::move(fallback));
  }
  std::vector<jit::BundleRecording> recordings = jit::read_bundle_recordings(dir);
  if (!fallback) {
    std::vector<std::string> held;
    held.reserve(recordings.size());
    for (const jit::BundleRecording& r : recordings) {
      held.push_back(jit::describe_signature(r.signature));
    }
    fallback = [dir, held = absl::StrJoin(held, ", ")](const std::vector<Tensor>& inputs) {
      return jit::no_fallback(dir, inputs, held);
    };
  }
  CompileOptions options;
  options.max_signatures = std::max(options.max_signatures, recordings.size());
  Compiled f(std::move(fallback), options);
  for (jit::BundleRecording& r : recordings) f.state_->add(r.signature, std::move(r.recording));
  return f;
}

}  // namespace kiln
