// The NCCL library's version, "NCCL 2.28.9". Only compiled with NCCL (ONNXTRAIN_HAVE_NCCL); plain C++
// so that comm_info.cc needs no NCCL or CUDA header.
#pragma once

#include <string>

namespace onnxtrain {

std::string nccl_library_version();

}  // namespace onnxtrain
