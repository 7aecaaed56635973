#include "executor/pipeline/nccl_link.h"

#include "graph/error.h"

namespace onnxtrain {
namespace {

// The value's bytes: its shape's, not its buffer's (the caching allocator rounds buffers up).
size_t bytes_of(const DeviceTensor& value) { return static_cast<size_t>(value.numel()) * dtype_size(value.dtype); }

}  // namespace

NcclLink::NcclLink(NcclCommunicator& nccl, const cuda::DeviceStream& stream)
    : nccl_(nccl), stream_(stream), posted_(stream.device()) {}

StageValue NcclLink::allocate(DType dtype, const std::vector<int64_t>& sizes) {
  auto value = std::make_shared<DeviceTensor>(DeviceTensor{.buffer = {}, .dtype = dtype, .sizes = sizes});
  const size_t bytes = bytes_of(*value);
  if (bytes > 0) value->buffer = cuda::DeviceBuffer(stream_, bytes);
  return {.host = {}, .device = std::move(value)};
}

void NcclLink::send(int peer, const StageValue& value) {
  ONNXTRAIN_CHECK(value.on_device(), "NCCL link: a host tensor to send (stages on GPUs send device values)");
  queued_.push_back({.send = true, .peer = peer, .value = value.device});
}

void NcclLink::recv(int peer, const StageValue& into) {
  ONNXTRAIN_CHECK(into.on_device(), "NCCL link: a host tensor to receive into");
  queued_.push_back({.send = false, .peer = peer, .value = into.device});
}

void NcclLink::post() {
  if (queued_.empty()) return;
  std::vector<Transfer> transfers = std::move(queued_);
  queued_.clear();
  NcclGroup group;  // both directions progress together (grouped_transport.h)
  for (const Transfer& t : transfers) {
    const size_t bytes = bytes_of(*t.value);
    if (bytes == 0) continue;  // both sides know the size from the header and skip it alike
    if (t.send) {
      nccl_.send(t.peer, t.value->buffer.data(), bytes, stream_.handle());
    } else {
      nccl_.recv(t.peer, t.value->buffer.data(), bytes, stream_.handle());
    }
  }
  posted_.record(stream_);
  pending_ = true;
}

bool NcclLink::done() {
  if (!pending_) return true;
  nccl_.check_async_error();  // a peer died: its transfers would never complete
  pending_ = !posted_.ready();
  return !pending_;
}

}  // namespace onnxtrain
