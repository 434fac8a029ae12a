// Reading and writing tensors as numpy .npy files (format versions 1.0-3.0, little-endian,
// C order). BF16 has no numpy dtype: it is written as '<f4' (exactly) and read back from it.
#ifndef KILN_IO_H_
#define KILN_IO_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kiln/tensor.h"

namespace kiln {

Tensor load_npy(const std::string& path);
void save_npy(const std::string& path, const Tensor& t);  // sync point

// .safetensors (dtypes BOOL I32 I64 F16 BF16 F32 F64): the file is mapped and every header
// entry is checked (dtype, shape, ranges inside the data, sizes, no overlaps or holes, a
// header under 100 MB) before any data is read; a bad file throws kiln::Error naming it.
std::map<std::string, Tensor> load_safetensors(const std::string& path);
// Part `part` of `parts` equal slices along `axis` of the tensor `name`, reading from the
// file only the header and that slice's bytes (one read per contiguous run): how each rank
// of a tensor-parallel group loads its shard of a weight (kiln/distributed.h).
Tensor load_safetensors_shard(const std::string& path, const std::string& name, int axis, int part,
                              int parts);
// The header's "__metadata__": the free-form strings a writer stored beside the tensors
// (Hugging Face's {"format": "pt"}); empty when the file has none. The header is checked as
// load_safetensors checks it, and a metadata value that is not a string is an error naming it.
std::map<std::string, std::string> load_safetensors_metadata(const std::string& path);
// Writes through a temporary file renamed into place (a sync point for the tensors), with
// `metadata` as the header's "__metadata__" when it is not empty.
void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// GGUF files (llama.cpp's format, versions 2 and 3; docs/io.md).
//
// One metadata value, typed as the file stores it: GGUF's twelve scalar types, strings and
// arrays (of one element type, arrays of arrays included). Reading it as another kind is a
// kiln::Error naming the stored type.
class GgufValue {
 public:
  enum class Type {  // GGUF's numbering
    kU8 = 0,
    kI8 = 1,
    kU16 = 2,
    kI16 = 3,
    kU32 = 4,
    kI32 = 5,
    kF32 = 6,
    kBool = 7,
    kString = 8,
    kArray = 9,
    kU64 = 10,
    kI64 = 11,
    kF64 = 12,
  };

  GgufValue() = default;  // a u32 holding 0
  // An integer of an integer type (or kBool: 0 or 1); throws if `value` does not fit it. A
  // u64 past INT64_MAX is made with integer_u64.
  static GgufValue integer(Type type, int64_t value);
  static GgufValue integer_u64(uint64_t value);
  static GgufValue floating(Type type, double value);  // kF32 (rounded to f32) or kF64
  static GgufValue string(std::string value);
  // An array whose elements all have `element_type` (the array's own type when empty).
  static GgufValue array(Type element_type, std::vector<GgufValue> elements);

  Type type() const { return type_; }
  Type element_type() const;  // of an array
  int64_t as_int() const;     // integers and bool; a u64 past INT64_MAX is an error
  uint64_t as_u64() const;    // non-negative integers
  double as_double() const;   // floats and integers
  bool as_bool() const;
  const std::string& as_string() const;
  const std::vector<GgufValue>& as_array() const;

  friend bool operator==(const GgufValue& a, const GgufValue& b);

 private:
  Type type_ = Type::kU32;
  Type element_type_ = Type::kU32;
  uint64_t bits_ = 0;  // integers (two's complement) and bool
  double float_ = 0;
  std::string string_;
  std::vector<GgufValue> array_;
};

// "u8", "f32", "string", "array", ...
const char* gguf_type_name(GgufValue::Type type);

struct GgufFile {
  std::map<std::string, GgufValue> metadata;  // typed values and arrays, as stored
  // Row-major shapes (ggml's ne reversed), dtypes as stored: F32 F16 BF16 F64 I8 I16 I32
  // I64 and the block formats Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q4_K Q5_K Q6_K (astype to f32 reads
  // them). On the CPU the data is mapped, not copied: memory grows only with what is read.
  std::map<std::string, Tensor> tensors;
};

// Checks every header field against the file before any tensor byte is read; a malformed
// file is a kiln::Error naming the path, the byte offset and what was expected there.
GgufFile load_gguf(const std::string& path, Device device = default_device());
// Writes GGUF version 3: metadata and tensors in name order, each tensor's data at a multiple
// of general.alignment (a u32 power of two; 32 when absent), through a temporary file
// renamed into place (a sync point for the tensors). A dtype GGUF has no type for (bool, u8,
// the 8-bit floats) is an error naming the tensor.
void save_gguf(const std::string& path, const GgufFile& file);

}  // namespace kiln

#endif  // KILN_IO_H_
