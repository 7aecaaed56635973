// The oneDNN Conv, MatMul and Gemm kernels against the reference kernels (the oracle) on seeded random
// shapes and attributes, and the registry's preference for them on float32.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <thread>

#include "kernels/kernel.h"
#include "kernels/scratch_arena.h"

using namespace onnxtrain;

namespace {

using Ints = std::vector<int64_t>;

Tensor random_tensor(const Ints& sizes, std::mt19937& rng) {
  Tensor t(DType::Float32, sizes);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

KernelSpec make_spec(const std::string& op, Attributes attributes, const std::vector<Tensor>& inputs, const Ints& out) {
  KernelSpec spec{.op_type = op, .opset = 17, .attributes = std::move(attributes), .node_name = "test"};
  for (const Tensor& t : inputs)
    spec.inputs.push_back({t.empty() && t.sizes().empty() ? DType::Undefined : t.dtype(), t.sizes()});
  spec.outputs.push_back({DType::Float32, out});
  return spec;
}

Tensor run_with(const std::string& implementation, const KernelSpec& spec, const std::vector<Tensor>& inputs) {
  const KernelEntry* entry =
      KernelRegistry::builtin().find("", spec.op_type, DeviceKind::Cpu, DType::Float32, implementation);
  EXPECT_NE(entry, nullptr) << spec.op_type << " " << implementation;
  std::unique_ptr<Kernel> kernel = entry->prepare(spec);
  Tensor out(DType::Float32, spec.outputs[0].sizes);
  std::vector<TensorView> in;
  for (const Tensor& t : inputs) in.push_back(t.sizes().empty() && t.empty() ? TensorView{} : TensorView::of(t));
  std::vector<TensorView> outs{TensorView::of(out)};
  Stream stream;
  kernel->run(stream, in, outs);
  return out;
}

// oneDNN and reference agree within rtol 1e-4 / atol 1e-5.
void expect_agree(const std::string& op, const Attributes& attributes, const std::vector<Tensor>& inputs,
                  const Ints& out, const std::string& what) {
  const KernelSpec spec = make_spec(op, attributes, inputs, out);
  const Tensor expected = run_with("reference", spec, inputs);
  const Tensor actual = run_with("onednn", spec, inputs);
  int failures = 0;
  for (int64_t i = 0; i < expected.numel() && failures < 5; ++i) {
    const float e = expected.data<float>()[i], a = actual.data<float>()[i];
    if (std::abs(a - e) > 1e-5f + 1e-4f * std::abs(e)) {
      ADD_FAILURE() << what << " element " << i << ": onednn " << a << ", reference " << e;
      ++failures;
    }
  }
}

std::string str(const Ints& v) {
  std::string s = "(";
  for (int64_t x : v) s += std::to_string(x) + ",";
  return s + ")";
}

TEST(OnednnKernels, RegistryPrefersOnednnForFloat32) {
  for (const char* op : {"Conv", "MatMul", "Gemm"}) {
    const KernelEntry* entry = KernelRegistry::builtin().find("", op, DeviceKind::Cpu, DType::Float32);
    ASSERT_NE(entry, nullptr) << op;
    EXPECT_EQ(entry->implementation, "onednn") << op;
    const KernelEntry* f64 = KernelRegistry::builtin().find("", op, DeviceKind::Cpu, DType::Float64);
    ASSERT_NE(f64, nullptr) << op;
    EXPECT_EQ(f64->implementation, "reference") << op;
  }
}

TEST(OnednnKernels, ConvMatchesReferenceOnRandomShapes) {
  std::mt19937 rng(1234);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const char* auto_pads[] = {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"};
  for (int trial = 0; trial < 60; ++trial) {
    const int64_t spatial = trial % 5 == 4 ? 3 : trial % 5 == 3 ? 1 : 2;
    const int64_t group = pick(1, 3), n = pick(1, 3);
    const int64_t c = group * pick(1, 4), m = group * pick(1, 4);
    const std::string auto_pad = auto_pads[pick(0, 3)];
    Ints x{n, c}, w{m, c / group}, y{n, m}, strides, dilations, pads(2 * spatial);
    for (int64_t d = 0; d < spatial; ++d) {
      const int64_t in = pick(spatial == 3 ? 3 : 5, spatial == 3 ? 7 : 12), k = pick(1, 3);
      strides.push_back(pick(1, 2));
      dilations.push_back(pick(1, 2));
      pads[d] = pick(0, 2);
      pads[d + spatial] = pick(0, 2);
      const int64_t dilated = (k - 1) * dilations[d] + 1;
      int64_t out = 0;
      if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER")
        out = (in + strides[d] - 1) / strides[d];
      else if (auto_pad == "VALID")
        out = in >= dilated ? (in - dilated) / strides[d] + 1 : 0;
      else
        out = (in + pads[d] + pads[d + spatial] - dilated) / strides[d] + 1;
      if (out < 1) {
        out = 1;
        pads[d + spatial] += dilated;
      }  // keep the window inside: pad more (NOTSET only)
      if (auto_pad == "VALID" && in < dilated) {
        --trial;
        goto next;
      }
      x.push_back(in);
      w.push_back(k);
      y.push_back(out);
    }
    {
      Attributes attrs{{"group", group}, {"strides", strides}, {"dilations", dilations}};
      if (auto_pad == "NOTSET")
        attrs["pads"] = pads;
      else
        attrs["auto_pad"] = auto_pad;
      std::vector<Tensor> inputs{random_tensor(x, rng), random_tensor(w, rng)};
      if (pick(0, 1)) inputs.push_back(random_tensor({m}, rng));
      expect_agree("Conv", attrs, inputs, y,
                   "Conv trial " + std::to_string(trial) + " X" + str(x) + " W" + str(w) + " Y" + str(y) + " group " +
                       std::to_string(group) + " " + auto_pad + " strides" + str(strides) + " dilations" +
                       str(dilations) + " pads" + str(pads));
    }
  next:;
  }
}

TEST(OnednnKernels, MatMulMatchesReferenceWithBroadcast) {
  std::mt19937 rng(99);
  const std::vector<std::pair<Ints, Ints>> cases = {{{5, 7}, {7, 3}},
                                                    {{2, 5, 7}, {2, 7, 3}},
                                                    {{2, 5, 7}, {1, 7, 3}},
                                                    {{1, 5, 7}, {4, 7, 3}},
                                                    {{3, 1, 4, 6}, {1, 2, 6, 5}},
                                                    {{2, 5, 7}, {7, 3}},
                                                    {{7}, {2, 7, 3}},
                                                    {{2, 5, 7}, {7}},
                                                    {{7}, {7}},
                                                    {{64, 33}, {33, 17}}};
  for (const auto& [a, b] : cases) {
    Ints batch_a(a.begin(), a.end() - std::min<size_t>(a.size(), 2)),
        batch_b(b.begin(), b.end() - std::min<size_t>(b.size(), 2));
    const size_t rank = std::max(batch_a.size(), batch_b.size());
    batch_a.insert(batch_a.begin(), rank - batch_a.size(), 1);
    batch_b.insert(batch_b.begin(), rank - batch_b.size(), 1);
    Ints y;
    for (size_t i = 0; i < rank; ++i) y.push_back(std::max(batch_a[i], batch_b[i]));
    if (a.size() >= 2) y.push_back(a[a.size() - 2]);
    if (b.size() >= 2) y.push_back(b.back());
    expect_agree("MatMul", {}, {random_tensor(a, rng), random_tensor(b, rng)}, y, "MatMul A" + str(a) + " B" + str(b));
  }
}

TEST(OnednnKernels, GemmMatchesReferenceOnRandomShapes) {
  std::mt19937 rng(7);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int trial = 0; trial < 40; ++trial) {
    const int64_t m = pick(1, 20), n = pick(1, 20), k = pick(1, 20);
    const bool ta = pick(0, 1), tb = pick(0, 1);
    const double alpha = trial % 3 == 0 ? 1.0 : 0.5 + 0.25 * pick(0, 4);
    const double beta = trial % 4 == 0 ? 1.0 : trial % 4 == 1 ? 0.0 : 0.25 * pick(1, 6);
    const Ints a = ta ? Ints{k, m} : Ints{m, k}, b = tb ? Ints{n, k} : Ints{k, n};
    const std::vector<Ints> c_shapes = {{}, {n}, {1, n}, {m, n}, {m, 1}, {1}, {1, 1}};
    const Ints c = c_shapes[pick(0, 6)];
    Attributes attrs{{"transA", int64_t{ta}}, {"transB", int64_t{tb}}, {"alpha", alpha}, {"beta", beta}};
    std::vector<Tensor> inputs{random_tensor(a, rng), random_tensor(b, rng)};
    const bool with_c = trial % 7 != 6;
    if (with_c) inputs.push_back(random_tensor(c, rng));
    expect_agree("Gemm", attrs, inputs, {m, n},
                 "Gemm trial " + std::to_string(trial) + " A" + str(a) + " B" + str(b) + " C" +
                     (with_c ? str(c) : "-") + " alpha " + std::to_string(alpha) + " beta " + std::to_string(beta));
  }
}

}  // namespace

// Kernels take their working memory (blocked copies, scratchpads) from the running thread's arena: the
// arena serves the first Conv, and eight Convs run one after another need no more than one.
TEST(OnednnKernels, ConvWorkingMemoryIsTheThreadsArenaNotTheKernels) {
  std::mt19937 rng(7);
  const std::vector<Tensor> inputs{random_tensor({4, 16, 28, 28}, rng), random_tensor({32, 16, 3, 3}, rng)};
  const KernelSpec spec = make_spec("Conv", {{"pads", Ints{1, 1, 1, 1}}}, inputs, {4, 32, 28, 28});
  const KernelEntry* entry = KernelRegistry::builtin().find("", "Conv", DeviceKind::Cpu, DType::Float32);
  ASSERT_NE(entry, nullptr);
  std::vector<std::unique_ptr<Kernel>> kernels;
  for (int k = 0; k < 8; ++k) kernels.push_back(entry->prepare(spec));
  size_t after_one = 0, after_all = 0;
  std::thread([&] {  // a fresh thread: an empty arena
    Tensor out(DType::Float32, spec.outputs[0].sizes);
    const std::vector<TensorView> in{TensorView::of(inputs[0]), TensorView::of(inputs[1])}, outs{TensorView::of(out)};
    Stream stream;
    for (size_t k = 0; k < kernels.size(); ++k) {
      kernels[k]->run(stream, in, outs);
      if (k == 0) after_one = ScratchArena::this_thread().capacity();
    }
    after_all = ScratchArena::this_thread().capacity();
  })
      .join();
  EXPECT_GT(after_one, 0u) << "the Conv kernel took no memory from the arena";
  EXPECT_EQ(after_all, after_one);
}
