// `onnxtrain train` on token data, as a user runs it (issue 20): a language model trained on a text file
// that Debian ships (text:) reports validation perplexity, which falls; every strategy takes (N, T)
// labels; integer inputs from an npz named after the model's input train a classifier; data that do not
// fit the model are refused before training, naming the file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "frontend/npy.h"
#include "tests/cli_run.h"

namespace onnxtrain {
namespace {

namespace fs = std::filesystem;

const std::string kSource = ONNXTRAIN_SOURCE_DIR;
const std::string kBigram = kSource + "/tests/data/lm/bigram_lm.onnx";  // (N,16) ids → (N,16,256) logits
const std::string kText = "/usr/share/common-licenses/GPL-3";           // Debian's base-files: 35 KB of English

using onnxtrain::testing_support::CliRun;
CliRun run(const std::string& args) { return onnxtrain::testing_support::run_cli(args); }

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("onnxtrain_lm_cli_" + std::to_string(getpid()) + "_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::vector<nlohmann::json> metrics_lines(const fs::path& file, const std::string& key) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    nlohmann::json j = nlohmann::json::parse(line);
    if (j.contains(key)) lines.push_back(j);
  }
  return lines;
}

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// `train` (a command without --epochs and -o) run 3 epochs at once, and 2 then resumed to 3 with a
// checkpoint every `every` steps: the resumed run must write the same bytes.
void expect_resumed_run_equals_the_whole(const std::string& train, const fs::path& dir, int every) {
  CliRun r = run(train + "--epochs 3 -o " + (dir / "whole.onnx").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string checkpoints =
      " --checkpoint-dir " + (dir / "ck").string() + " --checkpoint-every " + std::to_string(every);
  r = run(train + "--epochs 2" + checkpoints + " -o " + (dir / "part.onnx").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run(train + "--epochs 3" + checkpoints + " --resume -o " + (dir / "resumed.onnx").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from"), std::string::npos) << r.output;
  EXPECT_EQ(read_bytes(dir / "resumed.onnx"), read_bytes(dir / "whole.onnx")) << "the resumed model differs";
}

// Uniform guessing over 256 bytes has perplexity 256; English bytes given the previous byte about 10.
TEST(LanguageModelCli, TextTrainsABigramModelAndPerplexityFalls) {
  ASSERT_TRUE(fs::exists(kText)) << kText << " (Debian's base-files) is missing";
  const fs::path dir = scratch("text");
  const CliRun r = run("train " + kBigram + " --data text:" + kText + " --epochs 3 --batch 32 --optimizer adam " +
                       "--lr 0.01 --metrics " + (dir / "m.jsonl").string() + " -o " + (dir / "lm.onnx").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("windows of 16"), std::string::npos) << r.output;
  const std::vector<nlohmann::json> epochs = metrics_lines(dir / "m.jsonl", "val_perplexity");
  ASSERT_EQ(epochs.size(), 3u) << r.output;
  for (const nlohmann::json& e : epochs) {
    EXPECT_NEAR(e["val_perplexity"].get<double>(), std::exp(e["val_loss"].get<double>()),
                1e-6 * e["val_perplexity"].get<double>());
  }
  const double first = epochs[0]["val_perplexity"], last = epochs[2]["val_perplexity"];
  EXPECT_LT(last, first) << r.output;
  EXPECT_LT(last, 20.0) << "a bigram model of English text should be far better than uniform (256): " << r.output;
  EXPECT_GT(epochs[2]["val_accuracy"].get<double>(), 0.15) << r.output;
  EXPECT_NE(r.output.find("perplexity"), std::string::npos) << r.output;
}

// The same data through the replicated and pipelined strategies: each run trains (the last validation
// perplexity below uniform) on per-position labels.
TEST(LanguageModelCli, EveryStrategyTrainsOnPerPositionLabels) {
  const fs::path dir = scratch("strategies");
  for (const std::string strategy :
       {"--strategy dp --replicas 2", "--strategy dp --central-storage --replicas 2", "--strategy ps --replicas 2",
        "--strategy pipedream --stages 2", "--strategy spectrain --stages 2",
        "--strategy gpipe --stages 2 --micro-batches 2", "--strategy naive --stages 2"}) {
    SCOPED_TRACE(strategy);
    const CliRun r =
        run("train " + kBigram + " --data text:" + kText + " --epochs 1 --batch 32 --optimizer adam " + "--lr 0.01 " +
            strategy + " --metrics " + (dir / "m.jsonl").string() + " -o " + (dir / "lm.onnx").string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const std::vector<nlohmann::json> epochs = metrics_lines(dir / "m.jsonl", "val_perplexity");
    ASSERT_EQ(epochs.size(), 1u) << r.output;
    EXPECT_LT(epochs[0]["val_perplexity"].get<double>(), 40.0) << r.output;
  }
}

// models/transformer_opset17.onnx reads int64 ids (batch, 16): an npz naming its arrays input_ids and
// labels trains it from the command line.
TEST(LanguageModelCli, IntegerInputsFromAnNpzNamedAfterTheModelInput) {
  const fs::path dir = scratch("npz");
  const CliRun r =
      run("train " + kSource + "/models/transformer_opset17.onnx --data npz:" + kSource +
          "/tests/data/dataset_transformer.npz --batch 16 --optimizer adam --lr 0.003 -o " + (dir / "t.onnx").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("96 samples (16), 10 classes, token ids (not normalised)"), std::string::npos) << r.output;
}

// A Hugging Face GPT-2 export with a dynamic sequence axis trains on text windows of --seq-len 32 (the
// sequence dim bound to the data), and `run` takes the written model at another length (48).
TEST(LanguageModelCli, AGpt2ExportTrainsOnTextAndRunsAtAnyLength) {
  const fs::path dir = scratch("gpt2");
  const std::string gpt2 = kSource + "/models/transformers/gpt2_torchscript.onnx";
  CliRun r =
      run("train " + gpt2 + " --data text:" + kText + " --seq-len 32 --batch 8 --limit-batches 4 --optimizer adamw " +
          "--lr 0.003 -o " + (dir / "gpt2.onnx").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("perplexity"), std::string::npos) << r.output;
  Tensor ids(DType::Int64, {2, 48});
  for (int64_t i = 0; i < ids.numel(); ++i) ids.data<int64_t>()[i] = 32 + i % 90;
  write_npy((dir / "ids.npy").string(), ids);
  r = run("run " + (dir / "gpt2.onnx").string() + " --input " + (dir / "ids.npy").string() + " -o " + dir.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(read_npy((dir / "logits.npy").string()).sizes(), (std::vector<int64_t>{2, 48, 256}));
}

// BERT with attention_mask and token_type_ids (models/transformers/bert_masked_dynamo.onnx) reads an
// npz with an array per input (tests/data/dataset_bert_masked.npz: padded rows). Every strategy trains it;
// the synchronous ones (dp, central storage, gpipe, 1f1b) end at single's validation loss, which they only
// can when each replica and each stage is fed its rows of all three inputs.
TEST(LanguageModelCli, SeveralDataInputsTrainUnderEveryStrategy) {
  const fs::path dir = scratch("bert_masked");
  const std::string train = "train " + kSource + "/models/transformers/bert_masked_dynamo.onnx --data npz:" + kSource +
                            "/tests/data/dataset_bert_masked.npz --epochs 2 --batch 16 --optimizer adamw --lr 0.003 " +
                            "--metrics " + (dir / "m.jsonl").string() + " -o " + (dir / "b.onnx").string() + " ";
  CliRun r = run(train);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("192 samples (16), 10 classes, token ids (not normalised); with attention_mask (16) int64, "
                          "token_type_ids (16) int64"),
            std::string::npos)
      << r.output;
  std::vector<nlohmann::json> epochs = metrics_lines(dir / "m.jsonl", "val_loss");
  ASSERT_EQ(epochs.size(), 2u) << r.output;
  const double single = epochs[1]["val_loss"];
  EXPECT_LT(single, epochs[0]["val_loss"].get<double>()) << r.output;
  for (const std::string strategy :
       {"--strategy dp --replicas 2", "--strategy dp --central-storage --replicas 2",
        "--strategy gpipe --stages 2 --micro-batches 2", "--strategy 1f1b --stages 2 --micro-batches 2",
        "--strategy ps --replicas 2", "--strategy pipedream --stages 2", "--strategy spectrain --stages 2"}) {
    SCOPED_TRACE(strategy);
    r = run(train + strategy);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    epochs = metrics_lines(dir / "m.jsonl", "val_loss");
    ASSERT_EQ(epochs.size(), 2u) << r.output;
    const double loss = epochs[1]["val_loss"];
    if (strategy.find("ps") == std::string::npos && strategy.find("pipedream") == std::string::npos &&
        strategy.find("spectrain") == std::string::npos) {
      EXPECT_NEAR(loss, single, 1e-4 * single) << r.output;
    } else {
      EXPECT_LT(loss, std::log(10.0)) << "no better than guessing one of 10 classes: " << r.output;
    }
  }
}

// The three-input BERT under checkpoints and bf16: stopped after 2 epochs and resumed to 3, it writes the
// bytes of an uninterrupted 3-epoch run (the loader's position restores every input's rows); bf16
// autocast trains it.
TEST(LanguageModelCli, SeveralDataInputsResumeExactlyAndTrainInBfloat16) {
  const fs::path dir = scratch("bert_masked_resume");
  const std::string train = "train " + kSource +
                            "/models/transformers/bert_masked_torchscript.onnx --data npz:" + kSource +
                            "/tests/data/dataset_bert_masked.npz --batch 16 --optimizer adamw --lr 0.003 ";
  expect_resumed_run_equals_the_whole(train, dir, 5);
  const CliRun r = run(train + "--epochs 2 --precision bf16 --metrics " + (dir / "m.jsonl").string() + " -o " +
                       (dir / "bf16.onnx").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<nlohmann::json> epochs = metrics_lines(dir / "m.jsonl", "val_loss");
  ASSERT_EQ(epochs.size(), 2u) << r.output;
  EXPECT_LT(epochs[1]["val_loss"].get<double>(), epochs[0]["val_loss"].get<double>()) << r.output;
}

// T5 reads input_ids and decoder_input_ids and scores every position (tests/data/dataset_t5_copy.npz:
// copy a sequence of ids in [1, 64)): it learns, and a gpipe over 2 stages follows one device: the same
// perplexity after the first epoch (29 steps), within 1% after the third (the micro-batches' gradients
// are summed in another order, and Adam carries that round-off on).
TEST(LanguageModelCli, AnEncoderDecoderTrainsOnTwoInputs) {
  const fs::path dir = scratch("t5");
  const std::string train = "train " + kSource + "/models/transformers/t5_dynamo.onnx --data npz:" + kSource +
                            "/tests/data/dataset_t5_copy.npz --epochs 3 --batch 32 --optimizer adamw --lr 0.003 " +
                            "--metrics " + (dir / "m.jsonl").string() + " -o " + (dir / "t5.onnx").string() + " ";
  std::vector<nlohmann::json> single;
  for (const std::string strategy : {"", "--strategy gpipe --stages 2 --micro-batches 2"}) {
    SCOPED_TRACE(strategy);
    const CliRun r = run(train + strategy);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const std::vector<nlohmann::json> epochs = metrics_lines(dir / "m.jsonl", "val_perplexity");
    ASSERT_EQ(epochs.size(), 3u) << r.output;
    const double last = epochs[2]["val_perplexity"];
    EXPECT_LT(last, epochs[0]["val_perplexity"].get<double>()) << r.output;
    EXPECT_LT(last, 63.0) << "no better than uniform over the 63 ids: " << r.output;
    if (strategy.empty()) {
      single = epochs;
      continue;
    }
    const double first = epochs[0]["val_perplexity"], single_first = single[0]["val_perplexity"];
    EXPECT_NEAR(first, single_first, 1e-4 * single_first) << r.output;
    EXPECT_NEAR(last, single[2]["val_perplexity"].get<double>(), 1e-2 * last) << r.output;
  }
}

// A model with several data inputs names the arrays it misses, and refuses sources that hold one array.
TEST(LanguageModelCli, SeveralDataInputsNeedAnNpzWithEach) {
  const fs::path dir = scratch("bert_masked_errors");
  const std::string bert = kSource + "/models/transformers/bert_masked_torchscript.onnx";
  const std::string npz = kSource + "/tests/data/dataset_tokens.npz";
  CliRun r = run("train " + bert + " --data npz:" + npz + " -o " + (dir / "b.onnx").string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(npz + ": the model reads several data inputs: expected an array for each, and labels "
                                "(input_ids, attention_mask, token_type_ids, labels); missing attention_mask, "
                                "token_type_ids; the archive holds: input_ids, labels"),
            std::string::npos)
      << r.output;
  r = run("train " + bert + " --data text:" + kText + " -o " + (dir / "b.onnx").string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("the model reads several data inputs (input_ids, attention_mask, ...): give them as "
                          "npz:FILE with an array named after each input, and labels"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(dir / "b.onnx"));
}

// The GPT-2 export under checkpoints and bf16: a run stopped after 2 epochs and resumed to 3 writes the
// bytes of an uninterrupted 3-epoch run; bf16 autocast and a bf16 GPipe over 2 stages train it too.
TEST(LanguageModelCli, Gpt2ResumesExactlyAndTrainsInBfloat16) {
  const fs::path dir = scratch("gpt2_more");
  const std::string train = "train " + kSource + "/models/transformers/gpt2_torchscript.onnx --data text:" + kText +
                            " --seq-len 32 --batch 8 --limit-batches 4 --optimizer adamw --lr 0.003 ";
  expect_resumed_run_equals_the_whole(train, dir, 4);
  for (const std::string how : {"--precision bf16", "--precision bf16 --strategy gpipe --stages 2 --micro-batches 2"}) {
    const CliRun r =
        run(train + how + " --metrics " + (dir / "m.jsonl").string() + " -o " + (dir / "bf16.onnx").string());
    ASSERT_EQ(r.exit_code, 0) << how << "\n" << r.output;
    const std::vector<nlohmann::json> epochs = metrics_lines(dir / "m.jsonl", "val_perplexity");
    ASSERT_EQ(epochs.size(), 1u) << how;
    EXPECT_LT(epochs[0]["val_perplexity"].get<double>(), 256.0) << how << ": no better than uniform";
  }
}

// A plan that `partition` makes for a language model is the split `train --plan` runs: both place the
// nodes of the training graph with the loss as the trainer attaches it ((N, T, V) logits reshaped). The
// pipeline's own planner used to price a graph without that reshape, and a partition plan was refused.
TEST(LanguageModelCli, APartitionPlanOfALanguageModelTrains) {
  const fs::path dir = scratch("lm_plan");
  CliRun r = run("partition " + kBigram + " --stages 2 --batch 32 -o " + (dir / "plan.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run("train " + kBigram + " --data text:" + kText + " --strategy gpipe --stages 2 --plan " +
          (dir / "plan.json").string() + " --micro-batches 2 --batch 32 --limit-batches 4 -o " +
          (dir / "lm.onnx").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(", from the plan)"), std::string::npos) << r.output;
}

// bench times a language model on a synthetic token stream (synthetic:T:VOCAB:N, the next id the last
// plus 1, 2 or 3): a dynamic sequence axis takes --seq-len, and every strategy runs.
TEST(LanguageModelCli, BenchTimesTokenModelsOnSyntheticTokens) {
  const fs::path dir = scratch("lm_bench");
  CliRun r = run("bench " + kBigram + " --strategies single,dp:2,gpipe:2x2 --steps 2 --warmup 1 --repeats 1 --json " +
                 (dir / "b.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("synthetic:16:256:96"), std::string::npos) << r.output;
  std::ifstream in(dir / "b.json");
  const nlohmann::json doc = nlohmann::json::parse(in);
  ASSERT_EQ(doc["runs"].size(), 4u) << doc.dump();
  for (const nlohmann::json& row : doc["runs"])
    EXPECT_GT(row["measured"]["samples_per_s"]["median"].get<double>(), 0) << row.dump();
  r = run("bench " + kSource +
          "/models/transformers/gpt2_torchscript.onnx --strategies single --steps 1 --warmup 0 "
          "--repeats 1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("has a dynamic sequence axis: give --seq-len T"), std::string::npos) << r.output;
  r = run("bench " + kSource +
          "/models/transformers/gpt2_torchscript.onnx --seq-len 16 --strategies single "
          "--steps 1 --warmup 0 --repeats 1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// inspect counts the FLOPs of a dynamic sequence axis once it is bound: the TorchScript export with
// --seq-len 16 costs what the dynamo export (sequence fixed at 16) costs.
TEST(LanguageModelCli, InspectBindsTheSequenceLength) {
  const std::string dir = kSource + "/models/transformers/";
  const CliRun unbound = run("inspect " + dir + "gpt2_torchscript.onnx");
  EXPECT_NE(unbound.output.find("give --seq-len T for true FLOPs"), std::string::npos) << unbound.output;
  const CliRun bound = run("inspect " + dir + "gpt2_torchscript.onnx --seq-len 16");
  const CliRun dynamo = run("inspect " + dir + "gpt2_dynamo.onnx");
  auto forward_flops = [](const std::string& out) {
    const size_t at = out.find("FLOPs per sample    forward ");
    return at == std::string::npos ? std::string("(none)") : out.substr(at + 28, out.find(',', at) - at - 28);
  };
  EXPECT_EQ(forward_flops(bound.output), "2.85M") << bound.output;
  EXPECT_EQ(forward_flops(dynamo.output), "2.85M") << dynamo.output;
}

TEST(LanguageModelCli, DataThatDoNotFitTheModelAreRefusedBeforeTraining) {
  const fs::path dir = scratch("errors");
  const std::string out = " -o " + (dir / "x.onnx").string();
  CliRun r = run("train " + kSource + "/models/cnn_opset17.onnx --data text:" + kText + " --seq-len 16" + out);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(
      r.output.find(kText + ": inputs are int64: expected uint8 pixels or float32/float64 (integer token ids need "
                            "a model whose input is an integer type)"),
      std::string::npos)
      << r.output;
  // text: labels go up to 255; the transformer fixture scores 10 classes.
  r = run("train " + kSource + "/models/transformer_opset17.onnx --data text:" + kText + out);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("onnxtrain: error: the labels of text:" + kText +
                          " go up to 255, but the model's output 'logits' (batch,10) scores 10 classes"),
            std::string::npos)
      << r.output;
  r = run("train " + kBigram + " --data text:" + kText + " --seq-len 8" + out);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("do not match the model input 'input_ids' (batch,16)"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir / "x.onnx"));
}

}  // namespace
}  // namespace onnxtrain
