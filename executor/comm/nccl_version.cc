#include "executor/comm/nccl_version.h"

#include <nccl.h>

namespace onnxtrain {

std::string nccl_library_version() {
  int code = 0;
  const ncclResult_t result = ncclGetVersion(&code);
  if (result != ncclSuccess) return std::string("unknown (ncclGetVersion: ") + ncclGetErrorString(result) + ")";
  // NCCL >= 2.9 encodes MAJOR*10000 + MINOR*100 + PATCH; older releases MAJOR*1000 + MINOR*100 + PATCH.
  const int scale = code >= 20900 ? 10000 : 1000;
  return "NCCL " + std::to_string(code / scale) + "." + std::to_string((code % scale) / 100) + "." +
         std::to_string(code % 100);
}

}  // namespace onnxtrain
