#include "executor/pipeline/stage_transport.h"

#include <chrono>

#include "executor/pipeline/wall_clock.h"
#include "graph/error.h"

namespace onnxtrain {

int64_t StageValue::nbytes() const {
  return on_device() ? static_cast<int64_t>(device->buffer.bytes()) : static_cast<int64_t>(host.nbytes());
}

int64_t StageValue::numel() const { return on_device() ? device->numel() : host.numel(); }

DType StageValue::dtype() const { return on_device() ? device->dtype : host.dtype(); }

MessageKey message_key(int from, int to, const CommTag& tag) {
  return std::make_tuple(from, to, tag.micro_batch, tag.kind, tag.index);
}

void DeviceHandoff::put(const MessageKey& key, std::shared_ptr<const DeviceTensor> value, const std::string& what) {
  std::lock_guard<std::mutex> lock(mutex_);
  const bool inserted = parked_.emplace(key, std::move(value)).second;
  ONNXTRAIN_CHECK(inserted, "pipeline: " + what + " sent twice");
}

std::shared_ptr<const DeviceTensor> DeviceHandoff::take(const MessageKey& key, const std::string& what) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = parked_.find(key);
  ONNXTRAIN_CHECK(it != parked_.end(), "pipeline: " + what + " arrived without its device value");
  std::shared_ptr<const DeviceTensor> value = std::move(it->second);
  parked_.erase(it);
  return value;
}

void CommTransport::send(int to, const CommTag& tag, const StageValue& value, const std::string& what) {
  ONNXTRAIN_CHECK(value.on_device() == (handoff_ != nullptr),
                  "pipeline: " + what +
                      (value.on_device() ? " is in device memory, which this transport cannot carry"
                                         : " is a host tensor on a transport of device values"));
  const auto t = std::chrono::steady_clock::now();
  if (handoff_) {
    handoff_->put(message_key(comm_.rank(), to, tag), value.device, what);
    comm_.send(to, tag, Tensor(DType::Float32, {0}), what);  // the marker
  } else {
    comm_.send_shared(to, tag, value.host, what);  // the stage never writes a value it sends
  }
  idle_seconds += seconds_since(t);
}

bool CommTransport::try_recv(int from, const CommTag& tag, const std::string& what, StageValue& out) {
  const auto t = std::chrono::steady_clock::now();
  Tensor received = comm_.recv(from, tag, what);
  idle_seconds += seconds_since(t);
  out = handoff_ ? StageValue{.host = {}, .device = handoff_->take(message_key(from, comm_.rank(), tag), what)}
                 : StageValue{.host = std::move(received), .device = nullptr};
  return true;
}

void Mailbox::send(int to, const CommTag& tag, const StageValue& value, const std::string& what) {
  const bool inserted = messages_.emplace(message_key(self_, to, tag), value).second;
  ONNXTRAIN_CHECK(inserted, "pipeline emulation: " + what + " sent twice");
}

bool Mailbox::try_recv(int from, const CommTag& tag, const std::string&, StageValue& out) {
  auto it = messages_.find(message_key(from, self_, tag));
  if (it == messages_.end()) return false;
  out = std::move(it->second);
  messages_.erase(it);
  return true;
}

}  // namespace onnxtrain
