// `onnxtrain train --precision` as a user runs it: bf16 and fp16 runs write a float32 model (the input
// model with trained values), fp16 checkpoints carry the loss scaler so a resumed run ends where an
// uninterrupted one does, data parallelism, pipelines, central storage and the parameter server train in
// half precision, and the strategies that do not support a precision refuse it by name.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "frontend/importer.h"
#include "kernels/backend_info.h"
#include "tests/cli_run.h"

namespace onnxtrain {
namespace {

namespace fs = std::filesystem;
using testing_support::run_cli;

const std::string kModels = std::string(ONNXTRAIN_SOURCE_DIR) + "/models/";
const std::string kArgs = "train " + kModels + "cnn_opset17.onnx --data synthetic:1,28,28:10:96 --batch 16 " +
                          "--validation 0 --test-data none --seed 3 ";

const fs::path kScratch = fs::temp_directory_path() / ("onnxtrain_mixed_precision_cli_" + std::to_string(::getpid()));
// Removes the scratch directory when the test program ends.
const struct ScratchCleanup {
  ~ScratchCleanup() {
    std::error_code ignored;
    fs::remove_all(kScratch, ignored);
  }
} kCleanup;

fs::path scratch(const std::string& name) {
  fs::create_directories(kScratch);
  return kScratch / name;
}

std::string bytes_of(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST(MixedPrecisionCli, Bf16RunWritesAFloat32Model) {
  const fs::path out = scratch("bf16.onnx");
  const auto r = run_cli(kArgs + "--precision bf16 --limit-batches 3 -o " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("precision bf16"), std::string::npos) << r.output;
  // The CNN's first convolution reads one channel: it stays float32 on the CPU, and train says so.
  EXPECT_NE(r.output.find("1 convolution (depthwise, or of fewer than 4 input channels) in float32"), std::string::npos)
      << r.output;
  // Said before the first step: oneDNN's bfloat16 primitives where the CPU has them, else a warning that
  // the reference loops run, with the CPU's ISA.
  const std::string said =
      cpu_has_native_bf16() ? "note: --precision bf16 on the CPU: Conv, Gemm and MatMul on oneDNN's bfloat16 primitives"
                            : "warning: --precision bf16 on the CPU computes Conv, Gemm and MatMul in onnxtrain's "
                              "reference loops (oneDNN has bfloat16 primitives only with AVX-512 BF16 or AMX; this "
                              "CPU's ISA is";
  EXPECT_NE(r.output.find(said), std::string::npos) << r.output;
  EXPECT_LT(r.output.find(said), r.output.find("step 1/"));
  // The other path on any CPU: oneDNN limited to AVX2 (its ONEDNN_MAX_CPU_ISA) has no bfloat16 primitives.
  const auto avx2 = testing_support::run_cli_prefixed(
      "env ONEDNN_MAX_CPU_ISA=AVX2",
      kArgs + "--precision bf16 --limit-batches 1 -o " + scratch("bf16_avx2.onnx").string());
  ASSERT_EQ(avx2.exit_code, 0) << avx2.output;
  EXPECT_NE(avx2.output.find("reference loops (oneDNN has bfloat16 primitives only with AVX-512 BF16 or AMX; this "
                             "CPU's ISA is avx2)"),
            std::string::npos)
      << avx2.output;
  const ImportedModel trained = import_model(out.string());
  const ImportedModel input = import_model(kModels + "cnn_opset17.onnx");
  // The same nodes as the input model (no Cast written back) and float32 initializers with new values.
  EXPECT_EQ(trained.graph.node_count(), input.graph.node_count());
  int changed = 0;
  for (ValueId id : trained.graph.initializers) {
    const Value& v = trained.graph.value(id);
    EXPECT_EQ(v.dtype, DType::Float32) << v.name;
    const Value& before = input.graph.value(*input.graph.find_value(v.name));
    changed += std::memcmp(v.data->raw(), before.data->raw(), v.data->nbytes()) != 0;
  }
  EXPECT_EQ(changed, 8);  // every weight and bias of the 2 Conv and 2 Gemm layers trained
}

// On one device and with two data-parallel replicas (whose checkpoint carries replica 0's scaler).
TEST(MixedPrecisionCli, Fp16ResumeMatchesAnUninterruptedRun) {
  for (const std::string strategy : {"", "--strategy dp --replicas 2 "}) {
    SCOPED_TRACE(strategy);
    const std::string tag = strategy.empty() ? "single" : "dp";
    const fs::path whole = scratch(tag + "_whole.onnx"), resumed = scratch(tag + "_resumed.onnx"),
                   dir = scratch(tag + "_ckpt");
    fs::remove_all(dir);
    const std::string fp16 = kArgs + strategy + "--precision fp16 --limit-batches 2 ";
    const auto plain = run_cli(fp16 + "--epochs 2 -o " + whole.string());
    ASSERT_EQ(plain.exit_code, 0) << plain.output;
    EXPECT_NE(plain.output.find("warning: --precision fp16 on the CPU computes Conv, Gemm and MatMul in onnxtrain's "
                                "reference loops (oneDNN 2.6 has no float16 primitives for the CPU)"),
              std::string::npos)
        << plain.output;
    const auto first = run_cli(fp16 + "--epochs 1 --checkpoint-dir " + dir.string() + " --checkpoint-every 2 -o " +
                               scratch("half.onnx").string());
    ASSERT_EQ(first.exit_code, 0) << first.output;
    const auto second =
        run_cli(fp16 + "--epochs 2 --checkpoint-dir " + dir.string() + " --resume -o " + resumed.string());
    ASSERT_EQ(second.exit_code, 0) << second.output;
    EXPECT_NE(second.output.find("resumed from"), std::string::npos) << second.output;
    EXPECT_EQ(bytes_of(whole), bytes_of(resumed));
    // Another precision cannot resume the fp16 run.
    const auto other = run_cli(kArgs + strategy + "--precision bf16 --limit-batches 2 --epochs 3 --checkpoint-dir " +
                               dir.string() + " --resume -o " + scratch("other.onnx").string());
    EXPECT_NE(other.exit_code, 0);
    EXPECT_NE(other.output.find("precision"), std::string::npos) << other.output;
  }
}

// Data parallelism in bf16: two replica threads write a trained float32 model.
TEST(MixedPrecisionCli, Bf16DataParallelRun) {
  const fs::path out = scratch("dp_bf16.onnx");
  const auto r = run_cli(kArgs + "--precision bf16 --strategy dp --replicas 2 --limit-batches 3 -o " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Conv/Gemm/MatMul in bfloat16"), std::string::npos) << r.output;
  const ImportedModel trained = import_model(out.string());
  for (ValueId id : trained.graph.initializers) EXPECT_EQ(trained.graph.value(id).dtype, DType::Float32);
}

// The other strategies in half precision: a bf16 pipeline, fp16 central storage (its loss scale printed
// at the end) and a bf16 and an fp16 parameter server each write a trained float32 model.
TEST(MixedPrecisionCli, PipelineCentralStorageAndParameterServerRuns) {
  struct Case {
    std::string name, args, expect;
  };
  for (const Case& c : {Case{"pipeline", "--precision bf16 --strategy pipedream --stages 2", "in bfloat16"},
                        Case{"central", "--precision fp16 --central-storage --strategy dp --replicas 2", "loss scale "},
                        Case{"ps", "--precision bf16 --strategy ps --replicas 2", "in bfloat16"},
                        Case{"ps16", "--precision fp16 --strategy ps --replicas 2", "with dynamic loss scaling"}}) {
    const fs::path out = scratch(c.name + ".onnx");
    const auto r = run_cli(kArgs + c.args + " --limit-batches 3 -o " + out.string());
    ASSERT_EQ(r.exit_code, 0) << c.name << "\n" << r.output;
    EXPECT_NE(r.output.find(c.expect), std::string::npos) << c.name << "\n" << r.output;
    const ImportedModel trained = import_model(out.string());
    const ImportedModel initial = import_model(kModels + "cnn_opset17.onnx");
    int changed = 0;
    for (ValueId id : trained.graph.initializers) {
      const Value& v = trained.graph.value(id);
      EXPECT_EQ(v.dtype, DType::Float32) << c.name << ": " << v.name;
      const Tensor& before = *initial.graph.value(*initial.graph.find_value(v.name)).data;
      changed += std::memcmp(v.data->raw(), before.raw(), before.nbytes()) != 0;
    }
    EXPECT_GT(changed, 0) << c.name << ": the weights were trained";
  }
}

TEST(MixedPrecisionCli, UnsupportedCombinationsAreRefusedByName) {
  const auto dp =
      run_cli(kArgs + "--precision fp16 --strategy dp --replicas 2 --bucket-mb 1 -o " + scratch("dp.onnx").string());
  EXPECT_NE(dp.exit_code, 0);
  EXPECT_NE(dp.output.find("sends whole gradients after the backward pass; drop --bucket-mb"), std::string::npos)
      << dp.output;
  const auto pipe = run_cli(kArgs + "--precision fp16 --strategy naive --stages 2 -o " + scratch("p.onnx").string());
  EXPECT_NE(pipe.exit_code, 0);
  EXPECT_NE(pipe.output.find("--precision fp16 with --strategy naive: pipeline stages step on their own"),
            std::string::npos)
      << pipe.output;
  const auto bad = run_cli(kArgs + "--precision fp8 -o " + scratch("bad.onnx").string());
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("fp8"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace onnxtrain
