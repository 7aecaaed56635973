// The PeerLink (grouped_transport.h) of pipeline stages in separate processes on GPUs: device values, sent
// and received with NCCL on the stage's stream (the one its sessions and device store use), each flush one
// ncclGroupStart/End. Receive buffers come from that stream's caching allocator, so the next pass reads
// them in stream order, and a buffer whose send is still queued goes back to the allocator only for reuse
// on the same stream, after the send.
//
//   NcclCommunicator nccl(pipeline_group, device);       // collective over the pipeline's host group
//   GroupedTransport transport(pipeline_group, std::make_unique<NcclLink>(nccl, worker.device_stream()));
#pragma once

#include <memory>
#include <vector>

#include "executor/comm/nccl_comm.h"
#include "executor/pipeline/grouped_transport.h"
#include "kernels/cuda/cuda_runtime.h"

namespace onnxtrain {

class NcclLink final : public PeerLink {
 public:
  NcclLink(NcclCommunicator& nccl, const cuda::DeviceStream& stream) : nccl_(nccl), stream_(stream) {}
  // Waits for the stream, so that no transfer of this link is still running (errors swallowed: the
  // stage's own error, or the communicator's abort, is what the caller reports).
  ~NcclLink() override;

  StageValue allocate(DType dtype, const std::vector<int64_t>& sizes) override;
  void send(int peer, const StageValue& value) override;
  void recv(int peer, const StageValue& into) override;
  void post() override;

 private:
  struct Transfer {
    bool send = true;
    int peer = 0;
    std::shared_ptr<const DeviceTensor> value;
  };
  NcclCommunicator& nccl_;
  const cuda::DeviceStream& stream_;
  std::vector<Transfer> queued_;
};

}  // namespace onnxtrain
