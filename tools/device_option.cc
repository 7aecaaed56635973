#include "tools/device_option.h"

#include "graph/error.h"
#include "kernels/cuda/cuda_runtime.h"
#include "kernels/cuda/device_query.h"

namespace onnxtrain::cli {

Device device_option(const std::string& value, int devices, int offset, const std::string& what) {
  if (value == "cpu") return Device::cpu();
  int first = 0;
  if (value != "cuda") {
    const std::string index = value.rfind("cuda:", 0) == 0 ? value.substr(5) : "";
    if (index.empty() || index.find_first_not_of("0123456789") != std::string::npos || index.size() > 3) {
      throw Error("--device " + value + ": expected cpu, cuda or cuda:N");
    }
    first = std::stoi(index);
  }
  first += offset;
  const int visible = cuda::device_count();
  if (visible == 0) {
    throw Error("--device " + value + ": no CUDA device is visible (" + cuda::query_devices().unavailable_reason + ")");
  }
  if (first + devices > visible) {
    const std::string needed = devices == 1
                                   ? "cuda:" + std::to_string(first)
                                   : "cuda:" + std::to_string(first) + "..cuda:" + std::to_string(first + devices - 1);
    throw Error("--device " + value + (what.empty() ? "" : " with " + what) + " needs " + needed + ", but " +
                std::to_string(visible) + " CUDA device" + (visible == 1 ? " is" : "s are") +
                " visible (one device per stage or replica; set CUDA_VISIBLE_DEVICES or use fewer)");
  }
  return Device::cuda(first);
}

}  // namespace onnxtrain::cli
