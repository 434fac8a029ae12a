// Moving buffers between host and device memory (the CUDA backend does the copies).
#include "runtime/buffer.h"
#include "runtime/cuda/cuda_backend.h"

namespace kiln::runtime {

std::shared_ptr<const Buffer> host_view(const std::shared_ptr<const Buffer>& buffer) {
  if (buffer == nullptr || !buffer->on_device()) return buffer;
  return cuda::copy_to_host(*buffer);
}

std::shared_ptr<Buffer> place_on(const std::shared_ptr<Buffer>& buffer, Device device) {
  if (buffer == nullptr) return buffer;
  if (device.type == DeviceType::CPU) {
    return buffer->on_device() ? cuda::copy_to_host(*buffer) : buffer;
  }
  if (buffer->on_device() && buffer->device().index == device.index) return buffer;
  if (buffer->on_device()) return cuda::upload(*cuda::copy_to_host(*buffer), device);
  return cuda::upload(*buffer, device);
}

}  // namespace kiln::runtime
