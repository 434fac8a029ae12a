// .npy reading and writing, with hand-made bad files.
#include <filesystem>
#include <fstream>

#include "jit/formats/npy_file.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

class NpyTest : public testing::ScratchDirTest {
 protected:
  void write_raw(const std::string& name, const std::string& bytes) const {
    std::ofstream(path(name), std::ios::binary) << bytes;
  }
  // A version 1.0 file with the given header dict and data bytes.
  std::string npy(const std::string& dict, const std::string& data) const {
    std::string header = dict;
    while ((10 + header.size() + 1) % 64 != 0) header += ' ';
    header += '\n';
    std::string out = std::string("\x93NUMPY\x01\x00", 8);
    out += static_cast<char>(header.size() & 0xff);
    out += static_cast<char>(header.size() >> 8);
    return out + header + data;
  }
};

TEST_F(NpyTest, RoundTripsEveryDtype) {
  std::mt19937_64 rng(testing::test_seed());
  std::vector<float> v = testing::random_floats(12, rng);
  for (DType dt : kAllDTypes) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor t = (Tensor::from_vector(v, {3, 4}) * 10.0).astype(dt);
    save_npy(path("t.npy"), t);
    Tensor back = load_npy(path("t.npy"));
    // bf16 and the 8-bit floats travel as f32 (numpy has neither); the values are exact.
    const bool widened = dt == DType::BF16 || dt == DType::F8E4M3 || dt == DType::F8E5M2;
    EXPECT_EQ(back.dtype(), widened ? DType::F32 : dt);
    EXPECT_EQ(back.shape(), t.shape());
    EXPECT_EQ(testing::values(back), testing::values(t));
  }
  save_npy(path("s.npy"), Tensor::full({}, 3.5));
  EXPECT_EQ(load_npy(path("s.npy")).item(), 3.5);
  save_npy(path("v.npy"), Tensor::arange(3, DType::I64));
  EXPECT_EQ(load_npy(path("v.npy")).shape(), (std::vector<int64_t>{3}));
  save_npy(path("e.npy"), Tensor::zeros({0, 2}));
  EXPECT_EQ(load_npy(path("e.npy")).shape(), (std::vector<int64_t>{0, 2}));
}

TEST_F(NpyTest, ReadsAFileWrittenByHand) {
  std::string data(8, '\0');
  float values[2] = {1.5f, -2.0f};
  std::memcpy(data.data(), values, 8);
  write_raw("a.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", data));
  EXPECT_EQ(load_npy(path("a.npy")).to_vector<float>(), (std::vector<float>{1.5f, -2.0f}));
}

// numpy's own spellings of the narrow integers: one-byte types take '|', i16 is little-endian.
TEST_F(NpyTest, ReadsNarrowIntegersWrittenByHand) {
  write_raw("i1.npy", npy("{'descr': '|i1', 'fortran_order': False, 'shape': (3,), }",
                          std::string("\x80\x05\xff", 3)));
  EXPECT_EQ(load_npy(path("i1.npy")).to_vector<int8_t>(), (std::vector<int8_t>{-128, 5, -1}));
  write_raw("u1.npy", npy("{'descr': '|u1', 'fortran_order': False, 'shape': (2,), }",
                          std::string("\xff\x07", 2)));
  EXPECT_EQ(load_npy(path("u1.npy")).to_vector<uint8_t>(), (std::vector<uint8_t>{255, 7}));
  write_raw("i2.npy", npy("{'descr': '<i2', 'fortran_order': False, 'shape': (2,), }",
                          std::string("\xd4\xfe\x01\x02", 4)));
  EXPECT_EQ(load_npy(path("i2.npy")).to_vector<int16_t>(), (std::vector<int16_t>{-300, 513}));
}

TEST_F(NpyTest, RejectsBadFiles) {
  const std::string ok_dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  std::vector<std::pair<std::string, std::string>> bad = {
      {"magic", "NOTNUMPY" + std::string(100, ' ')},
      {"truncated preamble", std::string("\x93NUMPY\x01", 7)},
      {"truncated header", std::string("\x93NUMPY\x01\x00\xff\x00{'descr'", 18)},
      {"version 9", std::string("\x93NUMPY\x09\x00\x10\x00", 10) + std::string(16, ' ')},
      {"huge header", std::string("\x93NUMPY\x02\x00\xff\xff\xff\x7f", 12)},
      {"truncated data", npy(ok_dict, std::string(7, '\0'))},
      {"extra data", npy(ok_dict, std::string(9, '\0'))},
      {"fortran",
       npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", std::string(8, '\0'))},
      {"big endian",
       npy("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", std::string(8, '\0'))},
      {"complex",
       npy("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", std::string(8, '\0'))},
      {"bad shape", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }", "")},
      {"no shape", npy("{'descr': '<f4', 'fortran_order': False, }", "")},
      {"unterminated", npy("{'descr': '<f4", "")},
      {"overflow",
       npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000, 1000000000000), }",
           "")},
  };
  for (const auto& [what, bytes] : bad) {
    SCOPED_TRACE(what);
    write_raw("bad.npy", bytes);
    testing::expect_error([&] { load_npy(path("bad.npy")); }, {"[load_npy]", "bad.npy"});
  }
  testing::expect_error([&] { load_npy(path("missing.npy")); }, {"cannot open"});
}

TEST_F(NpyTest, AFailedWriteLeavesTheOldFile) {
  save_npy(path("keep.npy"), Tensor::ones({2}));
  EXPECT_THROW(save_npy((dir_ / "no_such_dir" / "x.npy").string(), Tensor::ones({2})), Error);
  EXPECT_EQ(load_npy(path("keep.npy")).to_vector<float>(), (std::vector<float>{1, 1}));
}

}  // namespace
}  // namespace kiln
