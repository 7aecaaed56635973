// Pipeline schedules (executor/pipeline/schedule.h), without running a kernel: the 1F1B and GPipe
// programs' structure, an event interpreter with bounded channels that proves the programs complete and
// that every pass has its inputs, the version accounting and SpecTrain's s values for both targets
// (checked against closed forms derived independently from the paper's grid), the unit-time timeline,
// and the printed table; a second interpreter with NCCL's unbuffered, grouped transfers proves that
// launch_before's grouping completes every schedule (and that without it gpipe and 1F1B deadlock).
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "executor/pipeline/schedule.h"
#include "graph/error.h"
#include "simulator/pipeline_simulation.h"

using namespace onnxtrain;

namespace {

constexpr PipelineStrategy kOneFOneB[] = {PipelineStrategy::naive, PipelineStrategy::pipedream,
                                          PipelineStrategy::spectrain};
constexpr PipelineStrategy kAll[] = {PipelineStrategy::naive, PipelineStrategy::pipedream,  PipelineStrategy::spectrain,
                                     PipelineStrategy::gpipe, PipelineStrategy::flush_1f1b, PipelineStrategy::two_bw};
bool flushes(PipelineStrategy s) { return strategy_traits(s).flushes; }

// Every pass `forward`/`backward` time units, updates and transfers instant.
PipelineSimulation unit_simulation(const Schedule& s, double forward, double backward) {
  const std::vector<StageTimes> times(s.stages, StageTimes{.forward_s = forward, .backward_s = backward});
  return simulate_pipeline(s, times, std::vector<LinkTimes>(s.stages - 1));
}

// Run counts worth covering for N stages: fewer mini-batches than the warm-up, exactly N, and long runs.
std::vector<int64_t> run_lengths(int n) { return {1, 2, n - 1 > 0 ? n - 1 : 1, n, n + 1, 2 * n + 3, 3 * n + 5}; }

std::vector<int64_t> micro_batches_of(const std::vector<Instruction>& program, Op op) {
  std::vector<int64_t> out;
  for (const Instruction& in : program)
    if (in.op == op) out.push_back(in.micro_batch);
  return out;
}

std::vector<int64_t> iota(int64_t n) {
  std::vector<int64_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

// Steps the stages round-robin, each as far as it can move, until none can.
template <typename Step>
void step_until_stuck(int stages, Step step) {
  for (bool progress = true; progress;) {
    progress = false;
    for (int k = 0; k < stages; ++k)
      while (step(k)) progress = true;
  }
}

// Executes the programs the way stage threads over a bounded Communicator would: a send blocks while its
// (from, to) channel holds `capacity` messages (capacity 0: a rendezvous, the send only completes into a
// receiver already waiting for that very tag); a recv waits for its tag, matched by tag, not FIFO. Each
// pass checks it has what it needs (the activation it reads, the gradient, its own forward for the
// backward). Returns false when no stage can move before all programs end (a deadlock).
struct Interpreter {
  struct Message {
    bool gradient;
    int64_t micro_batch;
  };
  Schedule schedule;  // a copy: tests hand in temporaries
  size_t capacity;
  std::vector<size_t> pc;
  std::map<std::pair<int, int>, std::deque<Message>> channels;
  std::vector<std::set<int64_t>> activations, gradients, forwarded, backwarded;
  std::vector<int64_t> updates;
  // What the interpreter saw: the optimizer steps of stage k before each of its passes.
  std::vector<std::map<int64_t, int64_t>> seen_forward_version, seen_backward_version;
  std::vector<std::string> failures;

  Interpreter(const Schedule& s, size_t cap)
      : schedule(s),
        capacity(cap),
        pc(s.stages, 0),
        activations(s.stages),
        gradients(s.stages),
        forwarded(s.stages),
        backwarded(s.stages),
        updates(s.stages, 0),
        seen_forward_version(s.stages),
        seen_backward_version(s.stages) {}

  bool done(int k) const { return pc[k] == schedule.programs[k].size(); }
  void fail(int k, const std::string& what) {
    failures.push_back("stage " + std::to_string(k) + " instruction " + std::to_string(pc[k]) + ": " + what);
  }
  const Instruction* current(int k) const { return done(k) ? nullptr : &schedule.programs[k][pc[k]]; }

  // One step of stage k if it can move.
  bool step(int k) {
    if (done(k)) return false;
    const Instruction& in = *current(k);
    const int64_t mb = in.micro_batch;
    switch (in.op) {
      case Op::SendActivation:
      case Op::SendGradient: {
        const bool gradient = in.op == Op::SendGradient;
        const int to = gradient ? k - 1 : k + 1;
        if (to < 0 || to >= schedule.stages) {
          fail(k, "sends past the end of the pipeline");
          return false;
        }
        if (capacity == 0) {
          // Rendezvous: complete only into a receiver blocked on exactly this message.
          const Instruction* r = current(to);
          const Op want = gradient ? Op::RecvGradient : Op::RecvActivation;
          if (r == nullptr || r->op != want || r->micro_batch != mb) return false;
          (gradient ? gradients : activations)[to].insert(mb);
          ++pc[to];
        } else {
          auto& channel = channels[{k, to}];
          if (channel.size() >= capacity) return false;
          channel.push_back({gradient, mb});
        }
        break;
      }
      case Op::RecvActivation:
      case Op::RecvGradient: {
        if (capacity == 0) return false;  // completed by the matching send
        const bool gradient = in.op == Op::RecvGradient;
        const int from = gradient ? k + 1 : k - 1;
        auto& channel = channels[{from, k}];
        auto it = std::find_if(channel.begin(), channel.end(),
                               [&](const Message& m) { return m.gradient == gradient && m.micro_batch == mb; });
        if (it == channel.end()) return false;
        channel.erase(it);
        (gradient ? gradients : activations)[k].insert(mb);
        break;
      }
      case Op::Forward:
        if (k > 0 && !activations[k].count(mb)) fail(k, "forward " + std::to_string(mb) + " without its activation");
        if (!forwarded[k].insert(mb).second) fail(k, "forward " + std::to_string(mb) + " twice");
        seen_forward_version[k][mb] = updates[k];
        break;
      case Op::Backward:
        if (!forwarded[k].count(mb)) fail(k, "backward " + std::to_string(mb) + " before its forward");
        if (k + 1 < schedule.stages && !gradients[k].count(mb))
          fail(k, "backward " + std::to_string(mb) + " without its gradient");
        if (!backwarded[k].insert(mb).second) fail(k, "backward " + std::to_string(mb) + " twice");
        seen_backward_version[k][mb] = updates[k];
        break;
      case Op::OptimizerStep:
        ++updates[k];
        break;
      case Op::Flush:
        if (static_cast<int64_t>(backwarded[k].size()) != schedule.micro_batches)
          fail(k, "flush before every backward");
        break;
    }
    ++pc[k];
    return true;
  }

  // Round-robin until every program ends (true) or nothing moves (false).
  bool run() {
    step_until_stuck(schedule.stages, [this](int k) { return step(k); });
    for (int k = 0; k < schedule.stages; ++k)
      if (!done(k)) return false;
    return true;
  }
};

std::string describe(PipelineStrategy strategy, int n, int64_t m) {
  return std::string(pipeline_strategy_name(strategy)) + " N=" + std::to_string(n) + " M=" + std::to_string(m);
}

}  // namespace

TEST(PipelineSchedule, NamesRoundTripAndUnknownNamesListTheKnownOnes) {
  for (PipelineStrategy s : kAll) EXPECT_EQ(parse_pipeline_strategy(pipeline_strategy_name(s)), s);
  for (SpecTrainTarget t : {SpecTrainTarget::sequential, SpecTrainTarget::paper})
    EXPECT_EQ(parse_spectrain_target(spectrain_target_name(t)), t);
  try {
    parse_pipeline_strategy("interleaved");
    FAIL() << "expected Error";
  } catch (const Error& e) {
    const std::string what = e.what();
    for (const char* name : {"'interleaved'", "naive", "pipedream", "spectrain", "gpipe", "1f1b"})
      EXPECT_NE(what.find(name), std::string::npos) << what;
  }
  EXPECT_THROW(parse_spectrain_target("future"), Error);
  EXPECT_STREQ(op_name(Op::RecvGradient), "RecvGradient");
}

TEST(PipelineSchedule, RejectsEmptyPipelines) {
  EXPECT_THROW(make_schedule(PipelineStrategy::pipedream, 0, 4), Error);
  EXPECT_THROW(make_schedule(PipelineStrategy::gpipe, 2, 0), Error);
  const std::vector<StageTimes> negative(2, StageTimes{.forward_s = -1});
  EXPECT_THROW(simulate_pipeline(make_schedule(PipelineStrategy::gpipe, 2, 2), negative, std::vector<LinkTimes>(1)),
               Error);
}

// Stage k: N-1-k warm-up forwards, then strict F/B alternation, N-k mini-batches in flight, every pass
// once and in mini-batch order, each Backward followed by its stage's update, Recv right before a pass,
// Send right after it.
TEST(PipelineSchedule, OneFOneBProgramStructure) {
  for (PipelineStrategy strategy : kOneFOneB)
    for (int n = 1; n <= 8; ++n)
      for (int64_t m : run_lengths(n)) {
        const Schedule s = make_schedule(strategy, n, m);
        SCOPED_TRACE(describe(strategy, n, m));
        ASSERT_EQ(s.stages, n);
        ASSERT_EQ(s.programs.size(), static_cast<size_t>(n));
        for (int k = 0; k < n; ++k) {
          SCOPED_TRACE("stage " + std::to_string(k));
          const std::vector<Instruction>& p = s.programs[k];
          EXPECT_EQ(micro_batches_of(p, Op::Forward), iota(m));
          EXPECT_EQ(micro_batches_of(p, Op::Backward), iota(m));
          EXPECT_EQ(micro_batches_of(p, Op::OptimizerStep), iota(m));
          EXPECT_TRUE(micro_batches_of(p, Op::Flush).empty());
          EXPECT_EQ(micro_batches_of(p, Op::RecvActivation), k > 0 ? iota(m) : std::vector<int64_t>{});
          EXPECT_EQ(micro_batches_of(p, Op::SendActivation), k + 1 < n ? iota(m) : std::vector<int64_t>{});
          EXPECT_EQ(micro_batches_of(p, Op::RecvGradient), k + 1 < n ? iota(m) : std::vector<int64_t>{});
          EXPECT_EQ(micro_batches_of(p, Op::SendGradient), k > 0 ? iota(m) : std::vector<int64_t>{});

          // The passes alone: warm-up forwards, then F/B pairs, then the drain.
          std::vector<Instruction> passes;
          for (const Instruction& in : p)
            if (in.op == Op::Forward || in.op == Op::Backward) passes.push_back(in);
          const int64_t warm_up = std::min<int64_t>(n - 1 - k, m);
          size_t j = 0;
          for (; j < passes.size() && passes[j].op == Op::Forward; ++j) {
          }
          EXPECT_EQ(static_cast<int64_t>(j), std::min<int64_t>(warm_up + 1, m)) << "forwards before the first backward";
          for (size_t q = warm_up; q + 1 < passes.size() && passes[q].op == Op::Forward; q += 2)
            EXPECT_EQ(passes[q + 1].op, Op::Backward) << "1F1B alternation at pass " << q;
          int64_t in_flight = 0, peak = 0;
          for (const Instruction& in : passes) {
            in_flight += in.op == Op::Forward ? 1 : -1;
            peak = std::max(peak, in_flight);
          }
          EXPECT_EQ(peak, std::min<int64_t>(n - k, m)) << "mini-batches in flight";

          // Recv immediately before its pass, Send immediately after, the update right after the backward
          // (after its gradient has gone out).
          for (size_t q = 0; q < p.size(); ++q) {
            const Instruction& in = p[q];
            Instruction want{in.op, -2};  // the neighbour instruction this one must sit next to
            size_t at = q;
            if (in.op == Op::RecvActivation) want = {Op::Forward, in.micro_batch}, at = q + 1;
            if (in.op == Op::SendActivation) want = {Op::Forward, in.micro_batch}, at = q - 1;
            if (in.op == Op::RecvGradient) want = {Op::Backward, in.micro_batch}, at = q + 1;
            if (in.op == Op::SendGradient) want = {Op::Backward, in.micro_batch}, at = q - 1;
            if (in.op == Op::Backward) want = {Op::OptimizerStep, in.micro_batch}, at = q + (k > 0 ? 2 : 1);
            if (want.micro_batch != -2) {
              EXPECT_EQ(p.at(at), want) << "instruction " << q << " " << op_name(in.op);
            }
          }
        }
      }
}

// What stage k sends on a link is what its neighbour receives there, in the same order (so a FIFO
// transport works too, and each message is consumed before the next pile up).
TEST(PipelineSchedule, SendsMatchTheNeighboursRecvsInOrder) {
  for (PipelineStrategy strategy : kAll)
    for (int n = 1; n <= 8; ++n)
      for (int64_t m : run_lengths(n)) {
        const Schedule s = make_schedule(strategy, n, m);
        SCOPED_TRACE(describe(strategy, n, m));
        EXPECT_TRUE(micro_batches_of(s.programs[0], Op::RecvActivation).empty());
        EXPECT_TRUE(micro_batches_of(s.programs[0], Op::SendGradient).empty());
        EXPECT_TRUE(micro_batches_of(s.programs[n - 1], Op::SendActivation).empty());
        EXPECT_TRUE(micro_batches_of(s.programs[n - 1], Op::RecvGradient).empty());
        for (int k = 0; k + 1 < n; ++k) {
          EXPECT_EQ(micro_batches_of(s.programs[k], Op::SendActivation),
                    micro_batches_of(s.programs[k + 1], Op::RecvActivation));
          EXPECT_EQ(micro_batches_of(s.programs[k + 1], Op::SendGradient),
                    micro_batches_of(s.programs[k], Op::RecvGradient));
        }
      }
}

// Every schedule runs to the end over channels that hold one message, and every pass finds its inputs.
TEST(PipelineSchedule, CompletesWithOneMessageChannels) {
  for (PipelineStrategy strategy : kAll)
    for (int n = 1; n <= 8; ++n)
      for (int64_t m : run_lengths(n)) {
        const Schedule s = make_schedule(strategy, n, m);
        SCOPED_TRACE(describe(strategy, n, m));
        Interpreter run(s, 1);
        EXPECT_TRUE(run.run()) << "deadlock";
        EXPECT_TRUE(run.failures.empty()) << run.failures.front();
        for (int k = 0; k < n; ++k) {
          EXPECT_EQ(static_cast<int64_t>(run.forwarded[k].size()), m);
          EXPECT_EQ(static_cast<int64_t>(run.backwarded[k].size()), m);
          EXPECT_EQ(run.updates[k], flushes(strategy) ? 1 : m);
        }
        for (const auto& [link, channel] : run.channels) EXPECT_TRUE(channel.empty()) << "left-over message";
      }
}

// The interpreter does detect deadlocks: 1F1B needs one buffered message (stage 0 sends F_{N-1}'s
// activation before it takes B_0's gradient, while stage 1 sends that gradient before it takes the
// activation), and a stage that receives out of the send order stalls a one-message channel.
TEST(PipelineSchedule, InterpreterDetectsDeadlocks) {
  for (int n = 2; n <= 5; ++n) {
    const Schedule s = make_schedule(PipelineStrategy::pipedream, n, n + 2);
    Interpreter rendezvous(s, 0);
    EXPECT_FALSE(rendezvous.run()) << "N=" << n;
  }
  // GPipe hands every message to a receiver already waiting, so it survives a rendezvous: the check above
  // is about 1F1B, not the interpreter failing everything at capacity 0.
  Interpreter gpipe(make_schedule(PipelineStrategy::gpipe, 4, 4), 0);
  EXPECT_TRUE(gpipe.run());

  Schedule swapped = make_schedule(PipelineStrategy::gpipe, 2, 3);
  auto& p = swapped.programs[1];
  // Stage 1: RecvActivation 0, Forward 0, RecvActivation 1, ... -> take mini-batch 1 before 0.
  ASSERT_EQ(p[0], (Instruction{Op::RecvActivation, 0}));
  ASSERT_EQ(p[2], (Instruction{Op::RecvActivation, 1}));
  std::swap(p[0], p[2]);
  std::swap(p[1], p[3]);
  Interpreter one_message(swapped, 1);
  EXPECT_FALSE(one_message.run());
  Interpreter two_messages(swapped, 2);  // with room for both it completes: the tags are matched
  EXPECT_TRUE(two_messages.run());
  EXPECT_TRUE(two_messages.failures.empty());
}

// forward_version / backward_version are what executing the program sees, and in 1F1B stage k has made
// max(0, i-(N-k-1)) updates before F_i and i before B_i: N-k-1 updates land between them.
TEST(PipelineSchedule, VersionsAreWhatTheProgramsSee) {
  for (PipelineStrategy strategy : kAll)
    for (int n = 1; n <= 8; ++n)
      for (int64_t m : run_lengths(n)) {
        const Schedule s = make_schedule(strategy, n, m);
        SCOPED_TRACE(describe(strategy, n, m));
        Interpreter run(s, 1);
        ASSERT_TRUE(run.run());
        for (int k = 0; k < n; ++k)
          for (int64_t i = 0; i < m; ++i) {
            EXPECT_EQ(s.forward_version[k][i], run.seen_forward_version[k].at(i));
            EXPECT_EQ(s.backward_version[k][i], run.seen_backward_version[k].at(i));
            if (flushes(strategy)) {
              EXPECT_EQ(s.forward_version[k][i], 0);
              EXPECT_EQ(s.backward_version[k][i], 0);
            } else {
              EXPECT_EQ(s.forward_version[k][i], std::max<int64_t>(0, i - (n - k - 1)));
              EXPECT_EQ(s.backward_version[k][i], i);
            }
          }
      }
}

// Sequential target (W_i): s_fwd = min(i, N-k-1) (N-k-1 once the pipeline is full), s_bwd = 0.
TEST(PipelineSchedule, SpecTrainSequentialTarget) {
  for (int n = 1; n <= 8; ++n)
    for (int64_t m : run_lengths(n)) {
      const Schedule s = make_schedule(PipelineStrategy::spectrain, n, m, SpecTrainTarget::sequential);
      SCOPED_TRACE(describe(s.strategy, n, m));
      for (int k = 0; k < n; ++k)
        for (int64_t i = 0; i < m; ++i) {
          EXPECT_EQ(s.target_version[k][i], i);
          EXPECT_EQ(s.s_forward[k][i], std::min<int64_t>(i, n - k - 1));
          EXPECT_EQ(s.s_backward[k][i], 0);
          EXPECT_EQ(s.s_forward[k][i], s.target_version[k][i] - s.forward_version[k][i]);
        }
    }
  // The issue's N = 4 example, once the pipeline is full.
  const Schedule s = make_schedule(PipelineStrategy::spectrain, 4, 12);
  const std::vector<int64_t> fwd = {3, 2, 1, 0};
  for (int k = 0; k < 4; ++k)
    for (int64_t i = 3; i < 12; ++i) {
      EXPECT_EQ(s.s_forward[k][i], fwd[k]) << "stage " << k << " mini-batch " << i;
      EXPECT_EQ(s.s_backward[k][i], 0);
    }
}

// The paper's grid, worked out by hand: stage k runs B_j during [2j+2N-1-k, 2j+2N-k) in half slots and
// updates at its end; stage 0's slot holding B_i starts at 2i+2N-2; the updates finished there are
// j <= i-1+floor(k/2), so target = min(M, i+floor(k/2)). The library gets there by simulation.
TEST(PipelineSchedule, SpecTrainPaperTarget) {
  for (int n = 1; n <= 8; ++n)
    for (int64_t m : run_lengths(n)) {
      const Schedule s = make_schedule(PipelineStrategy::spectrain, n, m, SpecTrainTarget::paper);
      SCOPED_TRACE(describe(s.strategy, n, m));
      EXPECT_EQ(s.target, SpecTrainTarget::paper);
      for (int k = 0; k < n; ++k)
        for (int64_t i = 0; i < m; ++i) {
          const int64_t target = std::min<int64_t>(m, i + k / 2);
          EXPECT_EQ(s.target_version[k][i], target) << "stage " << k << " mini-batch " << i;
          EXPECT_EQ(s.s_forward[k][i], target - std::max<int64_t>(0, i - (n - k - 1)));
          EXPECT_EQ(s.s_backward[k][i], target - i);
          // Once the pipeline is full and before it drains: the paper's formulas.
          if (i >= n - 1 && i + k / 2 <= m) {
            EXPECT_EQ(s.s_forward[k][i], k / 2 + n - k - 1);
            EXPECT_EQ(s.s_backward[k][i], k / 2);
          }
        }
    }
  // The issue's N = 4 example: s_fwd = 3,2,2,1 and s_bwd = 0,0,1,1.
  const Schedule s = make_schedule(PipelineStrategy::spectrain, 4, 12, SpecTrainTarget::paper);
  const std::vector<int64_t> fwd = {3, 2, 2, 1}, bwd = {0, 0, 1, 1};
  for (int k = 0; k < 4; ++k)
    for (int64_t i = 3; i < 11; ++i) {
      EXPECT_EQ(s.s_forward[k][i], fwd[k]) << "stage " << k << " mini-batch " << i;
      EXPECT_EQ(s.s_backward[k][i], bwd[k]) << "stage " << k << " mini-batch " << i;
    }
}

// With unit pass times the as-soon-as-possible timeline is the paper's grid for every backward (B_i on
// stage k at 2i+2N-1-k) and for the forwards after the first backward (F_i at 2i+k); the forwards before
// it run back to back instead of one per slot, which moves no update, so no version. Every run ends at
// 2(M+N-1): the bubble is (N-1)/(M+N-1).
TEST(PipelineSchedule, UnitTimelineIsThePapersGrid) {
  for (PipelineStrategy strategy : kAll)
    for (int n = 1; n <= 8; ++n)
      for (int64_t m : run_lengths(n)) {
        const Schedule s = make_schedule(strategy, n, m);
        SCOPED_TRACE(describe(strategy, n, m));
        const PipelineSimulation t = unit_simulation(s, 1, 1);
        EXPECT_DOUBLE_EQ(t.makespan, 2.0 * static_cast<double>(m + n - 1));
        for (int k = 0; k < n; ++k) {
          EXPECT_DOUBLE_EQ(t.stages[k].busy_s, 2.0 * static_cast<double>(m));
          EXPECT_NEAR(t.stages[k].bubble_fraction, static_cast<double>(n - 1) / static_cast<double>(m + n - 1), 1e-12);
          if (strategy == PipelineStrategy::gpipe) continue;
          for (int id : t.sim.tasks_of(t.stage_resource[k])) {
            const SimTask& in = t.sim.tasks()[static_cast<size_t>(id)];
            if (in.kind == TaskKind::backward) {
              EXPECT_EQ(t.sim.start(id), static_cast<double>(2 * in.micro_batch + 2 * n - 1 - k));
            }
            if (in.kind == TaskKind::forward && in.micro_batch >= n - k) {
              EXPECT_EQ(t.sim.start(id), static_cast<double>(2 * in.micro_batch + k))
                  << "F" << in.micro_batch << " on stage " << k;
            }
          }
        }
      }
  // Backward twice the forward: GPipe's makespan is (M+N-1)(F+B) and 1F1B's the same.
  for (PipelineStrategy strategy : kAll)
    EXPECT_DOUBLE_EQ(unit_simulation(make_schedule(strategy, 3, 5), 1, 2).makespan, 7 * 3.0)
        << pipeline_strategy_name(strategy);
}

// GPipe: all forwards in order, all backwards in order, then Flush and exactly one OptimizerStep.
TEST(PipelineSchedule, GPipeProgramAndOneUpdatePerMiniBatch) {
  for (int n = 1; n <= 8; ++n)
    for (int64_t m : run_lengths(n)) {
      const Schedule s = make_schedule(PipelineStrategy::gpipe, n, m, SpecTrainTarget::paper);
      SCOPED_TRACE(describe(s.strategy, n, m));
      for (int k = 0; k < n; ++k) {
        std::vector<Instruction> expected;
        for (int64_t i = 0; i < m; ++i) {
          if (k > 0) expected.push_back({Op::RecvActivation, i});
          expected.push_back({Op::Forward, i});
          if (k + 1 < n) expected.push_back({Op::SendActivation, i});
        }
        for (int64_t i = 0; i < m; ++i) {
          if (k + 1 < n) expected.push_back({Op::RecvGradient, i});
          expected.push_back({Op::Backward, i});
          if (k > 0) expected.push_back({Op::SendGradient, i});
        }
        expected.push_back({Op::Flush, -1});
        expected.push_back({Op::OptimizerStep, -1});
        EXPECT_EQ(s.programs[k], expected) << "stage " << k;
        for (int64_t i = 0; i < m; ++i) {
          EXPECT_EQ(s.target_version[k][i], 0);
          EXPECT_EQ(s.s_forward[k][i], 0);
          EXPECT_EQ(s.s_backward[k][i], 0);
        }
      }
    }
}

// 1f1b (PipeDream-Flush): naive's 1F1B order over the M micro-batches of one mini-batch without its
// per-backward updates, then Flush and one OptimizerStep. The backwards stay in micro-batch order (the
// gradients sum as gpipe's do) and stage k never holds more than min(N-k, M) micro-batches' activations
// (gpipe: M).
TEST(PipelineSchedule, OneFOneBFlushIsGpipesWorkInOneFOneBOrder) {
  for (int n = 1; n <= 8; ++n)
    for (int64_t m : run_lengths(n)) {
      const Schedule s = make_schedule(PipelineStrategy::flush_1f1b, n, m);
      const Schedule naive = make_schedule(PipelineStrategy::naive, n, m);
      const Schedule gpipe = make_schedule(PipelineStrategy::gpipe, n, m);
      SCOPED_TRACE(describe(s.strategy, n, m));
      for (int k = 0; k < n; ++k) {
        std::vector<Instruction> expected;
        for (const Instruction& in : naive.programs[k])
          if (in.op != Op::OptimizerStep) expected.push_back(in);
        expected.push_back({Op::Flush, -1});
        expected.push_back({Op::OptimizerStep, -1});
        EXPECT_EQ(s.programs[k], expected) << "stage " << k;
        auto in_flight_peak = [](const std::vector<Instruction>& program) {
          int64_t now = 0, peak = 0;
          std::vector<int64_t> backwards;
          for (const Instruction& in : program) {
            if (in.op == Op::Forward) peak = std::max(peak, ++now);
            if (in.op == Op::Backward) --now, backwards.push_back(in.micro_batch);
          }
          EXPECT_TRUE(std::is_sorted(backwards.begin(), backwards.end()));
          return peak;
        };
        EXPECT_EQ(in_flight_peak(s.programs[k]), std::min<int64_t>(n - k, m));
        EXPECT_EQ(in_flight_peak(gpipe.programs[k]), m);
      }
    }
}

// 2bw: naive's 1F1B order over every micro-batch of the run, an update after every M-th backward. The
// micro-batches of mini-batch i (i·M … i·M+M−1) are computed at W_i or W_(i−1) once M >= N−k: the update
// that makes W_(i+1) applies gradients at most one version stale, and two versions are read at a time.
TEST(PipelineSchedule, TwoBwUpdatesEveryMMicroBatchesOneVersionStale) {
  for (int n = 1; n <= 6; ++n)
    for (int64_t m : {1, 2, 4, 8}) {
      const int64_t minis = 5;
      const Schedule s = make_schedule(PipelineStrategy::two_bw, n, minis * m, SpecTrainTarget::sequential, m);
      const Schedule naive = make_schedule(PipelineStrategy::naive, n, minis * m);
      SCOPED_TRACE(describe(s.strategy, n, m));
      ASSERT_EQ(s.micro_per_update, m);
      Interpreter run(s, 1);
      ASSERT_TRUE(run.run());
      for (int k = 0; k < n; ++k) {
        EXPECT_EQ(run.updates[k], minis);
        std::vector<Instruction> expected;
        for (const Instruction& in : naive.programs[k])
          if (in.op != Op::OptimizerStep || (in.micro_batch + 1) % m == 0) expected.push_back(in);
        EXPECT_EQ(s.programs[k], expected) << "stage " << k;
        if (m < n - k) continue;
        for (int64_t j = 0; j < minis * m; ++j) {
          const int64_t i = j / m;
          EXPECT_LE(s.backward_version[k][j] - s.forward_version[k][j], 1) << "stage " << k << " micro-batch " << j;
          EXPECT_GE(s.forward_version[k][j], i - 1) << "stage " << k << " micro-batch " << j;
          EXPECT_LE(s.forward_version[k][j], i) << "stage " << k << " micro-batch " << j;
        }
      }
    }
  EXPECT_THROW(make_schedule(PipelineStrategy::two_bw, 2, 6, SpecTrainTarget::sequential, 4), Error);
}

TEST(PipelineSchedule, OneStageIsPlainTraining) {
  for (PipelineStrategy strategy : kOneFOneB)
    for (SpecTrainTarget target : {SpecTrainTarget::sequential, SpecTrainTarget::paper}) {
      const Schedule s = make_schedule(strategy, 1, 3, target);
      const std::vector<Instruction> expected = {{Op::Forward, 0}, {Op::Backward, 0}, {Op::OptimizerStep, 0},
                                                 {Op::Forward, 1}, {Op::Backward, 1}, {Op::OptimizerStep, 1},
                                                 {Op::Forward, 2}, {Op::Backward, 2}, {Op::OptimizerStep, 2}};
      EXPECT_EQ(s.programs[0], expected);
      EXPECT_EQ(s.s_forward[0], (std::vector<int64_t>{0, 0, 0}));
      EXPECT_EQ(s.s_backward[0], (std::vector<int64_t>{0, 0, 0}));
    }
}

// What `onnxtrain partition ... --schedule STRATEGY` prints, for N = 3 and M = 4. The grid agrees with the
// structure pinned above (stage 2: F0 B0 F1 B1 ...; stage 0: three forwards before B0), the versions with
// max(0, i-(N-k-1)) and i, the bubble with (N-1)/(M+N-1) = 2/6.
TEST(PipelineSchedule, TableGolden) {
  EXPECT_EQ(format_schedule_table(make_schedule(PipelineStrategy::spectrain, 3, 4)),
            R"(spectrain schedule: 3 stages, 4 mini-batches in the run (1F1B)
Fi forward of mini-batch i, Bi its backward then the stage's optimizer step, . idle; one column per pass time
time        0  1  2  3  4  5  6  7  8  9  10 11
stage 0     F0 F1 F2 .  .  B0 F3 B1 .  B2 .  B3
stage 1     .  F0 F1 .  B0 F2 B1 F3 B2 .  B3 .
stage 2     .  .  F0 B0 F1 B1 F2 B2 F3 B3 .  .
weights used, forward/backward (updates the stage made before the pass; sequential SGD uses i):
mini-batch  0   1   2   3
stage 0     0/0 0/1 0/2 1/3
stage 1     0/0 0/1 1/2 2/3
stage 2     0/0 1/1 2/2 3/3
SpecTrain s = target - used, forward/backward (sequential target):
mini-batch  0   1   2   3
stage 0     0/0 1/0 2/0 2/0
stage 1     0/0 1/0 1/0 1/0
stage 2     0/0 0/0 0/0 0/0
bubble (every pass one time unit): stage 0 33%, stage 1 33%, stage 2 33%
)");
  EXPECT_EQ(format_schedule_table(make_schedule(PipelineStrategy::gpipe, 3, 4)),
            R"(gpipe schedule: 3 stages, 4 micro-batches per mini-batch (all forwards, all backwards, one update)
Fi forward of micro-batch i, Bi its backward, U the optimizer step (flush), . idle; one column per pass time
time     0  1  2  3  4  5  6  7  8  9  10 11 12
stage 0  F0 F1 F2 F3 .  .  .  .  B0 B1 B2 B3 U
stage 1  .  F0 F1 F2 F3 .  .  B0 B1 B2 B3 U  .
stage 2  .  .  F0 F1 F2 F3 B0 B1 B2 B3 U  .  .
bubble (every pass one time unit): stage 0 33%, stage 1 33%, stage 2 33%
)");
}

// Executes the programs the way GroupedTransport over NCCL does (grouped_transport.h): a Send's header
// goes ahead at once (buffered) and its payload is queued; a Recv waits for its header, then queues its
// payload; the queue is launched as one group before every other instruction, at the end, and before the
// Recvs launch_before marks. Payloads are unbuffered: a launched send and recv of a (from, to) link match
// in FIFO order, and a stage whose group has not fully matched waits (stricter than NCCL, whose host only
// waits at its next stream synchronisation). `marks`: false ignores launch_before; `grouped`: false
// launches every transfer alone.
struct GroupedInterpreter {
  struct Transfer {
    bool send;
    int from, to;
    Op op;
    int64_t micro_batch;
    bool matched = false;
  };
  Schedule schedule;
  bool marks, grouped;
  std::vector<size_t> pc;
  std::vector<std::vector<bool>> launch;
  std::set<std::tuple<int, int, int64_t, bool>> headers;  // (from, to, micro-batch, gradient)
  std::vector<std::vector<std::shared_ptr<Transfer>>> queued, launched;
  std::map<std::pair<int, int>, std::deque<std::shared_ptr<Transfer>>> sends, recvs;
  std::vector<std::string> failures;

  GroupedInterpreter(const Schedule& s, bool use_marks, bool use_groups)
      : schedule(s), marks(use_marks), grouped(use_groups), pc(s.stages, 0), queued(s.stages), launched(s.stages) {
    for (int k = 0; k < s.stages; ++k) launch.push_back(launch_before(s, k));
  }

  void post(int k) {
    for (const auto& t : queued[k]) {
      (t->send ? sends : recvs)[{t->from, t->to}].push_back(t);
      auto& s = sends[{t->from, t->to}];
      auto& r = recvs[{t->from, t->to}];
      while (!s.empty() && !r.empty()) {
        if (s.front()->micro_batch != r.front()->micro_batch)
          failures.push_back("link " + std::to_string(t->from) + "->" + std::to_string(t->to) +
                             " matches micro-batch " + std::to_string(s.front()->micro_batch) + " with " +
                             std::to_string(r.front()->micro_batch));
        s.front()->matched = r.front()->matched = true;
        s.pop_front();
        r.pop_front();
      }
    }
    launched[k] = std::move(queued[k]);
    queued[k].clear();
  }
  bool waiting(int k) const {
    return std::any_of(launched[k].begin(), launched[k].end(), [](const auto& t) { return !t->matched; });
  }
  bool step(int k) {
    if (waiting(k)) return false;
    const std::vector<Instruction>& program = schedule.programs[k];
    if (pc[k] == program.size()) {
      if (queued[k].empty()) return false;
      post(k);
      return true;
    }
    const Instruction& in = program[pc[k]];
    const bool send = in.op == Op::SendActivation || in.op == Op::SendGradient;
    const bool recv = in.op == Op::RecvActivation || in.op == Op::RecvGradient;
    const bool gradient = in.op == Op::SendGradient || in.op == Op::RecvGradient;
    if (!queued[k].empty() && ((!send && !recv) || (recv && marks && launch[k][pc[k]]))) {
      post(k);
      return true;
    }
    if (send || recv) {
      const int peer = (in.op == Op::SendActivation || in.op == Op::RecvGradient) ? k + 1 : k - 1;
      const int from = send ? k : peer, to = send ? peer : k;
      if (send) headers.insert({from, to, in.micro_batch, gradient});
      if (recv && !headers.contains({from, to, in.micro_batch, gradient})) return false;
      queued[k].push_back(std::make_shared<Transfer>(Transfer{send, from, to, in.op, in.micro_batch}));
      if (!grouped) post(k);
    }
    ++pc[k];
    return true;
  }
  bool run() {
    step_until_stuck(schedule.stages, [this](int k) { return step(k); });
    for (int k = 0; k < schedule.stages; ++k)
      if (pc[k] != schedule.programs[k].size() || !queued[k].empty() || waiting(k)) return false;
    return true;
  }
};

TEST(PipelineSchedule, GroupedUnbufferedTransfersComplete) {
  for (PipelineStrategy strategy : kAll)
    for (int n = 1; n <= 8; ++n)
      for (int64_t m : run_lengths(n)) {
        const Schedule s = make_schedule(strategy, n, m);
        SCOPED_TRACE(describe(strategy, n, m));
        GroupedInterpreter run(s, true, true);
        EXPECT_TRUE(run.run()) << "deadlock";
        EXPECT_TRUE(run.failures.empty()) << run.failures.front();
      }
}

// Where launch_before marks: gpipe's first gradient, whose header stage k+1 sends only after it has the
// last activation; never in 1F1B's steady state, where the send and the recv cross and must share a group.
// Without the marks gpipe deadlocks on the header; without groups 1F1B deadlocks on the crossing sends.
TEST(PipelineSchedule, LaunchBeforeMarksTheRecvsThatDependOnTheQueuedSends) {
  for (int n = 2; n <= 6; ++n) {
    const Schedule gpipe = make_schedule(PipelineStrategy::gpipe, n, 3);
    for (int k = 0; k < n; ++k) {
      const std::vector<bool> marks = launch_before(gpipe, k);
      for (size_t j = 0; j < marks.size(); ++j) {
        const Instruction& in = gpipe.programs[k][j];
        EXPECT_EQ(marks[j], k + 1 < n && in.op == Op::RecvGradient && in.micro_batch == 0)
            << "gpipe N=" << n << " stage " << k << " instruction " << j;
      }
    }
    EXPECT_FALSE(GroupedInterpreter(gpipe, false, true).run()) << "gpipe N=" << n << " without the marks";
    for (PipelineStrategy strategy : kOneFOneB) {
      const Schedule s = make_schedule(strategy, n, n + 2);
      for (int k = 0; k < n; ++k) {
        const std::vector<bool> marks = launch_before(s, k);
        EXPECT_EQ(std::count(marks.begin(), marks.end(), true), 0) << describe(strategy, n, n + 2) << " stage " << k;
      }
      EXPECT_FALSE(GroupedInterpreter(s, true, false).run()) << describe(strategy, n, n + 2) << " without groups";
    }
  }
}
