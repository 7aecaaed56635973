// The "cpu" data-movement kernels (Transpose, Concat, Split, Slice, Gather, Expand, Tile, Pad, Cast, CastLike,
// Reshape, Flatten, Squeeze, Unsqueeze, Identity, Resize, DepthToSpace, SpaceToDepth; SliceGrad, GatherGrad, PadGrad,
// ResizeGrad) against the reference kernels: seeded random data, shapes large enough for several threads and odd enough
// for loop tails, every axis/attribute/mode that changes the code path, several dtypes. Data movement is exact, and the
// backward ops add in the reference kernel's order, so outputs must match bit for bit; bad data must fail
// with the reference kernel's message. Each case also checks that the registry's default is "cpu" and runs
// the prepared kernel twice (the second run takes the cached plan).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <random>

#include "graph/error.h"
#include "graph/shape.h"
#include "kernels/kernel.h"
#include "tests/reference_kernel_call.h"

using namespace onnxtrain;

namespace {

using Ints = std::vector<int64_t>;

const std::vector<DType> kAllDTypes = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int8,
                                       DType::UInt8,   DType::Int16,   DType::UInt16,  DType::Int32,    DType::UInt32,
                                       DType::Int64,   DType::UInt64,  DType::Bool};

std::mt19937& rng() {
  static std::mt19937 r(1234);
  return r;
}

Tensor random_tensor(DType dtype, const Ints& sizes, bool raw_bits = false) {
  return testing_support::random_any_dtype(rng(), dtype, sizes, raw_bits);
}

Tensor ints(const Ints& v, DType dtype = DType::Int64) { return testing_support::index_tensor(v, dtype); }

struct Case {
  std::string op;
  int opset = 13;
  Attributes attributes;
  std::vector<Tensor> inputs;  // a default Tensor is an omitted optional input
  std::vector<TensorDesc> outputs;
  std::string domain;
};

Case training_case(std::string op, Attributes attributes, std::vector<Tensor> inputs, std::vector<TensorDesc> outputs) {
  return {std::move(op), 1, std::move(attributes), std::move(inputs), std::move(outputs), "ai.onnxtrain"};
}

using testing_support::spec_of;

using testing_support::views_of;

std::vector<Tensor> fresh_outputs(const Case& c) {
  std::vector<Tensor> outs;
  for (const TensorDesc& d : c.outputs) {
    outs.emplace_back(d.dtype, d.sizes);
    if (outs.back().nbytes() > 0) std::memset(outs.back().raw(), 0xa5, outs.back().nbytes());  // not zero
  }
  return outs;
}

std::unique_ptr<Kernel> prepare(const Case& c, const std::string& implementation) {
  const KernelSpec spec = spec_of(c);
  const KernelEntry* entry =
      KernelRegistry::builtin().find(c.domain, c.op, DeviceKind::Cpu, kernel_dtype(spec), implementation);
  if (!entry) throw std::runtime_error("no " + implementation + " kernel for " + c.op);
  return entry->prepare(spec);
}

void run(Kernel& kernel, const Case& c, std::vector<Tensor>& outs) {
  Stream stream;
  const std::vector<TensorView> in = views_of(c.inputs), out = views_of(outs);
  kernel.run(stream, in, out);
}

void expect_bytes_equal(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  ASSERT_EQ(got.nbytes(), want.nbytes()) << what;
  if (want.nbytes() == 0) return;
  const auto* a = reinterpret_cast<const uint8_t*>(got.raw());
  const auto* b = reinterpret_cast<const uint8_t*>(want.raw());
  const size_t element = dtype_size(want.dtype());
  for (size_t i = 0; i < want.nbytes(); ++i) {
    if (a[i] != b[i]) {
      FAIL() << what << ": element " << i / element << " (byte " << i << ") differs: " << int(a[i]) << " vs "
             << int(b[i]);
    }
  }
}

std::string describe(const Case& c) {
  std::string s = c.op + " opset " + std::to_string(c.opset) + " dtype " +
                  std::string(dtype_name(kernel_dtype(spec_of(c)))) + " inputs";
  for (const Tensor& t : c.inputs) {
    s += " (";
    for (int64_t d : t.sizes()) s += std::to_string(d) + ",";
    s += ")";
  }
  for (const TensorDesc& d : c.outputs) s += " -> " + std::string(dtype_name(d.dtype));
  return s;
}

int checked_cases = 0;

// The default kernel is "cpu" and agrees with the reference kernel byte for byte, on two runs.
void expect_agree(const Case& c) {
  SCOPED_TRACE(describe(c));
  const KernelSpec spec = spec_of(c);
  const KernelEntry* entry = KernelRegistry::builtin().find(c.domain, c.op, DeviceKind::Cpu, kernel_dtype(spec));
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry->implementation, "cpu");
  std::unique_ptr<Kernel> ours = prepare(c, "");
  std::unique_ptr<Kernel> reference = prepare(c, "reference");
  std::vector<Tensor> want = fresh_outputs(c);
  run(*reference, c, want);
  for (int round = 0; round < 2; ++round) {
    std::vector<Tensor> got = fresh_outputs(c);
    run(*ours, c, got);
    for (size_t o = 0; o < want.size(); ++o)
      expect_bytes_equal(got[o], want[o], "output " + std::to_string(o) + " round " + std::to_string(round));
  }
  ++checked_cases;
}

std::string error_of(Kernel& kernel, const Case& c) {
  try {
    std::vector<Tensor> outs = fresh_outputs(c);
    run(kernel, c, outs);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Both kernels reject the case (at prepare or at run) with the same message.
void expect_same_error(const Case& c) {
  SCOPED_TRACE(describe(c));
  auto message = [&](const std::string& implementation) -> std::string {
    std::unique_ptr<Kernel> kernel;
    try {
      kernel = prepare(c, implementation);
    } catch (const Error& e) {
      return std::string("prepare: ") + e.what();
    }
    const std::string first = error_of(*kernel, c);
    EXPECT_EQ(error_of(*kernel, c), first) << "a second run fails the same way";
    return first;
  };
  const std::string want = message("reference");
  EXPECT_NE(want, "(no error)");
  EXPECT_EQ(message(""), want);
}

// --- Transpose ---

Case transpose(DType dtype, const Ints& sizes, const std::optional<Ints>& perm) {
  Ints out;
  if (perm) {
    for (int64_t p : *perm) out.push_back(sizes[p]);
  } else {
    out.assign(sizes.rbegin(), sizes.rend());
  }
  Attributes a;
  if (perm) a["perm"] = *perm;
  return {"Transpose", 13, a, {random_tensor(dtype, sizes)}, {{dtype, out}}};
}

TEST(CpuDataMovement, TransposeEveryPermutationAndDtype) {
  for (DType dtype : kAllDTypes) {
    Ints perm = {0, 1, 2, 3};
    do {
      expect_agree(transpose(dtype, {3, 5, 7, 9}, perm));
    } while (std::next_permutation(perm.begin(), perm.end()));
  }
}

TEST(CpuDataMovement, TransposeShapes) {
  expect_agree(transpose(DType::Float32, {64, 16, 4, 32}, Ints{0, 2, 1, 3}));  // transformer heads
  expect_agree(transpose(DType::Float32, {64, 4, 16, 32}, Ints{0, 2, 1, 3}));
  expect_agree(transpose(DType::Float32, {8, 4, 33, 32}, Ints{0, 1, 3, 2}));  // K^T
  expect_agree(transpose(DType::Float32, {257, 131}, std::nullopt));          // tiles with tails
  expect_agree(transpose(DType::Float64, {67, 45}, Ints{1, 0}));
  expect_agree(transpose(DType::UInt8, {129, 67}, Ints{1, 0}));
  expect_agree(transpose(DType::Float32, {5000, 3}, Ints{1, 0}));  // long inner rows, a short tile dim
  expect_agree(transpose(DType::Int64, {3, 5000}, Ints{1, 0}));
  expect_agree(transpose(DType::Float16, {5, 3, 33, 17}, Ints{0, 3, 1, 2}));   // NCHW -> NWCH
  expect_agree(transpose(DType::Float32, {4, 16, 19, 23}, Ints{0, 2, 3, 1}));  // NCHW -> NHWC
  expect_agree(transpose(DType::Float32, {4, 19, 23, 16}, Ints{0, 3, 1, 2}));  // NHWC -> NCHW
  expect_agree(transpose(DType::Int64, {2, 3, 1, 5, 1, 7}, Ints{5, 3, 1, 0, 2, 4}));
  expect_agree(transpose(DType::Float32, {1, 1, 1}, std::nullopt));
  expect_agree(transpose(DType::Float32, {3, 0, 4}, Ints{2, 0, 1}));
  expect_agree(transpose(DType::Float32, {}, Ints{}));
  expect_agree(transpose(DType::Int32, {7}, std::nullopt));
  for (int i = 0; i < 20; ++i) {  // random rank-5 permutations of odd sizes
    Ints perm = {0, 1, 2, 3, 4};
    std::shuffle(perm.begin(), perm.end(), rng());
    Ints sizes;
    for (int k = 0; k < 5; ++k) sizes.push_back(1 + static_cast<int64_t>(rng()() % 9));
    expect_agree(transpose(i % 2 ? DType::Float32 : DType::Int16, sizes, perm));
  }
}

TEST(CpuDataMovement, TransposeRejectsBadPerm) {
  expect_same_error(
      {"Transpose", 13, {{"perm", Ints{0, 0}}}, {random_tensor(DType::Float32, {2, 3})}, {{DType::Float32, {2, 2}}}});
}

// --- Concat / Split ---

Case concat(DType dtype, const std::vector<Ints>& parts, int64_t axis, int opset = 13) {
  Case c{"Concat", opset, {{"axis", axis}}, {}, {}};
  Ints out = parts[0];
  const int64_t a = axis < 0 ? axis + static_cast<int64_t>(out.size()) : axis;
  out[a] = 0;
  for (const Ints& p : parts) {
    c.inputs.push_back(random_tensor(dtype, p));
    out[a] += p[a];
  }
  c.outputs = {{dtype, out}};
  return c;
}

TEST(CpuDataMovement, Concat) {
  expect_agree(concat(DType::Float32, {{64, 16, 128}, {64, 16, 128}, {64, 16, 128}}, 2));
  expect_agree(concat(DType::Float32, {{64, 4, 16, 32}, {64, 12, 16, 32}}, 1));
  expect_agree(concat(DType::Float32, {{32, 16, 32, 32}, {32, 7, 32, 32}}, 1));  // ResNet-like channels
  expect_agree(concat(DType::Float32, {{300, 5}, {1, 5}, {0, 5}, {77, 5}}, 0));
  expect_agree(concat(DType::Float32, {{300, 5}, {300, 1}, {300, 0}, {300, 3}}, -1));
  expect_agree(concat(DType::Int64, {{1}, {1}, {2}}, 0));  // a shape computation
  expect_agree(concat(DType::Float16, {{3, 1, 5}, {3, 4, 5}}, -2));
  expect_agree(concat(DType::Bool, {{9, 33}, {9, 31}}, 1));
  expect_agree(concat(DType::Float64, {{2, 2}}, 0));
  expect_agree(concat(DType::UInt8, {{0, 3}, {0, 4}}, 1));
  expect_agree(concat(DType::Float32, {{5, 3}, {5, 6}}, 1, 1));
  Case bad = concat(DType::Float32, {{2, 3}, {2, 4}}, 0);
  bad.outputs = {{DType::Float32, {4, 3}}};
  expect_same_error(bad);
}

Case split(DType dtype, const Ints& sizes, int64_t axis, const Ints& chunks, int opset, bool give_split) {
  Case c{"Split", opset, {{"axis", axis}}, {random_tensor(dtype, sizes)}, {}};
  const int64_t a = axis < 0 ? axis + static_cast<int64_t>(sizes.size()) : axis;
  for (int64_t chunk : chunks) {
    Ints out = sizes;
    out[a] = chunk;
    c.outputs.push_back({dtype, out});
  }
  if (give_split && opset >= 13) c.inputs.push_back(ints(chunks));
  if (give_split && opset < 13) c.attributes["split"] = chunks;
  if (opset >= 18 && !give_split) c.attributes["num_outputs"] = static_cast<int64_t>(chunks.size());
  return c;
}

TEST(CpuDataMovement, Split) {
  expect_agree(split(DType::Float32, {64, 16, 384}, 2, {128, 128, 128}, 13, true));  // q, k, v
  expect_agree(split(DType::Float32, {64, 16, 384}, -1, {128, 128, 128}, 13, false));
  expect_agree(split(DType::Float32, {301, 7}, 0, {100, 0, 201}, 13, true));
  expect_agree(split(DType::Int32, {5, 301, 3}, 1, {1, 150, 150}, 11, true));
  expect_agree(split(DType::Float16, {6, 8}, 1, {4, 4}, 18, false));
  expect_agree(split(DType::Int64, {4}, 0, {1, 1, 2}, 13, true));
  expect_agree(split(DType::Bool, {17, 9}, 0, {17}, 13, false));
  Case bad = split(DType::Float32, {6, 4}, 0, {3, 3}, 13, true);
  bad.inputs[1] = ints({2, 4});  // disagrees with the outputs
  expect_same_error(bad);
}

// --- Slice / SliceGrad ---

Case slice(DType dtype, const Ints& sizes, const Ints& starts, const Ints& ends, const std::optional<Ints>& axes,
           const std::optional<Ints>& steps, DType index = DType::Int64) {
  const Tensor x = random_tensor(dtype, sizes);
  Ints out = sizes;
  const Ints all_axes = axes ? *axes : [&] {
    Ints a(starts.size());
    std::iota(a.begin(), a.end(), 0);
    return a;
  }();
  for (size_t j = 0; j < starts.size(); ++j) {
    const int64_t axis = all_axes[j] < 0 ? all_axes[j] + static_cast<int64_t>(sizes.size()) : all_axes[j];
    const SliceExtent e = numpy_slice(starts[j], ends[j], steps ? (*steps)[j] : 1, sizes[axis]);
    out[axis] = e.count;
  }
  Case c{"Slice", 13, {}, {x, ints(starts, index), ints(ends, index)}, {{dtype, out}}};
  c.inputs.push_back(axes ? ints(*axes, index) : Tensor());
  c.inputs.push_back(steps ? ints(*steps, index) : Tensor());
  return c;
}

TEST(CpuDataMovement, Slice) {
  const int64_t big = std::numeric_limits<int64_t>::max();
  expect_agree(slice(DType::Float32, {64, 16, 128}, {0}, {64}, Ints{2}, Ints{2}));
  expect_agree(slice(DType::Float32, {64, 16, 128}, {-1}, {-big}, Ints{-1}, Ints{-1}));  // reversed rows
  expect_agree(slice(DType::Float32, {64, 16, 128}, {3, 10}, {61, 1000}, Ints{0, 2}, std::nullopt));
  expect_agree(slice(DType::Float32, {64, 16, 128}, {5, 2}, {-2, 15}, Ints{-3, 1}, Ints{3, 4}, DType::Int32));
  expect_agree(slice(DType::Float32, {33, 17, 9}, {30, 15, 8}, {1, -100, 0}, std::nullopt, Ints{-2, -3, -1}));
  expect_agree(slice(DType::Float64, {33, 17, 9}, {0, 0}, {1, 1}, Ints{0, 1}, std::nullopt));
  expect_agree(slice(DType::Int64, {4}, {1}, {3}, std::nullopt, std::nullopt));  // shape[1:3]
  expect_agree(slice(DType::Int64, {4}, {-1}, {big}, Ints{0}, std::nullopt));
  expect_agree(slice(DType::Bool, {7, 300}, {299}, {0}, Ints{1}, Ints{-7}));
  expect_agree(slice(DType::UInt8, {7, 300}, {5}, {5}, Ints{1}, std::nullopt));  // empty
  expect_agree(slice(DType::Float16, {3, 4, 5, 6}, {1, 1}, {3, 6}, Ints{1, 3}, Ints{1, big}));
  // opset 1: attributes
  Case v1{"Slice",
          1,
          {{"starts", Ints{1, 0}}, {"ends", Ints{1000, -1}}, {"axes", Ints{0, 2}}},
          {random_tensor(DType::Float32, {5, 6, 7})},
          {{DType::Float32, {4, 6, 6}}}};
  expect_agree(v1);
  // bad data
  Case dup = slice(DType::Float32, {5, 6}, {0, 0}, {1, 1}, Ints{0, 1}, std::nullopt);
  dup.inputs[3] = ints({1, -1});
  expect_same_error(dup);
  Case zero_step = slice(DType::Float32, {5, 6}, {0}, {1}, Ints{0}, Ints{1});
  zero_step.inputs[4] = ints({0});
  expect_same_error(zero_step);
}

TEST(CpuDataMovement, SliceReplansWhenBoundsChange) {
  Case c = slice(DType::Float32, {40, 50}, {3}, {23}, Ints{1}, std::nullopt);
  std::unique_ptr<Kernel> ours = prepare(c, "");
  std::unique_ptr<Kernel> reference = prepare(c, "reference");
  for (int64_t start : {3, 10, 30, 3}) {
    c.inputs[1] = ints({start});
    c.inputs[2] = ints({start + 20});
    std::vector<Tensor> got = fresh_outputs(c), want = fresh_outputs(c);
    run(*ours, c, got);
    run(*reference, c, want);
    expect_bytes_equal(got[0], want[0], "start " + std::to_string(start));
  }
}

Case slice_grad(const Ints& x_sizes, const Ints& starts, const Ints& ends, const std::optional<Ints>& axes,
                const std::optional<Ints>& steps) {
  const Case forward = slice(DType::Float32, x_sizes, starts, ends, axes, steps);
  Case c = training_case("SliceGrad", {}, {random_tensor(DType::Float32, forward.outputs[0].sizes), ints(x_sizes)},
                         {{DType::Float32, x_sizes}});
  for (size_t i = 1; i < forward.inputs.size(); ++i) c.inputs.push_back(forward.inputs[i]);
  return c;
}

TEST(CpuDataMovement, SliceGrad) {
  expect_agree(slice_grad({64, 16, 128}, {0}, {64}, Ints{2}, Ints{2}));
  expect_agree(slice_grad({64, 16, 128}, {-1}, {-1000}, Ints{-1}, Ints{-3}));
  expect_agree(slice_grad({33, 17, 9}, {1, 2}, {30, 15}, std::nullopt, std::nullopt));
  expect_agree(slice_grad({5, 6}, {5}, {0}, Ints{1}, std::nullopt));  // empty dY
  Case bad = slice_grad({5, 6}, {0}, {3}, Ints{0}, std::nullopt);
  bad.inputs[1] = ints({5, 7});
  expect_same_error(bad);
}

// --- Gather / GatherGrad ---

Case gather(DType dtype, const Ints& sizes, const Ints& index_sizes, int64_t axis, DType index_dtype,
            bool negative = true) {
  const int64_t a = axis < 0 ? axis + static_cast<int64_t>(sizes.size()) : axis;
  const int64_t n = sizes[a];
  Tensor indices(index_dtype, index_sizes);
  for (int64_t j = 0; j < indices.numel(); ++j) {
    int64_t v = static_cast<int64_t>(rng()() % n);
    if (negative && rng()() % 3 == 0) v -= n;
    if (index_dtype == DType::Int32)
      indices.data<int32_t>()[j] = static_cast<int32_t>(v);
    else
      indices.data<int64_t>()[j] = v;
  }
  Ints out(sizes.begin(), sizes.begin() + a);
  out.insert(out.end(), index_sizes.begin(), index_sizes.end());
  out.insert(out.end(), sizes.begin() + a + 1, sizes.end());
  return {"Gather", 13, {{"axis", axis}}, {random_tensor(dtype, sizes), indices}, {{dtype, out}}};
}

TEST(CpuDataMovement, Gather) {
  expect_agree(gather(DType::Float32, {1000, 128}, {64, 16}, 0, DType::Int64, false));  // embedding
  expect_agree(gather(DType::Float32, {1000, 65}, {8, 17}, 0, DType::Int32));
  expect_agree(gather(DType::Float32, {7, 300, 5}, {33}, 1, DType::Int64));
  expect_agree(gather(DType::Float32, {70, 301}, {129}, -1, DType::Int64));  // single elements
  expect_agree(gather(DType::Float16, {7, 30, 5}, {}, 1, DType::Int32));     // a scalar index
  expect_agree(gather(DType::Int64, {4}, {}, 0, DType::Int64));              // shape[i]
  expect_agree(gather(DType::Int64, {4}, {2}, 0, DType::Int64));
  expect_agree(gather(DType::Bool, {9, 10}, {3, 4}, 0, DType::Int32));
  expect_agree(gather(DType::UInt8, {9, 10}, {0}, 1, DType::Int64));
  expect_agree(gather(DType::Float64, {3, 4, 5, 6}, {2, 3}, 2, DType::Int64));
  Case bad = gather(DType::Float32, {10, 3}, {4}, 0, DType::Int64);
  bad.inputs[1].data<int64_t>()[2] = 10;
  expect_same_error(bad);
  bad.inputs[1].data<int64_t>()[2] = -11;
  expect_same_error(bad);
}

Case gather_grad(const Ints& x_sizes, const Ints& index_sizes, int64_t axis, DType index_dtype, int64_t range = 0) {
  Case forward = gather(DType::Float32, x_sizes, index_sizes, axis, index_dtype);
  if (range > 0) {  // few distinct rows: many repeated indices
    for (int64_t j = 0; j < forward.inputs[1].numel(); ++j) {
      if (index_dtype == DType::Int32)
        forward.inputs[1].data<int32_t>()[j] %= static_cast<int32_t>(range);
      else
        forward.inputs[1].data<int64_t>()[j] %= range;
    }
  }
  return training_case("GatherGrad", {{"axis", axis}},
                       {random_tensor(DType::Float32, forward.outputs[0].sizes), ints(x_sizes), forward.inputs[1]},
                       {{DType::Float32, x_sizes}});
}

TEST(CpuDataMovement, GatherGrad) {
  expect_agree(gather_grad({1000, 128}, {64, 16}, 0, DType::Int64));
  expect_agree(gather_grad({1000, 128}, {64, 16}, 0, DType::Int64, 5));  // repeated ids
  expect_agree(gather_grad({100, 65}, {8, 17}, 0, DType::Int32, 3));
  expect_agree(gather_grad({7, 300, 5}, {33}, 1, DType::Int64, 4));
  expect_agree(gather_grad({70, 301}, {129}, -1, DType::Int64, 7));
  expect_agree(gather_grad({9, 30, 5}, {}, 1, DType::Int32));
  expect_agree(gather_grad({3, 4, 5, 6}, {2, 3}, 2, DType::Int64));
  Case f64 = gather_grad({50, 40}, {30}, 0, DType::Int64, 6);
  f64.inputs[0] = random_tensor(DType::Float64, f64.inputs[0].sizes());
  f64.outputs[0].dtype = DType::Float64;
  expect_agree(f64);
  Case bad = gather_grad({10, 3}, {4}, 0, DType::Int64);
  bad.inputs[2].data<int64_t>()[1] = 10;
  expect_same_error(bad);
}

// --- Expand / Tile ---

Case expand(DType dtype, const Ints& in, const Ints& shape, const Ints& out) {
  return {"Expand", 13, {}, {random_tensor(dtype, in), ints(shape)}, {{dtype, out}}};
}

TEST(CpuDataMovement, Expand) {
  expect_agree(expand(DType::Float32, {64, 1, 128}, {64, 16, 128}, {64, 16, 128}));
  expect_agree(expand(DType::Float32, {64, 16, 1}, {64, 16, 128}, {64, 16, 128}));  // inner broadcast: fills
  expect_agree(expand(DType::Float32, {1, 16, 1, 1}, {32, 16, 32, 32}, {32, 16, 32, 32}));
  expect_agree(expand(DType::Float32, {3, 1, 5}, {2, 1, 4, 1}, {2, 3, 4, 5}));
  expect_agree(expand(DType::Int64, {1}, {7, 9}, {7, 9}));
  expect_agree(expand(DType::Float16, {7, 1}, {1}, {7, 1}));
  expect_agree(expand(DType::Bool, {1, 33}, {17, 33}, {17, 33}));
  expect_agree(expand(DType::Float64, {}, {3, 0}, {3, 0}));
  expect_same_error(expand(DType::Float32, {3, 2}, {3, 4}, {3, 4}));
}

Case tile(DType dtype, const Ints& in, const Ints& repeats) {
  Ints out;
  for (size_t k = 0; k < in.size(); ++k) out.push_back(in[k] * repeats[k]);
  return {"Tile", 13, {}, {random_tensor(dtype, in), ints(repeats)}, {{dtype, out}}};
}

TEST(CpuDataMovement, Tile) {
  expect_agree(tile(DType::Float32, {64, 16, 128}, {1, 2, 1}));
  expect_agree(tile(DType::Float32, {3, 4, 5}, {2, 7, 3}));
  expect_agree(tile(DType::Float32, {1, 1}, {300, 7}));
  expect_agree(tile(DType::Int64, {3}, {4}));
  expect_agree(tile(DType::UInt16, {3, 4}, {0, 2}));
  expect_agree(tile(DType::Bool, {5, 1, 3}, {1, 1, 1}));
  Case bad = tile(DType::Float32, {3, 4}, {2, 1});
  bad.inputs[1] = ints({2, 1, 1});
  expect_same_error(bad);
}

// --- Pad / PadGrad ---

Ints padded(const Ints& in, const Ints& pads) {
  Ints out = in;
  const size_t r = in.size();
  for (size_t k = 0; k < r; ++k) out[k] += pads[k] + pads[k + r];
  return out;
}

Case pad(DType dtype, const Ints& in, const Ints& pads, const std::string& mode, int opset = 13,
         const Tensor& value = Tensor()) {
  Case c{"Pad", opset, {{"mode", mode}}, {random_tensor(dtype, in)}, {{dtype, padded(in, pads)}}};
  if (opset >= 11) {
    c.inputs.push_back(ints(pads));
    c.inputs.push_back(value);
  } else {
    c.attributes["pads"] = pads;
    c.attributes["value"] = 1.5;
  }
  return c;
}

TEST(CpuDataMovement, PadModes) {
  for (const std::string mode : {"constant", "reflect", "edge", "wrap"}) {
    const int opset = mode == "wrap" ? 19 : 13;
    expect_agree(pad(DType::Float32, {32, 16, 32, 32}, {0, 0, 1, 1, 0, 0, 1, 1}, mode, opset));  // ResNet conv pad
    expect_agree(pad(DType::Float32, {4, 5, 17, 19}, {0, 0, 3, 2, 0, 0, 2, 4}, mode, opset));
    expect_agree(pad(DType::Float32, {4, 5, 17, 19}, {1, 2, 0, 0, 2, 1, 0, 0}, mode, opset));    // outer dims only
    expect_agree(pad(DType::Float32, {4, 5, 17, 19}, {0, 0, -2, 3, 0, 0, 1, -4}, mode, opset));  // crops
    expect_agree(pad(DType::Int64, {3, 7}, {2, 5, 1, 6}, mode, opset));                          // pads beyond the size
    expect_agree(pad(DType::UInt8, {300}, {7, 9}, mode, opset));
    expect_agree(pad(DType::Float16, {2, 1, 5}, {1, 2, 3, 1, 2, 3}, mode, opset));
  }
  Tensor value(DType::Float32, {});
  value.data<float>()[0] = -7.25f;
  expect_agree(pad(DType::Float32, {64, 16, 128}, {0, 1, 2, 3, 4, 5}, "constant", 13, value));
  Tensor int_value(DType::Int32, {});
  int_value.data<int32_t>()[0] = 42;
  expect_agree(pad(DType::Int32, {6, 7}, {1, 1, 1, 1}, "constant", 11, int_value));
  expect_agree(pad(DType::Float32, {6, 7, 8}, {1, 0, 2, 3, 0, -1}, "constant", 2));  // attributes and value
  expect_agree(pad(DType::Float64, {6, 7, 8}, {0, 0, 0, 0, 0, 0}, "reflect", 2));
  expect_agree(pad(DType::Float32, {0, 3}, {1, 1, 1, 1}, "constant"));
  // opset 18: axes
  Case axes{"Pad",
            18,
            {{"mode", std::string("reflect")}},
            {random_tensor(DType::Float32, {4, 9, 10}), ints({2, 3, 1, 4}), Tensor(), ints({1, -1})},
            {{DType::Float32, {4, 12, 17}}}};
  expect_agree(axes);
  // bad pads
  Case bad = pad(DType::Float32, {4, 9}, {1, 1, 1, 1}, "constant");
  bad.inputs[1] = ints({1, 1, 1});
  expect_same_error(bad);
}

Case pad_grad(const Ints& in, const Ints& pads, const std::string& mode) {
  return training_case("PadGrad", {{"mode", mode}},
                       {random_tensor(DType::Float32, padded(in, pads)), ints(in), ints(pads)}, {{DType::Float32, in}});
}

TEST(CpuDataMovement, PadGrad) {
  for (const std::string mode : {"constant", "reflect", "edge", "wrap"}) {
    expect_agree(pad_grad({32, 16, 32, 32}, {0, 0, 1, 1, 0, 0, 1, 1}, mode));
    expect_agree(pad_grad({4, 5, 7, 9}, {0, 0, 3, 2, 0, 0, 2, 4}, mode));
    expect_agree(pad_grad({4, 5, 7, 9}, {1, 2, 0, 0, 2, 1, 0, 0}, mode));
    expect_agree(pad_grad({4, 5, 17, 19}, {0, 0, -2, 3, 0, 0, 1, -4}, mode));
    expect_agree(pad_grad({3, 4}, {5, 9, 7, 6}, mode));  // pads beyond the size: many readers per element
    expect_agree(pad_grad({300}, {7, 9}, mode));
  }
  Case f64 = pad_grad({5, 6}, {1, 2, 3, 4}, "reflect");
  f64.inputs[0] = random_tensor(DType::Float64, f64.inputs[0].sizes());
  f64.outputs[0].dtype = DType::Float64;
  expect_agree(f64);
  expect_same_error(pad_grad({0, 3}, {1, 1, 0, 0}, "reflect"));
}

// --- Cast ---

Tensor cast_source(DType dtype, int64_t n) {
  Tensor t = random_tensor(dtype, {n}, /*raw_bits=*/true);
  if (dtype == DType::Float32) {  // a third special and halfway values
    const float specials[] = {0.0f,
                              -0.0f,
                              1.0f,
                              -1.5f,
                              65504.0f,
                              65519.99f,
                              65520.0f,
                              1e-8f,
                              5.96e-8f,
                              2.98e-8f,
                              3e9f,
                              -3e9f,
                              2147483520.0f,
                              9.3e18f,
                              -9.3e18f,
                              0.5f,
                              2.5f,
                              -2.5f,
                              std::numeric_limits<float>::infinity(),
                              -std::numeric_limits<float>::infinity(),
                              std::numeric_limits<float>::quiet_NaN(),
                              std::numeric_limits<float>::denorm_min()};
    float* p = t.data<float>().data();
    std::uniform_real_distribution<float> small(-70000.0f, 70000.0f);
    for (int64_t i = 0; i < n; i += 3) p[i] = small(rng());
    for (int64_t i = 1; i < n; i += 7) p[i] = specials[(i / 7) % std::size(specials)];
    for (int64_t i = 2; i < n; i += 11) {                 // halfway between two float16 values
      const uint32_t r = static_cast<uint32_t>(rng()());  // exponents from float16 subnormals to overflow
      uint32_t bits = (r & 0x80000000u) | ((100u + r % 45u) << 23) | (r & 0x007fe000u) | 0x1000u;
      std::memcpy(&p[i], &bits, 4);
    }
  }
  return t;
}

// --- Resize / ResizeGrad: image planes (the last two axes) and the per-element path for other axes ---

Tensor floats(const std::vector<float>& v) {
  Tensor t(DType::Float32, {static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.data<float>().begin());
  return t;
}

TEST(CpuDataMovement, ResizeAndItsGradient) {
  const DType f = DType::Float32;
  const Attributes bilinear{{"mode", std::string("linear")}};
  const Attributes cubic_crop{{"mode", std::string("cubic")},
                              {"coordinate_transformation_mode", std::string("tf_crop_and_resize")},
                              {"extrapolation_value", 0.5}};
  const Attributes nearest_channels{{"axes", Ints{1, 3}}, {"nearest_mode", std::string("ceil")}};
  const Tensor roi = floats({0, 0, -0.1f, 0.2f, 1, 1, 0.9f, 1.3f});
  expect_agree({"Resize",
                13,
                bilinear,
                {random_tensor(f, {32, 16, 16, 16}), Tensor(), floats({1, 1, 2, 2})},
                {{f, {32, 16, 32, 32}}}});
  expect_agree({"Resize",
                13,
                {},
                {random_tensor(DType::Float64, {3, 5, 7}), Tensor(), floats({1, 0.5f, 2.5f})},
                {{DType::Float64, {3, 2, 17}}}});
  expect_agree({"Resize",
                13,
                cubic_crop,
                {random_tensor(f, {2, 3, 9, 11}), roi, Tensor(), ints({2, 3, 13, 6})},
                {{f, {2, 3, 13, 6}}}});
  expect_agree({"Resize",
                18,
                nearest_channels,
                {random_tensor(f, {4, 6, 5, 7}), Tensor(), Tensor(), ints({9, 3})},
                {{f, {4, 9, 5, 3}}}});
  expect_agree(
      training_case("ResizeGrad", bilinear,
                    {random_tensor(f, {32, 16, 32, 32}), ints({32, 16, 16, 16}), Tensor(), floats({1, 1, 2, 2})},
                    {{f, {32, 16, 16, 16}}}));
  expect_agree(training_case("ResizeGrad", cubic_crop,
                             {random_tensor(f, {2, 3, 13, 6}), ints({2, 3, 9, 11}), roi, Tensor(), ints({2, 3, 13, 6})},
                             {{f, {2, 3, 9, 11}}}));
  Case channels = training_case("ResizeGrad", nearest_channels,
                                {random_tensor(f, {4, 9, 5, 3}), ints({4, 6, 5, 7}), Tensor(), Tensor(), ints({9, 3})},
                                {{f, {4, 6, 5, 7}}});
  expect_agree(channels);
  Case bad = channels;  // dY of other sizes than the resize gives
  bad.inputs[0] = random_tensor(f, {4, 9, 5, 4});
  bad.outputs = {{f, {4, 6, 5, 7}}};
  expect_same_error(bad);
}

TEST(CpuDataMovement, DepthToSpaceAndSpaceToDepth) {
  for (const std::string mode : {"DCR", "CRD"}) {
    expect_agree({"DepthToSpace",
                  13,
                  {{"blocksize", int64_t{2}}, {"mode", mode}},
                  {random_tensor(DType::Float32, {8, 64, 14, 14})},
                  {{DType::Float32, {8, 16, 28, 28}}}});
  }
  expect_agree({"SpaceToDepth",
                13,
                {{"blocksize", int64_t{3}}},
                {random_tensor(DType::UInt8, {2, 3, 9, 12})},
                {{DType::UInt8, {2, 27, 3, 4}}}});
}

TEST(CpuDataMovement, CastEveryPair) {
  for (DType from : kAllDTypes) {
    for (DType to : kAllDTypes) {
      Case c{"Cast", 13, {{"to", static_cast<int64_t>(0)}}, {cast_source(from, 4099)}, {{to, {4099}}}};
      // ONNX codes of the dtypes
      static const std::map<DType, int64_t> code = {
          {DType::Float32, 1}, {DType::UInt8, 2},   {DType::Int8, 3},     {DType::UInt16, 4},   {DType::Int16, 5},
          {DType::Int32, 6},   {DType::Int64, 7},   {DType::Bool, 9},     {DType::Float16, 10}, {DType::Float64, 11},
          {DType::UInt32, 12}, {DType::UInt64, 13}, {DType::BFloat16, 16}};
      c.attributes["to"] = code.at(to);
      expect_agree(c);
    }
  }
}

TEST(CpuDataMovement, CastFloat32ToFloat16ExactOnManyBitPatterns) {
  Case c{"Cast", 13, {{"to", int64_t{10}}}, {cast_source(DType::Float32, 1 << 20)}, {{DType::Float16, {1 << 20}}}};
  expect_agree(c);
  Case back{"Cast",
            13,
            {{"to", int64_t{1}}},
            {random_tensor(DType::Float16, {1 << 16}, true)},
            {{DType::Float32, {1 << 16}}}};
  for (int64_t i = 0; i < (1 << 16); ++i) back.inputs[0].data<uint16_t>()[i] = static_cast<uint16_t>(i);
  expect_agree(back);
}

// The conversions autocast runs around every product, on the clone this CPU picks (cast.cc).
TEST(CpuDataMovement, CastFloat32ToBFloat16ExactOnManyBitPatterns) {
  expect_agree(
      {"Cast", 13, {{"to", int64_t{16}}}, {cast_source(DType::Float32, 1 << 20)}, {{DType::BFloat16, {1 << 20}}}});
  Case back{"Cast",
            13,
            {{"to", int64_t{1}}},
            {random_tensor(DType::BFloat16, {1 << 16}, true)},
            {{DType::Float32, {1 << 16}}}};
  for (int64_t i = 0; i < (1 << 16); ++i) back.inputs[0].data<uint16_t>()[i] = static_cast<uint16_t>(i);
  expect_agree(back);
}

TEST(CpuDataMovement, CastLikeAndLargeTensors) {
  expect_agree({"Cast",
                13,
                {{"to", int64_t{7}}},
                {cast_source(DType::Float32, 64 * 16 * 128)},
                {{DType::Int64, {64 * 16 * 128}}}});
  expect_agree({"Cast",
                13,
                {{"to", int64_t{1}}},
                {random_tensor(DType::Float32, {64, 16, 128})},
                {{DType::Float32, {64, 16, 128}}}});  // same dtype: a copy
  expect_agree({"Cast",
                1,
                {{"to", std::string("DOUBLE")}},
                {random_tensor(DType::Float32, {33, 7})},
                {{DType::Float64, {33, 7}}}});
  expect_agree({"CastLike",
                15,
                {},
                {random_tensor(DType::Float32, {64, 16, 128}), Tensor(DType::BFloat16, {1})},
                {{DType::BFloat16, {64, 16, 128}}}});
  expect_same_error({"Cast", 13, {{"to", int64_t{8}}}, {random_tensor(DType::Float32, {3})}, {{DType::String, {3}}}});
}

// --- Reshape & co. ---

TEST(CpuDataMovement, ReshapeFamily) {
  const Tensor x = random_tensor(DType::Float32, {64, 16, 128});
  expect_agree({"Reshape", 14, {}, {x, ints({64, -1, 32})}, {{DType::Float32, {64, 64, 32}}}});
  expect_agree({"Reshape", 14, {}, {x, ints({0, 0, 4, 32})}, {{DType::Float32, {64, 16, 4, 32}}}});
  expect_agree({"Reshape", 1, {{"shape", Ints{1024, 128}}}, {x}, {{DType::Float32, {1024, 128}}}});
  expect_agree({"Flatten", 13, {{"axis", int64_t{2}}}, {x}, {{DType::Float32, {1024, 128}}}});
  expect_agree({"Squeeze", 13, {}, {random_tensor(DType::Int64, {1, 5}), ints({0})}, {{DType::Int64, {5}}}});
  expect_agree(
      {"Unsqueeze", 13, {}, {random_tensor(DType::Float16, {3, 5}), ints({1})}, {{DType::Float16, {3, 1, 5}}}});
  expect_agree({"Identity", 13, {}, {random_tensor(DType::Bool, {300, 301})}, {{DType::Bool, {300, 301}}}});
  expect_same_error({"Reshape", 14, {}, {x, ints({64, -1, 33})}, {{DType::Float32, {64, 62, 33}}}});
  expect_same_error({"Reshape", 14, {}, {x, ints({64, 32, 64})}, {{DType::Float32, {64, 64, 32}}}});
}

TEST(CpuDataMovement, ReshapeRechecksWhenTheShapeChanges) {
  const Tensor x = random_tensor(DType::Float32, {6, 4});
  Case c{"Reshape", 14, {}, {x, ints({3, 8})}, {{DType::Float32, {3, 8}}}};
  std::unique_ptr<Kernel> ours = prepare(c, "");
  for (int i = 0; i < 2; ++i) {
    std::vector<Tensor> outs = fresh_outputs(c);
    run(*ours, c, outs);
    expect_bytes_equal(outs[0], x.reshaped({3, 8}), "run " + std::to_string(i));
  }
  c.inputs[1] = ints({4, 6});  // a shape the output's sizes do not match
  EXPECT_NE(error_of(*ours, c), "(no error)");
}

TEST(CpuDataMovement, EveryOpHasItsCpuKernel) {
  for (const char* op : {"Transpose", "Concat", "Split", "Slice", "Gather", "Expand", "Tile", "Pad", "Cast", "CastLike",
                         "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"}) {
    for (DType d : kAllDTypes) {
      const KernelEntry* e = KernelRegistry::builtin().find("", op, DeviceKind::Cpu, d);
      ASSERT_NE(e, nullptr) << op;
      EXPECT_EQ(e->implementation, "cpu") << op << " " << dtype_name(d);
    }
  }
  for (const char* op : {"SliceGrad", "GatherGrad", "PadGrad"}) {
    for (DType d : {DType::Float32, DType::Float64}) {
      const KernelEntry* e = KernelRegistry::builtin().find("ai.onnxtrain", op, DeviceKind::Cpu, d);
      ASSERT_NE(e, nullptr) << op;
      EXPECT_EQ(e->implementation, "cpu") << op;
    }
  }
}

}  // namespace
