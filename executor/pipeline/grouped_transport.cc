#include "executor/pipeline/grouped_transport.h"

#include <chrono>

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
  idle_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  link_->send(to, value);
}

bool GroupedTransport::try_recv(int from, const CommTag& tag, const std::string& what, StageValue& out) {
  const auto t = std::chrono::steady_clock::now();
  const Tensor header = comm_.recv(from, tag, what);
  idle_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  ONNXTRAIN_CHECK(header.dtype() == DType::Int64 && header.rank() == 1 && header.numel() >= 1,
                  "pipeline: the header of " + what + " is not a value header");
  std::span<const int64_t> h = header.data<int64_t>();
  out = link_->allocate(static_cast<DType>(h[0]), std::vector<int64_t>(h.begin() + 1, h.end()));
  link_->recv(from, out);
  return true;
}

}  // namespace onnxtrain
