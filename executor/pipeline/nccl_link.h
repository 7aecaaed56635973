// The PeerLink (grouped_transport.h) of pipeline stages in separate processes on GPUs: device values, sent
// and received with NCCL on the stage's stream (the one its sessions and device store use), each post one
// ncclGroupStart/End followed by an event that done() polls (with NCCL's asynchronous error flag).
// Receive buffers come from that stream's caching allocator, so the next pass reads them in stream order,
// and a sent buffer dropped after the post goes back to the allocator only for reuse on the same stream,
// after the send.
//
//   NcclCommunicator nccl(pipeline_group, device);       // collective over the pipeline's host group
//   GroupedTransport transport(pipeline_group, std::make_unique<NcclLink>(nccl, worker.device_stream()), timeout);
#pragma once

#include <memory>
#include <vector>

#include "executor/comm/nccl_comm.h"
#include "executor/pipeline/grouped_transport.h"
#include "kernels/cuda/cuda_runtime.h"

namespace onnxtrain {

class NcclLink final : public PeerLink {
 public:
  NcclLink(NcclCommunicator& nccl, const cuda::DeviceStream& stream);

  StageValue allocate(DType dtype, const std::vector<int64_t>& sizes) override;
  void send(int peer, const StageValue& value) override;
  void recv(int peer, const StageValue& into) override;
  void post() override;
  bool done() override;
  void abort() noexcept override { nccl_.abort(); }

 private:
  struct Transfer {
    bool send = true;
    int peer = 0;
    std::shared_ptr<const DeviceTensor> value;
  };
  NcclCommunicator& nccl_;
  const cuda::DeviceStream& stream_;
  std::vector<Transfer> queued_;
  cuda::DeviceEvent posted_;  // recorded after the last group
  bool pending_ = false;      // a group was posted and has not been seen complete
};

}  // namespace onnxtrain
