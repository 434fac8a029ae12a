#include "jit/formats/npy_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/atomic_file.h"
#include "jit/backend/backend.h"
#include "jit/graph/node.h"
#include "kiln/error.h"
#include "kiln/io.h"
#include "ops/element_access.h"

namespace kiln::jit {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;
constexpr uint32_t kMaxHeaderBytes = 1 << 20;

// A tiny reader for the Python dict literal in an .npy header, e.g.
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
class HeaderParser {
 public:
  explicit HeaderParser(std::string_view text) : text_(text) {}

  absl::Status parse() {
    skip_space();
    if (!eat('{')) return fail("expected '{'");
    while (true) {
      skip_space();
      if (eat('}')) break;
      std::optional<std::string> key = string_literal();
      if (!key) return fail("expected a quoted key");
      skip_space();
      if (!eat(':')) return fail("expected ':'");
      skip_space();
      absl::Status s = value(*key);
      if (!s.ok()) return s;
      skip_space();
      if (eat(',')) continue;
      skip_space();
      if (eat('}')) break;
      return fail("expected ',' or '}'");
    }
    if (!descr) return fail("no 'descr'");
    if (!shape) return fail("no 'shape'");
    return absl::OkStatus();
  }

  std::optional<std::string> descr;
  std::optional<bool> fortran_order;
  std::optional<ops::Shape> shape;

 private:
  absl::Status value(const std::string& key) {
    if (key == "descr") {
      descr = string_literal();
      return descr ? absl::OkStatus() : fail("'descr' must be a string");
    }
    if (key == "fortran_order") {
      if (consume("True"))
        fortran_order = true;
      else if (consume("False"))
        fortran_order = false;
      else
        return fail("'fortran_order' must be True or False");
      return absl::OkStatus();
    }
    if (key == "shape") return shape_tuple();
    return fail(absl::StrCat("unexpected key '", key, "'"));
  }

  absl::Status shape_tuple() {
    if (!eat('(')) return fail("'shape' must be a tuple");
    ops::Shape dims;
    while (true) {
      skip_space();
      if (eat(')')) break;
      int64_t d = 0;
      size_t digits = 0;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
        if (d > (int64_t{1} << 50)) return fail("a dimension is too large");
        d = d * 10 + (text_[pos_++] - '0');
        ++digits;
      }
      if (digits == 0) return fail("'shape' must hold non-negative integers");
      dims.push_back(d);
      skip_space();
      if (eat(',')) continue;
      skip_space();
      if (eat(')')) break;
      return fail("expected ',' or ')' in 'shape'");
    }
    shape = dims;
    return absl::OkStatus();
  }

  std::optional<std::string> string_literal() {
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) return std::nullopt;
    char quote = text_[pos_++];
    size_t end = text_.find(quote, pos_);
    if (end == std::string_view::npos) return std::nullopt;
    std::string s(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return s;
  }

  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n')) ++pos_;
  }
  bool eat(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool consume(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }
  absl::Status fail(const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat("bad header at byte ", pos_, ": ", what));
  }

  std::string_view text_;
  size_t pos_ = 0;
};

std::optional<DType> dtype_from_descr(const std::string& descr) {
  if (descr == "|b1") return DType::Bool;
  if (descr.size() != 3 || (descr[0] != '<' && descr[0] != '=' && descr[0] != '|')) {
    return std::nullopt;
  }
  std::string_view code(descr.data() + 1, 2);
  if (code == "i1") return DType::I8;
  if (code == "u1") return DType::U8;
  if (code == "i2") return DType::I16;
  if (code == "i4") return DType::I32;
  if (code == "i8") return DType::I64;
  if (code == "f2") return DType::F16;
  if (code == "f4") return DType::F32;
  if (code == "f8") return DType::F64;
  return std::nullopt;
}

const char* descr_for(DType dt) {
  switch (dt) {
    case DType::Bool:
      return "|b1";
    case DType::I8:
      return "|i1";
    case DType::U8:
      return "|u1";
    case DType::I16:
      return "<i2";
    case DType::I32:
      return "<i4";
    case DType::I64:
      return "<i8";
    case DType::F16:
      return "<f2";
    case DType::F64:
      return "<f8";
    default:  // F32, and bf16 and the 8-bit floats widened to F32
      return "<f4";
  }
}

}  // namespace

absl::StatusOr<NpyArray> read_npy(const std::string& path) {
  auto fail = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
  };
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return absl::NotFoundError(absl::StrCat(path, ": cannot open (", std::strerror(errno), ")"));
  in.seekg(0, std::ios::end);
  const int64_t file_size = in.tellg();
  in.seekg(0);
  char preamble[12] = {};
  in.read(preamble, 10);
  if (!in || std::memcmp(preamble, kMagic, kMagicSize) != 0)
    return fail("not an .npy file (bad magic)");
  const int major = static_cast<unsigned char>(preamble[6]);
  uint32_t header_len = 0;
  int64_t preamble_size = 10;
  if (major == 1) {
    header_len =
        static_cast<unsigned char>(preamble[8]) | (static_cast<unsigned char>(preamble[9]) << 8);
  } else if (major == 2 || major == 3) {
    in.read(preamble + 10, 2);
    if (!in) return fail("truncated preamble");
    for (int i = 0; i < 4; ++i)
      header_len |= static_cast<uint32_t>(static_cast<unsigned char>(preamble[8 + i])) << (8 * i);
    preamble_size = 12;
  } else {
    return fail(absl::StrCat("unsupported .npy version ", major));
  }
  if (header_len > kMaxHeaderBytes)
    return fail(absl::StrCat("header of ", header_len, " bytes is too large"));
  if (preamble_size + header_len > file_size) return fail("truncated header");
  std::string header(header_len, '\0');
  in.read(header.data(), header_len);
  if (!in) return fail("truncated header");
  HeaderParser parser(header);
  if (absl::Status s = parser.parse(); !s.ok()) return fail(std::string(s.message()));
  if (parser.fortran_order.value_or(false))
    return fail("Fortran-order arrays are not supported (save with C order)");
  std::optional<DType> dtype = dtype_from_descr(*parser.descr);
  if (!dtype)
    return fail(absl::StrCat("unsupported dtype '", *parser.descr,
                             "' (expected |b1 |i1 |u1 <i2 <i4 <i8 <f2 <f4 <f8)"));
  absl::StatusOr<int64_t> count = ops::checked_numel(*parser.shape);
  if (!count.ok()) return fail(std::string(count.status().message()));
  const int64_t nbytes = *count * dtype_size(*dtype);
  const int64_t data_size = file_size - preamble_size - header_len;
  if (data_size != nbytes) {
    return fail(absl::StrCat("holds ", data_size, " data bytes but shape ",
                             ops::format_shape(*parser.shape), " of ", dtype_name(*dtype),
                             " needs ", nbytes));
  }
  NpyArray array{{*parser.shape, *dtype}, std::make_shared<base::Buffer>(nbytes)};
  in.read(reinterpret_cast<char*>(array.data->data()), nbytes);
  if (!in) return fail("truncated data");
  return array;
}

absl::Status write_npy(const std::string& path, const ops::ValueType& type,
                       const base::Buffer& data) {
  // numpy has no bf16 or 8-bit floats: they travel as f32, which holds them exactly.
  const bool widen =
      type.dtype == DType::BF16 || type.dtype == DType::F8E4M3 || type.dtype == DType::F8E5M2;
  // Python tuple syntax: "()", "(3,)", "(2, 3)".
  std::string shape =
      type.shape.size() == 1 ? absl::StrCat(type.shape[0], ",") : absl::StrJoin(type.shape, ", ");
  std::string header = absl::StrCat("{'descr': '", descr_for(type.dtype),
                                    "', 'fortran_order': False, 'shape': (", shape, "), }");
  // Pad with spaces so the data starts at a multiple of 64 bytes; end with a newline.
  const size_t unpadded = kMagicSize + 4 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  return base::write_file_atomically(path, [&](std::ostream& out) {
    out.write(kMagic, kMagicSize);
    const char version_and_len[4] = {1, 0, static_cast<char>(header.size() & 0xff),
                                     static_cast<char>(header.size() >> 8)};
    out.write(version_and_len, 4);
    out << header;
    const int64_t count = ops::numel(type.shape);
    if (widen) {
      std::vector<float> widened(count);
      for (int64_t i = 0; i < count; ++i) {
        widened[i] = static_cast<float>(ops::load_double(data, type.dtype, i));
      }
      out.write(reinterpret_cast<const char*>(widened.data()), count * 4);
    } else {
      out.write(reinterpret_cast<const char*>(data.data()), count * dtype_size(type.dtype));
    }
  });
}

}  // namespace kiln::jit

namespace kiln {

Tensor load_npy(const std::string& path) {
  absl::StatusOr<jit::NpyArray> array = jit::read_npy(path);
  if (!array.ok()) throw Error(absl::StrCat("[load_npy] ", array.status().message()));
  return jit::realized_on(array->type, array->data, default_device());
}

void save_npy(const std::string& path, const Tensor& t) {
  if (!t.defined()) throw Error("[save_npy] the tensor is empty (undefined)");
  t.eval();
  const detail::Node& node = *detail::TensorAccess::node(t);
  absl::Status s = jit::write_npy(path, node.type, *jit::host_view(node.buffer));
  if (!s.ok()) throw Error(absl::StrCat("[save_npy] ", s.message()));
}

}  // namespace kiln
