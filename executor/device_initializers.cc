#include "executor/device_initializers.h"

#include "graph/error.h"

namespace onnxtrain {

int64_t DeviceTensor::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

DeviceInitializerStore::DeviceInitializerStore(int device) : stream_(std::make_unique<cuda::DeviceStream>(device)) {}

DeviceInitializerStore::~DeviceInitializerStore() = default;

void DeviceInitializerStore::upload(Entry& entry) {
  const size_t bytes = entry.host.nbytes();
  if (entry.device.bytes() != bytes) entry.device = bytes ? cuda::DeviceBuffer(*stream_, bytes) : cuda::DeviceBuffer();
  // From pageable memory the copy returns once the source may be reused: the host may write it again.
  if (bytes) cuda::copy_to_device(entry.device.data(), entry.host.raw(), bytes, *stream_);
  entry.device_current = entry.host_current = true;
  ++uploads_;
}

const void* DeviceInitializerStore::data(const std::string& name, const Tensor& host) {
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    it = entries_.emplace(name, Entry{.host = host}).first;
    upload(it->second);
    return it->second.device.data();
  }
  Entry& e = it->second;
  const bool same_host = e.host.nbytes() == host.nbytes() && e.host.sizes() == host.sizes() &&
                         (host.nbytes() == 0 || e.host.raw() == host.raw());
  if (!same_host) {
    if (!e.host_current) {
      throw Error("device initializer '" + name +
                  "': its device copy holds an update its host copy lacks, and "
                  "another host tensor of that name was given (call sync_to_host before replacing it)");
    }
    e.host = host;
    e.device_current = false;
  }
  if (!e.device_current) upload(e);
  return e.device.data();
}

void* DeviceInitializerStore::data_for_update(const std::string& name) {
  auto it = entries_.find(name);
  if (it == entries_.end())
    throw Error("device initializer '" + name + "' is not on " + Device::cuda(device()).name() + " yet");
  Entry& e = it->second;
  if (!e.device_current) upload(e);
  e.host_current = false;
  return e.device.data();
}

void DeviceInitializerStore::mark_host_changed() {
  for (auto& [name, e] : entries_) {
    e.device_current = false;
    e.host_current = true;
  }
}

void DeviceInitializerStore::mark_host_changed(const std::string& name) {
  auto it = entries_.find(name);
  if (it == entries_.end()) return;  // not uploaded yet: the first use uploads the current host copy
  it->second.device_current = false;
  it->second.host_current = true;
}

void DeviceInitializerStore::sync_to_host() {
  bool copied = false;
  for (auto& [name, e] : entries_) {
    if (e.host_current) continue;
    if (e.host.nbytes()) cuda::copy_to_host(e.host.raw(), e.device.data(), e.host.nbytes(), *stream_);
    copied = true;
  }
  if (!copied) return;
  stream_->synchronize();  // pageable destinations are complete only now
  for (auto& [name, e] : entries_) e.host_current = true;
}

bool DeviceInitializerStore::host_current(const std::string& name) const {
  auto it = entries_.find(name);
  return it == entries_.end() || it->second.host_current;
}

}  // namespace onnxtrain
