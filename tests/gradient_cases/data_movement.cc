// Harness cases of the data-movement ops: Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Concat, Split,
// Slice, Gather, CumSum, Trilu, Expand, Tile, Pad, Dropout, Resize, Upsample, DepthToSpace and
// SpaceToDepth (and through them SliceGrad, GatherGrad, PadGrad, DropoutGrad, ResizeGrad).
#include "tests/gradient_harness.h"

namespace onnxtrain::harness {

std::vector<GradientCase> data_movement_gradient_cases() {
  using V = std::vector<int64_t>;
  std::vector<GradientCase> cases;
  // Reshape, Flatten, Squeeze, Unsqueeze: one rule, Reshape(dy, shape(x)).
  cases.push_back({.label = "Reshape -1", .op_type = "Reshape", .inputs = {normal({2, 3, 4}), int64s({4, -1})}});
  cases.push_back(
      {.label = "Reshape 0 copies a dim", .op_type = "Reshape", .inputs = {normal({2, 3, 4}), int64s({0, 12})}});
  cases.push_back({.label = "Flatten axis 2",
                   .op_type = "Flatten",
                   .attributes = {{"axis", int64_t{2}}},
                   .inputs = {normal({2, 3, 4})}});
  cases.push_back({.label = "Flatten axis -3",
                   .op_type = "Flatten",
                   .attributes = {{"axis", int64_t{-3}}},
                   .inputs = {normal({2, 3, 4})}});
  cases.push_back({.label = "Squeeze axes input negative",
                   .op_type = "Squeeze",
                   .inputs = {normal({2, 1, 3, 1}), int64s({1, -1})}});
  cases.push_back({.label = "Squeeze all ones", .op_type = "Squeeze", .inputs = {normal({1, 3, 1})}});
  cases.push_back({.label = "Squeeze opset 11 attribute",
                   .op_type = "Squeeze",
                   .attributes = {{"axes", V{0}}},
                   .inputs = {normal({1, 4})},
                   .opset = 11});
  cases.push_back(
      {.label = "Unsqueeze negative axes", .op_type = "Unsqueeze", .inputs = {normal({2, 3}), int64s({0, -1})}});
  // Transpose: inverse permutation.
  cases.push_back({.label = "Transpose perm 2 0 1",
                   .op_type = "Transpose",
                   .attributes = {{"perm", V{2, 0, 1}}},
                   .inputs = {normal({2, 3, 4})}});
  cases.push_back({.label = "Transpose default reverses", .op_type = "Transpose", .inputs = {normal({2, 3, 4})}});
  // Concat: Split of dy by the inputs' sizes.
  cases.push_back({.label = "Concat axis 1 three inputs",
                   .op_type = "Concat",
                   .attributes = {{"axis", int64_t{1}}},
                   .inputs = {normal({2, 3}), normal({2, 1}), normal({2, 2})}});
  cases.push_back({.label = "Concat axis -2 with a constant",
                   .op_type = "Concat",
                   .attributes = {{"axis", int64_t{-2}}},
                   .inputs = {normal({1, 3}), constant(normal({2, 3})), normal({3, 3})}});
  // Split: Concat of the output gradients, zeros for outputs the loss ignores.
  cases.push_back({.label = "Split uneven input, middle output unused",
                   .op_type = "Split",
                   .attributes = {{"axis", int64_t{1}}},
                   .inputs = {normal({2, 6}), int64s({1, 3, 2})},
                   .outputs = 3,
                   .loss_outputs = {0, 2}});
  cases.push_back({.label = "Split opset 11 attribute axis -2",
                   .op_type = "Split",
                   .attributes = {{"axis", int64_t{-2}}, {"split", V{2, 1}}},
                   .inputs = {normal({3, 4})},
                   .outputs = 2,
                   .opset = 11});
  cases.push_back(
      {.label = "Split equal opset 13", .op_type = "Split", .inputs = {normal({4, 3})}, .outputs = 2, .opset = 13});
  cases.push_back({.label = "Split opset 18 num_outputs smaller last",
                   .op_type = "Split",
                   .attributes = {{"axis", int64_t{-1}}, {"num_outputs", int64_t{3}}},
                   .inputs = {normal({2, 7})},
                   .outputs = 3,
                   .loss_outputs = {1, 2},
                   .opset = 18});
  // Slice: SliceGrad scatters dy back (numpy clamping, negative steps).
  cases.push_back({.label = "Slice negative steps",
                   .op_type = "Slice",
                   .inputs = {normal({5, 6}), int64s({-1, 5}), int64s({-100, 0}), int64s({0, 1}), int64s({-2, -2})}});
  cases.push_back({.label = "Slice out of range bounds",
                   .op_type = "Slice",
                   .inputs = {normal({4, 5}), int64s({-100, 2}), int64s({100, 1000})}});
  cases.push_back({.label = "Slice negative axis",
                   .op_type = "Slice",
                   .inputs = {normal({3, 4, 5}), int64s({1}), int64s({-1}), int64s({-1})}});
  cases.push_back({.label = "Slice steps without axes",
                   .op_type = "Slice",
                   .inputs = {normal({6, 4}), int64s({0, 3}), int64s({6, -5}), omitted(), int64s({3, -1})}});
  cases.push_back({.label = "Slice opset 9 attributes",
                   .op_type = "Slice",
                   .attributes = {{"starts", V{1}}, {"ends", V{3}}, {"axes", V{1}}},
                   .inputs = {normal({2, 4})},
                   .opset = 9});
  // Gather: GatherGrad scatter-adds (repeated and negative indices).
  cases.push_back({.label = "Gather repeated negative indices",
                   .op_type = "Gather",
                   .inputs = {normal({5, 3}), values({0, 2, 2, -1, 4, 0}, {2, 3})}});
  cases.push_back({.label = "Gather axis 1 repeated",
                   .op_type = "Gather",
                   .attributes = {{"axis", int64_t{1}}},
                   .inputs = {normal({2, 4, 3}), int64s({3, 1, 3})}});
  cases.push_back({.label = "Gather scalar index axis -1",
                   .op_type = "Gather",
                   .attributes = {{"axis", int64_t{-1}}},
                   .inputs = {normal({4, 3}), values({-2}, {})}});
  cases.push_back({.label = "Gather int32 indices",
                   .op_type = "Gather",
                   .inputs = {normal({3, 2}), values({1, 1, 0}, {3}, DType::Int32)}});
  // CumSum: the running sum of dy in the other direction (exclusive and reverse, int32 and negative axes).
  cases.push_back({.label = "CumSum axis 1", .op_type = "CumSum", .inputs = {normal({2, 5, 3}), values({1}, {})}});
  cases.push_back({.label = "CumSum exclusive reverse axis -1",
                   .op_type = "CumSum",
                   .attributes = {{"exclusive", int64_t{1}}, {"reverse", int64_t{1}}},
                   .inputs = {normal({3, 4}), values({-1}, {}, DType::Int32)}});
  // Trilu: the same triangle of dy (k shifts the diagonal; a batch of matrices).
  cases.push_back({.label = "Trilu upper", .op_type = "Trilu", .inputs = {normal({4, 5})}});
  cases.push_back({.label = "Trilu lower k -1 batched",
                   .op_type = "Trilu",
                   .attributes = {{"upper", int64_t{0}}},
                   .inputs = {normal({2, 3, 4}), values({-1}, {})}});
  // Expand: dy summed over the broadcast axes.
  cases.push_back(
      {.label = "Expand new leading and ones", .op_type = "Expand", .inputs = {normal({3, 1}), int64s({2, 3, 4})}});
  cases.push_back({.label = "Expand both ways", .op_type = "Expand", .inputs = {normal({1, 4}), int64s({3, 1})}});
  cases.push_back({.label = "Expand same shape", .op_type = "Expand", .inputs = {normal({2, 3}), int64s({2, 3})}});
  // Tile: the repeats interleaved with x's dims, summed.
  cases.push_back({.label = "Tile 2x3", .op_type = "Tile", .inputs = {normal({2, 3}), int64s({2, 3})}});
  cases.push_back({.label = "Tile 3-D with ones", .op_type = "Tile", .inputs = {normal({2, 1, 3}), int64s({1, 4, 2})}});
  // Pad, constant mode: Pad(dy, -pads).
  cases.push_back({.label = "Pad constant", .op_type = "Pad", .inputs = {normal({2, 3}), int64s({1, 0, 2, 1})}});
  cases.push_back({.label = "Pad constant value and cropping",
                   .op_type = "Pad",
                   .inputs = {normal({3, 4}), int64s({-1, 1, 0, -2}), values({0.5}, {}, DType::Float32)}});
  cases.push_back({.label = "Pad opset 2 attribute",
                   .op_type = "Pad",
                   .attributes = {{"pads", V{0, 1, 1, 0}}, {"value", 1.5}},
                   .inputs = {normal({2, 2})},
                   .opset = 2});
  cases.push_back({.label = "Pad opset 18 axes",
                   .op_type = "Pad",
                   .inputs = {normal({2, 3, 2}), int64s({1, 2}), omitted(), int64s({-2})},
                   .opset = 18});
  // Pad, reflect/edge/wrap: PadGrad adds each border element's gradient into the element it copies.
  cases.push_back({.label = "Pad reflect",
                   .op_type = "Pad",
                   .attributes = {{"mode", std::string("reflect")}},
                   .inputs = {normal({3, 4}), int64s({2, 1, 1, 3})}});
  cases.push_back({.label = "Pad edge wide",
                   .op_type = "Pad",
                   .attributes = {{"mode", std::string("edge")}},
                   .inputs = {normal({2, 3}), int64s({0, 4, 3, 2})}});
  cases.push_back({.label = "Pad wrap opset 19 axes",
                   .op_type = "Pad",
                   .attributes = {{"mode", std::string("wrap")}},
                   .inputs = {normal({2, 3, 2}), int64s({2, 4}), omitted(), int64s({1})},
                   .opset = 19});
  // Dropout: DropoutGrad in training mode (the `seed` attribute fixes the mask), dy in inference.
  cases.push_back({.label = "Dropout training ratio 0.3",
                   .op_type = "Dropout",
                   .attributes = {{"seed", int64_t{42}}},
                   .inputs = {normal({4, 5}), values({0.3}, {}, DType::Float32), values({1}, {}, DType::Bool)}});
  cases.push_back({.label = "Dropout training default ratio with mask",
                   .op_type = "Dropout",
                   .attributes = {{"seed", int64_t{7}}},
                   .inputs = {normal({3, 4}), omitted(), values({1}, {}, DType::Bool)},
                   .outputs = 2});
  cases.push_back({.label = "Dropout training_mode false",
                   .op_type = "Dropout",
                   .inputs = {normal({3, 4}), values({0.5}, {}, DType::Float32), values({0}, {}, DType::Bool)}});
  cases.push_back(
      {.label = "Dropout no training_mode", .op_type = "Dropout", .inputs = {normal({2, 3})}, .outputs = 2});
  cases.push_back({.label = "Dropout opset 10",
                   .op_type = "Dropout",
                   .attributes = {{"ratio", 0.4}},
                   .inputs = {normal({2, 3})},
                   .opset = 10});
  // GatherElements, ScatterElements, GatherND (and through them GatherElementsGrad, GatherNDGrad).
  // GatherElements: GatherElementsGrad scatter-adds dy (repeated and negative indices; indices shorter
  // than the data off the axis).
  cases.push_back({.label = "GatherElements axis 1 repeated negative",
                   .op_type = "GatherElements",
                   .attributes = {{"axis", int64_t{1}}},
                   .inputs = {normal({3, 4}), values({0, -1, 3, 3, 1, 1, 1, 0, 2, -4, -4, 2, 2, 3, 0}, {3, 5})}});
  cases.push_back({.label = "GatherElements axis 0 shorter indices int32",
                   .op_type = "GatherElements",
                   .inputs = {normal({4, 3, 2}), values({3, -1, 0, 0, 2, 2, -4, 1}, {2, 2, 2}, DType::Int32)}});
  cases.push_back({.label = "GatherElements opset 11 axis -1",
                   .op_type = "GatherElements",
                   .attributes = {{"axis", int64_t{-1}}},
                   .inputs = {normal({2, 3}), values({2, 0, 0, 1}, {2, 2})},
                   .opset = 11});
  // TopK: dX is dValues scattered back to the positions Indices names (GatherElementsGrad); K as input
  // (opset 10, 11) and attribute (opset 1), largest and smallest, a middle axis.
  cases.push_back({.label = "TopK largest axis -1",
                   .op_type = "TopK",
                   .inputs = {normal({3, 5}), values({2}, {1})},
                   .outputs = 2,
                   .opset = 11});
  cases.push_back({.label = "TopK smallest axis 1 of 3",
                   .op_type = "TopK",
                   .attributes = {{"axis", int64_t{1}}, {"largest", int64_t{0}}},
                   .inputs = {normal({2, 4, 3}), values({3}, {1})},
                   .outputs = 2,
                   .opset = 11});
  cases.push_back({.label = "TopK opset 1 attribute k",
                   .op_type = "TopK",
                   .attributes = {{"k", int64_t{2}}, {"axis", int64_t{0}}},
                   .inputs = {normal({4, 2})},
                   .outputs = 2,
                   .opset = 1});
  // ScatterElements "none": d data = dy with the written positions zeroed, d updates = GatherElements(dy)
  // (unique indices: repeated ones are undefined in ONNX); "add": d data = dy (repeated indices fine).
  cases.push_back({.label = "ScatterElements none axis 1",
                   .op_type = "ScatterElements",
                   .attributes = {{"axis", int64_t{1}}},
                   .inputs = {normal({3, 5}), values({4, 0, -1, 2, 1, 3}, {3, 2}), normal({3, 2})}});
  cases.push_back(
      {.label = "ScatterElements none axis -1 int32 opset 13",
       .op_type = "ScatterElements",
       .attributes = {{"axis", int64_t{-1}}},
       .inputs = {normal({2, 3, 4}), values({-1, 0, 1, 2, 3, -4, 0, 2}, {2, 2, 2}, DType::Int32), normal({2, 2, 2})},
       .opset = 13});
  cases.push_back({.label = "ScatterElements add repeated",
                   .op_type = "ScatterElements",
                   .attributes = {{"reduction", std::string("add")}},
                   .inputs = {normal({4, 3}), values({1, 0, 3, 1, -1, 3, 1, 2, 0}, {3, 3}), normal({3, 3})}});
  // GatherND: GatherNDGrad adds each dy slice into the slice its index row names (repeated rows, negative
  // coordinates, whole elements with k = rank, batch_dims).
  cases.push_back({.label = "GatherND rows repeated negative",
                   .op_type = "GatherND",
                   .inputs = {normal({4, 3}), values({2, 0, 2, -1}, {2, 2, 1})}});
  cases.push_back({.label = "GatherND elements int32",
                   .op_type = "GatherND",
                   .inputs = {normal({3, 4}), values({0, 1, 2, -1, 0, 1}, {3, 2}, DType::Int32)}});
  cases.push_back({.label = "GatherND batch_dims 1 opset 12",
                   .op_type = "GatherND",
                   .attributes = {{"batch_dims", int64_t{1}}},
                   .inputs = {normal({2, 3, 4}), values({2, 2, 0, 1}, {2, 2, 1})},
                   .opset = 12});
  // ScatterND "none": d data = dy with the written slices zeroed, d updates = GatherND(dy) (unique rows:
  // repeated ones are undefined in ONNX); "add": d data = dy (repeated rows fine). Slices and elements.
  cases.push_back({.label = "ScatterND none slices negative",
                   .op_type = "ScatterND",
                   .inputs = {normal({4, 3}), values({2, -1}, {2, 1}), normal({2, 3})}});
  cases.push_back({.label = "ScatterND none elements int32",
                   .op_type = "ScatterND",
                   .inputs = {normal({2, 3, 2}), values({0, 1, 1, 1, 2, 0}, {2, 3}, DType::Int32), normal({2})},
                   .opset = 13});
  cases.push_back({.label = "ScatterND add repeated",
                   .op_type = "ScatterND",
                   .attributes = {{"reduction", std::string("add")}},
                   .inputs = {normal({3, 4}), values({1, 0, 1}, {3, 1}), normal({3, 4})},
                   .opset = 16});
  // Resize and Upsample: ResizeGrad gathers each input element's share of every output that read it.
  // Every mode and coordinate transformation the taps distinguish, enlarging and shrinking; the same
  // sampling ONNX's node tests check forward.
  using S = std::string;
  auto f32 = [](std::vector<double> v) {
    const auto n = static_cast<int64_t>(v.size());
    return values(std::move(v), {n}, DType::Float32);
  };
  cases.push_back({.label = "Resize nearest asymmetric floor sizes",
                   .op_type = "Resize",
                   .attributes = {{"coordinate_transformation_mode", S("asymmetric")}, {"nearest_mode", S("floor")}},
                   .inputs = {normal({1, 2, 3, 2}), omitted(), omitted(), int64s({1, 2, 7, 5})},
                   .opset = 13});
  cases.push_back({.label = "Resize nearest round_prefer_ceil shrink",
                   .op_type = "Resize",
                   .attributes = {{"nearest_mode", S("round_prefer_ceil")}},
                   .inputs = {normal({2, 5, 4}), omitted(), f32({1, 0.6f, 0.5f})},
                   .opset = 13});
  cases.push_back({.label = "Resize linear half_pixel scales",
                   .op_type = "Resize",
                   .attributes = {{"mode", S("linear")}},
                   .inputs = {normal({1, 1, 3, 4}), omitted(), f32({1, 1, 2, 1.5})},
                   .opset = 13});
  cases.push_back({.label = "Resize linear pytorch_half_pixel shrink",
                   .op_type = "Resize",
                   .attributes = {{"mode", S("linear")}, {"coordinate_transformation_mode", S("pytorch_half_pixel")}},
                   .inputs = {normal({1, 2, 5, 6}), omitted(), omitted(), int64s({1, 2, 3, 1})},
                   .opset = 13});
  cases.push_back({.label = "Resize linear align_corners",
                   .op_type = "Resize",
                   .attributes = {{"mode", S("linear")}, {"coordinate_transformation_mode", S("align_corners")}},
                   .inputs = {normal({2, 1, 3, 3}), omitted(), f32({1, 1, 2, 2})},
                   .opset = 13});
  cases.push_back({.label = "Resize cubic exclude_outside A -0.5",
                   .op_type = "Resize",
                   .attributes = {{"mode", S("cubic")}, {"exclude_outside", int64_t{1}}, {"cubic_coeff_a", -0.5}},
                   .inputs = {normal({1, 1, 4, 3}), omitted(), f32({1, 1, 1.75, 2})},
                   .opset = 13});
  cases.push_back(
      {.label = "Resize linear tf_crop_and_resize extrapolates",
       .op_type = "Resize",
       .attributes = {{"mode", S("linear")},
                      {"coordinate_transformation_mode", S("tf_crop_and_resize")},
                      {"extrapolation_value", 2.5}},
       .inputs = {normal({1, 1, 4, 4}), f32({0, 0, -0.2, 0.3, 1, 1, 0.8, 1.4}), omitted(), int64s({1, 1, 3, 5})},
       .opset = 13});
  cases.push_back({.label = "Resize opset 11 cubic scales with an empty roi",
                   .op_type = "Resize",
                   .attributes = {{"mode", S("cubic")}},
                   .inputs = {normal({1, 1, 3, 5}), f32({}), f32({1, 1, 2, 0.8})},
                   .opset = 11});
  cases.push_back({.label = "Resize opset 18 axes keep_aspect not_larger",
                   .op_type = "Resize",
                   .attributes = {{"mode", S("linear")},
                                  {"axes", V{2, 3}},
                                  {"keep_aspect_ratio_policy", S("not_larger")},
                                  {"coordinate_transformation_mode", S("half_pixel_symmetric")}},
                   .inputs = {normal({1, 2, 4, 6}), omitted(), omitted(), int64s({6, 6})},
                   .opset = 18});
  cases.push_back({.label = "Resize opset 10 nearest shrinks up",
                   .op_type = "Resize",
                   .inputs = {normal({1, 1, 5, 3}), f32({1, 1, 0.6f, 2})},
                   .opset = 10});
  cases.push_back({.label = "Upsample opset 9 linear",
                   .op_type = "Upsample",
                   .attributes = {{"mode", S("linear")}},
                   .inputs = {normal({1, 2, 2, 3}), f32({1, 1, 2, 3})},
                   .opset = 9});
  cases.push_back({.label = "Upsample opset 7 scales attribute",
                   .op_type = "Upsample",
                   .attributes = {{"scales", std::vector<double>{1, 1, 3, 2}}},
                   .inputs = {normal({1, 1, 2, 2})},
                   .opset = 7});
  // DepthToSpace and SpaceToDepth: dx is dy moved back by the inverse transpose of the 6-D view.
  cases.push_back({.label = "DepthToSpace DCR",
                   .op_type = "DepthToSpace",
                   .attributes = {{"blocksize", int64_t{2}}},
                   .inputs = {normal({2, 8, 2, 3})}});
  cases.push_back({.label = "DepthToSpace CRD",
                   .op_type = "DepthToSpace",
                   .attributes = {{"blocksize", int64_t{2}}, {"mode", S("CRD")}},
                   .inputs = {normal({1, 8, 3, 2})}});
  cases.push_back({.label = "SpaceToDepth blocksize 3",
                   .op_type = "SpaceToDepth",
                   .attributes = {{"blocksize", int64_t{3}}},
                   .inputs = {normal({2, 2, 3, 6})}});
  return cases;
}

}  // namespace onnxtrain::harness
