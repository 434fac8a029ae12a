// Element types and devices.
#ifndef KILN_DTYPE_H_
#define KILN_DTYPE_H_

#include <cstdint>
#include <string>

namespace kiln {

enum class DType { Bool, I32, I64, F16, BF16, F32, F64 };

// Bytes one element occupies in memory (Bool is one byte; F16 and BF16 are two).
int dtype_size(DType dt);
bool is_floating(DType dt);
bool is_integral(DType dt);  // I32, I64 (not Bool)
// The trace-file spelling: "bool", "i32", "i64", "f16", "bf16", "f32", "f64".
const char* dtype_name(DType dt);
// Inverse of dtype_name; throws kiln::Error for an unknown spelling.
DType dtype_from_name(const std::string& name);
// PyTorch promotion: bool < integers < floating; F16 with BF16 gives F32.
DType promote_types(DType a, DType b);

// IEEE binary16, stored as its 16 bits. Converts to and from float with round-to-nearest-even.
struct Half {
  uint16_t bits = 0;
  Half() = default;
  explicit Half(float value);
  explicit operator float() const;
};

// bfloat16 (the upper half of an F32), stored as its 16 bits; round-to-nearest-even.
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  explicit BFloat16(float value);
  explicit operator float() const;
};

enum class DeviceType { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;
  friend bool operator==(const Device&, const Device&) = default;
};

std::string device_name(Device d);  // "cpu", "cuda:0"

// KILN_DEVICE=cpu|cuda|auto (default auto: CUDA if usable, else CPU). Asking for CUDA where
// none is usable throws kiln::Error.
Device default_device();
void set_default_device(Device d);

}  // namespace kiln

#endif  // KILN_DTYPE_H_
