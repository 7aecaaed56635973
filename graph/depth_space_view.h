// DepthToSpace and SpaceToDepth as ONNX defines them: a 4-D tensor viewed as 6-D, transposed, read back
// as 4-D. The reference kernels and the CUDA ones (a strided gather, like Transpose) share the view:
//
//   DepthSpaceView v = depth_space_view(/*to_space=*/true, "DCR", {n, c, h, w}, blocksize);
//   // y (v.out, row-major) == Transpose(Reshape(x, v.sizes), v.perm)
//
// DepthToSpace DCR: (N, b, b, C/b², H, W), perm (0, 3, 4, 1, 5, 2); CRD: (N, C/b², b, b, H, W),
// perm (0, 1, 4, 2, 5, 3); both give (N, C/b², H·b, W·b). SpaceToDepth: (N, C, H/b, b, W/b, b),
// perm (0, 3, 5, 1, 2, 4), giving (N, C·b², H/b, W/b).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace onnxtrain {

struct DepthSpaceView {
  std::vector<int64_t> sizes, perm, out;
  std::string error;  // empty, or why the input cannot be rearranged
};

inline DepthSpaceView depth_space_view(bool to_space, const std::string& mode, const std::vector<int64_t>& in,
                                       int64_t b) {
  DepthSpaceView v;
  if (in.size() != 4) {
    v.error = "the input must be 4-D (N, C, H, W), got rank " + std::to_string(in.size());
    return v;
  }
  if (b <= 0) {
    v.error = "blocksize must be positive, got " + std::to_string(b);
    return v;
  }
  const int64_t n = in[0], c = in[1], h = in[2], w = in[3];
  if (to_space) {
    if (c % (b * b) != 0) {
      v.error =
          std::to_string(c) + " channels do not divide into blocks of " + std::to_string(b) + "x" + std::to_string(b);
    } else if (mode == "DCR") {
      v.sizes = {n, b, b, c / (b * b), h, w};
      v.perm = {0, 3, 4, 1, 5, 2};
    } else if (mode == "CRD") {
      v.sizes = {n, c / (b * b), b, b, h, w};
      v.perm = {0, 1, 4, 2, 5, 3};
    } else {
      v.error = "unknown mode '" + mode + "' (expected DCR or CRD)";
    }
    v.out = {n, c / (b * b), h * b, w * b};
  } else {
    if (h % b != 0 || w % b != 0) {
      v.error = "height " + std::to_string(h) + " and width " + std::to_string(w) + " must be multiples of blocksize " +
                std::to_string(b);
    }
    v.sizes = {n, c, h / b, b, w / b, b};
    v.perm = {0, 3, 5, 1, 2, 4};
    v.out = {n, c * b * b, h / b, w / b};
  }
  return v;
}

}  // namespace onnxtrain
