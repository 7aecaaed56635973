// The data-movement reference kernels (Shape, Size, Gather, Reshape, Flatten, Squeeze, Unsqueeze, Identity,
// Concat, Split, Slice, Transpose, Expand, Tile, Constant, ConstantOfShape, Range, Pad, GatherElements,
// ScatterElements, GatherND, and the backward GatherElementsGrad, GatherNDGrad) on hand-computed cases:
// opset forms (attributes vs inputs), negative axes/indices/steps, several dtypes, bad data.
#include <gtest/gtest.h>

#include <climits>
#include <cstring>

#include "kernels/kernel.h"
#include "tests/reference_kernel_call.h"

using namespace onnxtrain;

namespace {

template <typename T>
Tensor tensor(DType dtype, std::vector<int64_t> sizes, const std::vector<T>& values) {
  Tensor t(dtype, std::move(sizes));
  EXPECT_EQ(static_cast<int64_t>(values.size()), t.numel());
  for (size_t i = 0; i < values.size(); ++i) t.data<T>()[i] = values[i];
  return t;
}
Tensor f32(std::vector<int64_t> sizes, const std::vector<float>& v) { return tensor(DType::Float32, sizes, v); }
Tensor i64(std::vector<int64_t> sizes, const std::vector<int64_t>& v) { return tensor(DType::Int64, sizes, v); }
Tensor i32(std::vector<int64_t> sizes, const std::vector<int32_t>& v) { return tensor(DType::Int32, sizes, v); }
Tensor vec64(const std::vector<int64_t>& v) { return i64({static_cast<int64_t>(v.size())}, v); }

// 0, 1, 2, ... as float32.
Tensor iota_f32(std::vector<int64_t> sizes) {
  Tensor t(DType::Float32, std::move(sizes));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i);
  return t;
}

using namespace testing_support;

TEST(ReferenceDataMovement, EveryOpIsRegisteredForEveryFixedSizeDtype) {
  const std::vector<DType> all = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int8,
                                  DType::UInt8,   DType::Int16,   DType::UInt16,  DType::Int32,    DType::UInt32,
                                  DType::Int64,   DType::UInt64,  DType::Bool};
  for (const char* op : {"Shape", "Size", "Gather", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Concat",
                         "Split", "Slice", "Transpose", "Expand", "Tile", "Constant", "Pad"}) {
    for (DType d : all)
      EXPECT_NE(KernelRegistry::builtin().find("", op, DeviceKind::Cpu, d, "reference"), nullptr)
          << op << " " << dtype_name(d);
  }
  EXPECT_NE(KernelRegistry::builtin().find("", "ConstantOfShape", DeviceKind::Cpu, DType::Int64, "reference"), nullptr);
  for (DType d : {DType::Float32, DType::Float64, DType::Int16, DType::Int32, DType::Int64})
    EXPECT_NE(KernelRegistry::builtin().find("", "Range", DeviceKind::Cpu, d, "reference"), nullptr);
}

TEST(ReferenceDataMovement, ShapeWithStartAndEnd) {
  Tensor x(DType::Float16, {2, 3, 4});
  EXPECT_EQ(values<int64_t>(run({"Shape", 13, {}, {x}, {{DType::Int64, {3}}}})[0]), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(values<int64_t>(run({"Shape", 15, {{"start", int64_t{1}}}, {x}, {{DType::Int64, {2}}}})[0]),
            (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(values<int64_t>(run({"Shape", 15, {{"end", int64_t{-1}}}, {x}, {{DType::Int64, {2}}}})[0]),
            (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(values<int64_t>(
                run({"Shape", 15, {{"start", int64_t{-10}}, {"end", int64_t{10}}}, {x}, {{DType::Int64, {3}}}})[0]),
            (std::vector<int64_t>{2, 3, 4}));  // clamped
  EXPECT_EQ(run({"Shape", 15, {{"start", int64_t{2}}, {"end", int64_t{1}}}, {x}, {{DType::Int64, {0}}}})[0].numel(), 0);
}

TEST(ReferenceDataMovement, SizeCountsElements) {
  Tensor x(DType::Int8, {2, 3, 4});
  EXPECT_EQ(values<int64_t>(run({"Size", 13, {}, {x}, {{DType::Int64, {}}}})[0]), (std::vector<int64_t>{24}));
}

TEST(ReferenceDataMovement, GatherAlongAxesWithNegativeIndices) {
  Tensor data = f32({3, 2}, {1, 2, 3, 4, 5, 6});
  auto out = run({"Gather", 13, {}, {data, i64({2, 2}, {0, -1, 1, 0})}, {{DType::Float32, {2, 2, 2}}}});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{1, 2, 5, 6, 3, 4, 1, 2}));

  Tensor shorts = tensor<int16_t>(DType::Int16, {2, 3}, {10, 11, 12, 20, 21, 22});
  out = run({"Gather", 11, {{"axis", int64_t{-1}}}, {shorts, i32({2}, {2, -3})}, {{DType::Int16, {2, 2}}}});
  EXPECT_EQ(values<int16_t>(out[0]), (std::vector<int16_t>{12, 10, 22, 20}));

  // A scalar index drops the axis.
  out = run({"Gather", 13, {}, {data, i64({}, {-2})}, {{DType::Float32, {2}}}});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{3, 4}));
}

TEST(ReferenceDataMovement, GatherIndexOutOfRangeThrowsNamingTheOp) {
  Tensor data = f32({3, 2}, {1, 2, 3, 4, 5, 6});
  std::string message = error_of({"Gather", 13, {}, {data, i64({2}, {0, 3})}, {{DType::Float32, {2, 2}}}});
  EXPECT_NE(message.find("Gather"), std::string::npos) << message;
  EXPECT_NE(message.find("index 3"), std::string::npos) << message;
  message = error_of({"Gather", 13, {}, {data, i32({1}, {-4})}, {{DType::Float32, {1, 2}}}});
  EXPECT_NE(message.find("index -4"), std::string::npos) << message;
  // A bad axis fails at prepare.
  EXPECT_NE(error_of({"Gather", 13, {{"axis", int64_t{2}}}, {data, i64({1}, {0})}, {{DType::Float32, {3, 1}}}})
                .find("axis 2"),
            std::string::npos);
}

TEST(ReferenceDataMovement, ReshapeFormsCopyBytes) {
  Tensor x = iota_f32({2, 3, 4});
  auto out = run({"Reshape", 13, {}, {x, vec64({0, -1})}, {{DType::Float32, {2, 12}}}});
  EXPECT_EQ(out[0].sizes(), (std::vector<int64_t>{2, 12}));
  EXPECT_EQ(values<float>(out[0]), values<float>(x));
  out = run({"Reshape", 1, {{"shape", std::vector<int64_t>{4, -1}}}, {x}, {{DType::Float32, {4, 6}}}});
  EXPECT_EQ(values<float>(out[0]), values<float>(x));
  // The allocation must agree with the shape input.
  EXPECT_NE(error_of({"Reshape", 13, {}, {x, vec64({6, 4})}, {{DType::Float32, {4, 6}}}}).find("(6,4)"),
            std::string::npos);
  // allowzero: 0 is a size, not a copy of the input dim.
  Tensor empty(DType::Float32, {0, 3});
  out = run({"Reshape", 14, {{"allowzero", int64_t{1}}}, {empty, vec64({3, 0})}, {{DType::Float32, {3, 0}}}});
  EXPECT_EQ(out[0].numel(), 0);
}

TEST(ReferenceDataMovement, FlattenSqueezeUnsqueezeIdentityKeepBytes) {
  Tensor flags = tensor<uint8_t>(DType::Bool, {1, 2, 1, 3}, {1, 0, 1, 1, 0, 0});
  auto out = run({"Squeeze", 13, {}, {flags, vec64({0, -2})}, {{DType::Bool, {2, 3}}}});
  EXPECT_EQ(values<uint8_t>(out[0]), values<uint8_t>(flags));
  out = run({"Squeeze", 11, {{"axes", std::vector<int64_t>{0, 2}}}, {flags}, {{DType::Bool, {2, 3}}}});
  EXPECT_EQ(values<uint8_t>(out[0]), values<uint8_t>(flags));
  out = run({"Unsqueeze", 13, {}, {out[0], vec64({0, 2})}, {{DType::Bool, {1, 2, 1, 3}}}});
  EXPECT_EQ(values<uint8_t>(out[0]), values<uint8_t>(flags));
  out = run({"Identity", 13, {}, {flags}, {{DType::Bool, {1, 2, 1, 3}}}});
  EXPECT_EQ(values<uint8_t>(out[0]), values<uint8_t>(flags));
  out = run({"Flatten", 13, {{"axis", int64_t{-1}}}, {flags}, {{DType::Bool, {2, 3}}}});
  EXPECT_EQ(values<uint8_t>(out[0]), values<uint8_t>(flags));
  out = run({"Flatten", 13, {{"axis", int64_t{0}}}, {flags}, {{DType::Bool, {1, 6}}}});
  EXPECT_EQ(values<uint8_t>(out[0]), values<uint8_t>(flags));
  EXPECT_THROW(run({"Flatten", 13, {{"axis", int64_t{5}}}, {flags}, {{DType::Bool, {6, 1}}}}), Error);
  EXPECT_THROW(run({"Identity", 13, {}, {flags}, {{DType::Bool, {5}}}}), Error);  // element counts differ
}

TEST(ReferenceDataMovement, ConcatAlongNegativeAndDefaultAxis) {
  Tensor a = i64({2, 1}, {1, 2}), b = i64({2, 2}, {3, 4, 5, 6});
  auto out = run({"Concat", 13, {{"axis", int64_t{-1}}}, {a, b}, {{DType::Int64, {2, 3}}}});
  EXPECT_EQ(values<int64_t>(out[0]), (std::vector<int64_t>{1, 3, 4, 2, 5, 6}));
  out = run({"Concat", 1, {}, {a, b}, {{DType::Int64, {2, 3}}}});  // opset 1 defaults to axis 1
  EXPECT_EQ(values<int64_t>(out[0]), (std::vector<int64_t>{1, 3, 4, 2, 5, 6}));
  out = run({"Concat", 13, {{"axis", int64_t{0}}}, {i64({1, 2}, {7, 8}), b}, {{DType::Int64, {3, 2}}}});
  EXPECT_EQ(values<int64_t>(out[0]), (std::vector<int64_t>{7, 8, 3, 4, 5, 6}));
  EXPECT_THROW(run({"Concat", 13, {}, {a, b}, {{DType::Int64, {2, 3}}}}), Error);  // axis required from opset 4
}

TEST(ReferenceDataMovement, SplitByInputAttributeAndOutputSizes) {
  Tensor x = iota_f32({2, 3});
  auto out = run(
      {"Split", 13, {{"axis", int64_t{1}}}, {x, vec64({1, 2})}, {{DType::Float32, {2, 1}}, {DType::Float32, {2, 2}}}});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{0, 3}));
  EXPECT_EQ(values<float>(out[1]), (std::vector<float>{1, 2, 4, 5}));
  out = run({"Split",
             11,
             {{"axis", int64_t{-1}}, {"split", std::vector<int64_t>{2, 1}}},
             {x},
             {{DType::Float32, {2, 2}}, {DType::Float32, {2, 1}}}});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{0, 1, 3, 4}));
  EXPECT_EQ(values<float>(out[1]), (std::vector<float>{2, 5}));
  // Opset 18 num_outputs: the last chunk is smaller; chunk sizes come from the outputs.
  Tensor y = iota_f32({5});
  out = run({"Split", 18, {{"num_outputs", int64_t{2}}}, {y}, {{DType::Float32, {3}}, {DType::Float32, {2}}}});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{0, 1, 2}));
  EXPECT_EQ(values<float>(out[1]), (std::vector<float>{3, 4}));
  EXPECT_THROW(run({"Split", 13, {}, {y, vec64({1, 4})}, {{DType::Float32, {3}}, {DType::Float32, {2}}}}), Error);
  EXPECT_THROW(run({"Split", 13, {}, {y}, {{DType::Float32, {3}}, {DType::Float32, {3}}}}), Error);
}

TEST(ReferenceDataMovement, SliceWithInputsNegativeStepsAndClamping) {
  Tensor x = iota_f32({10});
  auto out = run(
      {"Slice", 13, {}, {x, i32({1}, {-1}), i32({1}, {INT32_MIN}), Tensor(), i32({1}, {-3})}, {{DType::Float32, {4}}}});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{9, 6, 3, 0}));
  out = run({"Slice", 13, {}, {x, vec64({8}), vec64({1}), vec64({0}), vec64({-2})}, {{DType::Float32, {4}}}});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{8, 6, 4, 2}));
  out = run({"Slice", 10, {}, {x, vec64({-3}), vec64({INT64_MAX})}, {{DType::Float32, {3}}}});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{7, 8, 9}));

  Tensor m = iota_f32({3, 4});
  out = run({"Slice", 13, {}, {m, vec64({0, 1}), vec64({2, 1000}), vec64({0, -1})}, {{DType::Float32, {2, 3}}}});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{1, 2, 3, 5, 6, 7}));
  out =
      run({"Slice",
           1,
           {{"starts", std::vector<int64_t>{1}}, {"ends", std::vector<int64_t>{-1}}, {"axes", std::vector<int64_t>{1}}},
           {m},
           {{DType::Float32, {3, 2}}}});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{1, 2, 5, 6, 9, 10}));
  // Start past the end gives an empty slice.
  out = run({"Slice", 13, {}, {m, vec64({5}), vec64({9}), vec64({1})}, {{DType::Float32, {3, 0}}}});
  EXPECT_EQ(out[0].numel(), 0);
  EXPECT_THROW(run({"Slice", 13, {}, {x, vec64({0}), vec64({5}), vec64({0}), vec64({0})}, {{DType::Float32, {5}}}}),
               Error);
  EXPECT_THROW(run({"Slice", 13, {}, {x, vec64({0}), vec64({5})}, {{DType::Float32, {4}}}}), Error);
}

TEST(ReferenceDataMovement, TransposeDefaultAndPerm) {
  Tensor x = tensor<uint8_t>(DType::UInt8, {2, 3}, {1, 2, 3, 4, 5, 6});
  auto out = run({"Transpose", 13, {}, {x}, {{DType::UInt8, {3, 2}}}});
  EXPECT_EQ(values<uint8_t>(out[0]), (std::vector<uint8_t>{1, 4, 2, 5, 3, 6}));

  Tensor y = iota_f32({2, 3, 4});
  out = run({"Transpose", 13, {{"perm", std::vector<int64_t>{1, 2, 0}}}, {y}, {{DType::Float32, {3, 4, 2}}}});
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 4; ++k)
        EXPECT_EQ(out[0].data<float>()[j * 8 + k * 2 + i], y.data<float>()[i * 12 + j * 4 + k]);
  EXPECT_THROW(run({"Transpose", 13, {{"perm", std::vector<int64_t>{0, 0, 1}}}, {y}, {{DType::Float32, {2, 2, 3}}}}),
               Error);
}

TEST(ReferenceDataMovement, ExpandBroadcastsBothWays) {
  Tensor x = tensor<uint16_t>(DType::BFloat16, {3, 1}, {0x3f80, 0x4000, 0x4040});  // 1, 2, 3
  auto out = run({"Expand", 13, {}, {x, vec64({2, 1, 2})}, {{DType::BFloat16, {2, 3, 2}}}});
  EXPECT_EQ(values<uint16_t>(out[0]), (std::vector<uint16_t>{0x3f80, 0x3f80, 0x4000, 0x4000, 0x4040, 0x4040, 0x3f80,
                                                             0x3f80, 0x4000, 0x4000, 0x4040, 0x4040}));
  // A shape dim of 1 keeps the input's size (numpy broadcast, not a plain reshape).
  out = run({"Expand", 13, {}, {x, vec64({1, 1})}, {{DType::BFloat16, {3, 1}}}});
  EXPECT_EQ(values<uint16_t>(out[0]), values<uint16_t>(x));
  EXPECT_THROW(run({"Expand", 13, {}, {x, vec64({2, 2})}, {{DType::BFloat16, {3, 2}}}}), Error);
}

TEST(ReferenceDataMovement, TileRepeatsEachAxis) {
  Tensor x = i32({2, 2}, {1, 2, 3, 4});
  auto out = run({"Tile", 13, {}, {x, vec64({2, 3})}, {{DType::Int32, {4, 6}}}});
  EXPECT_EQ(values<int32_t>(out[0]),
            (std::vector<int32_t>{1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4, 1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4}));
  out = run({"Tile", 6, {}, {x, vec64({1, 0})}, {{DType::Int32, {2, 0}}}});
  EXPECT_EQ(out[0].numel(), 0);
  EXPECT_THROW(run({"Tile", 13, {}, {x, vec64({2})}, {{DType::Int32, {4, 2}}}}), Error);
}

TEST(ReferenceDataMovement, ConstantFromEachAttributeForm) {
  Tensor value = tensor<double>(DType::Float64, {2}, {1.5, -2});
  auto out = run({"Constant", 13, {{"value", value}}, {}, {{DType::Float64, {2}}}});
  EXPECT_EQ(values<double>(out[0]), (std::vector<double>{1.5, -2}));
  out = run({"Constant", 13, {{"value_floats", std::vector<double>{0.25, 4}}}, {}, {{DType::Float32, {2}}}});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{0.25f, 4.f}));
  out = run({"Constant", 13, {{"value_float", 3.0}}, {}, {{DType::Float32, {}}}});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{3.f}));
  out = run({"Constant", 13, {{"value_int", int64_t{-7}}}, {}, {{DType::Int64, {}}}});
  EXPECT_EQ(values<int64_t>(out[0]), (std::vector<int64_t>{-7}));
  out = run({"Constant", 13, {{"value_ints", std::vector<int64_t>{1, 2, 3}}}, {}, {{DType::Int64, {3}}}});
  EXPECT_EQ(values<int64_t>(out[0]), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_THROW(run({"Constant", 13, {{"value_string", std::string("x")}}, {}, {{DType::Int64, {}}}}), Error);
}

TEST(ReferenceDataMovement, ConstantOfShapeFillsValue) {
  auto out = run({"ConstantOfShape", 9, {}, {vec64({2, 2})}, {{DType::Float32, {2, 2}}}});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{0, 0, 0, 0}));
  out = run({"ConstantOfShape", 9, {{"value", i32({1}, {7})}}, {vec64({3})}, {{DType::Int32, {3}}}});
  EXPECT_EQ(values<int32_t>(out[0]), (std::vector<int32_t>{7, 7, 7}));
  out = run({"ConstantOfShape", 9, {{"value", i32({1}, {7})}}, {vec64({})}, {{DType::Int32, {}}}});
  EXPECT_EQ(values<int32_t>(out[0]), (std::vector<int32_t>{7}));
  EXPECT_THROW(run({"ConstantOfShape", 9, {}, {vec64({2})}, {{DType::Float32, {3}}}}), Error);
}

TEST(ReferenceDataMovement, RangeOverEachType) {
  auto out = run({"Range", 11, {}, {i32({}, {10}), i32({}, {4}), i32({}, {-3})}, {{DType::Int32, {2}}}});
  EXPECT_EQ(values<int32_t>(out[0]), (std::vector<int32_t>{10, 7}));
  out = run({"Range", 11, {}, {i64({}, {0}), i64({}, {5}), i64({}, {2})}, {{DType::Int64, {3}}}});
  EXPECT_EQ(values<int64_t>(out[0]), (std::vector<int64_t>{0, 2, 4}));
  out = run({"Range", 11, {}, {f32({}, {1}), f32({}, {2}), f32({}, {0.25})}, {{DType::Float32, {4}}}});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{1, 1.25, 1.5, 1.75}));
  Tensor d0 = tensor<double>(DType::Float64, {}, {0}), d1 = tensor<double>(DType::Float64, {}, {-1});
  out = run({"Range", 11, {}, {d0, d1, tensor<double>(DType::Float64, {}, {-0.5})}, {{DType::Float64, {2}}}});
  EXPECT_EQ(values<double>(out[0]), (std::vector<double>{0, -0.5}));
  out = run({"Range", 11, {}, {d0, d1, tensor<double>(DType::Float64, {}, {1})}, {{DType::Float64, {0}}}});
  EXPECT_EQ(out[0].numel(), 0);
  EXPECT_THROW(run({"Range", 11, {}, {i32({}, {0}), i32({}, {4}), i32({}, {0})}, {{DType::Int32, {0}}}}), Error);
}

TEST(ReferenceDataMovement, PadModes) {
  Tensor x = f32({3}, {1, 2, 3});
  auto pad = [&](const char* mode) {
    return values<float>(
        run({"Pad", 13, {{"mode", std::string(mode)}}, {x, vec64({2, 2})}, {{DType::Float32, {7}}}})[0]);
  };
  EXPECT_EQ(pad("constant"), (std::vector<float>{0, 0, 1, 2, 3, 0, 0}));
  EXPECT_EQ(pad("reflect"), (std::vector<float>{3, 2, 1, 2, 3, 2, 1}));
  EXPECT_EQ(pad("edge"), (std::vector<float>{1, 1, 1, 2, 3, 3, 3}));
  EXPECT_EQ(pad("wrap"), (std::vector<float>{2, 3, 1, 2, 3, 1, 2}));
  EXPECT_THROW(pad("mirror"), Error);
}

TEST(ReferenceDataMovement, PadOpsetForms) {
  Tensor m = i64({2, 2}, {1, 2, 3, 4});
  // Opset 11: pads and constant_value inputs; a negative pad crops.
  auto out = run({"Pad", 11, {}, {m, vec64({1, 0, 0, -1}), i64({}, {9})}, {{DType::Int64, {3, 1}}}});
  EXPECT_EQ(values<int64_t>(out[0]), (std::vector<int64_t>{9, 1, 3}));
  // Opset 18: axes input (negative allowed), pads only for those axes.
  out = run({"Pad", 18, {}, {m, vec64({1, 1}), i64({}, {-1}), vec64({-1})}, {{DType::Int64, {2, 4}}}});
  EXPECT_EQ(values<int64_t>(out[0]), (std::vector<int64_t>{-1, 1, 2, -1, -1, 3, 4, -1}));
  // Opset 2: pads and value attributes, the value converted to the data's dtype (float16 1.0 = 0x3c00).
  Tensor h = tensor<uint16_t>(DType::Float16, {1}, {0x4000});
  out = run({"Pad", 2, {{"pads", std::vector<int64_t>{1, 0}}, {"value", 1.0}}, {h}, {{DType::Float16, {2}}}});
  EXPECT_EQ(values<uint16_t>(out[0]), (std::vector<uint16_t>{0x3c00, 0x4000}));
  // Opset 1 called them paddings.
  out = run({"Pad", 1, {{"paddings", std::vector<int64_t>{0, 2}}}, {h}, {{DType::Float16, {3}}}});
  EXPECT_EQ(values<uint16_t>(out[0]), (std::vector<uint16_t>{0x4000, 0, 0}));
  EXPECT_THROW(run({"Pad", 11, {}, {m, vec64({1, 1})}, {{DType::Int64, {4, 2}}}}), Error);  // 2 entries for rank 2
}

// --- GatherElements, ScatterElements, GatherND and the backward ops GatherElementsGrad, GatherNDGrad ---

// Runs the reference kernel of a backward op (domain ai.onnxtrain) on fresh outputs.
std::vector<Tensor> run_training(KernelCase c) {
  c.domain = "ai.onnxtrain";
  const KernelSpec spec = spec_of(c);
  const KernelEntry* entry =
      KernelRegistry::builtin().find("ai.onnxtrain", c.op, DeviceKind::Cpu, kernel_dtype(spec), "reference");
  if (!entry) throw Error("no reference kernel for " + c.op);
  return run_prepared(*entry->prepare(spec), c.inputs, c.outputs);
}

TEST(ReferenceDataMovement, ElementAndNDOpsAreRegistered) {
  const std::vector<DType> all = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int8,
                                  DType::UInt8,   DType::Int16,   DType::UInt16,  DType::Int32,    DType::UInt32,
                                  DType::Int64,   DType::UInt64,  DType::Bool};
  for (const char* op : {"GatherElements", "ScatterElements", "GatherND"})
    for (DType d : all)
      EXPECT_NE(KernelRegistry::builtin().find("", op, DeviceKind::Cpu, d, "reference"), nullptr)
          << op << " " << dtype_name(d);
  for (const char* op : {"GatherElementsGrad", "GatherNDGrad"})
    for (DType d : {DType::Float32, DType::Float64})
      EXPECT_NE(KernelRegistry::builtin().find("ai.onnxtrain", op, DeviceKind::Cpu, d, "reference"), nullptr) << op;
}

TEST(ReferenceDataMovement, GatherElementsAlongEachAxis) {
  // The ONNX examples: axis 1, then axis 0 with fewer index rows than data rows.
  auto out = run({"GatherElements",
                  13,
                  {{"axis", int64_t{1}}},
                  {f32({2, 2}, {1, 2, 3, 4}), i64({2, 2}, {0, 0, 1, 0})},
                  {{DType::Float32, {2, 2}}}});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{1, 1, 4, 3}));
  Tensor data = f32({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  out = run({"GatherElements", 11, {}, {data, i64({2, 3}, {1, 2, 0, 2, 0, 0})}, {{DType::Float32, {2, 3}}}});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{4, 8, 3, 7, 2, 3}));
  // Negative int32 indices, axis -1, int16 data; indices shorter than the data along axis 0.
  Tensor shorts = tensor<int16_t>(DType::Int16, {2, 3}, {10, 11, 12, 20, 21, 22});
  out = run(
      {"GatherElements", 13, {{"axis", int64_t{-1}}}, {shorts, i32({1, 4}, {-1, -3, 1, 2})}, {{DType::Int16, {1, 4}}}});
  EXPECT_EQ(values<int16_t>(out[0]), (std::vector<int16_t>{12, 10, 11, 12}));
}

TEST(ReferenceDataMovement, GatherElementsRejectsBadIndicesAndShapes) {
  Tensor data = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  std::string message =
      error_of({"GatherElements", 13, {{"axis", int64_t{1}}}, {data, i64({2, 1}, {0, 3})}, {{DType::Float32, {2, 1}}}});
  EXPECT_NE(message.find("GatherElements"), std::string::npos) << message;
  EXPECT_NE(message.find("index 3 (position 1)"), std::string::npos) << message;
  message = error_of({"GatherElements", 13, {}, {data, i32({1, 1}, {-3})}, {{DType::Float32, {1, 1}}}});
  EXPECT_NE(message.find("index -3"), std::string::npos) << message;
  // Longer than the data off the axis, and a rank mismatch, fail at prepare.
  message = error_of({"GatherElements", 13, {}, {data, i64({1, 4}, {0, 0, 0, 0})}, {{DType::Float32, {1, 4}}}});
  EXPECT_NE(message.find("longer than data"), std::string::npos) << message;
  message = error_of({"GatherElements", 13, {}, {data, i64({2}, {0, 0})}, {{DType::Float32, {2}}}});
  EXPECT_NE(message.find("must have the rank of data"), std::string::npos) << message;
}

TEST(ReferenceDataMovement, ScatterElementsWritesAndReduces) {
  // The ONNX examples: axis 0 into zeros, axis 1 with negative int32 indices.
  auto out = run({"ScatterElements",
                  11,
                  {},
                  {f32({3, 3}, std::vector<float>(9, 0)), i64({2, 3}, {1, 0, 2, 0, 2, 1}),
                   f32({2, 3}, {1, 1.5, 1.25, 2, 2.5, 2.25})},
                  {{DType::Float32, {3, 3}}}});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{2, 1.5, 0, 1, 0, 2.25, 0, 2.5, 1.25}));
  Tensor row = f32({1, 5}, {1, 2, 3, 4, 5});
  out = run({"ScatterElements",
             13,
             {{"axis", int64_t{1}}},
             {row, i32({1, 2}, {1, -2}), f32({1, 2}, {1.5, 2.5})},
             {{DType::Float32, {1, 5}}}});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{1, 1.5, 3, 2.5, 5}));
  // Repeated indices: "none" keeps the last write, the reductions combine in index order.
  auto scatter = [&](int opset, const char* reduction) {
    return values<float>(run({"ScatterElements",
                              opset,
                              {{"axis", int64_t{1}}, {"reduction", std::string(reduction)}},
                              {row, i64({1, 3}, {1, 1, -1}), f32({1, 3}, {3, 0.5, 7})},
                              {{DType::Float32, {1, 5}}}})[0]);
  };
  EXPECT_EQ(scatter(16, "none"), (std::vector<float>{1, 0.5, 3, 4, 7}));
  EXPECT_EQ(scatter(16, "add"), (std::vector<float>{1, 5.5, 3, 4, 12}));
  EXPECT_EQ(scatter(16, "mul"), (std::vector<float>{1, 3, 3, 4, 35}));
  EXPECT_EQ(scatter(18, "max"), (std::vector<float>{1, 3, 3, 4, 7}));
  EXPECT_EQ(scatter(18, "min"), (std::vector<float>{1, 0.5, 3, 4, 5}));
  // Integers reduce too; bool data moves with "none" only.
  out = run({"ScatterElements",
             16,
             {{"reduction", std::string("add")}},
             {i64({3}, {1, 2, 3}), i64({2}, {2, 2}), i64({2}, {10, 20})},
             {{DType::Int64, {3}}}});
  EXPECT_EQ(values<int64_t>(out[0]), (std::vector<int64_t>{1, 2, 33}));
  Tensor flags = tensor<bool>(DType::Bool, {3}, {false, false, true});
  out = run({"ScatterElements",
             13,
             {},
             {flags, i64({1}, {0}), tensor<bool>(DType::Bool, {1}, {true})},
             {{DType::Bool, {3}}}});
  EXPECT_EQ(values<bool>(out[0]), (std::vector<bool>{true, false, true}));
  EXPECT_NE(error_of({"ScatterElements",
                      16,
                      {{"reduction", std::string("add")}},
                      {flags, i64({1}, {0}), tensor<bool>(DType::Bool, {1}, {true})},
                      {{DType::Bool, {3}}}})
                .find("not supported on bool"),
            std::string::npos);
}

TEST(ReferenceDataMovement, ScatterElementsRejectsBadIndices) {
  Tensor row = f32({1, 3}, {1, 2, 3});
  std::string message = error_of({"ScatterElements",
                                  13,
                                  {{"axis", int64_t{1}}},
                                  {row, i64({1, 2}, {0, -4}), f32({1, 2}, {5, 6})},
                                  {{DType::Float32, {1, 3}}}});
  EXPECT_NE(message.find("ScatterElements"), std::string::npos) << message;
  EXPECT_NE(message.find("index -4 (position 1)"), std::string::npos) << message;
  message =
      error_of({"ScatterElements", 13, {}, {row, i64({1, 2}, {0, 0}), f32({1, 1}, {5})}, {{DType::Float32, {1, 3}}}});
  EXPECT_NE(message.find("must have the sizes of indices"), std::string::npos) << message;
}

TEST(ReferenceDataMovement, GatherNDSlicesElementsAndBatches) {
  // The ONNX examples: whole elements, rows, and batch_dims 1.
  Tensor m = i64({2, 2}, {0, 1, 2, 3});
  auto out = run({"GatherND", 11, {}, {m, i64({2, 2}, {0, 0, 1, 1})}, {{DType::Int64, {2}}}});
  EXPECT_EQ(values<int64_t>(out[0]), (std::vector<int64_t>{0, 3}));
  out = run({"GatherND", 11, {}, {m, i64({2, 1}, {1, 0})}, {{DType::Int64, {2, 2}}}});
  EXPECT_EQ(values<int64_t>(out[0]), (std::vector<int64_t>{2, 3, 0, 1}));
  Tensor cube = f32({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  out = run({"GatherND", 12, {{"batch_dims", int64_t{1}}}, {cube, i64({2, 1}, {1, 0})}, {{DType::Float32, {2, 2}}}});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{2, 3, 4, 5}));
  // Negative int32 coordinates, index rows in a (2, 1, 2) tensor.
  out = run({"GatherND", 13, {}, {cube, i32({2, 1, 2}, {-1, 0, 0, -1})}, {{DType::Float32, {2, 1, 2}}}});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{4, 5, 2, 3}));
}

TEST(ReferenceDataMovement, GatherNDRejectsBadIndicesAndShapes) {
  Tensor m = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  std::string message = error_of({"GatherND", 13, {}, {m, i64({2, 2}, {1, 2, 1, 3})}, {{DType::Float32, {2}}}});
  EXPECT_NE(message.find("GatherND"), std::string::npos) << message;
  EXPECT_NE(message.find("index 3 (index row 1, coordinate 1)"), std::string::npos) << message;
  message = error_of({"GatherND", 13, {}, {m, i64({1, 3}, {0, 0, 0})}, {{DType::Float32, {1}}}});
  EXPECT_NE(message.find("last axis of indices"), std::string::npos) << message;
  message =
      error_of({"GatherND", 13, {{"batch_dims", int64_t{1}}}, {m, i64({3, 1}, {0, 0, 0})}, {{DType::Float32, {3}}}});
  EXPECT_NE(message.find("batch axis 0 differs"), std::string::npos) << message;
}

TEST(ReferenceDataMovement, ElementAndNDGradsAccumulateRepeatedIndices) {
  // GatherElementsGrad along axis 1 of (2, 3): position (0, 0) and (0, 2) both name column 2.
  auto dx =
      run_training({.op = "GatherElementsGrad",
                    .opset = 1,
                    .attributes = {{"axis", int64_t{1}}},
                    .inputs = {f32({2, 3}, {1, 2, 4, 8, 16, 32}), vec64({2, 3}), i64({2, 3}, {2, 0, -1, 1, 1, 0})},
                    .outputs = {{DType::Float32, {2, 3}}}});
  EXPECT_EQ(values<float>(dx[0]), (std::vector<float>{2, 0, 5, 32, 24, 0}));
  // GatherNDGrad: rows 1, 1, 0 of a (3, 2) dX.
  dx = run_training({.op = "GatherNDGrad",
                     .opset = 1,
                     .inputs = {f32({3, 2}, {1, 2, 4, 8, 16, 32}), vec64({3, 2}), i64({3, 1}, {1, -2, 0})},
                     .outputs = {{DType::Float32, {3, 2}}}});
  EXPECT_EQ(values<float>(dx[0]), (std::vector<float>{16, 32, 5, 10, 0, 0}));
  // A bad index is an Error naming the op.
  try {
    run_training({.op = "GatherNDGrad",
                  .opset = 1,
                  .inputs = {f32({1, 2}, {1, 2}), vec64({3, 2}), i64({1, 1}, {3})},
                  .outputs = {{DType::Float32, {3, 2}}}});
    ADD_FAILURE() << "GatherNDGrad accepted index 3 of an axis of size 3";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("GatherNDGrad"), std::string::npos) << e.what();
  }
}

}  // namespace
