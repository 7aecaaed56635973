// The simulator (simulator/) against closed forms it must reproduce: GPipe's bubble (N-1)/(M+N-1) with
// equal stages, 1F1B's steady state equal to its slowest stage, data parallelism's step = compute + the
// ring all-reduce + the update without overlap (and less with buckets), a parameter server with one
// worker, memory peaks, machines (presets, JSON, errors), strategies on a machine and the recommendation.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "executor/pipeline/schedule.h"
#include "graph/error.h"
#include "simulator/event_simulation.h"
#include "simulator/machine.h"
#include "simulator/pipeline_simulation.h"
#include "simulator/recommend.h"
#include "simulator/replica_simulation.h"
#include "simulator/strategy_simulation.h"
#include "tests/error_of.h"

using namespace onnxtrain;

using testing_support::error_of;

namespace {

TEST(EventSimulation, InOrderResourcesAndWaits) {
  EventSimulation sim;
  const int a = sim.add_resource("a"), b = sim.add_resource("b");
  const int pool = sim.add_memory_pool("a", 100);
  const int t0 = sim.add_task({.resource = a, .seconds = 2, .memory_pool = pool, .allocate = 50});
  const int t1 = sim.add_task({.resource = b, .seconds = 3, .after = {t0}});
  const int t2 = sim.add_task({.resource = a, .seconds = 1, .memory_pool = pool, .allocate = 30, .release = 80});
  const int t3 = sim.add_task({.resource = a, .seconds = 1, .after = {t1}});
  sim.run();
  EXPECT_EQ(sim.start(t1), 2);  // waits for t0
  EXPECT_EQ(sim.start(t2), 2);  // runs on a while b works
  EXPECT_EQ(sim.start(t3), 5);  // waits for t1, after t2 on its resource
  EXPECT_EQ(sim.makespan(), 6);
  EXPECT_EQ(sim.busy_seconds(a), 4);
  EXPECT_EQ(sim.peak_memory(pool), 180);  // 100 resident + 50 + 30 until t2 ends
}

TEST(EventSimulation, ATaskWaitsOnlyOnTasksAddedBeforeIt) {
  EventSimulation sim;
  const int a = sim.add_resource("a");
  EXPECT_THROW(sim.add_task({.resource = a, .seconds = 1, .after = {0}}), std::exception);
  EXPECT_THROW(sim.add_task({.resource = 7, .seconds = 1}), std::exception);
  EXPECT_THROW(sim.add_task({.resource = a, .seconds = -1}), std::exception);
}

TEST(EventSimulation, TasksOfAProcessorPoolRunAtMostItsCountAtOnce) {
  EventSimulation sim;
  const int cpus = sim.add_processors(2);
  std::vector<int> resources, tasks;
  for (int r = 0; r < 3; ++r) resources.push_back(sim.add_resource("worker " + std::to_string(r)));
  for (int r = 0; r < 3; ++r)
    tasks.push_back(sim.add_task({.resource = resources[r], .seconds = 1, .processors = cpus}));
  // Outside the pool: starts at once, whatever the pool's load.
  const int transfer = sim.add_task({.resource = resources[2], .seconds = 0.5});
  sim.run();
  EXPECT_EQ(sim.start(tasks[0]), 0);
  EXPECT_EQ(sim.start(tasks[1]), 0);
  EXPECT_EQ(sim.start(tasks[2]), 1);  // two processors: the third waits for one
  EXPECT_EQ(sim.start(transfer), 2);  // after its resource's task, not held back by the pool
  EXPECT_EQ(sim.makespan(), 2.5);
  EXPECT_EQ(sim.processors_in_use(cpus), 2);
}

TEST(EventSimulation, APoolTaskTakesTheEarliestGapThatHoldsIt) {
  EventSimulation sim;
  const int cpu = sim.add_processors(1);
  const int a = sim.add_resource("a"), b = sim.add_resource("b"), c = sim.add_resource("c");
  const int first = sim.add_task({.resource = a, .seconds = 1, .processors = cpu});                   // [0, 1)
  const int late = sim.add_task({.resource = b, .seconds = 1, .after = {first}, .processors = cpu});  // waits to 1
  const int wait = sim.add_task({.resource = a, .seconds = 3});                                       // a: [1, 4)
  const int after_wait = sim.add_task({.resource = a, .seconds = 1, .processors = cpu});              // [4, 5)
  // Ready at 0 on its own resource: the gap [2, 4) is the first that holds 2 seconds.
  const int gap = sim.add_task({.resource = c, .seconds = 2, .processors = cpu});
  sim.run();
  EXPECT_EQ(sim.start(late), 1);
  EXPECT_EQ(sim.start(wait), 1);
  EXPECT_EQ(sim.start(after_wait), 4);
  EXPECT_EQ(sim.start(gap), 2);
  EXPECT_EQ(sim.processors_in_use(cpu), 1);
  EXPECT_THROW(sim.add_processors(0), std::exception);
  EXPECT_THROW(sim.add_task({.resource = a, .seconds = 1, .processors = 5}), std::exception);
}

std::vector<LinkTimes> free_links(int stages) { return std::vector<LinkTimes>(static_cast<size_t>(stages - 1)); }

TEST(PipelineSimulation, GPipeBubbleIsTheClosedForm) {
  for (int n : {1, 2, 4, 8})
    for (int64_t m : {1, 4, 16}) {
      const std::vector<StageTimes> equal(static_cast<size_t>(n), StageTimes{.forward_s = 1e-3, .backward_s = 2e-3});
      const PipelineSimulation p =
          simulate_pipeline(make_schedule(PipelineStrategy::gpipe, n, m), equal, free_links(n));
      const double expected = static_cast<double>(n - 1) / static_cast<double>(m + n - 1);
      for (const StageSummary& s : p.stages) EXPECT_NEAR(s.bubble_fraction, expected, 1e-12) << n << " stages, M " << m;
      EXPECT_NEAR(p.makespan, static_cast<double>(m + n - 1) * 3e-3, 1e-12);
    }
}

// Stages beyond the CPUs (bench's gpipe:4x4 on 2 cores) compute when a CPU is free: the run can go no
// faster than the CPUs' total, and with as many CPUs as stages nothing changes.
TEST(PipelineSimulation, StagesSharingFewerProcessorsComputeAtMostThatManyAtOnce) {
  const int n = 4;
  const int64_t m = 4, steps = 6;
  const std::vector<StageTimes> equal(n, StageTimes{.forward_s = 1e-3, .backward_s = 2e-3, .update_s = 1e-3});
  const Schedule s = make_schedule(PipelineStrategy::gpipe, n, m);
  const PipelineSimulation own = simulate_pipeline(s, equal, free_links(n), steps);
  EXPECT_DOUBLE_EQ(simulate_pipeline(s, equal, free_links(n), steps, n).makespan, own.makespan);
  for (int cpus : {1, 2, 3}) {
    const PipelineSimulation shared = simulate_pipeline(s, equal, free_links(n), steps, cpus);
    const double work = static_cast<double>(steps) * n * (m * 3e-3 + 1e-3);
    EXPECT_GE(shared.makespan, work / cpus - 1e-12) << cpus << " CPUs";
    EXPECT_GT(shared.makespan, own.makespan) << cpus << " CPUs";
    EXPECT_EQ(shared.sim.processors_in_use(0), cpus);
    if (cpus == 1) {
      EXPECT_NEAR(shared.makespan, work, 1e-12);  // one CPU: every pass one after another
    }
  }
}

TEST(PipelineSimulation, OneFOneBSteadyStateIsTheSlowestStage) {
  for (PipelineStrategy strategy :
       {PipelineStrategy::naive, PipelineStrategy::pipedream, PipelineStrategy::spectrain}) {
    const std::vector<StageTimes> stages = {
        {.forward_s = 1, .backward_s = 2, .update_s = 0.25, .activation_bytes_out = 1000},
        {.forward_s = 2, .backward_s = 3, .update_s = 0.5, .activation_bytes_out = 1000, .gradient_bytes_out = 1000},
        {.forward_s = 1, .backward_s = 1, .gradient_bytes_out = 1000}};
    // Links well below the slowest stage's time: 0.1 s latency + 1000 B at 10 kB/s = 0.2 s per message.
    const std::vector<LinkTimes> links(2, LinkTimes{.bandwidth = 1e4, .latency_s = 0.1});
    const PipelineSimulation p = simulate_pipeline(make_schedule(strategy, 3, 60), stages, links);
    EXPECT_NEAR(1 / p.steady_rate(20), 2 + 3 + 0.5, 1e-9) << pipeline_strategy_name(strategy);
    EXPECT_NEAR(p.step_end[40] - p.step_end[39], 2 + 3 + 0.5, 1e-9);
    // The slowest stage never waits in steady state; the others do.
    EXPECT_GT(p.stages[1].busy_s / p.makespan, p.stages[0].busy_s / p.makespan);
    EXPECT_NEAR(p.stages[0].send_s, 60 * 0.2, 1e-9);  // its activations only
    EXPECT_NEAR(p.stages[1].send_s, 2 * 60 * 0.2, 1e-9);
  }
}

// With 1F1B stage 0 keeps N mini-batches in flight, so a round trip through the pipeline (every pass and
// both messages of a link) is spread over N steps: the period is max(slowest stage, round trip / N).
TEST(PipelineSimulation, ALinkSlowerThanTheStagesSetsThePeriod) {
  const std::vector<StageTimes> stages(
      2, StageTimes{.forward_s = 1, .backward_s = 1, .activation_bytes_out = 3000, .gradient_bytes_out = 3000});
  const std::vector<LinkTimes> slow = {LinkTimes{.bandwidth = 1000, .latency_s = 0}};  // 3 s a message, each way
  const PipelineSimulation p = simulate_pipeline(make_schedule(PipelineStrategy::pipedream, 2, 50), stages, slow);
  EXPECT_NEAR(1 / p.steady_rate(10), (1 + 3 + 1 + 1 + 3 + 1) / 2.0, 1e-9);
  const std::vector<LinkTimes> fast = {LinkTimes{.bandwidth = 1e6, .latency_s = 0}};  // 3 ms a message
  EXPECT_NEAR(1 / simulate_pipeline(make_schedule(PipelineStrategy::pipedream, 2, 50), stages, fast).steady_rate(10),
              (4 + 2 * 0.003) / 2, 1e-9);
  std::vector<StageTimes> uneven = stages;
  uneven[1].forward_s = uneven[1].backward_s = 2;  // round trip (6.006) / 2 < 4: the slow stage sets the period
  EXPECT_NEAR(1 / simulate_pipeline(make_schedule(PipelineStrategy::pipedream, 2, 50), uneven, fast).steady_rate(10), 4,
              1e-9);
}

TEST(PipelineSimulation, MemoryPeakCountsTheMicroBatchesInFlight) {
  // GPipe keeps all M micro-batches' activations before the first backward; 1F1B stage k keeps N-k.
  const std::vector<StageTimes> stages(
      3, StageTimes{.forward_s = 1, .backward_s = 1, .resident_bytes = 1000, .kept_bytes_per_micro_batch = 10});
  EXPECT_EQ(
      simulate_pipeline(make_schedule(PipelineStrategy::gpipe, 3, 8), stages, free_links(3)).stages[0].peak_memory,
      1000 + 8 * 10);
  const PipelineSimulation p =
      simulate_pipeline(make_schedule(PipelineStrategy::pipedream, 3, 12), stages, free_links(3));
  for (int k = 0; k < 3; ++k) EXPECT_EQ(p.stages[k].peak_memory, 1000 + (3 - k) * 10) << "stage " << k;
}

TEST(ReplicaSimulation, DataParallelStepIsComputePlusRingAllReduce) {
  const ReplicaTimes t{.forward_s = 0.01, .backward_s = 0.02, .update_s = 0.001, .parameter_bytes = 100'000'000};
  const LinkTimes link{.bandwidth = 100e9, .latency_s = 5e-6};
  for (int r : {1, 2, 4, 8}) {
    const double ring = r == 1 ? 0 : 2.0 * (r - 1) * 5e-6 + 2.0 * (r - 1) / r * 100e6 / 100e9;
    EXPECT_NEAR(ring_allreduce_seconds(100'000'000, r, link), ring, 1e-15);
    const ReplicaSimulation dp = simulate_data_parallel(t, r, link, 10);
    EXPECT_NEAR(1 / dp.steady_rate(2), 0.03 + ring + 0.001, 1e-12) << r << " replicas";
    // Buckets overlap all but the last bucket's share with the backward.
    if (r > 1) {
      const ReplicaSimulation overlapped = simulate_data_parallel(t, r, link, 10, 4);
      EXPECT_LT(1 / overlapped.steady_rate(2), 1 / dp.steady_rate(2));
      EXPECT_GE(1 / overlapped.steady_rate(2), 0.03 + 0.001 + ring_allreduce_seconds(25'000'000, r, link) - 1e-12);
    }
  }
}

TEST(ReplicaSimulation, ParameterServerWithOneWorkerIsSequential) {
  const ReplicaTimes t{.forward_s = 0.01, .backward_s = 0.02, .update_s = 0.004, .parameter_bytes = 1'000'000};
  const LinkTimes link{.bandwidth = 1e9, .latency_s = 0};
  const ReplicaSimulation ps = simulate_parameter_server(t, 1, 2, link, 10);
  // Pull 1 MB (two shards' halves) over the worker's link, compute, push 1 MB, the shards' half updates side by side.
  EXPECT_NEAR(1 / ps.steady_rate(2), 0.001 + 0.03 + 0.001 + 0.002, 1e-12);
  // Workers that do not wait on each other: 4 of them give more mini-batches per second.
  EXPECT_GT(simulate_parameter_server(t, 4, 2, link, 10).steady_rate(4), 2 * ps.steady_rate(2));
  const ReplicaSimulation cs = simulate_central_storage(t, 2, link, 10);
  EXPECT_NEAR(1 / cs.steady_rate(2), 0.001 + 0.03 + 0.001 + 0.004,
              1e-12);  // pull, compute, push (each replica its own link), update
}

TEST(Machine, PresetsLinksAndRings) {
  const Machine m = machine_from_preset("2x8xh100-ib");
  EXPECT_EQ(m.devices(), 16);
  EXPECT_EQ(m.link(0, 7).bandwidth, 450e9);
  EXPECT_EQ(m.link(7, 8).bandwidth, 50e9);
  EXPECT_EQ(m.ring_link(8).bandwidth, 450e9);
  EXPECT_EQ(m.ring_link(16).bandwidth, 400e9);  // 8 rings side by side, one NIC each
  EXPECT_EQ(machine_from_preset("8xa100-nvlink3").ring_link(8).bandwidth, 300e9);
  EXPECT_EQ(machine_from_preset("8xa100-pcie4").intra_node.bandwidth, 32e9);
  EXPECT_EQ(machine_from_preset("8xh200").device.memory_bytes, 141'000'000'000u);
  const std::string unknown = error_of([] { machine_from_preset("dgx-9000"); });
  EXPECT_NE(unknown.find("8xh100"), std::string::npos) << unknown;
}

TEST(Machine, JsonDescriptionsAndTheirErrors) {
  const Machine m = parse_machine(R"({"name": "lab", "nodes": 2, "devices_per_node": 4, "device": "a100",
                                      "intra_node_link": "nvlink3", "inter_node_link": {"preset": "ib-hdr", "bandwidth": 20e9}})",
                                  "lab.json");
  EXPECT_EQ(m.devices(), 8);
  EXPECT_EQ(m.link(3, 4).bandwidth, 20e9);
  EXPECT_EQ(m.link(0, 3).bandwidth, 300e9);
  EXPECT_EQ(m.host.bandwidth, 32e9);  // A100: PCIe 4
  const std::string missing = error_of([] { parse_machine(R"({"nodes": 2, "device": "h100"})", "two.json"); });
  EXPECT_NE(missing.find("inter_node_link"), std::string::npos) << missing;
  EXPECT_NE(missing.find("two.json"), std::string::npos) << missing;
  const std::string typo = error_of([] { parse_machine(R"({"device": "h100", "node": 2})", "t.json"); });
  EXPECT_NE(typo.find("'node'"), std::string::npos) << typo;
  const std::string bad_count = error_of([] { parse_machine(R"({"device": "h100", "nodes": 0})", "t.json"); });
  EXPECT_NE(bad_count.find("nodes"), std::string::npos) << bad_count;
  const std::string bad_device = error_of([] { parse_machine(R"({"device": {"name": "x"}})", "t.json"); });
  EXPECT_NE(bad_device.find("device"), std::string::npos) << bad_device;
}

// A made-up model: 8 equal nodes, each 1 ms forward + 2 ms backward per 32 rows (linear in the rows),
// 10 MB of parameters and 1 MB of activations per 32 rows, 100 kB across every cut.
CostProfile toy_profile(int64_t batch) {
  CostProfile p;
  p.batch = batch;
  const double scale = static_cast<double>(batch) / 32;
  for (int i = 0; i < 8; ++i)
    p.nodes.push_back({.name = "n" + std::to_string(i),
                       .forward_seconds = 1e-3 * scale,
                       .backward_seconds = 2e-3 * scale,
                       .parameter_bytes = 1'250'000,
                       .activation_bytes = static_cast<int64_t>(125'000 * scale)});
  p.cut_activation_bytes.assign(9, static_cast<int64_t>(100'000 * scale));
  p.cut_gradient_bytes = p.cut_activation_bytes;
  p.cut_activation_bytes.front() = p.cut_activation_bytes.back() = 0;
  p.cut_gradient_bytes.front() = p.cut_gradient_bytes.back() = 0;
  return p;
}

struct ToyProfiles {
  std::map<int64_t, CostProfile> cache;
  ProfileAt at() {
    return [this](int64_t b, int) -> const CostProfile& { return cache.try_emplace(b, toy_profile(b)).first->second; };
  }
};

TEST(StrategySimulation, StrategiesOnAMachine) {
  ToyProfiles toy;
  const Machine m = machine_from_preset("8xh100");
  const SimulationSettings settings{.batch = 32, .steps = 40, .warmup = 8};
  const auto run = [&](const std::string& spec) {
    return simulate_strategy(parse_strategy_specs(spec, 8)[0], m, toy.at(), settings);
  };
  const StrategySimulation single = run("single");
  const double update = 5 * 10e6 / (3350e9 * 0.8);
  EXPECT_NEAR(single.step_seconds, 24e-3 + update, 1e-9);
  EXPECT_NEAR(single.samples_per_s, 32 / (24e-3 + update), 1e-6);
  EXPECT_NE(single.limited_by.find("compute"), std::string::npos);
  // dp:8 at 4 rows each: compute / 8 + the ring over NVLink + the update.
  const StrategySimulation dp = run("dp:8");
  EXPECT_NEAR(dp.step_seconds, 3e-3 + ring_allreduce_seconds(10'000'000, 8, {450e9, m.intra_node.latency_s}) + update,
              1e-9);
  // 4 balanced stages: 1F1B's steady state is one stage's forward + backward + its update.
  const StrategySimulation pd = run("pipedream:4");
  ASSERT_TRUE(pd.plan.has_value());
  EXPECT_EQ(pd.plan->stages.size(), 4u);
  // Plus at most the messages' time: equal stages leave no slack for them in the round trip.
  EXPECT_NEAR(pd.step_seconds, 6e-3 + update / 4, 3e-6);
  EXPECT_GE(pd.step_seconds, 6e-3 + update / 4);
  EXPECT_EQ(pd.workers.size(), 4u);
  // 1f1b runs gpipe's flush in 1F1B order: the same step, less activation memory on the early stages.
  const StrategySimulation gpipe = run("gpipe:4x8"), flush = run("1f1b:4x8");
  EXPECT_NEAR(flush.step_seconds, gpipe.step_seconds, 0.01 * gpipe.step_seconds);
  EXPECT_LT(flush.peak_memory, gpipe.peak_memory);
  // 2bw streams the micro-batches with no flush: no fill and drain per mini-batch, so faster than both.
  const StrategySimulation two_bw = run("2bw:4x8");
  EXPECT_LT(two_bw.step_seconds, 0.9 * flush.step_seconds);
  EXPECT_LT(two_bw.bubble_fraction, flush.bubble_fraction);
  const StrategySimulation hybrid = run("pipedream:2x4");
  EXPECT_GT(hybrid.samples_per_s, run("pipedream:2").samples_per_s * 3);
  EXPECT_NE(error_of([&] { run("dp:16"); }).find("needs 16 devices"), std::string::npos);
}

// A flushing stage's update starts with the weight-gradient products its nodes deferred to the end of the
// micro-batches' sum (NodeCost::sum_end_seconds); the machine's bandwidth prices only the optimizer's passes.
// The simulation had dropped them (ResNet-18's last stage under gpipe:2x4: 5.85 ms a step on a 2-core host).
TEST(StrategySimulation, AFlushingStagesUpdateRunsItsDeferredProducts) {
  const Machine m = machine_from_preset("8xh100");
  const SimulationSettings settings{.batch = 32, .steps = 40, .warmup = 8};
  constexpr double kDeferred = 2e-3;  // per node and mini-batch: every node the same, so the split stays
  std::map<int64_t, CostProfile> plain, deferring;
  const ProfileAt plain_at = [&](int64_t b, int) -> const CostProfile& {
    return plain.try_emplace(b, toy_profile(b)).first->second;
  };
  const ProfileAt deferring_at = [&](int64_t b, int) -> const CostProfile& {
    auto [it, added] = deferring.try_emplace(b, toy_profile(b));
    if (added)
      for (NodeCost& n : it->second.nodes) n.sum_end_seconds = kDeferred;
    return it->second;
  };
  // The devices' busy time a mini-batch, summed over the stages.
  const auto busy_per_step = [](const StrategySimulation& sim) {
    double busy = 0;
    for (const WorkerFigures& w : sim.workers) busy += w.busy_fraction * sim.step_seconds;
    return busy;
  };
  for (const char* spec : {"gpipe:2x4", "1f1b:2x4"}) {
    const StrategySpec s = parse_strategy_specs(spec, 8)[0];
    const StrategySimulation before = simulate_strategy(s, m, plain_at, settings);
    const StrategySimulation after = simulate_strategy(s, m, deferring_at, settings);
    ASSERT_TRUE(before.plan && after.plan);
    ASSERT_EQ(before.plan->stages[1].first_node, after.plan->stages[1].first_node) << spec;
    EXPECT_NEAR(busy_per_step(after) - busy_per_step(before), 8 * kDeferred, 1e-9) << spec;
    EXPECT_GT(after.step_seconds, before.step_seconds) << spec;
  }
  // pipedream sums nothing, so defers nothing.
  const StrategySpec pipedream = parse_strategy_specs("pipedream:2", 8)[0];
  EXPECT_DOUBLE_EQ(simulate_strategy(pipedream, m, deferring_at, settings).step_seconds,
                   simulate_strategy(pipedream, m, plain_at, settings).step_seconds);
}

TEST(StrategySimulation, HostReplicasSumAndStepTheirSharesInOnePass) {
  // onnxtrain's replica threads (host_executor): no ring and no update of their own, but one collective
  // that reads every replica's gradients once and makes the update's other passes over the shared weights.
  ToyProfiles toy;
  Machine m = machine_from_preset("8xh100");
  m.device.memory_bandwidth = 40e9;
  m.device.memory_efficiency = 1.0;
  const SimulationSettings settings{.batch = 32, .steps = 40, .warmup = 8, .update_passes = 5, .host_executor = true};
  for (int r : {2, 4}) {
    const StrategySimulation dp =
        simulate_strategy(parse_strategy_specs("dp:" + std::to_string(r), 8)[0], m, toy.at(), settings);
    const double exchange = (5 + (r - 1)) * 10e6 / 40e9;  // 10 MB of parameters
    EXPECT_NEAR(dp.step_seconds, 24e-3 / r + exchange, 1e-9) << r << " replicas";
  }
  // Elsewhere (GPUs, processes) dp still all-reduces over the ring and then updates.
  const SimulationSettings devices{.batch = 32, .steps = 40, .warmup = 8, .update_passes = 5};
  const StrategySimulation ring = simulate_strategy(parse_strategy_specs("dp:2", 8)[0], m, toy.at(), devices);
  EXPECT_NEAR(ring.step_seconds,
              12e-3 + ring_allreduce_seconds(10'000'000, 2, {450e9, m.intra_node.latency_s}) + 5 * 10e6 / 40e9, 1e-9);
}

TEST(StrategySimulation, WorkersBeyondTheCpusTakeTurnsUnlessTheyArePipelineStages) {
  const auto share = [](const std::string& spec, int threads) {
    return cpu_share(parse_strategy_specs(spec, 8)[0], threads);
  };
  const CpuShare fits = share("dp:2", 2), over = share("dp:4", 2), wide = share("dp:2", 8), ps = share("ps:3:1", 2);
  EXPECT_EQ(fits.per_worker, 1);
  EXPECT_EQ(fits.at_once, 2);
  EXPECT_EQ(fits.time_shared, 1.0);
  EXPECT_EQ(over.at_once, 2);  // 4 replicas of 1 thread on 2 CPUs: two at a time, each at half speed
  EXPECT_EQ(over.time_shared, 2.0);
  EXPECT_EQ(wide.per_worker, 4);
  EXPECT_EQ(wide.time_shared, 1.0);
  EXPECT_GT(ps.time_shared, 1.0);
  // Stages beyond the CPUs are not stretched: they lend their CPU in their bubbles, and the simulation
  // runs at most at_once of them at a time (SimulationSettings::processors).
  const CpuShare stages = share("pipedream:4", 2);
  EXPECT_EQ(stages.at_once, 2);
  EXPECT_EQ(stages.time_shared, 1.0);
  EXPECT_EQ(share("gpipe:2x4", 2).at_once, 2);
}

TEST(StrategySimulation, PipelineStagesBeyondTheCpusShareThem) {
  ToyProfiles toy;
  const Machine m = machine_from_preset("8xh100");
  const auto step = [&](const std::string& spec, int processors) {
    const SimulationSettings settings{.batch = 32, .steps = 24, .warmup = 4, .processors = processors};
    return simulate_strategy(parse_strategy_specs(spec, 8)[0], m, toy.at(), settings).step_seconds;
  };
  // 24 ms of compute a step: 8 stages on 2 CPUs take at least half of it, as 2 stages do on their own.
  EXPECT_GE(step("gpipe:8x4", 2), 12e-3);
  EXPECT_LT(step("gpipe:8x4", 0), 12e-3);  // the 8 stages' own devices: faster than 2 CPUs could be
  EXPECT_GT(step("gpipe:8x4", 2), step("gpipe:8x4", 4));
  EXPECT_DOUBLE_EQ(step("gpipe:2x4", 2), step("gpipe:2x4", 0));  // one CPU each: nothing shared
}

TEST(StrategySimulation, MemoryThatDoesNotFitIsFlaggedAndLeftOutOfTheRecommendation) {
  ToyProfiles toy;
  Machine m = machine_from_preset("8xh100");
  m.device.memory_bytes =
      45'000'000;  // dp's 10 MB weights + 10 MB gradients + 10 MB velocity + activations fit; 4 copies would not
  const SimulationSettings settings{.batch = 32, .steps = 24, .warmup = 4};
  const StrategySimulation gpipe = simulate_strategy(parse_strategy_specs("gpipe:2x32", 8)[0], m, toy.at(), settings);
  EXPECT_TRUE(gpipe.fits_memory);
  m.device.memory_bytes = 20'000'000;
  const StrategySimulation single = simulate_strategy(parse_strategy_specs("single", 8)[0], m, toy.at(), settings);
  EXPECT_FALSE(single.fits_memory);
  EXPECT_NE(single.limited_by.find("memory"), std::string::npos) << single.limited_by;
  const Recommendation rec = recommend(m, toy.at(), settings);
  ASSERT_FALSE(rec.ranked.empty());
  for (size_t i = 1; i < rec.ranked.size(); ++i)
    EXPECT_GE(rec.ranked[i - 1].simulation.samples_per_s, rec.ranked[i].simulation.samples_per_s);
  for (const RankedStrategy& r : rec.ranked) EXPECT_TRUE(r.simulation.fits_memory) << r.simulation.strategy.spec;
  EXPECT_TRUE(std::any_of(rec.left_out.begin(), rec.left_out.end(),
                          [](const std::string& s) { return s.starts_with("single:"); }));
}

TEST(Recommend, CandidatesAndStalenessWarnings) {
  std::vector<std::string> specs;
  for (const StrategySpec& s : recommendation_candidates(8, 32)) specs.push_back(s.spec);
  for (const char* expected :
       {"single", "dp:8", "cs:2", "ps:4:2", "pipedream:2x4", "spectrain:8", "gpipe:2x8x4", "gpipe:8x32"})
    EXPECT_NE(std::find(specs.begin(), specs.end(), expected), specs.end()) << expected;
  EXPECT_EQ(std::find(specs.begin(), specs.end(), "gpipe:8x64"), specs.end());  // M above the batch
  for (const StrategySpec& s : recommendation_candidates(8, 32)) EXPECT_LE(s.devices(), 8) << s.spec;
  EXPECT_NE(staleness_warning(parse_strategy_specs("spectrain:4", 4)[0]).find("diverged"), std::string::npos);
  EXPECT_EQ(staleness_warning(parse_strategy_specs("pipedream:4", 4)[0]), "");
  EXPECT_EQ(staleness_warning(parse_strategy_specs("gpipe:8x8", 8)[0]), "");
  // The recommendation: the first (fastest) without a warning, else the fastest.
  EXPECT_EQ(recommended_index({"stale", "", "stale"}), 1u);
  EXPECT_EQ(recommended_index({"", "stale"}), 0u);
  EXPECT_EQ(recommended_index({"stale", "stale"}), 0u);
  EXPECT_EQ(train_command("m.onnx", parse_strategy_specs("pipedream:2x4", 8)[0], 64, "p.json", true, true),
            "mpirun -np 8 onnxtrain train m.onnx --batch 64 --strategy pipedream --stages 2 --replicas 4 --plan p.json "
            "--device cuda -o m.trained.onnx");
  EXPECT_EQ(train_command("dir/m.onnx", parse_strategy_specs("dp:2", 2)[0], 32, "", false, false, "synthetic:16:4:64"),
            "onnxtrain train dir/m.onnx --data synthetic:16:4:64 --batch 32 --strategy dp --replicas 2 -o "
            "m.trained.onnx");
}

}  // namespace
