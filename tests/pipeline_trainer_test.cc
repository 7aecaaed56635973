// executor/pipeline: the pipeline trainer against the one-device Trainer (N = 1: every strategy bit for
// bit; gpipe: the whole mini-batch at any N and M), threaded against the sequential emulation of the same
// schedule (bit for bit, every strategy), stages as processes, bf16, grouped transfers, pipeline copies,
// successive calls and option errors. Each strategy's own semantics: pipeline_strategies_test.cc.
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
#include "executor/pipeline/stage_worker.h"
#include "frontend/data_loader.h"
#include "frontend/dataset.h"
#include "frontend/importer.h"
#include "graph/op_schema.h"
#include "tests/graph_builder.h"
#include "tests/pipeline_fixtures.h"
#include "tests/rendezvous_links.h"
#include "tests/replica_fixtures.h"

namespace onnxtrain {
namespace {

using namespace pipeline_testing;  // NOLINT: the shared helpers of the pipeline tests
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

// gpipe and 1f1b carry what the kernels derive from the weights (single_pixel_conv.h's gathered taps,
// tap_product_conv.h's transposed weight) from a stage's first pass of a weight version to its later passes,
// and derive it afresh after each update. On a model whose convolutions take both paths they still take the
// one-device steps on the whole mini-batch: taps carried past an update would read the old weights. The
// same with the weights as training holds them by default (live taps, tap-major: TapMajorConvGrad sums its
// micro-batches' dWt in its own products).
TEST(PipelineTrainer, FlushingStrategiesCarryWeightDerivedValuesWithinAVersion) {
  const std::string model = std::string(ONNXTRAIN_SOURCE_DIR) + "/tests/data/small_planes/small_plane_cnn.onnx";
  const Batches batches = make_batches("4,4,4", 16, 4, 9);
  for (const bool model_layout : {true, false}) {
    const TrainerOptions trainer =
        model_layout ? testing_support::model_layout_weights(momentum_sgd(0.1)) : momentum_sgd(0.1);
    const std::string layout = model_layout ? "model layout " : "as trained by default ";
    ImportedModel single_model = import_model(model);
    Trainer single_trainer(single_model.graph, trainer);
    TrainedRun single;
    for (const auto& [x, y] : batches) single.losses.push_back(single_trainer.train_step(x, y));
    single.params = single_trainer.trained_initializers();
    for (PipelineStrategy strategy : {PipelineStrategy::gpipe, PipelineStrategy::flush_1f1b}) {
      for (int64_t m : {1, 4}) {
        PipelineOptions o = options_for({"flush", strategy}, trainer, 2);
        o.micro_batches = m;
        ImportedModel pipeline_model = import_model(model);
        PipelineTrainer p(pipeline_model.graph, o);
        TrainedRun pipelined;
        pipelined.losses = p.train(batches);
        pipelined.params = p.trained_initializers();
        expect_close(pipelined, single, 1e-5,
                     layout + std::string(pipeline_strategy_name(strategy)) + " M=" + std::to_string(m));
      }
    }
    EXPECT_GT(std::abs(single.losses.back() - single.losses.front()), 1e-3) << "the weights moved between versions";
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
        if (v.strategy == PipelineStrategy::pipedream && !o.vertical_sync && k + 1 == c.stages) {
          // The last stage's backward follows its forward before any update: it reads W, copies nothing.
          EXPECT_EQ(t.peak_stash_bytes, 0) << c.model << " " << v.name;
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
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20))
      << "the neighbours waited out the timeout";
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
// model on the whole mini-batch (rtol 1e-5): every strategy, gpipe, 1f1b and 2bw with their gradient sums
// all-reduced once per update. On the transformer the 7 Dropout nodes draw each copy's rows'
// masks of the whole mini-batch (counters offset by the copy's first row), or the models would part.
// The rows of `t` in the order `order` gives (each row's bytes as they are).
Tensor rows_in_order(const Tensor& t, const std::vector<int64_t>& order) {
  Tensor out(t.dtype(), t.sizes());
  const size_t row = t.nbytes() / static_cast<size_t>(t.sizes()[0]);
  for (size_t i = 0; i < order.size(); ++i) std::memcpy(out.raw() + i * row, t.raw() + order[i] * row, row);
  return out;
}

// With M micro-batches per copy, micro-batch j of copy r holds rows of the copy's share; 2bw's micro-batches
// of a mini-batch may read different weight versions, so the one pipeline compared must put the same rows in
// its micro-batch j: the copies' j-th chunks, in copy order (the mean over the batch does not see the order).
Batches rows_of_micro_batches_across_copies(const Batches& batches, int copies, int64_t m) {
  Batches out;
  for (const auto& [x, y] : batches) {
    const int64_t rows = x.sizes()[0];
    std::vector<int64_t> order;
    for (int64_t j = 0; j < m; ++j)
      for (int r = 0; r < copies; ++r) {
        const auto [begin, end] = micro_batch_rows(rows, copies, r);
        const auto [from, to] = micro_batch_rows(end - begin, m, j);
        for (int64_t i = begin + from; i < begin + to; ++i) order.push_back(i);
      }
    out.emplace_back(rows_in_order(x, order), rows_in_order(y, order));
  }
  return out;
}

void expect_copies_equal_one_pipeline(const std::string& model, const Batches& batches, const TrainerOptions& trainer,
                                      std::span<const Variant> variants) {
  const int n = 2, copies = 2;
  for (const Variant& v : variants) {
    PipelineOptions o = options_for(v, trainer, n);
    o.threads = n;
    const TrainedRun whole =
        train_pipeline(model, o, rows_of_micro_batches_across_copies(batches, copies, v.micro_batches));
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
  const Variant micro_batched[] = {{"1f1b", PipelineStrategy::flush_1f1b, false, SpecTrainTarget::sequential, 2},
                                   {"2bw", PipelineStrategy::two_bw, false, SpecTrainTarget::sequential, 3}};
  expect_copies_equal_one_pipeline("cnn_opset17.onnx", make_batches("1,28,28", 12, 5, 13), momentum_sgd(0.05),
                                   micro_batched);
  TrainerOptions dropout = momentum_sgd(0.05);
  dropout.seed = 3;
  const Variant some[] = {kVariants[1], kVariants[3]};  // pipedream, spectrain
  expect_copies_equal_one_pipeline("transformer_opset17.onnx", token_batches(8, 4, 21), dropout, some);
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
