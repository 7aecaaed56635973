// Device-resident initializers: the device copies of a graph's initializers (weights, running
// statistics, constants) on one CUDA device, kept across runs and shared by every session that takes the
// same store (a Trainer's training and evaluation sessions), together with the one stream all of them
// enqueue on, so that a run, an optimizer step and the next run are ordered without host waits.
//
//   auto store = std::make_shared<DeviceInitializerStore>(0);     // cuda:0 and its stream
//   InferenceSession train(training_graph, "", Device::cuda(0), store);
//   InferenceSession eval(eval_graph, "", Device::cuda(0), store);   // the same device copies
//   train.run(...);                                  // uploads every initializer once (lazily)
//   float* w = store->data_for_update("fc.weight");  // an optimizer step writes it on the device
//   eval.run(...);                                   // sees the update; nothing is uploaded
//   store->sync_to_host();                           // the host Tensors hold the device values again
//   ... host copies overwritten (restore) ...;  store->mark_host_changed();   // re-uploaded at next use
//
// Each entry is in one of three states: both copies equal; the host copy newer (uploaded at the next
// use); the device copy newer (downloaded by sync_to_host). Entries are keyed by value name; the host
// copy is the graph's initializer Tensor itself (Tensor copies share buffers), so a download writes
// into the graph every session and the trainer read. Not thread-safe: one trainer's thread uses it.
// With CUDA compiled out a store cannot be made (its stream's constructor throws Error).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "graph/tensor.h"
#include "kernels/cuda/cuda_runtime.h"

namespace onnxtrain {

// A tensor in device memory: a graph output kept on the device (InferenceSession::run with
// keep_on_device), a gradient uploaded for a device optimizer step.
struct DeviceTensor {
  cuda::DeviceBuffer buffer;
  DType dtype = DType::Undefined;
  std::vector<int64_t> sizes;

  int64_t numel() const;
  float* floats() const { return static_cast<float*>(buffer.data()); }
};

class DeviceInitializerStore {
 public:
  explicit DeviceInitializerStore(int device);  // throws Error when cuda:`device` is not visible
  ~DeviceInitializerStore();
  DeviceInitializerStore(const DeviceInitializerStore&) = delete;
  DeviceInitializerStore& operator=(const DeviceInitializerStore&) = delete;

  int device() const { return stream_->device(); }
  // The stream every session, optimizer step and copy on this store uses.
  const cuda::DeviceStream& stream() const { return *stream_; }

  // The device copy of initializer `name`, whose host copy is `host`: uploaded (on the stream) at the
  // first call and whenever the host copy is newer. A host Tensor other than the one the entry was made
  // from (another buffer or size) replaces it and is uploaded; when the device copy is newer than the
  // entry's host copy that would lose an update, which is an Error.
  const void* data(const std::string& name, const Tensor& host);
  // The device copy of `name` for an in-place update on the device (an optimizer step): the host copy
  // is stale afterwards, until sync_to_host. Throws Error when `name` was never uploaded.
  void* data_for_update(const std::string& name);
  bool contains(const std::string& name) const { return entries_.contains(name); }

  // The host copies were written (restore, running statistics, a caller writing through shared
  // buffers): they are the truth now and are uploaded again at their next use.
  void mark_host_changed();
  void mark_host_changed(const std::string& name);
  // Downloads every device copy newer than its host copy into the host Tensor and waits for the copies;
  // nothing (not even a wait) when every host copy is current.
  void sync_to_host();
  // Whether the host copy of `name` holds the current value (true for a name not in the store).
  bool host_current(const std::string& name) const;

  // Uploads of initializers so far (for tests: a session uploads each once, not once per run).
  uint64_t uploads() const { return uploads_; }

 private:
  struct Entry {
    Tensor host;  // shares the graph's buffer
    cuda::DeviceBuffer device;
    bool device_current = false;  // false: the host copy is newer (upload at the next use)
    bool host_current = true;     // false: the device copy is newer (download at sync_to_host)
  };
  void upload(Entry& entry);

  std::unique_ptr<cuda::DeviceStream> stream_;  // declared first: outlives the buffers below
  std::map<std::string, Entry> entries_;
  uint64_t uploads_ = 0;
};

}  // namespace onnxtrain
