// How a pipeline stage's values reach its neighbours (executor/pipeline/stage_worker.h): a StageValue is
// a host Tensor or, for stages on GPUs, device memory; a StageTransport carries it to the next or the
// previous stage.
//
//   CommTransport transport(comm);             // threads or processes: host Tensors over a Communicator
//   DeviceHandoff handoff;                     // stages on GPUs in one process: device values too
//   CommTransport on_gpus(comm, &handoff);
//   Mailbox box(k, messages);                  // the single-threaded emulation: both, never waits
//   GroupedTransport over_nccl(comm, link);    // processes on GPUs: NCCL groups (grouped_transport.h)
//
// Device values are shared, read-only: the sender may keep the same buffer for its own backward pass while
// the receiver reads it (in place on the same device, by a peer copy from another one). The buffer goes
// back to its device's caching allocator when the last holder drops it, after every reader's run has
// waited for its stream, so no stream can still be reading it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

#include "executor/comm/comm.h"
#include "executor/device_initializers.h"
#include "graph/tensor.h"

namespace onnxtrain {

struct StageValue {
  Tensor host;
  std::shared_ptr<const DeviceTensor> device;  // set for a value in device memory (then `host` is empty)

  bool on_device() const { return device != nullptr; }
  int64_t nbytes() const;
  int64_t numel() const;
  DType dtype() const;
};

// (from stage, to stage, micro-batch tag, kind, index): one message.
using MessageKey = std::tuple<int, int, int64_t, int, int>;
MessageKey message_key(int from, int to, const CommTag& tag);

class StageTransport {
 public:
  virtual ~StageTransport() = default;
  virtual void send(int to, const CommTag& tag, const StageValue& value, const std::string& what) = 0;
  // Threaded transports block until the message is there (true); the emulation's mailbox returns false
  // when it is not there yet.
  virtual bool try_recv(int from, const CommTag& tag, const std::string& what, StageValue& out) = 0;
  // Called before every instruction that is not a transfer: transports that batch transfers launch them.
  virtual void flush() {}

  double idle_seconds = 0;  // blocked in send and recv (the stage's idle time)
};

// Device values between the threads of one process. The sender parks a value here, then sends a marker
// (an empty tensor) over the communicator, whose blocking, timeout and abort thus apply unchanged; the
// receiver, woken by the marker, takes the value. Thread-safe.
class DeviceHandoff {
 public:
  void put(const MessageKey& key, std::shared_ptr<const DeviceTensor> value, const std::string& what);
  std::shared_ptr<const DeviceTensor> take(const MessageKey& key, const std::string& what);

 private:
  std::mutex mutex_;
  std::map<MessageKey, std::shared_ptr<const DeviceTensor>> parked_;
};

// A Communicator as a transport.
// Without a handoff it carries host values only; with one, device values only (the stages of one process
// on GPUs send every activation and gradient from device memory).
class CommTransport final : public StageTransport {
 public:
  explicit CommTransport(Communicator& comm, DeviceHandoff* handoff = nullptr) : comm_(comm), handoff_(handoff) {}
  void send(int to, const CommTag& tag, const StageValue& value, const std::string& what) override;
  bool try_recv(int from, const CommTag& tag, const std::string& what, StageValue& out) override;

 private:
  Communicator& comm_;
  DeviceHandoff* handoff_;
};

// All stages' messages in one map, for the single-threaded emulation (not thread-safe; no copies: the
// values a stage sends are never written again).
class Mailbox final : public StageTransport {
 public:
  explicit Mailbox(int self, std::map<MessageKey, StageValue>& messages) : self_(self), messages_(messages) {}
  void send(int to, const CommTag& tag, const StageValue& value, const std::string& what) override;
  bool try_recv(int from, const CommTag& tag, const std::string& what, StageValue& out) override;

 private:
  int self_;
  std::map<MessageKey, StageValue>& messages_;
};

}  // namespace onnxtrain
