// executor/pipeline: the pipeline trainer against the one-device Trainer (N = 1: every strategy bit for
// bit; gpipe: the whole mini-batch at any N and M), threaded against the sequential emulation of the same
// schedule (bit for bit, every strategy), PipeDream's stash, naive's inconsistency, SpecTrain's prediction.
#include "executor/pipeline/pipeline_trainer.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <utility>

#include "executor/comm/local_comm.h"
#include "frontend/data_loader.h"
#include "frontend/dataset.h"
#include "frontend/importer.h"
#include "graph/op_schema.h"
#include "tests/graph_builder.h"
#include "tests/rendezvous_links.h"
#include "tests/replica_fixtures.h"

namespace onnxtrain {
namespace {

const std::string kModels = std::string(ONNXTRAIN_SOURCE_DIR) + "/models/";

using testing_support::Batches;
using testing_support::momentum_sgd;
using testing_support::token_batches;

Batches make_batches(const std::string& shape, int64_t batch, int64_t count, uint64_t seed) {
  Dataset data = load_dataset("synthetic:" + shape + ":10:" + std::to_string(batch * count),
                              {.normalize = Normalization::MeanStd, .seed = seed});
  DataLoader loader(data, {.batch = batch, .shuffle = false, .prefetch = false});
  Batches out;
  for (int64_t i = 0; i < count; ++i) {
    Batch b = loader.next();
    out.emplace_back(b.x, b.y);
  }
  return out;
}

struct TrainedRun {
  std::vector<float> losses;
  std::map<std::string, Tensor> params;
};

TrainedRun train_single(const std::string& model, const TrainerOptions& options, const Batches& batches) {
  ImportedModel m = import_model(kModels + model);
  Trainer t(m.graph, options);
  TrainedRun r;
  for (const auto& [x, y] : batches) r.losses.push_back(t.train_step(x, y));
  r.params = t.trained_initializers();
  return r;
}

TrainedRun train_pipeline(const std::string& model, const PipelineOptions& options, const Batches& batches,
                          PipelineReport* report = nullptr) {
  ImportedModel m = import_model(kModels + model);
  PipelineTrainer p(m.graph, options);
  TrainedRun r;
  r.losses = p.train(batches);
  r.params = p.trained_initializers();
  if (report) *report = p.report();
  return r;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.sizes() == b.sizes() && a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

void expect_identical(const TrainedRun& a, const TrainedRun& b, const std::string& what) {
  ASSERT_EQ(a.losses.size(), b.losses.size()) << what;
  for (size_t i = 0; i < a.losses.size(); ++i) {
    EXPECT_EQ(std::memcmp(&a.losses[i], &b.losses[i], sizeof(float)), 0)
        << what << ": loss " << i << ": " << a.losses[i] << " vs " << b.losses[i];
  }
  ASSERT_EQ(a.params.size(), b.params.size()) << what;
  for (const auto& [name, t] : a.params) {
    ASSERT_TRUE(b.params.contains(name)) << what << ": " << name;
    EXPECT_TRUE(same_bits(t, b.params.at(name))) << what << ": " << name << " differs";
  }
}

void expect_close(const TrainedRun& a, const TrainedRun& b, double rtol, const std::string& what) {
  ASSERT_EQ(a.losses.size(), b.losses.size()) << what;
  for (size_t i = 0; i < a.losses.size(); ++i)
    EXPECT_NEAR(a.losses[i], b.losses[i], rtol * std::abs(b.losses[i])) << what << ": loss " << i;
  ASSERT_EQ(a.params.size(), b.params.size()) << what;
  for (const auto& [name, t] : a.params) {
    auto x = t.data<float>();
    auto y = b.params.at(name).data<float>();
    ASSERT_EQ(x.size(), y.size()) << what << ": " << name;
    int bad = 0;
    for (size_t i = 0; i < x.size(); ++i) bad += std::abs(x[i] - y[i]) > rtol * std::abs(y[i]) + 1e-7;
    EXPECT_EQ(bad, 0) << what << ": " << name << " has " << bad << " elements beyond rtol " << rtol;
  }
}

bool any_difference(const TrainedRun& a, const TrainedRun& b) {
  for (const auto& [name, t] : a.params)
    if (!same_bits(t, b.params.at(name))) return true;
  return false;
}

struct Variant {
  std::string name;
  PipelineStrategy strategy;
  bool vertical_sync = false;
  SpecTrainTarget target = SpecTrainTarget::sequential;
  int64_t micro_batches = 1;
};

const std::vector<Variant> kVariants = {
    {"naive", PipelineStrategy::naive},
    {"pipedream", PipelineStrategy::pipedream},
    {"pipedream-vertical-sync", PipelineStrategy::pipedream, true},
    {"spectrain", PipelineStrategy::spectrain},
    {"spectrain-paper", PipelineStrategy::spectrain, false, SpecTrainTarget::paper},
    {"gpipe", PipelineStrategy::gpipe, false, SpecTrainTarget::sequential, 2},
};

PipelineOptions options_for(const Variant& v, const TrainerOptions& trainer, int stages) {
  PipelineOptions o;
  o.trainer = trainer;
  o.strategy = v.strategy;
  o.stages = stages;
  o.vertical_sync = v.vertical_sync;
  o.spectrain_target = v.target;
  o.micro_batches = v.micro_batches;
  return o;
}

// With one stage there is nothing to be stale: every strategy is the one-device Trainer, bit for bit
// (gpipe with one micro-batch).
TEST(PipelineTrainer, OneStageEqualsTrainerBitForBit) {
  for (const std::string model : {"cnn_opset17.onnx", "mlp_opset17.onnx", "resnet_opset17.onnx"}) {
    const bool resnet = model.starts_with("resnet");  // BatchNorm: running statistics too
    const Batches batches = make_batches(resnet ? "3,32,32" : "1,28,28", resnet ? 8 : 16, resnet ? 3 : 4, 5);
    const TrainerOptions trainer = momentum_sgd(0.05);
    const TrainedRun single = train_single(model, trainer, batches);
    for (Variant v : kVariants) {
      v.micro_batches = 1;
      expect_identical(train_pipeline(model, options_for(v, trainer, 1), batches), single, model + " " + v.name);
    }
  }
}

// Every stage runs mini-batch i's passes with run index i and each micro-batch's rows at their place in the
// mini-batch, so the transformer's 7 Dropout nodes draw the single run's masks: one stage is bit-identical,
// and gpipe and 1f1b with any number of micro-batches take the single run's steps (up to the summation order
// and the stages' own thread counts; a wrong mask would move the loss by far more).
TEST(PipelineTrainer, DropoutMasksAreTheSingleRunsMasks) {
  const Batches batches = token_batches(8, 4, 21);
  TrainerOptions trainer = momentum_sgd(0.05);
  trainer.seed = 3;
  const TrainedRun single = train_single("transformer_opset17.onnx", trainer, batches);
  expect_identical(train_pipeline("transformer_opset17.onnx", options_for(kVariants[3], trainer, 1), batches), single,
                   "transformer spectrain N=1");
  for (int stages : {2, 3}) {
    PipelineOptions o = options_for({"gpipe", PipelineStrategy::gpipe}, trainer, stages);
    expect_close(train_pipeline("transformer_opset17.onnx", o, batches), single, 1e-5,
                 "transformer gpipe N=" + std::to_string(stages));
  }
  // Micro-batches draw their rows' masks of the whole mini-batch (run index = the mini-batch, counters
  // offset by the micro-batch's first row), so any M takes the single run's steps.
  for (PipelineStrategy strategy : {PipelineStrategy::gpipe, PipelineStrategy::flush_1f1b}) {
    for (int64_t m : {2, 4}) {
      PipelineOptions o = options_for({"flush", strategy}, trainer, 2);
      o.micro_batches = m;
      expect_close(train_pipeline("transformer_opset17.onnx", o, batches), single, 1e-5,
                   std::string("transformer ") + pipeline_strategy_name(strategy) + " N=2 M=" + std::to_string(m));
    }
  }
  trainer.seed = 4;  // the check has teeth: other masks, other losses
  const TrainedRun other = train_single("transformer_opset17.onnx", trainer, batches);
  EXPECT_GT(std::abs(other.losses[0] - single.losses[0]), 1e-4);
}

// GPipe accumulates the micro-batch gradients and updates once per mini-batch: the whole mini-batch's
// step, up to the summation order (BN-free models).
TEST(PipelineTrainer, GpipeEqualsTrainerOnTheWholeMiniBatch) {
  for (const std::string model : {"mlp_opset17.onnx", "cnn_opset17.onnx"}) {
    const Batches batches = make_batches("1,28,28", 16, 3, 7);
    const TrainerOptions trainer = momentum_sgd(0.05);
    const TrainedRun single = train_single(model, trainer, batches);
    for (int stages : {2, 3}) {
      for (int64_t m : {1, 2, 4}) {
        PipelineOptions o = options_for({"gpipe", PipelineStrategy::gpipe}, trainer, stages);
        o.micro_batches = m;
        expect_close(train_pipeline(model, o, batches), single, 1e-5,
                     model + " N=" + std::to_string(stages) + " M=" + std::to_string(m));
      }
    }
  }
  // Rows that do not split evenly (18 = 5+5+4+4) weigh each micro-batch by its rows.
  const Batches odd = make_batches("1,28,28", 18, 2, 8);
  PipelineOptions o = options_for({"gpipe", PipelineStrategy::gpipe}, momentum_sgd(0.05), 2);
  o.micro_batches = 4;
  expect_close(train_pipeline("mlp_opset17.onnx", o, odd), train_single("mlp_opset17.onnx", momentum_sgd(0.05), odd),
               1e-5, "mlp uneven micro-batches");
}

// 1f1b (PipeDream-Flush) runs gpipe's micro-batches in 1F1B order: the backwards keep micro-batch order, so
// the gradient sums, the updates and the weights are gpipe's bit for bit, while stage k holds at most
// min(N-k, M) micro-batches' activations instead of M (the report's peak, measured by the stage).
TEST(PipelineTrainer, OneFOneBEqualsGpipeBitForBitWithLessActivationMemory) {
  const Batches batches = make_batches("1,28,28", 16, 3, 7);
  for (int stages : {2, 3}) {
    for (int64_t m : {1, 4}) {
      PipelineOptions o = options_for({"gpipe", PipelineStrategy::gpipe}, momentum_sgd(0.05), stages);
      o.micro_batches = m;
      PipelineReport gpipe_report, report;
      const TrainedRun gpipe = train_pipeline("cnn_opset17.onnx", o, batches, &gpipe_report);
      o.strategy = PipelineStrategy::flush_1f1b;
      const std::string what = "N=" + std::to_string(stages) + " M=" + std::to_string(m);
      expect_identical(train_pipeline("cnn_opset17.onnx", o, batches, &report), gpipe, "1f1b " + what);
      for (int k = 0; k < stages; ++k) {
        const int64_t held = std::min<int64_t>(stages - k, m);
        const StageReport& a = report.stages[static_cast<size_t>(k)];
        const StageReport& g = gpipe_report.stages[static_cast<size_t>(k)];
        if (held < m) {
          EXPECT_LT(a.peak_activation_bytes, g.peak_activation_bytes) << what << " stage " << k;
        } else {
          EXPECT_EQ(a.peak_activation_bytes, g.peak_activation_bytes) << what << " stage " << k;
        }
        EXPECT_EQ(a.gradient_sum_bytes, g.gradient_sum_bytes);
        EXPECT_EQ(a.updates, 3);
      }
    }
  }
}

// Thread timing cannot change a number: each stage's results depend only on its program order and what it
// receives. The emulation runs the same programs on one thread.
TEST(PipelineTrainer, ThreadedEqualsSequentialEmulation) {
  struct Case {
    std::string model, shape;
    int stages;
  };
  for (const Case& c : {Case{"cnn_opset17.onnx", "1,28,28", 3}, Case{"resnet_opset17.onnx", "3,32,32", 2}}) {
    const Batches batches = make_batches(c.shape, 8, 6, 11);
    for (const Variant& v : kVariants) {
      PipelineOptions o = options_for(v, momentum_sgd(0.05), c.stages);
      PipelineReport threaded_report, emulated_report;
      const TrainedRun threaded = train_pipeline(c.model, o, batches, &threaded_report);
      o.threaded = false;
      const TrainedRun emulated = train_pipeline(c.model, o, batches, &emulated_report);
      expect_identical(threaded, emulated, c.model + " " + v.name);
      for (float l : threaded.losses) EXPECT_TRUE(std::isfinite(l)) << c.model << " " << v.name;
      ASSERT_EQ(threaded_report.stages.size(), static_cast<size_t>(c.stages));
      for (int k = 0; k < c.stages; ++k) {
        const StageReport& t = threaded_report.stages[k];
        const StageReport& e = emulated_report.stages[k];
        EXPECT_EQ(t.mean_staleness, e.mean_staleness) << c.model << " " << v.name << " stage " << k;
        EXPECT_EQ(t.updates, 6) << c.model << " " << v.name << " stage " << k;
        EXPECT_EQ(t.samples, 48) << c.model << " " << v.name << " stage " << k;
        EXPECT_GE(t.bubble_fraction, 0.0);
        EXPECT_LE(t.bubble_fraction, 1.0);
        if (v.strategy == PipelineStrategy::pipedream && k + 1 < c.stages) {
          EXPECT_GT(t.peak_stash_bytes, 0) << c.model << " " << v.name << " stage " << k;
        }
      }
    }
  }
}

// The CNN pipeline `o` with a stage per process (the `mpirun -np N` layout), threads standing in for the
// processes and the local communicator for MPI: each rank's losses and gather_trained_initializers().
std::vector<TrainedRun> train_stage_per_process(const PipelineOptions& o, const Batches& batches) {
  const int n = o.stages;
  auto group = make_local_group(n, std::chrono::seconds(60));
  std::vector<TrainedRun> ranks(n);
  std::vector<std::thread> threads;
  for (int k = 0; k < n; ++k) {
    threads.emplace_back([&, k] {
      ImportedModel m = import_model(kModels + "cnn_opset17.onnx");
      PipelineOptions mine = o;
      mine.threads = 1;
      mine.world = group[k].get();
      PipelineTrainer p(m.graph, mine);
      ranks[k].losses = p.train(batches);
      ranks[k].params = p.gather_trained_initializers();
    });
  }
  for (std::thread& t : threads) t.join();
  return ranks;
}

// A stage per process (the `mpirun -np N` layout), with threads standing in for the processes and the
// local communicator for MPI: every strategy gives the threaded single-process run's losses (on the last
// stage) and, gathered on rank 0, its weights, bit for bit.
TEST(PipelineTrainer, OneStagePerProcessEqualsTheThreadedRun) {
  const int n = 3;
  const Batches batches = make_batches("1,28,28", 8, 5, 12);
  for (const Variant& v : kVariants) {
    PipelineOptions o = options_for(v, momentum_sgd(0.05), n);
    o.threads = n;  // one OpenMP thread per stage in both runs
    const TrainedRun threaded = train_pipeline("cnn_opset17.onnx", o, batches);
    const std::vector<TrainedRun> ranks = train_stage_per_process(o, batches);
    TrainedRun combined{ranks[n - 1].losses, ranks[0].params};
    expect_identical(threaded, combined, "stage per process, " + v.name);
    EXPECT_TRUE(ranks[1].params.empty());
    for (float l : ranks[0].losses) EXPECT_TRUE(std::isnan(l)) << "only the last stage computes the loss";
  }
}

// bf16: the stages split the training graph with autocast's Cast nodes. With one micro-batch gpipe is the
// one-device bf16 Trainer bit for bit, also where the stage boundary carries a bfloat16 value, and with
// that boundary every strategy gives the same numbers with a stage per process as on threads.
TEST(PipelineTrainer, Bf16StagesComputeWhatOneBf16TrainerComputes) {
  TrainerOptions bf16 = momentum_sgd(0.05);
  bf16.precision = Precision::bf16;
  ImportedModel m = import_model(kModels + "cnn_opset17.onnx");
  Trainer prepared(m.graph, bf16);
  const TrainingGraph& training = prepared.training_graph();
  const Graph& g = training.graph;
  int64_t cut = 0;  // the first cut whose boundary sends a bfloat16 activation
  for (int64_t c = 1; c < static_cast<int64_t>(training.forward_node_count); ++c) {
    const std::vector<int64_t> starts{0, c};
    const std::vector<StageGraphs> split = split_training_graph(training, starts);
    for (const std::string& name : split[0].send_activations) {
      const Value& v = g.value(*g.find_value(name));
      if (v.dtype == DType::BFloat16 && cut == 0) cut = c;
      // A layer's weights are cast right before the layer (graph.h sort_depth_first): only a cut between
      // the Cast and the layer ships the half copy, not a cut that leaves the Cast stages away.
      const Node& producer = g.node(v.producer);
      if (producer.op_type == "Cast" && g.value(producer.inputs[0]).role == ValueRole::Parameter) {
        const std::vector<ValueId>& first_inputs = g.node(g.order()[static_cast<size_t>(c)]).inputs;
        EXPECT_NE(std::find(first_inputs.begin(), first_inputs.end(), *g.find_value(name)), first_inputs.end())
            << "cut " << c << " sends the half copy of a weight, " << name << ", to a later layer";
      }
    }
  }
  ASSERT_GT(cut, 0) << "some cut must send a bfloat16 activation";
  const Batches batches = make_batches("1,28,28", 8, 4, 15);
  const TrainedRun single = train_single("cnn_opset17.onnx", bf16, batches);
  for (const std::vector<int64_t>& starts : {std::vector<int64_t>{}, std::vector<int64_t>{0, cut}}) {
    PipelineOptions o = options_for({"gpipe", PipelineStrategy::gpipe}, bf16, 2);
    o.stage_starts = starts;
    o.threads = 2 * omp_get_max_threads();  // each stage's kernels split their work as the Trainer's do
    expect_identical(train_pipeline("cnn_opset17.onnx", o, batches), single,
                     "gpipe in bf16, cut " + (starts.empty() ? std::string("even") : std::to_string(cut)));
  }
  for (const Variant& v : kVariants) {
    PipelineOptions o = options_for(v, bf16, 2);
    o.stage_starts = {0, cut};
    o.threads = 2;
    const TrainedRun threaded = train_pipeline("cnn_opset17.onnx", o, batches);
    const std::vector<TrainedRun> ranks = train_stage_per_process(o, batches);
    expect_identical(threaded, TrainedRun{ranks[1].losses, ranks[0].params}, "bf16 stage per process, " + v.name);
    for (float l : threaded.losses) EXPECT_TRUE(std::isfinite(l)) << v.name;
  }
}

// The protocol stages on GPUs in separate processes use (grouped_transport.h: headers ahead over the
// communicator, payloads in one NCCL group per run of consecutive transfers), run over host memory with
// NCCL's unbuffered semantics: every strategy completes and gives the plain run's losses and weights bit
// for bit, threads and a stage per process alike, and runs of transfers are grouped (1F1B's steady state
// sends an activation and receives a gradient together).
TEST(PipelineTrainer, TransfersInNcclStyleGroupsEqualThePlainRun) {
  const int n = 3;
  const Batches batches = make_batches("1,28,28", 8, 5, 14);
  for (const Variant& v : kVariants) {
    PipelineOptions o = options_for(v, momentum_sgd(0.05), n);
    o.threads = n;
    const TrainedRun plain = train_pipeline("cnn_opset17.onnx", o, batches);
    testing_support::RendezvousLinks links;
    PipelineOptions grouped = o;
    grouped.peer_links = [&](int k, Communicator&) { return links.link(k); };
    expect_identical(plain, train_pipeline("cnn_opset17.onnx", grouped, batches), "grouped transfers, " + v.name);

    EXPECT_GE(links.largest_group(), 2u) << v.name;
    const std::vector<TrainedRun> ranks = train_stage_per_process(grouped, batches);
    expect_identical(plain, TrainedRun{ranks[n - 1].losses, ranks[0].params}, "grouped, stage per process, " + v.name);
  }
}

// A stage that fails while its neighbours wait for grouped transfers stops them through the
// communicator's abort, long before the timeout, and train() reports the failed stage's own error.
TEST(PipelineTrainer, AFailingStageStopsNeighboursWaitingForGroupedTransfers) {
  testing_support::RendezvousLinks links;
  PipelineOptions o = options_for(kVariants[0], momentum_sgd(0.05), 3);
  o.peer_links = [&](int k, Communicator&) { return links.link(k); };
  o.timeout = std::chrono::seconds(60);
  o.observer = [](const PassObservation& p) {
    if (p.stage == 1 && p.mini_batch == 2 && !p.backward) throw Error("injected failure in stage 1");
  };
  const auto start = std::chrono::steady_clock::now();
  try {
    train_pipeline("cnn_opset17.onnx", o, make_batches("1,28,28", 8, 5, 16));
    ADD_FAILURE() << "the injected failure was lost";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("injected failure in stage 1"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20)) << "the neighbours waited out the timeout";
}

// The same transfers posted one at a time deadlock 1F1B (why NcclLink groups them): the stand-in shows
// it, and the stage's timeout names the transfers it waited for.
TEST(PipelineTrainer, UngroupedUnbufferedTransfersDeadlock1F1B) {
  testing_support::RendezvousLinks links(/*grouped=*/false);
  PipelineOptions o = options_for(kVariants[0], momentum_sgd(0.05), 2);
  ASSERT_EQ(o.strategy, PipelineStrategy::naive);
  o.peer_links = [&](int k, Communicator&) { return links.link(k); };
  o.timeout = std::chrono::milliseconds(500);
  try {
    train_pipeline("cnn_opset17.onnx", o, make_batches("1,28,28", 8, 4, 15));
    ADD_FAILURE() << "1F1B completed over unbuffered, ungrouped transfers";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("did not complete in 500 ms"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("mini-batch"), std::string::npos) << "names what it waited for: " << e.what();
  }
}

// Pipeline × data parallelism: 2 pipelines of 2 stages (4 ranks; threads standing in for processes),
// every mini-batch split by rows between the pipelines and each stage's gradients summed over its two
// copies: the same weights as one pipeline on the whole mini-batch, up to summation order, and the two
// pipelines' weights identical.
// R copies of an N-stage pipeline (N·R ranks), each on its rows of every mini-batch, train the one pipeline's
// model on the whole mini-batch (rtol 1e-5). On the transformer the 7 Dropout nodes draw each copy's rows'
// masks of the whole mini-batch (counters offset by the copy's first row), or the models would part.
void expect_copies_equal_one_pipeline(const std::string& model, const Batches& batches, const TrainerOptions& trainer,
                                      std::span<const Variant> variants) {
  const int n = 2, copies = 2;
  for (const Variant& v : variants) {
    if (strategy_traits(v.strategy).flushes) continue;  // not supported with replicas yet
    PipelineOptions o = options_for(v, trainer, n);
    o.threads = n;
    const TrainedRun whole = train_pipeline(model, o, batches);
    auto group = make_local_group(n * copies, std::chrono::seconds(60));
    std::vector<std::map<std::string, Tensor>> models(n * copies);
    std::vector<std::thread> threads;
    for (int rank = 0; rank < n * copies; ++rank) {
      threads.emplace_back([&, rank] {
        ImportedModel m = import_model(kModels + model);
        PipelineOptions mine = o;
        mine.threads = 1;
        mine.world = group[rank].get();
        mine.replicas = copies;
        PipelineTrainer p(m.graph, mine);
        p.train(batches);
        models[rank] = p.gather_trained_initializers();  // on each pipeline's first stage
      });
    }
    for (std::thread& t : threads) t.join();
    ASSERT_FALSE(models[0].empty());
    ASSERT_FALSE(models[n].empty());
    for (const auto& [name, t] : whole.params) {
      EXPECT_TRUE(same_bits(models[0].at(name), models[n].at(name)))
          << model << " " << v.name << ": " << name << " differs between the pipelines";
      const testing_support::Deviation d =
          testing_support::deviation(t.data<float>(), std::as_const(models[0].at(name)).data<float>());
      EXPECT_LE(d.worst, 1e-5 * d.scale) << model << " " << v.name << ": " << name;
    }
  }
}

TEST(PipelineTrainer, ReplicatedPipelinesEqualOnePipelineOnTheWholeBatch) {
  expect_copies_equal_one_pipeline("cnn_opset17.onnx", make_batches("1,28,28", 10, 5, 13), momentum_sgd(0.05),
                                   kVariants);
  TrainerOptions dropout = momentum_sgd(0.05);
  dropout.seed = 3;
  const Variant some[] = {kVariants[1], kVariants[3]};  // pipedream, spectrain
  expect_copies_equal_one_pipeline("transformer_opset17.onnx", token_batches(8, 4, 21), dropout, some);
}

// Records the working weights of every pass, by (stage, mini-batch, backward).
struct PassLog {
  std::mutex mutex;
  std::map<std::tuple<int, int64_t, bool>, std::pair<int64_t, std::vector<Tensor>>> passes;
  PassObserver observer() {
    return [this](const PassObservation& p) {
      std::vector<Tensor> copy;
      for (const Tensor& t : *p.weights) copy.push_back(t.clone());
      std::lock_guard<std::mutex> lock(mutex);
      passes[{p.stage, p.mini_batch, p.backward}] = {p.version_read, std::move(copy)};
    };
  }
};

bool same_weights(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!same_bits(a[i], b[i])) return false;
  return true;
}

// PipeDream's backward reads exactly the weights its forward read (the stash); naive's backward reads the
// weights updated since, so the two strategies train differently once N > 1.
TEST(PipelineTrainer, PipeDreamBackwardReadsTheForwardsWeights) {
  const Batches batches = make_batches("1,28,28", 8, 6, 13);
  const int n = 3;
  PassLog pipedream_log, naive_log;
  PipelineOptions o = options_for({"pipedream", PipelineStrategy::pipedream}, momentum_sgd(0.05), n);
  o.observer = pipedream_log.observer();
  const TrainedRun pipedream = train_pipeline("cnn_opset17.onnx", o, batches);
  o = options_for({"naive", PipelineStrategy::naive}, momentum_sgd(0.05), n);
  o.observer = naive_log.observer();
  const TrainedRun naive = train_pipeline("cnn_opset17.onnx", o, batches);

  int checked = 0, naive_inconsistent = 0;
  for (int k = 0; k < n; ++k) {
    for (int64_t i = 0; i < 6; ++i) {
      const auto& f = pipedream_log.passes.at({k, i, false});
      const auto& b = pipedream_log.passes.at({k, i, true});
      EXPECT_TRUE(same_weights(f.second, b.second)) << "pipedream stage " << k << " mini-batch " << i;
      EXPECT_EQ(f.first, b.first) << "stage " << k << " mini-batch " << i;
      // 1F1B: N−k−1 updates land between F_i and B_i in steady state (none before the first update exists).
      EXPECT_EQ(f.first, std::max<int64_t>(0, i - (n - k - 1))) << "stage " << k << " mini-batch " << i;
      ++checked;
      const auto& nf = naive_log.passes.at({k, i, false});
      const auto& nb = naive_log.passes.at({k, i, true});
      if (!same_weights(nf.second, nb.second)) {
        ++naive_inconsistent;
        EXPECT_LT(k, n - 1) << "the last stage updates right after its backward: nothing lands in between";
      }
    }
  }
  EXPECT_EQ(checked, n * 6);
  EXPECT_GT(naive_inconsistent, 0);
  EXPECT_TRUE(any_difference(pipedream, naive));
}

// 2bw (PipeDream-2BW): with M = 1 it is pipedream bit for bit (the sum of one gradient is that gradient);
// with M micro-batches per mini-batch in one 1F1B stream the threaded run equals its sequential emulation,
// a stage stashes at most two weight versions once M >= N-k (pipedream: N-k), and every update applies
// gradients computed at most one version before it (the micro-batches of mini-batch i read W_i or W_(i-1)).
TEST(PipelineTrainer, TwoBwKeepsTwoVersionsAndUpdatesOneVersionStale) {
  const Batches batches = make_batches("1,28,28", 16, 5, 29);
  for (int stages : {2, 3}) {
    PipelineOptions o = options_for({"pipedream", PipelineStrategy::pipedream}, momentum_sgd(0.05), stages);
    PipelineReport pipedream_report;
    const TrainedRun pipedream = train_pipeline("cnn_opset17.onnx", o, batches, &pipedream_report);
    o.strategy = PipelineStrategy::two_bw;
    expect_identical(train_pipeline("cnn_opset17.onnx", o, batches), pipedream, "2bw M=1 N=" + std::to_string(stages));

    o.micro_batches = 4;
    PassLog log;
    o.observer = log.observer();
    PipelineReport report, emulated_report;
    const TrainedRun threaded = train_pipeline("cnn_opset17.onnx", o, batches, &report);
    o.observer = nullptr;
    o.threaded = false;
    expect_identical(train_pipeline("cnn_opset17.onnx", o, batches, &emulated_report), threaded,
                     "2bw M=4 threaded against emulated, N=" + std::to_string(stages));
    EXPECT_TRUE(any_difference(threaded, pipedream)) << "M = 4 trains otherwise than pipedream";
    for (float l : threaded.losses) EXPECT_TRUE(std::isfinite(l));
    EXPECT_EQ(threaded.losses.size(), 5u);
    for (int k = 0; k < stages; ++k) {
      const StageReport& r = report.stages[static_cast<size_t>(k)];
      EXPECT_EQ(r.updates, 5);
      EXPECT_EQ(r.forward_passes, 20);
      EXPECT_LE(r.peak_stash_bytes, 2 * r.weight_bytes) << "stage " << k;
      EXPECT_GT(r.gradient_sum_bytes, 0);
      if (k == 0) {
        EXPECT_EQ(pipedream_report.stages[0].peak_stash_bytes, stages * r.weight_bytes);
      }
      for (int64_t i = 0; i < 5; ++i) {
        const int64_t read = log.passes.at({k, i, true}).first;  // the last micro-batch's backward of i
        EXPECT_GE(read, i - 1) << "stage " << k << ", mini-batch " << i;
        EXPECT_LE(read, i) << "stage " << k << ", mini-batch " << i;
      }
    }
  }
}

// PipeDream's vertical sync: every stage computes mini-batch i, forward and backward, at the version stage 0
// read for it (W_{i−(N−1)} in steady state), and the backward reads the forward's weights bit for bit.
// Without it a later stage's forward reads its own, newer version.
TEST(PipelineTrainer, VerticalSyncReadsStageZerosVersionOnEveryStage) {
  const int n = 3;
  const Batches batches = make_batches("1,28,28", 8, 7, 23);
  for (bool vertical : {true, false}) {
    PassLog log;
    PipelineOptions o = options_for(vertical ? kVariants[2] : kVariants[1], momentum_sgd(0.05), n);
    o.observer = log.observer();
    train_pipeline("cnn_opset17.onnx", o, batches);
    int newer = 0;
    for (int64_t i = 0; i < 7; ++i) {
      const int64_t stage0 = log.passes.at({0, i, false}).first;
      EXPECT_EQ(stage0, std::max<int64_t>(0, i - (n - 1))) << "mini-batch " << i;
      for (int k = 0; k < n; ++k) {
        const auto& forward = log.passes.at({k, i, false});
        const auto& backward = log.passes.at({k, i, true});
        EXPECT_EQ(backward.first, forward.first) << "stage " << k << ", mini-batch " << i;
        EXPECT_TRUE(same_weights(forward.second, backward.second)) << "stage " << k << ", mini-batch " << i;
        if (vertical) {
          EXPECT_EQ(forward.first, stage0) << "stage " << k << ", mini-batch " << i;
        }
        newer += forward.first > stage0;
      }
    }
    if (vertical) {
      EXPECT_EQ(newer, 0);
    } else {
      EXPECT_GT(newer, 0) << "without vertical sync the later stages read newer versions";
    }
  }
}

// Version accounting in the report: PipeDream reads W_{i−(N−k−1)} in both passes; SpecTrain (sequential
// target) aims every pass at W_i; naive's backward reads W_i.
TEST(PipelineTrainer, ReportsStalenessPerStage) {
  const Batches batches = make_batches("1,28,28", 8, 8, 17);
  for (const Variant& v : {kVariants[0], kVariants[1], kVariants[3]}) {
    PipelineReport report;
    train_pipeline("cnn_opset17.onnx", options_for(v, momentum_sgd(0.05), 3), batches, &report);
    ASSERT_EQ(report.stages.size(), 3u);
    EXPECT_EQ(report.mini_batches, 8);
    EXPECT_EQ(report.samples, 64);
    EXPECT_GT(report.samples_per_second, 0);
    const StageReport& last = report.stages[2];
    EXPECT_EQ(last.mean_staleness, 0) << v.name << ": the last stage is never stale";
    const StageReport& first = report.stages[0];
    EXPECT_GT(first.parameters, 0);
    EXPECT_EQ(first.weight_bytes, first.parameters * 4);
    EXPECT_GT(first.peak_activation_bytes, 0);
    EXPECT_EQ(first.forward_passes, 8);
    EXPECT_EQ(first.backward_passes, 8);
    if (v.strategy == PipelineStrategy::spectrain) {
      // Scored against the version each pass aimed at: the momentum prediction lands nearer to it than the
      // weights the pass would read without prediction (ratio 1), and the report counts the scoring copies.
      EXPECT_EQ(first.predictions, 7) << "mini-batches 1..7 predict on stage 0 (mini-batch 0 has s = 0)";
      EXPECT_GT(first.prediction_error, 0);
      EXPECT_LT(first.prediction_error, 1);
      EXPECT_EQ(first.prediction_bytes, 2 * 2 * first.weight_bytes) << "Ŵ and W of 2 pending predictions";
      EXPECT_EQ(last.prediction_bytes, 0) << "the last stage predicts nothing";
      // Without the metrics: the same numbers, no scoring and no copies.
      PipelineOptions quiet = options_for(v, momentum_sgd(0.05), 3);
      quiet.measure_prediction = false;
      PipelineReport quiet_report;
      const TrainedRun scored = train_pipeline("cnn_opset17.onnx", options_for(v, momentum_sgd(0.05), 3), batches);
      expect_identical(train_pipeline("cnn_opset17.onnx", quiet, batches, &quiet_report), scored, "metrics off");
      EXPECT_EQ(quiet_report.stages[0].predictions, 0);
      EXPECT_EQ(quiet_report.stages[0].prediction_bytes, 0);
    } else {
      // Stage 0 forward of i reads W_{i−2} once two updates exist: gaps 0,1,2,2,2,2,2,2.
      EXPECT_DOUBLE_EQ(first.mean_staleness_forward, 13.0 / 8.0) << v.name;
      EXPECT_DOUBLE_EQ(first.mean_staleness_backward, v.strategy == PipelineStrategy::naive ? 0.0 : 13.0 / 8.0)
          << v.name;
    }
  }
}

// A graph whose gradients never change: loss = ReduceSum(x·w0 + w1) with x fixed, so dloss/dw0 = x and
// dloss/dw1 = 1. Two stages: {Mul} and {Add, ReduceSum}.
Graph constant_gradient_graph() {
  Graph g;
  auto add = [&](const std::string& op, std::vector<ValueId> inputs, Attributes attributes = {}) {
    return testing_support::add_inferred_node(g, op, op, std::move(inputs), op + "_out", std::move(attributes));
  };
  auto param = [&](const std::string& name, std::vector<float> values) {
    Tensor t(DType::Float32, {static_cast<int64_t>(values.size())});
    std::copy(values.begin(), values.end(), t.data<float>().begin());
    return testing_support::add_parameter(g, name, t);
  };
  ValueId x = g.add_value(
      {.name = "x", .dtype = DType::Float32, .shape = Shape({Dim::symbol("batch"), Dim(4)}), .role = ValueRole::Input});
  g.inputs.push_back(x);
  ValueId w0 = param("w0", {0.5f, -1.0f, 2.0f, 0.25f});
  ValueId w1 = param("w1", {1.0f, 0.0f, -0.5f, 3.0f});
  ValueId loss = add("ReduceSum", {add("Add", {add("Mul", {x, w0}), w1})}, {{"keepdims", int64_t{0}}});
  g.value(loss).name = "total";
  g.outputs.push_back(loss);
  return g;
}

// With a constant gradient Adam's next step is its current direction, so SpecTrain's prediction one update
// ahead (stage 0 of 2: s = 1) is the real next weights: stage 0's forward of i reads (up to rounding) what
// its backward of i reads, W_i. Mini-batch 1 has no optimizer state to predict from yet.
TEST(PipelineTrainer, SpecTrainPredictsTheNextWeightsForAConstantGradient) {
  Graph g = constant_gradient_graph();
  PipelineOptions o;
  o.trainer.loss = parse_loss_spec("output:total");
  o.trainer.optimizer.kind = OptimizerKind::adam;
  o.trainer.schedule.base_lr = 0.01;
  o.strategy = PipelineStrategy::spectrain;
  o.stages = 2;
  o.stage_starts = {0, 1};
  PassLog log;
  o.observer = log.observer();
  PipelineTrainer p(g, o);
  Tensor x(DType::Float32, {2, 4});
  const float xs[] = {1.0f, -2.0f, 0.5f, 3.0f, 0.5f, 1.0f, -1.5f, 2.0f};
  std::copy(std::begin(xs), std::end(xs), x.data<float>().begin());
  const Batches batches(8, {x, Tensor(DType::Int64, {2})});
  p.train(batches);
  ASSERT_EQ(p.stage_parameters(0), std::vector<std::string>{"w0"});
  for (int64_t i = 2; i < 8; ++i) {
    const auto& f = log.passes.at({0, i, false});
    const auto& b = log.passes.at({0, i, true});
    EXPECT_EQ(f.first, i);
    EXPECT_EQ(b.first, i);
    auto predicted = f.second[0].data<float>();
    auto real = b.second[0].data<float>();
    for (size_t e = 0; e < predicted.size(); ++e)
      EXPECT_NEAR(predicted[e], real[e], 1e-6) << "mini-batch " << i << " element " << e;
  }
  // Without prediction the forward would read W_{i−1}, one whole step (0.01 per element) away.
  const StageReport s0 = p.report().stages[0];
  EXPECT_EQ(s0.predictions, 7);                      // mini-batches 1..7 (mini-batch 0 has s = 0)
  EXPECT_LT(s0.prediction_error, 1.0 / 7.0 + 1e-3);  // mini-batch 1 scores 1, the others ~0
}

// train() calls continue one run: mini-batches, versions and run indices are numbered over all calls. gpipe
// flushes every mini-batch anyway, so splitting the batches over calls changes nothing; 1F1B drains the
// pipeline at the end of each call (fewer stale passes), which the version checks inside accept.
TEST(PipelineTrainer, SuccessiveCallsContinueTheRun) {
  const Batches batches = make_batches("1,28,28", 8, 5, 19);
  const Batches head(batches.begin(), batches.begin() + 2), tail(batches.begin() + 2, batches.end());
  PipelineOptions o = options_for(kVariants[5], momentum_sgd(0.05), 2);
  const TrainedRun once = train_pipeline("cnn_opset17.onnx", o, batches);
  {
    ImportedModel m = import_model(kModels + "cnn_opset17.onnx");
    PipelineTrainer p(m.graph, o);
    TrainedRun twice;
    twice.losses = p.train(head);
    for (float l : p.train(tail)) twice.losses.push_back(l);
    twice.params = p.trained_initializers();
    expect_identical(twice, once, "gpipe in two calls");
    EXPECT_EQ(p.mini_batches_trained(), 5);
  }
  ImportedModel m = import_model(kModels + "cnn_opset17.onnx");
  PassLog log;
  o = options_for(kVariants[3], momentum_sgd(0.05), 3);
  o.observer = log.observer();
  PipelineTrainer p(m.graph, o);
  std::vector<int64_t> seen;
  auto on_loss = [&](int64_t i, float) { seen.push_back(i); };
  p.train(head, on_loss);
  p.train(tail, on_loss);
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(p.report().stages[k].updates, 5);
    // The second call starts from a drained pipeline: mini-batch 2's forward reads version 2 everywhere.
    EXPECT_EQ(log.passes.at({k, 2, false}).first, 2) << "stage " << k;
  }
}

// The same at the policy level, two updates ahead: Ŵ = W − 2·d lands on W after two constant-gradient Adam
// steps; the master weights are untouched by the prediction.
TEST(WeightPolicy, SpecTrainPredictsTwoConstantGradientStepsAhead) {
  Tensor w(DType::Float32, {4});
  const std::vector<float> initial = {0.5f, -1.0f, 2.0f, 0.25f};
  std::copy(initial.begin(), initial.end(), w.data<float>().begin());
  WeightPolicy policy(PipelineStrategy::spectrain, false, {{"w", w}},
                      Optimizer({.kind = OptimizerKind::adam}, {.base_lr = 0.01}));
  const std::vector<float> g = {0.3f, -2.0f, 0.01f, 1.0f};
  const std::vector<const float*> grads = {g.data()};
  policy.step(grads);
  const std::vector<float> before = policy.master();
  EXPECT_EQ(policy.before_forward({.mini_batch = 3, .s = 2}), 3);
  const std::vector<float> predicted(w.data<float>().begin(), w.data<float>().end());
  EXPECT_EQ(before, policy.master()) << "prediction moved W";
  policy.step(grads);
  policy.step(grads);
  for (size_t e = 0; e < predicted.size(); ++e) {
    EXPECT_NEAR(predicted[e], policy.master()[e], 1e-6) << e;
    EXPECT_GT(std::abs(before[e] - policy.master()[e]), 0.019) << e;  // two steps of lr 0.01 per element
  }
  EXPECT_EQ(policy.statistics().predictions, 1);
  EXPECT_LT(policy.statistics().prediction_error, 1e-4);
}

// The policy writes the working weights only when the version a pass reads changes: naive once per
// update (the passes in between read the same W), spectrain every predicted pass.
TEST(WeightPolicy, CountsWritesOfTheWorkingWeights) {
  const std::vector<float> g = {0.5f, -0.5f};
  const std::vector<const float*> grads = {g.data()};
  Tensor w(DType::Float32, {2});
  WeightPolicy naive(PipelineStrategy::naive, false, {{"w", w}}, Optimizer({}, {.base_lr = 0.1}));
  const int64_t start = naive.working_writes();
  naive.before_forward({.mini_batch = 0});
  naive.before_backward({.mini_batch = 0});
  EXPECT_EQ(naive.working_writes(), start) << "W unchanged since the working weights were made from it";
  naive.step(grads);
  naive.before_forward({.mini_batch = 1});
  naive.before_backward({.mini_batch = 1});
  EXPECT_EQ(naive.working_writes(), start + 1);
  EXPECT_EQ(w.data<float>()[0], naive.master()[0]);

  Tensor v(DType::Float32, {2});
  WeightPolicy spectrain(PipelineStrategy::spectrain, false, {{"v", v}}, Optimizer({}, {.base_lr = 0.1}));
  spectrain.step(grads);
  const int64_t before = spectrain.working_writes();
  spectrain.before_forward({.mini_batch = 2, .s = 1});
  spectrain.before_forward({.mini_batch = 3, .s = 1});
  EXPECT_EQ(spectrain.working_writes(), before + 2);
}

TEST(PipelineTrainer, RejectsOptionsThatDoNotFit) {
  ImportedModel m = import_model(kModels + "mlp_opset17.onnx");
  PipelineOptions o;
  o.trainer = momentum_sgd(0.1);
  o.stages = 2;
  o.stage_starts = {0};
  EXPECT_THROW(PipelineTrainer(m.graph, o), Error);
  o.stage_starts.clear();
  o.micro_batches = 2;  // naive sends whole mini-batches
  EXPECT_THROW(PipelineTrainer(m.graph, o), Error);
  o.micro_batches = 1;
  o.vertical_sync = true;
  EXPECT_THROW(PipelineTrainer(m.graph, o), Error);
  o.vertical_sync = false;
  o.stages = 0;
  EXPECT_THROW(PipelineTrainer(m.graph, o), Error);
}

}  // namespace
}  // namespace onnxtrain
