#include "executor/pipeline/grouped_transport.h"

#include <chrono>
#include <optional>
#include <thread>

#include "executor/pipeline/wall_clock.h"
#include "graph/error.h"

namespace onnxtrain {
namespace {

// A value's header: {dtype, size 0, size 1, ...} as int64.
Tensor header_of(const StageValue& value) {
  const DType dtype = value.on_device() ? value.device->dtype : value.host.dtype();
  const std::vector<int64_t>& sizes = value.on_device() ? value.device->sizes : value.host.sizes();
  Tensor header(DType::Int64, {static_cast<int64_t>(sizes.size()) + 1});
  std::span<int64_t> h = header.data<int64_t>();
  h[0] = static_cast<int64_t>(dtype);
  for (size_t i = 0; i < sizes.size(); ++i) h[i + 1] = sizes[i];
  return header;
}

}  // namespace

void GroupedTransport::send(int to, const CommTag& tag, const StageValue& value, const std::string& what) {
  const auto t = std::chrono::steady_clock::now();
  comm_.send(to, tag, header_of(value), what);
  idle_seconds += seconds_since(t);
  link_->send(to, value);
  queued_.push_back(what);
}

bool GroupedTransport::try_recv(int from, const CommTag& tag, const std::string& what, StageValue& out) {
  const auto t = std::chrono::steady_clock::now();
  const Tensor header = comm_.recv(from, tag, what);
  idle_seconds += seconds_since(t);
  ONNXTRAIN_CHECK(header.dtype() == DType::Int64 && header.rank() == 1 && header.numel() >= 1,
                  "pipeline: the header of " + what + " is not a value header");
  std::span<const int64_t> h = header.data<int64_t>();
  out = link_->allocate(static_cast<DType>(h[0]), std::vector<int64_t>(h.begin() + 1, h.end()));
  link_->recv(from, out);
  queued_.push_back(what);
  return true;
}

void GroupedTransport::flush() {
  link_->post();
  const auto start = std::chrono::steady_clock::now();
  for (int polls = 0; !link_->done(); ++polls) {
    const std::optional<CommAbort> aborted = comm_.aborted();
    const bool late = std::chrono::steady_clock::now() - start > timeout_;
    if (aborted || late) {
      link_->abort();
      const std::string transfers =
          queued_.empty()
              ? "its transfers"
              : queued_.front() + (queued_.size() > 1 ? " and " + std::to_string(queued_.size() - 1) + " more transfers"
                                                      : std::string());
      if (aborted) {
        throw Error("pipeline: rank " + std::to_string(comm_.rank()) + " abandoned " + transfers + ": rank " +
                    std::to_string(aborted->rank) + " aborted: " + aborted->reason);
      }
      throw Error("pipeline: rank " + std::to_string(comm_.rank()) + ": " + transfers + " did not complete in " +
                  std::to_string(timeout_.count()) + " ms (a neighbour is stuck or gone, or the transfers deadlock)");
    }
    // Spin briefly (a group usually completes within microseconds of its peer's), then sleep.
    if (polls < 64) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
  idle_seconds += seconds_since(start);
  queued_.clear();
}

}  // namespace onnxtrain
