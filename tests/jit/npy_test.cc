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
  for (DType dt :
       {DType::Bool, DType::I32, DType::I64, DType::F16, DType::BF16, DType::F32, DType::F64}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor t = (Tensor::from_vector(v, {3, 4}) * 10.0).astype(dt);
    save_npy(path("t.npy"), t);
    Tensor back = load_npy(path("t.npy"));
    // BF16 travels as f32 (numpy has no bfloat16); the values are exact.
    EXPECT_EQ(back.dtype(), dt == DType::BF16 ? DType::F32 : dt);
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
