// Resize's sampling (ONNX Resize 10-19, Upsample 7 and 9), decided on the host and shared by the schema
// (output sizes), the reference kernels and the CUDA ones (which copy the tables to the device):
//
//   ResizeSampling s = decode_resize_sampling(node.attributes, legacy);      // error text in s.error
//   std::vector<ResizeAxis> axes = resolve_resize_axes(s, in_sizes, roi, scales, sizes, &error);
//   ResizeTables t = make_resize_tables(s, axes);   // per output position: the input taps and weights
//
// Along a resized axis, output position o maps to an input coordinate x by the coordinate transformation
// mode, and reads 1 (nearest), 2 (linear) or 4 (cubic) input positions around it, clamped to the axis as
// ONNX's reference pads the data with its edge. An N-D output element is the sum over every combination
// of its axes' taps of the product of their weights times that input element (resize_gather.h).
// The formulas are the ONNX specification's, with the integer output length where they take it, as ONNX
// Runtime and PyTorch do (resize_sampling.cc says where ONNX's reference implementation differs); the tap
// weights and edge clamping are the reference's. Upsample and Resize-10 sample as ONNX Runtime does
// there: asymmetric coordinates, nearest rounding down when enlarging and up when shrinking.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/attributes.h"
#include "graph/dtype.h"

namespace onnxtrain {

enum class ResizeMode { Nearest, Linear, Cubic };
enum class ResizeCoordinates {
  HalfPixel,
  HalfPixelSymmetric,
  PytorchHalfPixel,
  AlignCorners,
  Asymmetric,
  TfHalfPixelForNn,
  TfCropAndResize
};
enum class ResizeNearest { RoundPreferFloor, RoundPreferCeil, Floor, Ceil, Legacy };
enum class ResizeAspect { Stretch, NotLarger, NotSmaller };

// A Resize node's attributes, decoded. `error` is empty or says which attribute is wrong.
struct ResizeSampling {
  ResizeMode mode = ResizeMode::Nearest;
  ResizeCoordinates coordinates = ResizeCoordinates::HalfPixel;
  ResizeNearest nearest = ResizeNearest::RoundPreferFloor;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation_value = 0.0;
  std::vector<int64_t> axes;  // opset 18's axes attribute as given; empty: every axis
  ResizeAspect aspect = ResizeAspect::Stretch;
  std::string error;
};

// `legacy`: Upsample, or Resize before opset 11 (no coordinate or nearest-mode attributes).
ResizeSampling decode_resize_sampling(const Attributes& attributes, bool legacy);
bool resize_is_legacy(const std::string& op_type, int opset);

// Where a node keeps its roi, scales and sizes inputs (-1: it has none). Upsample-7 has a scales attribute;
// ResizeGrad (dY, x_shape, roi, scales, sizes) has them at 2, 3 and 4.
struct ResizeSlots {
  int roi = -1, scales = -1, sizes = -1;
};
ResizeSlots resize_slots(const std::string& op_type, int opset);

// A float32 or float64 tensor's values (roi, scales) as doubles; false for another dtype.
bool read_resize_floats(DType dtype, const void* data, int64_t count, std::vector<double>& values);

// One axis of the input, resolved: its input and output lengths and the scale and roi that place output
// positions on it. An axis the node leaves alone has resized == false (and out == in).
struct ResizeAxis {
  int64_t in = 0, out = 0;
  double scale = 1.0;
  double roi_start = 0.0, roi_end = 1.0;
  bool resized = false;
};

// Each axis's output length and scale from `scales` or `sizes` (one value per axis of `axes`, or per
// axis of the input when it is empty), as ONNX defines them: out = floor(in · scale) (times the roi's
// extent for tf_crop_and_resize), or sizes with scale = out / in (keep_aspect_ratio_policy: one scale for
// all, out = round(in · scale)). `roi` ([starts..., ends...]) only for tf_crop_and_resize; nullptr
// otherwise. On bad input returns {} and sets *error.
std::vector<ResizeAxis> resolve_resize_axes(const ResizeSampling& sampling, const std::vector<int64_t>& in_sizes,
                                            const std::vector<double>* roi, const std::vector<double>* scales,
                                            const std::vector<int64_t>* sizes, std::string* error);

// The input positions one output position reads along one axis, with their weights (zero weights
// dropped); `extrapolated`: tf_crop_and_resize placed it outside the input, so the element takes
// extrapolation_value and passes no gradient.
struct ResizeTaps {
  int64_t index[4] = {};
  double weight[4] = {};
  int32_t count = 0;
  int32_t extrapolated = 0;
};

ResizeTaps resize_taps(const ResizeSampling& sampling, const ResizeAxis& axis, int64_t o);

// Every axis's taps, concatenated (axis k's output positions from tap_offset[k]), and for the gradient
// every input position's reach: the first and last output position whose taps read it (first > last when
// none does), from reach_offset[k] in pairs.
struct ResizeTables {
  std::vector<ResizeTaps> taps;
  std::vector<int64_t> tap_offset;
  std::vector<int64_t> reach;
  std::vector<int64_t> reach_offset;
};

ResizeTables make_resize_tables(const ResizeSampling& sampling, const std::vector<ResizeAxis>& axes);

}  // namespace onnxtrain
