// GGUF files (llama.cpp's ggml format, versions 2 and 3; little-endian):
//   "GGUF" | u32 version | u64 tensor count | u64 metadata count
//   metadata: string key | u32 value type | value      (strings: u64 length | bytes;
//                                                       arrays: u32 type | u64 count | values)
//   tensor infos: string name | u32 n_dims | u64 ne[n_dims] | u32 ggml type | u64 offset
//   padding to general.alignment (default 32) | data (each offset a multiple of it)
// ggml's ne lists the fastest-moving dimension first: Kiln's row-major shape is ne reversed.
// The reader checks every field against the file's size before it allocates or reads
// anything the field sizes, and maps the file so that tensors are views of its pages.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/atomic_file.h"
#include "jit/backend/backend.h"
#include "jit/formats/mapped_file.h"
#include "jit/graph/node.h"
#include "kiln/error.h"
#include "kiln/io.h"
#include "ops/value_type.h"

namespace kiln {
namespace {

using Type = GgufValue::Type;

constexpr char kMagic[4] = {'G', 'G', 'U', 'F'};
constexpr uint32_t kDefaultAlignment = 32;
constexpr uint32_t kMaxDims = 4;     // GGML_MAX_DIMS
constexpr size_t kMaxName = 64;      // GGML_MAX_NAME, its terminating zero included
constexpr int kMaxArrayNesting = 8;  // arrays of arrays, far past any real file's depth

// ggml's tensor types, by the number files store. Those Kiln reads map to a dtype; the
// others are named in the error that refuses them.
struct GgmlType {
  uint32_t id;
  const char* name;
  std::optional<DType> dtype;
};
constexpr GgmlType kGgmlTypes[] = {
    {0, "F32", DType::F32},    {1, "F16", DType::F16},    {2, "Q4_0", DType::Q4_0},
    {3, "Q4_1", DType::Q4_1},  {6, "Q5_0", DType::Q5_0},  {7, "Q5_1", DType::Q5_1},
    {8, "Q8_0", DType::Q8_0},  {9, "Q8_1", {}},           {10, "Q2_K", {}},
    {11, "Q3_K", {}},          {12, "Q4_K", DType::Q4_K}, {13, "Q5_K", DType::Q5_K},
    {14, "Q6_K", DType::Q6_K}, {15, "Q8_K", {}},          {16, "IQ2_XXS", {}},
    {17, "IQ2_XS", {}},        {18, "IQ3_XXS", {}},       {19, "IQ1_S", {}},
    {20, "IQ4_NL", {}},        {21, "IQ3_S", {}},         {22, "IQ2_S", {}},
    {23, "IQ4_XS", {}},        {24, "I8", DType::I8},     {25, "I16", DType::I16},
    {26, "I32", DType::I32},   {27, "I64", DType::I64},   {28, "F64", DType::F64},
    {29, "IQ1_M", {}},         {30, "BF16", DType::BF16}, {34, "TQ1_0", {}},
    {35, "TQ2_0", {}},         {39, "MXFP4", {}},
};

constexpr const char* kReadTypes =
    "F32 F16 BF16 F64 I8 I16 I32 I64 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q4_K Q5_K Q6_K";

const GgmlType* ggml_type(uint32_t id) {
  for (const GgmlType& t : kGgmlTypes) {
    if (t.id == id) return &t;
  }
  return nullptr;
}

const GgmlType* ggml_type_of(DType dt) {
  for (const GgmlType& t : kGgmlTypes) {
    if (t.dtype == dt) return &t;
  }
  return nullptr;
}

// Reads little-endian fields from the mapped bytes, each checked against the end of the
// file; a failure names the offset it happened at.
class Reader {
 public:
  Reader(const unsigned char* bytes, uint64_t size, const std::string& path)
      : bytes_(bytes), size_(size), path_(path) {}

  uint64_t offset() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }

  Error fail(uint64_t at, const std::string& what) const {
    return Error(absl::StrCat("[load_gguf] ", path_, ": at byte ", at, ": ", what));
  }

  const unsigned char* take(uint64_t n, const char* what) {
    if (n > left()) {
      throw fail(pos_, absl::StrCat("expected ", what, " (", n,
                                    " bytes), but the file ends at byte ", size_));
    }
    const unsigned char* p = bytes_ + pos_;
    pos_ += n;
    return p;
  }

  template <class T>
  T scalar(const char* what) {
    T v;
    std::memcpy(&v, take(sizeof(T), what), sizeof(T));
    return v;
  }

  std::string string(const char* what) {
    const uint64_t at = pos_;
    const auto length = scalar<uint64_t>(what);
    if (length > left()) {
      throw fail(at, absl::StrCat(what, " of ", length, " bytes runs past the end of the file (",
                                  left(), " bytes left)"));
    }
    const unsigned char* p = take(length, what);
    return std::string(reinterpret_cast<const char*>(p), length);
  }

  // A count of items that each take at least `min_bytes`: more than the rest of the file
  // could hold is an error, before anything is allocated for them.
  uint64_t count(const char* what, uint64_t min_bytes) {
    const uint64_t at = pos_;
    const auto n = scalar<uint64_t>(what);
    if (min_bytes > 0 && n > left() / min_bytes) {
      throw fail(at, absl::StrCat(what, " ", n, " is more than the ", left(),
                                  " bytes left in the file can hold"));
    }
    return n;
  }

  GgufValue value(uint32_t type, int depth) {
    const uint64_t at = pos_;
    switch (static_cast<Type>(type)) {
      case Type::kU8:
        return GgufValue::integer(Type::kU8, scalar<uint8_t>("a u8"));
      case Type::kI8:
        return GgufValue::integer(Type::kI8, scalar<int8_t>("an i8"));
      case Type::kU16:
        return GgufValue::integer(Type::kU16, scalar<uint16_t>("a u16"));
      case Type::kI16:
        return GgufValue::integer(Type::kI16, scalar<int16_t>("an i16"));
      case Type::kU32:
        return GgufValue::integer(Type::kU32, scalar<uint32_t>("a u32"));
      case Type::kI32:
        return GgufValue::integer(Type::kI32, scalar<int32_t>("an i32"));
      case Type::kU64:
        return GgufValue::integer_u64(scalar<uint64_t>("a u64"));
      case Type::kI64:
        return GgufValue::integer(Type::kI64, scalar<int64_t>("an i64"));
      case Type::kF32:
        return GgufValue::floating(Type::kF32, scalar<float>("an f32"));
      case Type::kF64:
        return GgufValue::floating(Type::kF64, scalar<double>("an f64"));
      case Type::kBool: {
        const auto b = scalar<uint8_t>("a bool");
        if (b > 1) throw fail(at, absl::StrCat("a bool must be 0 or 1, got ", b));
        return GgufValue::integer(Type::kBool, b);
      }
      case Type::kString:
        return GgufValue::string(string("a string"));
      case Type::kArray:
        return array(depth);
    }
    throw fail(at > 4 ? at - 4 : 0,
               absl::StrCat("unknown value type ", type, " (expected 0 to 12)"));
  }

 private:
  GgufValue array(int depth) {
    const uint64_t at = pos_;
    if (depth >= kMaxArrayNesting) {
      throw fail(at, absl::StrCat("arrays nested more than ", kMaxArrayNesting, " deep"));
    }
    const auto element = scalar<uint32_t>("an array's element type");
    if (element > static_cast<uint32_t>(Type::kF64)) {
      throw fail(at, absl::StrCat("unknown array element type ", element, " (expected 0 to 12)"));
    }
    const uint64_t n = count("an array's length", min_bytes(static_cast<Type>(element)));
    // A value takes far more memory than its bytes in the file: reserve for what the file
    // could hold, at most 65536, and let a longer array grow as it is read.
    std::vector<GgufValue> elements;
    elements.reserve(std::min<uint64_t>(n, 1u << 16));
    for (uint64_t i = 0; i < n; ++i) elements.push_back(value(element, depth + 1));
    return GgufValue::array(static_cast<Type>(element), std::move(elements));
  }

  // The fewest bytes a value of type `t` takes in a file.
  static uint64_t min_bytes(Type t) {
    switch (t) {
      case Type::kU8:
      case Type::kI8:
      case Type::kBool:
        return 1;
      case Type::kU16:
      case Type::kI16:
        return 2;
      case Type::kU32:
      case Type::kI32:
      case Type::kF32:
        return 4;
      case Type::kU64:
      case Type::kI64:
      case Type::kF64:
      case Type::kString:  // its length
        return 8;
      case Type::kArray:  // its element type and length
        return 12;
    }
    return 1;
  }

  const unsigned char* bytes_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const std::string& path_;
};

struct TensorInfo {
  std::string name;
  ops::ValueType type;
  uint64_t offset = 0;  // from the start of the data
  uint64_t bytes = 0;
  uint64_t info_at = 0;  // where its entry starts, for messages
};

// The alignment general.alignment asks for (a u32 power of two), else 32.
uint32_t alignment_of(const std::map<std::string, GgufValue>& metadata,
                      const std::function<Error(const std::string&)>& fail) {
  const auto it = metadata.find("general.alignment");
  if (it == metadata.end()) return kDefaultAlignment;
  if (it->second.type() != Type::kU32) {
    throw fail(absl::StrCat("general.alignment is a ", gguf_type_name(it->second.type()),
                            ", expected a u32"));
  }
  const int64_t a = it->second.as_int();
  if (a == 0 || (a & (a - 1)) != 0) {
    throw fail(absl::StrCat("general.alignment ", a, " is not a power of two"));
  }
  return static_cast<uint32_t>(a);
}

TensorInfo read_tensor_info(Reader& in) {
  TensorInfo t;
  t.info_at = in.offset();
  t.name = in.string("a tensor's name");
  const uint64_t dims_at = in.offset();
  const auto n_dims = in.scalar<uint32_t>("a tensor's dimension count");
  if (n_dims == 0 || n_dims > kMaxDims) {
    throw in.fail(dims_at, absl::StrCat("tensor '", t.name, "' has ", n_dims,
                                        " dimensions (expected 1 to ", kMaxDims, ")"));
  }
  std::vector<int64_t> ne(n_dims);
  for (uint32_t d = 0; d < n_dims; ++d) {
    const uint64_t at = in.offset();
    const auto extent = in.scalar<uint64_t>("a tensor dimension");
    if (extent > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      throw in.fail(at, absl::StrCat("tensor '", t.name, "' dimension ", extent, " is too large"));
    }
    ne[d] = static_cast<int64_t>(extent);
  }
  t.type.shape.assign(ne.rbegin(), ne.rend());
  const uint64_t type_at = in.offset();
  const auto type_id = in.scalar<uint32_t>("a tensor's ggml type");
  const GgmlType* ggml = ggml_type(type_id);
  if (ggml == nullptr) {
    throw in.fail(type_at, absl::StrCat("tensor '", t.name, "' has unknown ggml type ", type_id));
  }
  if (!ggml->dtype) {
    throw in.fail(type_at,
                  absl::StrCat("tensor '", t.name, "' has ggml type ", ggml->name, " (", type_id,
                               "), which Kiln does not read yet (it reads ", kReadTypes, ")"));
  }
  t.type.dtype = *ggml->dtype;
  const int values = block_values(t.type.dtype);
  if (ne[0] % values != 0) {
    throw in.fail(dims_at,
                  absl::StrCat("tensor '", t.name, "' of ggml type ", ggml->name, " has rows of ",
                               ne[0], " values, not whole blocks of ", values));
  }
  absl::StatusOr<int64_t> count = ops::checked_numel(t.type.shape);
  const int64_t block = block_bytes(t.type.dtype);
  if (!count.ok() || *count / values > std::numeric_limits<int64_t>::max() / block) {
    throw in.fail(dims_at, absl::StrCat("tensor '", t.name, "' of shape ",
                                        ops::format_shape(t.type.shape), " overflows 64 bits"));
  }
  t.bytes = static_cast<uint64_t>(storage_bytes(t.type.dtype, *count));
  t.offset = in.scalar<uint64_t>("a tensor's data offset");
  return t;
}

// Every tensor inside the data, at a multiple of the alignment, none overlapping another.
void check_layout(const std::vector<TensorInfo>& infos, uint64_t data_start, uint64_t data_size,
                  uint32_t alignment, const Reader& in) {
  for (const TensorInfo& t : infos) {
    if (t.offset % alignment != 0) {
      throw in.fail(t.info_at,
                    absl::StrCat("tensor '", t.name, "' starts at data offset ", t.offset,
                                 ", not a multiple of the alignment ", alignment));
    }
    if (t.offset > data_size || t.bytes > data_size - t.offset) {
      throw in.fail(t.info_at,
                    absl::StrCat("tensor '", t.name, "' (", t.bytes, " bytes at data offset ",
                                 t.offset, ") runs past the end of the file: the data holds ",
                                 data_size, " bytes from byte ", data_start));
    }
  }
  // Empty tensors hold no bytes to overlap (writers put them at the next tensor's offset).
  std::vector<const TensorInfo*> sorted;
  sorted.reserve(infos.size());
  for (const TensorInfo& t : infos) {
    if (t.bytes > 0) sorted.push_back(&t);
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < sorted.size(); ++i) {
    const TensorInfo& a = *sorted[i - 1];
    const TensorInfo& b = *sorted[i];
    if (b.offset < a.offset + a.bytes) {
      throw in.fail(b.info_at, absl::StrCat("tensor '", b.name, "' at data offset ", b.offset,
                                            " overlaps tensor '", a.name, "' (data offsets ",
                                            a.offset, " to ", a.offset + a.bytes, ")"));
    }
  }
}

uint64_t round_up(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

}  // namespace

GgufFile load_gguf(const std::string& path, Device device) {
  auto fail_file = [&](const std::string& what) -> Error {
    return Error(absl::StrCat("[load_gguf] ", path, ": ", what));
  };
  const std::shared_ptr<const jit::MappedFile> map =
      jit::MappedFile::open(path, jit::MappedFile::Access::kPrivateWritable, fail_file);
  const unsigned char* bytes = map->bytes();
  Reader in(bytes, map->size(), path);

  const unsigned char* magic = in.take(4, "the magic \"GGUF\"");
  if (std::memcmp(magic, kMagic, 4) != 0) throw in.fail(0, "expected the magic \"GGUF\"");
  const auto version = in.scalar<uint32_t>("the version");
  if (version != 2 && version != 3) {
    throw in.fail(4, absl::StrCat("version ", version, " (expected 2 or 3)"));
  }
  // A tensor's entry takes 24 bytes at least, a metadata entry 13.
  const uint64_t tensor_count = in.count("the tensor count", 24);
  const uint64_t metadata_count = in.count("the metadata count", 13);

  GgufFile file;
  for (uint64_t i = 0; i < metadata_count; ++i) {
    const uint64_t at = in.offset();
    std::string key = in.string("a metadata key");
    const auto type = in.scalar<uint32_t>("a metadata value type");
    GgufValue value = in.value(type, 0);
    if (!file.metadata.emplace(std::move(key), std::move(value)).second) {
      throw in.fail(at, "a metadata key appears twice");
    }
  }
  const uint32_t alignment =
      alignment_of(file.metadata, [&](const std::string& what) { return fail_file(what); });

  std::vector<TensorInfo> infos;
  infos.reserve(tensor_count);
  std::set<std::string> names;
  for (uint64_t i = 0; i < tensor_count; ++i) {
    infos.push_back(read_tensor_info(in));
    if (!names.insert(infos.back().name).second) {
      throw in.fail(infos.back().info_at,
                    absl::StrCat("tensor '", infos.back().name, "' appears twice"));
    }
  }
  const uint64_t data_start = std::min<uint64_t>(round_up(in.offset(), alignment), map->size());
  const uint64_t data_size = map->size() - data_start;
  check_layout(infos, data_start, data_size, alignment, in);

  for (const TensorInfo& t : infos) {
    const unsigned char* at = bytes + data_start + t.offset;
    std::shared_ptr<base::Buffer> buffer;
    const auto address = reinterpret_cast<uintptr_t>(at);
    // Blocks hold 16-bit scales at any byte: only element dtypes need alignment.
    const int64_t alignment_needed = std::max(1, dtype_size(t.type.dtype));
    if (t.bytes > 0 && address % alignment_needed == 0) {
      // The file's own pages: the buffer keeps the mapping alive.
      buffer = std::make_shared<base::Buffer>(
          const_cast<std::byte*>(reinterpret_cast<const std::byte*>(at)),
          static_cast<int64_t>(t.bytes), [map] {});
    } else {  // empty, or misaligned under a small general.alignment: a copy
      buffer = std::make_shared<base::Buffer>(static_cast<int64_t>(t.bytes));
      if (t.bytes > 0) std::memcpy(buffer->data(), at, t.bytes);
    }
    file.tensors[t.name] = jit::realized_on(t.type, buffer, device);
  }
  return file;
}

namespace {

// Little-endian fields of a GGUF file, appended to a string.
class Writer {
 public:
  std::string bytes;

  template <class T>
  void scalar(T v) {
    bytes.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void string(const std::string& s) {
    scalar<uint64_t>(s.size());
    bytes += s;
  }
  void value(const GgufValue& v) {
    switch (v.type()) {
      case Type::kU8:
        return scalar(static_cast<uint8_t>(v.as_int()));
      case Type::kI8:
        return scalar(static_cast<int8_t>(v.as_int()));
      case Type::kU16:
        return scalar(static_cast<uint16_t>(v.as_int()));
      case Type::kI16:
        return scalar(static_cast<int16_t>(v.as_int()));
      case Type::kU32:
        return scalar(static_cast<uint32_t>(v.as_int()));
      case Type::kI32:
        return scalar(static_cast<int32_t>(v.as_int()));
      case Type::kU64:
        return scalar(v.as_u64());
      case Type::kI64:
        return scalar(v.as_int());
      case Type::kF32:
        return scalar(static_cast<float>(v.as_double()));
      case Type::kF64:
        return scalar(v.as_double());
      case Type::kBool:
        return scalar(static_cast<uint8_t>(v.as_bool() ? 1 : 0));
      case Type::kString:
        return string(v.as_string());
      case Type::kArray:
        scalar(static_cast<uint32_t>(v.element_type()));
        scalar<uint64_t>(v.as_array().size());
        for (const GgufValue& e : v.as_array()) value(e);
        return;
    }
  }
  void pad_to(uint64_t alignment) { bytes.resize(round_up(bytes.size(), alignment), '\0'); }
};

}  // namespace

void save_gguf(const std::string& path, const GgufFile& file) {
  auto fail = [&](const std::string& what) -> Error {
    return Error(absl::StrCat("[save_gguf] ", path, ": ", what));
  };
  const uint32_t alignment = alignment_of(file.metadata, fail);
  std::vector<Tensor> all;
  for (const auto& [name, t] : file.tensors) {
    if (!t.defined()) throw fail(absl::StrCat("tensor '", name, "' is empty (undefined)"));
    if (ggml_type_of(t.dtype()) == nullptr) {
      throw fail(absl::StrCat("tensor '", name, "' is ", dtype_name(t.dtype()),
                              ", which GGUF has no type for (", kReadTypes, " do)"));
    }
    if (name.size() >= kMaxName) {
      throw fail(absl::StrCat("tensor name '", name, "' has ", name.size(),
                              " bytes; llama.cpp reads names of at most ", kMaxName - 1));
    }
    if (t.ndim() > static_cast<int>(kMaxDims)) {
      throw fail(absl::StrCat("tensor '", name, "' has ", t.ndim(), " dimensions (GGUF holds ",
                              kMaxDims, " at most)"));
    }
    all.push_back(t);
  }
  eval(all);
  Writer w;
  w.bytes.append(kMagic, 4);
  w.scalar<uint32_t>(3);
  w.scalar<uint64_t>(file.tensors.size());
  w.scalar<uint64_t>(file.metadata.size());
  for (const auto& [key, value] : file.metadata) {
    w.string(key);
    w.scalar(static_cast<uint32_t>(value.type()));
    w.value(value);
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : file.tensors) {
    w.string(name);
    // A 0-d tensor is stored as one element of one dimension (ggml has no 0-d tensors).
    std::vector<int64_t> ne(t.shape().rbegin(), t.shape().rend());
    if (ne.empty()) ne.push_back(1);
    w.scalar<uint32_t>(ne.size());
    for (int64_t d : ne) w.scalar<uint64_t>(d);
    w.scalar(ggml_type_of(t.dtype())->id);
    w.scalar(offset);
    offset += round_up(storage_bytes(t.dtype(), t.numel()), alignment);
  }
  w.pad_to(alignment);
  absl::Status written = base::write_file_atomically(path, [&](std::ostream& out) {
    out.write(w.bytes.data(), static_cast<std::streamsize>(w.bytes.size()));
    const std::string zeros(alignment, '\0');
    for (const auto& [name, t] : file.tensors) {
      const std::shared_ptr<const base::Buffer> b =
          jit::host_view(detail::TensorAccess::node(t)->buffer);
      const int64_t size = storage_bytes(t.dtype(), t.numel());
      out.write(reinterpret_cast<const char*>(b->data()), size);
      out.write(zeros.data(), static_cast<std::streamsize>(round_up(size, alignment) - size));
    }
  });
  if (!written.ok()) throw fail(std::string(written.message()));
}

}  // namespace kiln
