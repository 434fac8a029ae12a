// The CUDA device: launch plans run as generated kernels on one stream per device, with
// buffers from the caching allocator and modules compiled by NVRTC through the cubin cache.
//
// Nothing here runs without a GPU; CI checks what it can without one (every kernel's
// source compiles, the parameter layouts, the allocator's policy), and scripts/gpu-check.sh
// runs the whole suite on a GPU machine with KILN_DEVICE=cuda.
#ifndef KILN_RUNTIME_CUDA_CUDA_BACKEND_H_
#define KILN_RUNTIME_CUDA_CUDA_BACKEND_H_

#include <memory>

#include "absl/status/status.h"
#include "base/buffer.h"
#include "jit/backend/backend.h"
#include "kiln/dtype.h"

namespace kiln::runtime::cuda {

// OK when CUDA device 0 can run kernels: the driver loads, a GPU is there, NVRTC loads.
absl::Status cuda_available();

// The backend for GPU `device_index` (below the number of GPUs the driver sees).
std::unique_ptr<jit::Backend> make_cuda_backend(int device_index);

// CUDA's entry in the backend registry: the GPUs the driver sees (when cuda_available()),
// make_cuda_backend, and a renderer of CUDA C++ (cuda_renderer.h) that checks custom source
// with NVRTC for sm_80 where NVRTC loads.
jit::BackendFactory cuda_backend_factory();

// Copies between host and device memory (synchronizing the device's stream first).
std::shared_ptr<base::Buffer> copy_to_host(const base::Buffer& device_buffer);
std::shared_ptr<base::Buffer> upload(const base::Buffer& host_buffer, Device device);

}  // namespace kiln::runtime::cuda

#endif  // KILN_RUNTIME_CUDA_CUDA_BACKEND_H_
