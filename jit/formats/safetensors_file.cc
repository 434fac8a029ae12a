// .safetensors files (https://github.com/huggingface/safetensors, format of 2023):
//   u64 little-endian header length N | N bytes of JSON header | data buffer
// The header maps tensor names to {"dtype", "shape", "data_offsets": [begin, end]} (offsets
// into the data buffer), plus an optional "__metadata__" object of strings. The file is
// mapped with mmap and every range is checked before any byte is read: ranges must lie in
// the buffer, match their tensor's size, and cover the buffer without overlaps or holes.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/atomic_file.h"
#include "jit/backend/backend.h"
#include "jit/formats/mapped_file.h"
#include "jit/formats/trace_format.h"
#include "jit/graph/node.h"
#include "kiln/error.h"
#include "kiln/io.h"
#include "ops/value_type.h"

namespace kiln {
namespace {

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // the format's own limit

std::optional<DType> dtype_from_code(const std::string& code) {
  if (code == "BOOL") return DType::Bool;
  if (code == "I8") return DType::I8;
  if (code == "U8") return DType::U8;
  if (code == "I16") return DType::I16;
  if (code == "F8_E4M3") return DType::F8E4M3;
  if (code == "F8_E5M2") return DType::F8E5M2;
  if (code == "I32") return DType::I32;
  if (code == "I64") return DType::I64;
  if (code == "F16") return DType::F16;
  if (code == "BF16") return DType::BF16;
  if (code == "F32") return DType::F32;
  if (code == "F64") return DType::F64;
  return std::nullopt;
}

const char* code_of(DType dt) {
  switch (dt) {
    case DType::Bool:
      return "BOOL";
    case DType::I8:
      return "I8";
    case DType::U8:
      return "U8";
    case DType::I16:
      return "I16";
    case DType::F8E4M3:
      return "F8_E4M3";
    case DType::F8E5M2:
      return "F8_E5M2";
    case DType::I32:
      return "I32";
    case DType::I64:
      return "I64";
    case DType::F16:
      return "F16";
    case DType::BF16:
      return "BF16";
    case DType::F32:
      return "F32";
    case DType::F64:
      return "F64";
    default:  // the block formats: safetensors has no spelling for them
      return nullptr;
  }
}

struct Entry {
  std::string name;
  ops::ValueType type;
  uint64_t begin = 0, end = 0;
};

// The checked entries of a header: every range lies in the data buffer, matches its
// tensor's size, and the ranges tile the buffer. `fail` makes the error to throw.
using FailFn = std::function<Error(const std::string&)>;

std::vector<Entry> parse_header(const unsigned char* json_bytes, uint64_t header_length,
                                uint64_t data_size, const FailFn& fail) {
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(json_bytes, json_bytes + header_length);
  } catch (const nlohmann::json::exception& e) {
    throw fail(absl::StrCat("malformed JSON header: ", e.what()));
  }
  if (!header.is_object()) throw fail("the header must be a JSON object");
  std::vector<Entry> entries;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    Entry e;
    e.name = name;
    try {
      std::optional<DType> dt = dtype_from_code(info.at("dtype").get<std::string>());
      if (!dt)
        throw fail(
            absl::StrCat("tensor '", name, "': unsupported dtype ", info.at("dtype").dump()));
      e.type.dtype = *dt;
      // Integers only: converting a JSON float such as 1e300 to an integer is undefined.
      if (!jit::json_to(info.at("shape"), e.type.shape)) {
        throw fail(absl::StrCat("tensor '", name, "': shape must be a list of integers, got ",
                                info.at("shape").dump()));
      }
      std::vector<uint64_t> offsets;
      if (!jit::json_to(info.at("data_offsets"), offsets) || offsets.size() != 2)
        throw fail(absl::StrCat("tensor '", name, "': data_offsets needs 2 numbers"));
      e.begin = offsets[0];
      e.end = offsets[1];
    } catch (const nlohmann::json::exception& ex) {
      throw fail(absl::StrCat("tensor '", name, "': ", ex.what()));
    }
    absl::StatusOr<int64_t> count = ops::checked_numel(e.type.shape);
    if (!count.ok()) throw fail(absl::StrCat("tensor '", name, "': ", count.status().message()));
    if (e.end < e.begin || e.end > data_size) {
      throw fail(absl::StrCat("tensor '", name, "': data_offsets [", e.begin, ", ", e.end,
                              "] are outside the ", data_size, "-byte data buffer"));
    }
    const uint64_t want =
        static_cast<uint64_t>(*count) * static_cast<uint64_t>(dtype_size(e.type.dtype));
    if (e.end - e.begin != want) {
      throw fail(absl::StrCat("tensor '", name, "': ", e.end - e.begin, " bytes but ",
                              ops::format_type(e.type), " needs ", want));
    }
    entries.push_back(std::move(e));
  }
  // The ranges must tile the buffer: sorted, each starting where the previous ended.
  std::vector<const Entry*> sorted;
  sorted.reserve(entries.size());
  for (const Entry& e : entries) sorted.push_back(&e);
  std::sort(sorted.begin(), sorted.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t covered = 0;
  for (const Entry* e : sorted) {
    if (e->begin < covered)
      throw fail(absl::StrCat("tensor '", e->name, "' overlaps another tensor's bytes"));
    if (e->begin > covered)
      throw fail(absl::StrCat("bytes ", covered, "..", e->begin, " before tensor '", e->name,
                              "' belong to no tensor"));
    covered = e->end;
  }
  if (covered != data_size)
    throw fail(absl::StrCat("bytes ", covered, "..", data_size, " belong to no tensor"));
  return entries;
}

uint64_t little_endian_u64(const unsigned char* bytes) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | bytes[i];
  return v;
}

// Normalizes bool bytes to 0 or 1, as Kiln stores bools.
void normalize_bools(DType dtype, base::Buffer& buffer) {
  if (dtype != DType::Bool) return;
  for (int64_t i = 0; i < buffer.nbytes(); ++i)
    buffer.as<uint8_t>()[i] = buffer.as<uint8_t>()[i] != 0;
}

// Reads exactly `size` bytes at `offset`, or throws.
void read_at(int fd, void* out, uint64_t size, uint64_t offset, const FailFn& fail) {
  auto* p = static_cast<char*>(out);
  while (size > 0) {
    const ssize_t got = ::pread(fd, p, size, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) throw fail(absl::StrCat("cannot read ", size, " bytes at offset ", offset));
    p += got;
    size -= static_cast<uint64_t>(got);
    offset += static_cast<uint64_t>(got);
  }
}

struct FileDescriptor {
  int fd = -1;
  ~FileDescriptor() {
    if (fd >= 0) ::close(fd);
  }
};

// A file's header, read with pread (not mapped): its JSON bytes and where the data starts.
struct Header {
  std::vector<unsigned char> json;
  uint64_t data_start = 0, data_size = 0;
};

Header read_header(int fd, const FailFn& fail) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw fail("cannot stat");
  const auto file_size = static_cast<uint64_t>(st.st_size);
  if (file_size < 8) throw fail(absl::StrCat("file of ", file_size, " bytes has no header length"));
  unsigned char length_bytes[8];
  read_at(fd, length_bytes, 8, 0, fail);
  const uint64_t header_length = little_endian_u64(length_bytes);
  if (header_length > kMaxHeaderBytes || header_length > file_size - 8) {
    throw fail(absl::StrCat("header of ", header_length, " bytes does not fit the file"));
  }
  Header h;
  h.json.resize(header_length);
  read_at(fd, h.json.data(), header_length, 8, fail);
  h.data_start = 8 + header_length;
  h.data_size = file_size - h.data_start;
  return h;
}

}  // namespace

std::map<std::string, Tensor> load_safetensors(const std::string& path) {
  auto fail = [&](const std::string& what) -> Error {
    return Error(absl::StrCat("[load_safetensors] ", path, ": ", what));
  };
  const std::shared_ptr<const jit::MappedFile> map =
      jit::MappedFile::open(path, jit::MappedFile::Access::kReadOnly, fail);
  if (map->size() < 8) {
    throw fail(absl::StrCat("file of ", map->size(), " bytes has no header length"));
  }
  const unsigned char* bytes = map->bytes();
  const uint64_t header_length = little_endian_u64(bytes);
  if (header_length > kMaxHeaderBytes) {
    throw fail(absl::StrCat("header of ", header_length, " bytes is over the 100 MB limit"));
  }
  if (header_length > map->size() - 8) {
    throw fail(absl::StrCat("header of ", header_length, " bytes runs past the end of the file"));
  }
  const uint64_t data_start = 8 + header_length;
  const std::vector<Entry> entries =
      parse_header(bytes + 8, header_length, map->size() - data_start, fail);
  std::map<std::string, Tensor> tensors;
  for (const Entry& e : entries) {
    auto buffer = std::make_shared<base::Buffer>(static_cast<int64_t>(e.end - e.begin));
    if (e.end > e.begin) std::memcpy(buffer->data(), bytes + data_start + e.begin, e.end - e.begin);
    normalize_bools(e.type.dtype, *buffer);
    tensors[e.name] = jit::realized_on(e.type, buffer, default_device());
  }
  return tensors;
}

Tensor load_safetensors_shard(const std::string& path, const std::string& name, int axis, int part,
                              int parts) {
  auto fail = [&](const std::string& what) -> Error {
    return Error(absl::StrCat("[load_safetensors_shard] ", path, " tensor '", name, "' part ", part,
                              " of ", parts, ": ", what));
  };
  if (parts < 1 || part < 0 || part >= parts) throw fail("expected 0 <= part < parts");
  FileDescriptor file;
  file.fd = ::open(path.c_str(), O_RDONLY);
  if (file.fd < 0) throw fail(absl::StrCat("cannot open (", std::strerror(errno), ")"));
  const Header header = read_header(file.fd, fail);
  const uint64_t data_start = header.data_start;
  const std::vector<Entry> entries =
      parse_header(header.json.data(), header.json.size(), header.data_size, fail);
  const auto it =
      std::find_if(entries.begin(), entries.end(), [&](const Entry& e) { return e.name == name; });
  if (it == entries.end()) throw fail("no tensor of that name in the file");
  const ops::ValueType& type = it->type;
  const int rank = static_cast<int>(type.shape.size());
  if (axis < -rank || axis >= rank) {
    throw fail(absl::StrCat(ops::format_type(type), " has no axis ", axis));
  }
  if (axis < 0) axis += rank;
  const int64_t extent = type.shape[static_cast<size_t>(axis)];
  if (extent % parts != 0) {
    throw fail(absl::StrCat(ops::format_type(type), ": axis ", axis, " (extent ", extent,
                            ") does not split evenly into ", parts, " parts"));
  }
  ops::ValueType shard = type;
  shard.shape[static_cast<size_t>(axis)] = extent / parts;
  if (ops::numel(type.shape) == 0) {  // nothing to read (and no runs to count)
    return jit::realized_on(shard, std::make_shared<base::Buffer>(0), default_device());
  }
  // The shard is `outer` runs of (extent / parts) * inner elements each: one read per run.
  // The header check bounded outer * extent * inner * esize by the file's size.
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= type.shape[static_cast<size_t>(i)];
  for (int i = axis + 1; i < rank; ++i) inner *= type.shape[static_cast<size_t>(i)];
  const int64_t esize = dtype_size(type.dtype);
  const int64_t run = extent / parts * inner * esize;
  auto buffer = std::make_shared<base::Buffer>(outer * run);
  for (int64_t o = 0; o < outer; ++o) {
    const uint64_t offset =
        data_start + it->begin + static_cast<uint64_t>(o * extent * inner * esize + part * run);
    read_at(file.fd, buffer->as<char>() + o * run, static_cast<uint64_t>(run), offset, fail);
  }
  normalize_bools(shard.dtype, *buffer);
  return jit::realized_on(shard, buffer, default_device());
}

std::map<std::string, std::string> load_safetensors_metadata(const std::string& path) {
  auto fail = [&](const std::string& what) -> Error {
    return Error(absl::StrCat("[load_safetensors_metadata] ", path, ": ", what));
  };
  FileDescriptor file;
  file.fd = ::open(path.c_str(), O_RDONLY);
  if (file.fd < 0) throw fail(absl::StrCat("cannot open (", std::strerror(errno), ")"));
  const Header header = read_header(file.fd, fail);
  (void)parse_header(header.json.data(), header.json.size(), header.data_size, fail);
  // parse_header parsed these bytes already; a failure here would be the same one.
  const nlohmann::json json =
      nlohmann::json::parse(header.json.begin(), header.json.end(), nullptr, false);
  if (json.is_discarded()) throw fail("malformed JSON header");
  std::map<std::string, std::string> metadata;
  const auto it = json.find("__metadata__");
  if (it == json.end()) return metadata;
  if (!it->is_object()) throw fail("'__metadata__' is not an object of strings");
  for (const auto& [key, value] : it->items()) {
    if (!value.is_string()) {
      throw fail(absl::StrCat("'__metadata__' entry '", key, "' is ", value.dump(),
                              ", expected a string"));
    }
    metadata[key] = value.get<std::string>();
  }
  return metadata;
}

void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  std::vector<Tensor> all;
  for (const auto& [name, t] : tensors) {
    if (!t.defined())
      throw Error(absl::StrCat("[save_safetensors] tensor '", name, "' is empty (undefined)"));
    if (name == "__metadata__") throw Error("[save_safetensors] '__metadata__' is reserved");
    if (code_of(t.dtype()) == nullptr) {
      throw Error(absl::StrCat("[save_safetensors] tensor '", name, "' is ", dtype_name(t.dtype()),
                               ", which safetensors has no dtype for (save it with save_gguf, or "
                               "astype it first)"));
    }
    all.push_back(t);
  }
  eval(all);
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    const uint64_t size =
        static_cast<uint64_t>(t.numel()) * static_cast<uint64_t>(dtype_size(t.dtype()));
    header[name] = {{"dtype", code_of(t.dtype())},
                    {"shape", t.shape()},
                    {"data_offsets", {offset, offset + size}}};
    offset += size;
  }
  std::string text = header.dump();
  while ((8 + text.size()) % 8 != 0) text.push_back(' ');  // data starts 8-byte aligned
  absl::Status written = base::write_file_atomically(path, [&](std::ostream& out) {
    const uint64_t length = text.size();
    char le[8];
    for (int i = 0; i < 8; ++i) le[i] = static_cast<char>((length >> (8 * i)) & 0xff);
    out.write(le, 8);
    out << text;
    for (const auto& [name, t] : tensors) {
      const std::shared_ptr<const base::Buffer> b =
          jit::host_view(detail::TensorAccess::node(t)->buffer);
      out.write(reinterpret_cast<const char*>(b->data()), t.numel() * dtype_size(t.dtype()));
    }
  });
  if (!written.ok()) throw Error(absl::StrCat("[save_safetensors] ", written.message()));
}

}  // namespace kiln
