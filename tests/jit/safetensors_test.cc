// .safetensors through the public API, with hand-made bad files.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>

#include "tests/test_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

class SafetensorsTest : public testing::ScratchDirTest {
 protected:
  // A file with `header` (JSON text) and `data` bytes; `claimed` overrides the length field.
  void write(const std::string& name, const std::string& header, const std::string& data,
             int64_t claimed = -1) const {
    uint64_t length = claimed >= 0 ? static_cast<uint64_t>(claimed) : header.size();
    std::string bytes(8, '\0');
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((length >> (8 * i)) & 0xff);
    std::ofstream(path(name), std::ios::binary) << bytes << header << data;
  }
};

TEST_F(SafetensorsTest, RoundTripsEveryDtype) {
  std::mt19937_64 rng(testing::test_seed());
  std::map<std::string, Tensor> tensors;
  for (DType dt : kAllDTypes) {
    tensors[std::string("w_") + dtype_name(dt)] =
        (Tensor::from_vector(testing::random_floats(15, rng), {3, 5}) * 4.0).astype(dt);
  }
  tensors["scalar"] = Tensor::full({}, 2.5);
  tensors["empty"] = Tensor::zeros({0, 4});
  save_safetensors(path("m.safetensors"), tensors);
  std::map<std::string, Tensor> back = load_safetensors(path("m.safetensors"));
  ASSERT_EQ(back.size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(back.count(name));
    EXPECT_EQ(back[name].dtype(), t.dtype());
    EXPECT_EQ(back[name].shape(), t.shape());
    EXPECT_EQ(testing::values(back[name]), testing::values(t));
  }
}

TEST_F(SafetensorsTest, ReadsAFileWrittenByHand) {
  float values[3] = {1.5f, -2.0f, 0.25f};
  std::string data(reinterpret_cast<const char*>(values), sizeof values);
  write(
      "a.safetensors",
      R"({"__metadata__": {"format": "pt"}, "b": {"dtype": "F32", "shape": [3], "data_offsets": [0, 12]}})",
      data);
  auto t = load_safetensors(path("a.safetensors"));
  EXPECT_EQ(t.at("b").to_vector<float>(), (std::vector<float>{1.5f, -2.0f, 0.25f}));
}

// "__metadata__" as Hugging Face writes it, read back; written by Kiln first in the header,
// where other readers look for it; a value that is not a string is an error naming it.
TEST_F(SafetensorsTest, MetadataIsReadAndWritten) {
  float values[3] = {1.5f, -2.0f, 0.25f};
  const std::string data(reinterpret_cast<const char*>(values), sizeof values);
  const std::string tensor = R"("b": {"dtype": "F32", "shape": [3], "data_offsets": [0, 12]})";
  write("hf.safetensors", R"({"__metadata__": {"format": "pt", "n": "7"}, )" + tensor + "}", data);
  EXPECT_EQ(load_safetensors_metadata(path("hf.safetensors")),
            (std::map<std::string, std::string>{{"format", "pt"}, {"n", "7"}}));
  write("none.safetensors", "{" + tensor + "}", data);
  EXPECT_TRUE(load_safetensors_metadata(path("none.safetensors")).empty());

  const std::map<std::string, std::string> metadata{{"format", "pt"}, {"source", "kiln test"}};
  save_safetensors(path("m.safetensors"), {{"w", Tensor::ones({2, 2})}}, metadata);
  EXPECT_EQ(load_safetensors_metadata(path("m.safetensors")), metadata);
  EXPECT_EQ(load_safetensors(path("m.safetensors")).at("w").to_vector<float>(),
            (std::vector<float>{1, 1, 1, 1}));
  std::ifstream in(path("m.safetensors"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(bytes.substr(8, 16), R"({"__metadata__":)");

  write("bad.safetensors", R"({"__metadata__": {"n": 7}, )" + tensor + "}", data);
  testing::expect_error([&] { (void)load_safetensors_metadata(path("bad.safetensors")); },
                        {"[load_safetensors_metadata]", "entry 'n' is 7", "expected a string"});
  write("short.safetensors", "{" + tensor + "}", data.substr(0, 8));
  testing::expect_error([&] { (void)load_safetensors_metadata(path("short.safetensors")); },
                        {"tensor 'b'"});
}

// The 8-bit dtypes as other writers spell them: OCP codes 0x38 (1), 0x7e (448), 0xfe (-448)
// in F8_E4M3; 0x3c (1), 0x7b (57344) in F8_E5M2; two's complement I8; little-endian I16.
TEST_F(SafetensorsTest, ReadsTheNarrowDtypesWrittenByHand) {
  const std::string data("\x38\x7e\xfe\x3c\x7b\x80\x7f\xff\xd4\xfe", 10);
  write("n.safetensors",
        R"({"a": {"dtype": "F8_E4M3", "shape": [3], "data_offsets": [0, 3]},)"
        R"( "b": {"dtype": "F8_E5M2", "shape": [2], "data_offsets": [3, 5]},)"
        R"( "c": {"dtype": "I8", "shape": [2], "data_offsets": [5, 7]},)"
        R"( "d": {"dtype": "U8", "shape": [1], "data_offsets": [7, 8]},)"
        R"( "e": {"dtype": "I16", "shape": [1], "data_offsets": [8, 10]}})",
        data);
  auto t = load_safetensors(path("n.safetensors"));
  EXPECT_EQ(testing::values(t.at("a")), (std::vector<double>{1, 448, -448}));
  EXPECT_EQ(testing::values(t.at("b")), (std::vector<double>{1, 57344}));
  EXPECT_EQ(t.at("c").to_vector<int8_t>(), (std::vector<int8_t>{-128, 127}));
  EXPECT_EQ(t.at("d").to_vector<uint8_t>(), (std::vector<uint8_t>{255}));
  EXPECT_EQ(t.at("e").to_vector<int16_t>(), (std::vector<int16_t>{-300}));
}

TEST_F(SafetensorsTest, RejectsBadFiles) {
  const std::string data(16, '\x01');
  auto entry = [](const std::string& name, const std::string& dtype, const std::string& shape,
                  int begin, int end) {
    return "\"" + name + "\": {\"dtype\": \"" + dtype + "\", \"shape\": " + shape +
           ", \"data_offsets\": [" + std::to_string(begin) + ", " + std::to_string(end) + "]}";
  };
  struct Case {
    std::string what, header, data;
    int64_t claimed;
    std::string expect;
  };
  std::vector<Case> cases = {
      {"header past the end", "{}", "", 1000, "runs past the end"},
      {"oversized header", "{}", "", int64_t{200} << 20, "100 MB"},
      {"malformed JSON", "{\"a\": ", "", -1, "malformed JSON"},
      {"not an object", "[1, 2]", "", -1, "JSON object"},
      {"unknown dtype", "{" + entry("a", "U4", "[16]", 0, 16) + "}", data, -1, "unsupported dtype"},
      {"missing offsets", R"({"a": {"dtype": "F32", "shape": [4]}})", data, -1, "tensor 'a'"},
      {"range past the data", "{" + entry("a", "F32", "[8]", 0, 32) + "}", data, -1, "outside"},
      {"end before begin", "{" + entry("a", "F32", "[0]", 8, 4) + "}", data, -1, "outside"},
      {"size mismatch", "{" + entry("a", "F32", "[3]", 0, 16) + "}", data, -1, "needs 12"},
      {"overlap",
       "{" + entry("a", "F32", "[4]", 0, 16) + ", " + entry("b", "F32", "[2]", 8, 16) + "}", data,
       -1, "overlaps"},
      {"hole", "{" + entry("a", "F32", "[2]", 0, 8) + "}", data, -1, "belong to no tensor"},
      {"negative dim", "{" + entry("a", "F32", "[-4]", 0, 16) + "}", data, -1, "negative"},
      // Integers that are JSON floats out of range (their conversion was undefined behaviour,
      // which the fuzzers' UBSan build reports).
      {"float dim", R"({"a": {"dtype": "F32", "shape": [1e300], "data_offsets": [0, 16]}})", data,
       -1, "shape must be a list of integers"},
      {"float offset", R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 1e300]}})", data,
       -1, "data_offsets needs 2"},
      {"negative offset", R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [-16, 0]}})",
       data, -1, "data_offsets needs 2"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    write("bad.safetensors", c.header, c.data, c.claimed);
    testing::expect_error([&] { load_safetensors(path("bad.safetensors")); },
                          {"[load_safetensors]", "bad.safetensors", c.expect});
  }
  std::ofstream(path("short.safetensors"), std::ios::binary) << "abc";
  testing::expect_error([&] { load_safetensors(path("short.safetensors")); }, {"no header length"});
  testing::expect_error([&] { load_safetensors(path("missing.safetensors")); }, {"cannot open"});
}

}  // namespace
}  // namespace kiln
