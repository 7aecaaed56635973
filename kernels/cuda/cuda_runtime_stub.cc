// Built when CUDA is off: there are no devices, and asking for one is a clear error that says so in the
// same words as the CUDA build without a GPU ("0 CUDA devices are visible").
#include "graph/error.h"
#include "kernels/cuda/cuda_runtime.h"

namespace onnxtrain::cuda {
namespace {
[[noreturn]] void not_compiled() {
  throw Error("CUDA support not compiled in: rebuild with the CUDA toolkit installed (-DONNXTRAIN_CUDA=ON)");
}
}  // namespace

int device_count() { return 0; }
void require_device(int device, const std::string& what) {
  throw Error(what + ": cuda:" + std::to_string(device) +
              " requested but 0 CUDA devices are visible (this onnxtrain was built without CUDA support: "
              "rebuild with the CUDA toolkit installed, -DONNXTRAIN_CUDA=ON)");
}
DeviceStream::DeviceStream(int device) : device_(device) { require_device(device, "DeviceStream"); }
DeviceStream::~DeviceStream() = default;
void DeviceStream::synchronize() const { not_compiled(); }
DeviceEvent::DeviceEvent(int device, EventTiming) : device_(device) { require_device(device, "DeviceEvent"); }
DeviceEvent::~DeviceEvent() = default;
void DeviceEvent::record(const DeviceStream&) { not_compiled(); }
void DeviceEvent::make_wait(const DeviceStream&) const { not_compiled(); }
void DeviceEvent::synchronize() const { not_compiled(); }
bool DeviceEvent::ready() const { not_compiled(); }
float DeviceEvent::ms_since(const DeviceEvent&) const { not_compiled(); }
DeviceBuffer::DeviceBuffer(const DeviceStream&, size_t) { not_compiled(); }
DeviceBuffer::~DeviceBuffer() = default;
DeviceBuffer::DeviceBuffer(DeviceBuffer&&) noexcept = default;
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&&) noexcept = default;
void DeviceBuffer::release() {}
PinnedHostBuffer::PinnedHostBuffer(size_t) { require_device(0, "pinned host memory"); }
PinnedHostBuffer::~PinnedHostBuffer() = default;
PinnedHostBuffer::PinnedHostBuffer(PinnedHostBuffer&&) noexcept = default;
PinnedHostBuffer& PinnedHostBuffer::operator=(PinnedHostBuffer&&) noexcept = default;
Tensor pinned_tensor(int device, DType, std::vector<int64_t>) {
  require_device(device, "pinned host memory");
  return {};
}
DeviceAllocatorStats pinned_allocator_stats() {
  require_device(0, "pinned_allocator_stats");
  return {};
}
void copy_to_device(void*, const void*, size_t, const DeviceStream&) { not_compiled(); }
void copy_to_host(void*, const void*, size_t, const DeviceStream&) { not_compiled(); }
void copy_on_device(void*, const void*, size_t, const DeviceStream&) { not_compiled(); }
void copy_between_devices(void*, int, const void*, int, size_t, const DeviceStream&) { not_compiled(); }
// Like the CUDA build, asking about a device that is not there is an error.
DeviceAllocatorStats allocator_stats(int device) {
  require_device(device, "allocator_stats");
  return {};
}
void empty_cache(int device) { require_device(device, "empty_cache"); }

}  // namespace onnxtrain::cuda
