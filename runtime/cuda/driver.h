// The CUDA driver (libcuda.so.1), opened with dlopen on first use: a Kiln binary starts and
// runs on the CPU where there is no driver or no GPU.
#ifndef KILN_RUNTIME_CUDA_DRIVER_H_
#define KILN_RUNTIME_CUDA_DRIVER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln::runtime::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int compute_major = 0, compute_minor = 0;
  int64_t memory_bytes = 0;
};

// The GPUs the driver sees, or why there are none (no driver, cuInit failed, ...).
absl::StatusOr<std::vector<DeviceInfo>> query_devices();

}  // namespace kiln::runtime::cuda

#endif  // KILN_RUNTIME_CUDA_DRIVER_H_
