#include "graph/resize_sampling.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <utility>

namespace onnxtrain {

namespace {

// The enum value `name` spells in `table`; false when it spells none.
template <typename E>
bool decode(const std::string& name, std::initializer_list<std::pair<const char*, E>> table, E& out) {
  for (const auto& [spelling, value] : table) {
    if (name == spelling) {
      out = value;
      return true;
    }
  }
  return false;
}

bool decode_mode(const std::string& name, ResizeMode& mode) {
  return decode(name,
                {{"nearest", ResizeMode::Nearest},
                 {"linear", ResizeMode::Linear},
                 {"bilinear", ResizeMode::Linear},  // Upsample-7 spelled it bilinear too
                 {"cubic", ResizeMode::Cubic}},
                mode);
}

bool decode_coordinates(const std::string& name, ResizeCoordinates& c) {
  return decode(name,
                {{"half_pixel", ResizeCoordinates::HalfPixel},
                 {"half_pixel_symmetric", ResizeCoordinates::HalfPixelSymmetric},
                 {"pytorch_half_pixel", ResizeCoordinates::PytorchHalfPixel},
                 {"align_corners", ResizeCoordinates::AlignCorners},
                 {"asymmetric", ResizeCoordinates::Asymmetric},
                 {"tf_half_pixel_for_nn", ResizeCoordinates::TfHalfPixelForNn},
                 {"tf_crop_and_resize", ResizeCoordinates::TfCropAndResize}},
                c);
}

bool decode_nearest(const std::string& name, ResizeNearest& n) {
  return decode(name,
                {{"round_prefer_floor", ResizeNearest::RoundPreferFloor},
                 {"round_prefer_ceil", ResizeNearest::RoundPreferCeil},
                 {"floor", ResizeNearest::Floor},
                 {"ceil", ResizeNearest::Ceil}},
                n);
}

// The input coordinate of output position o, by the formulas of ONNX's Resize specification. Where they
// take the output length (align_corners, pytorch_half_pixel, tf_crop_and_resize), it is the integer
// length, as in ONNX Runtime and PyTorch; ONNX's reference implementation takes scale x input length
// there instead, which differs when that is not an integer (onnx_conformance_test excludes its two
// node tests where it shows).
double original_coordinate(ResizeCoordinates c, const ResizeAxis& a, int64_t o) {
  // In float, as ONNX Runtime computes it: at a scale such as 1.6 (1.60000002 in float) output 8 falls on
  // input 5.0 in float but on 4.99999992 in double, and nearest rounds down to 4 where ONNX Runtime and
  // PyTorch (8 x 0.625) read 5.
  const auto x = static_cast<float>(o), in = static_cast<float>(a.in), out = static_cast<float>(a.out);
  const auto scale = static_cast<float>(a.scale);
  const auto start = static_cast<float>(a.roi_start), end = static_cast<float>(a.roi_end);
  switch (c) {
    case ResizeCoordinates::AlignCorners:
      return a.out == 1 ? 0.0f : x * (in - 1.0f) / (out - 1.0f);
    case ResizeCoordinates::Asymmetric:
      return x / scale;
    case ResizeCoordinates::TfCropAndResize: {
      const float extent = (end - start) * (in - 1.0f);
      return start * (in - 1.0f) + (a.out == 1 ? extent / 2.0f : x * extent / (out - 1.0f));
    }
    case ResizeCoordinates::TfHalfPixelForNn:
      return (x + 0.5f) / scale;
    case ResizeCoordinates::PytorchHalfPixel:
      return a.out > 1 ? (x + 0.5f) / scale - 0.5f : 0.0f;
    case ResizeCoordinates::HalfPixelSymmetric: {
      const float adjustment = out / (scale * in);
      const float offset = in / 2.0f * (1.0f - adjustment);
      return offset + (x + 0.5f) / scale - 0.5f;
    }
    case ResizeCoordinates::HalfPixel:
      break;
  }
  return (x + 0.5f) / scale - 0.5f;
}

// The nearest tap's offset from floor(x) (0 or 1) for a fractional part `ratio` in (0, 1).
int64_t nearest_offset(ResizeNearest n, double ratio, double scale) {
  switch (n) {
    case ResizeNearest::RoundPreferFloor:
      return ratio <= 0.5 ? 0 : 1;
    case ResizeNearest::RoundPreferCeil:
      return ratio < 0.5 ? 0 : 1;
    case ResizeNearest::Floor:
      return 0;
    case ResizeNearest::Ceil:
      return 1;
    case ResizeNearest::Legacy:  // ONNX Runtime's Resize-10 ("SIMPLE"): truncate when enlarging
      return scale < 1.0 ? 1 : 0;
  }
  return 0;
}

// Keys's cubic convolution weights of the taps at floor(x) - 1 .. floor(x) + 2 (ONNX's _cubic_coeffs).
void cubic_weights(double r, double a, double* w) {
  const double s = 1.0 - r;
  w[0] = ((a * (r + 1.0) - 5.0 * a) * (r + 1.0) + 8.0 * a) * (r + 1.0) - 4.0 * a;
  w[1] = ((a + 2.0) * r - (a + 3.0)) * r * r + 1.0;
  w[2] = ((a + 2.0) * s - (a + 3.0)) * s * s + 1.0;
  w[3] = ((a * (s + 1.0) - 5.0 * a) * (s + 1.0) + 8.0 * a) * (s + 1.0) - 4.0 * a;
}

}  // namespace

ResizeSampling decode_resize_sampling(const Attributes& attributes, bool legacy) {
  ResizeSampling s;
  const std::string mode = attributes.get_string("mode", "nearest");
  if (!decode_mode(mode, s.mode)) {
    s.error = "unknown mode '" + mode + "' (expected nearest, linear or cubic)";
    return s;
  }
  if (legacy) {
    s.coordinates = ResizeCoordinates::Asymmetric;
    s.nearest = ResizeNearest::Legacy;
    if (s.mode == ResizeMode::Cubic) s.error = "mode cubic needs Resize from opset 11";
    return s;
  }
  const std::string coordinates = attributes.get_string("coordinate_transformation_mode", "half_pixel");
  if (!decode_coordinates(coordinates, s.coordinates)) {
    s.error = "unknown coordinate_transformation_mode '" + coordinates +
              "' (expected half_pixel, half_pixel_symmetric, pytorch_half_pixel, align_corners, asymmetric, "
              "tf_half_pixel_for_nn or tf_crop_and_resize)";
    return s;
  }
  const std::string nearest = attributes.get_string("nearest_mode", "round_prefer_floor");
  if (!decode_nearest(nearest, s.nearest)) {
    s.error = "unknown nearest_mode '" + nearest + "' (expected round_prefer_floor, round_prefer_ceil, floor or ceil)";
    return s;
  }
  s.cubic_a = attributes.get_float("cubic_coeff_a", -0.75);
  s.exclude_outside = attributes.get_int("exclude_outside", 0) != 0;
  s.extrapolation_value = attributes.get_float("extrapolation_value", 0.0);
  s.axes = attributes.get_ints("axes");
  const std::string aspect = attributes.get_string("keep_aspect_ratio_policy", "stretch");
  if (!decode(aspect,
              {{"stretch", ResizeAspect::Stretch},
               {"not_larger", ResizeAspect::NotLarger},
               {"not_smaller", ResizeAspect::NotSmaller}},
              s.aspect))
    s.error = "unknown keep_aspect_ratio_policy '" + aspect + "' (expected stretch, not_larger or not_smaller)";
  if (attributes.get_int("antialias", 0) != 0)
    s.error = "antialias=1 (a widened filter when shrinking) is not implemented; export with antialias=False";
  return s;
}

bool resize_is_legacy(const std::string& op_type, int opset) { return op_type == "Upsample" || opset < 11; }

ResizeSlots resize_slots(const std::string& op_type, int opset) {
  if (op_type == "ResizeGrad") return {.roi = 2, .scales = 3, .sizes = 4};
  if (op_type == "Upsample") return opset < 9 ? ResizeSlots{} : ResizeSlots{.scales = 1};
  if (opset < 11) return {.scales = 1};
  return {.roi = 1, .scales = 2, .sizes = 3};
}

bool read_resize_floats(DType dtype, const void* data, int64_t count, std::vector<double>& values) {
  values.resize(static_cast<size_t>(count));
  if (dtype == DType::Float32) {
    for (int64_t i = 0; i < count; ++i) values[i] = static_cast<const float*>(data)[i];
  } else if (dtype == DType::Float64) {
    for (int64_t i = 0; i < count; ++i) values[i] = static_cast<const double*>(data)[i];
  } else {
    return false;
  }
  return true;
}

// Output lengths at or beyond this (2^62) are refused: they fit no tensor, and their cast to int64 could overflow.
constexpr double kMaxLength = 4611686018427387904.0;

std::vector<ResizeAxis> resolve_resize_axes(const ResizeSampling& s, const std::vector<int64_t>& in_sizes,
                                            const std::vector<double>* roi, const std::vector<double>* scales,
                                            const std::vector<int64_t>* sizes, std::string* error) {
  const auto rank = static_cast<int64_t>(in_sizes.size());
  auto fail = [&](const std::string& text) {
    *error = text;
    return std::vector<ResizeAxis>{};
  };
  std::vector<int64_t> axes = s.axes;
  if (axes.empty())
    for (int64_t k = 0; k < rank; ++k) axes.push_back(k);
  for (int64_t& a : axes) {
    if (a < -rank || a >= rank)
      return fail("axis " + std::to_string(a) + " is out of range for rank " + std::to_string(rank));
    if (a < 0) a += rank;
  }
  const auto n = static_cast<int64_t>(axes.size());
  std::vector<ResizeAxis> out(static_cast<size_t>(rank));
  for (int64_t k = 0; k < rank; ++k) out[k] = {.in = in_sizes[k], .out = in_sizes[k]};
  if (s.coordinates == ResizeCoordinates::TfCropAndResize) {
    if (!roi || static_cast<int64_t>(roi->size()) != 2 * n)
      return fail("tf_crop_and_resize needs an roi of " + std::to_string(2 * n) + " values (starts, then ends)");
  }
  const bool by_sizes = sizes && !sizes->empty();
  if (!by_sizes && (!scales || scales->empty())) return fail("one of scales and sizes must be given");
  if (by_sizes && scales && !scales->empty()) return fail("scales and sizes are both given; ONNX allows one");
  const auto given = static_cast<int64_t>(by_sizes ? sizes->size() : scales->size());
  if (given != n)
    return fail(std::string(by_sizes ? "sizes" : "scales") + " has " + std::to_string(given) + " values, expected " +
                std::to_string(n) + " (one per resized axis)");
  double common = 0.0;  // keep_aspect_ratio_policy's one scale
  if (by_sizes && s.aspect != ResizeAspect::Stretch) {
    for (int64_t j = 0; j < n; ++j) {
      const double r = static_cast<double>((*sizes)[j]) / static_cast<double>(in_sizes[axes[j]]);
      common = j == 0 ? r : (s.aspect == ResizeAspect::NotLarger ? std::min(common, r) : std::max(common, r));
    }
  }
  for (int64_t j = 0; j < n; ++j) {
    ResizeAxis& a = out[axes[j]];
    a.resized = true;
    if (s.coordinates == ResizeCoordinates::TfCropAndResize) {
      a.roi_start = (*roi)[j];
      a.roi_end = (*roi)[j + n];
    }
    if (by_sizes) {
      if ((*sizes)[j] < 0) return fail("sizes has a negative value " + std::to_string((*sizes)[j]));
      if (s.aspect == ResizeAspect::Stretch) {
        a.out = (*sizes)[j];
        a.scale = static_cast<double>(a.out) / static_cast<double>(a.in);
      } else {
        a.scale = common;
        const double length = std::floor(common * static_cast<double>(a.in) + 0.5);
        if (!(length >= 0.0 && length < kMaxLength))
          return fail("keep_aspect_ratio_policy gives axis " + std::to_string(axes[j]) + " the length " +
                      std::to_string(length));
        a.out = static_cast<int64_t>(length);
      }
    } else {
      a.scale = (*scales)[j];
      if (!(a.scale > 0.0) || !std::isfinite(a.scale))
        return fail("scales has " + std::to_string(a.scale) + "; every scale must be positive and finite");
      double length = static_cast<double>(a.in) * a.scale;
      if (s.coordinates == ResizeCoordinates::TfCropAndResize) length *= a.roi_end - a.roi_start;
      if (!(length >= 0.0))
        return fail("the roi and scales give axis " + std::to_string(axes[j]) + " a negative length");
      if (!(length < kMaxLength))  // a fuzzed scale of 1e33 made the cast to int64 undefined
        return fail("scales give axis " + std::to_string(axes[j]) + " the length " + std::to_string(length) +
                    ", beyond any tensor");
      a.out = static_cast<int64_t>(std::floor(length));
    }
    if (a.in == 0 && a.out > 0) return fail("cannot resize an empty axis to " + std::to_string(a.out));
  }
  return out;
}

ResizeTaps resize_taps(const ResizeSampling& s, const ResizeAxis& a, int64_t o) {
  ResizeTaps t;
  if (!a.resized) {
    t.index[0] = o;
    t.weight[0] = 1.0;
    t.count = 1;
    return t;
  }
  const double x = original_coordinate(s.coordinates, a, o);
  const double last = static_cast<double>(a.in - 1);
  if (s.coordinates == ResizeCoordinates::TfCropAndResize && (x < 0.0 || x > last)) {
    t.extrapolated = 1;
    return t;
  }
  const double base = std::floor(x), ratio = x - base;
  const auto first = static_cast<int64_t>(base);
  auto clamp = [&](int64_t i) { return std::clamp<int64_t>(i, 0, a.in - 1); };
  if (ratio == 0.0 || s.mode == ResizeMode::Nearest) {  // one tap; every mode's weights are 0 and 1 on a grid point
    t.index[0] = clamp(ratio == 0.0 ? first : first + nearest_offset(s.nearest, ratio, a.scale));
    t.weight[0] = 1.0;
    t.count = 1;
    return t;
  }
  int64_t index[4];
  double weight[4];
  int taps = 2;
  if (s.mode == ResizeMode::Linear) {
    index[0] = first;
    index[1] = first + 1;
    weight[0] = 1.0 - ratio;
    weight[1] = ratio;
  } else {
    taps = 4;
    for (int j = 0; j < 4; ++j) index[j] = first - 1 + j;
    cubic_weights(ratio, s.cubic_a, weight);
  }
  if (s.exclude_outside) {  // taps beyond the input drop out, the others are scaled to sum to 1
    double sum = 0.0;
    for (int j = 0; j < taps; ++j) {
      if (index[j] < 0 || index[j] >= a.in) weight[j] = 0.0;
      sum += weight[j];
    }
    if (sum != 0.0)
      for (int j = 0; j < taps; ++j) weight[j] /= sum;
  }
  for (int j = 0; j < taps; ++j) {
    if (weight[j] == 0.0) continue;
    t.index[t.count] = clamp(index[j]);
    t.weight[t.count] = weight[j];
    ++t.count;
  }
  if (t.count == 0) {  // exclude_outside dropped every tap: the element is 0
    t.index[0] = clamp(first);
    t.count = 1;
  }
  return t;
}

ResizeTables make_resize_tables(const ResizeSampling& s, const std::vector<ResizeAxis>& axes) {
  ResizeTables t;
  for (const ResizeAxis& a : axes) {
    t.tap_offset.push_back(static_cast<int64_t>(t.taps.size()));
    t.reach_offset.push_back(static_cast<int64_t>(t.reach.size()));
    const size_t reach_at = t.reach.size();
    for (int64_t i = 0; i < a.in; ++i) {
      t.reach.push_back(a.out);  // first: none yet
      t.reach.push_back(-1);     // last
    }
    for (int64_t o = 0; o < a.out; ++o) {
      const ResizeTaps taps = resize_taps(s, a, o);
      t.taps.push_back(taps);
      for (int j = 0; j < taps.count; ++j) {
        int64_t* reach = &t.reach[reach_at + 2 * static_cast<size_t>(taps.index[j])];
        reach[0] = std::min(reach[0], o);
        reach[1] = std::max(reach[1], o);
      }
    }
  }
  return t;
}

}  // namespace onnxtrain
