// The conformance suite every Communicator backend passes (local, tcp, mpi): tag matching, send-buffer
// reuse, sends that never block, the rank-ordered bit-exact all-reduce, broadcast, barrier, timeouts
// naming the peer and `what`, abort propagation, mismatched collectives. A test file instantiates it
// with one CommGroupRunner per group size:
//
//   INSTANTIATE_TEST_SUITE_P(Local, CommConformance, ::testing::Values(local_runner(2), local_runner(3)),
//                            comm_runner_name);
//
// Every test body is one rank's part (written for any group size, 1 included), so the same body runs on
// one thread per rank (local, tcp) or once per process under mpirun (mpi).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "executor/comm/comm.h"
#include "graph/error.h"

namespace onnxtrain::comm_test {

using namespace std::chrono_literals;
using Body = std::function<void(Communicator&)>;

struct CommGroupRunner {
  std::string name;  // test-name suffix, e.g. "ranks3"
  int size = 1;
  // Makes a fresh group whose calls time out after `timeout` and runs body(comm) for each of its ranks:
  // on one thread per rank, or for this process's rank under mpirun. Reports exceptions as failures.
  std::function<void(std::chrono::milliseconds timeout, const Body& body)> run;
};

// gtest prints parameters of failed tests with this (instead of the object's bytes).
inline void PrintTo(const CommGroupRunner& runner, std::ostream* os) { *os << runner.name; }

inline std::string comm_runner_name(const ::testing::TestParamInfo<CommGroupRunner>& info) { return info.param.name; }

// Runs body on one thread per communicator of `group`; an exception escaping a rank fails the test.
inline void run_on_threads(std::vector<std::unique_ptr<Communicator>>& group, const Body& body) {
  std::vector<std::thread> threads;
  for (auto& comm : group)
    threads.emplace_back([&body, c = comm.get()] {
      try {
        body(*c);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << c->rank() << " threw: " << e.what();
      }
    });
  for (auto& t : threads) t.join();
}

inline Tensor float_tensor(std::vector<float> values) {
  Tensor t(DType::Float32, {static_cast<int64_t>(values.size())});
  std::copy(values.begin(), values.end(), t.data<float>().begin());
  return t;
}

inline std::vector<float> values_of(const Tensor& t) {
  auto d = t.data<float>();
  return {d.begin(), d.end()};
}

// The message of the Error fn throws, "" if it returns.
inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Values of very different magnitudes, so that any other summation order changes some bits; the first
// three elements are 1e8, 1, -1e8 (by rank modulo 3), where (1e8 + 1) - 1e8 = 0 but (1e8 - 1e8) + 1 = 1.
inline std::vector<float> rank_values(int rank, std::size_t n) {
  std::mt19937 rng(1234u + static_cast<unsigned>(rank));
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-20, 20);
  std::vector<float> v(n);
  for (float& x : v) x = std::ldexp(mantissa(rng), exponent(rng));
  const float pattern[3] = {1e8f, 1.0f, -1e8f};
  for (std::size_t i = 0; i < std::min<std::size_t>(n, 3); ++i)
    v[i] = pattern[(static_cast<std::size_t>(rank) + i) % 3];
  return v;
}

// ((x0 + x1) + x2) + ... element by element.
inline std::vector<float> rank_order_sum(int size, std::size_t n) {
  std::vector<float> sum = rank_values(0, n);
  for (int r = 1; r < size; ++r) {
    const std::vector<float> x = rank_values(r, n);
    for (std::size_t i = 0; i < n; ++i) sum[i] += x[i];
  }
  return sum;
}

class CommConformance : public ::testing::TestWithParam<CommGroupRunner> {
 protected:
  static constexpr std::chrono::milliseconds kLongTimeout = 20s;  // only a broken backend waits this long
  static constexpr std::chrono::milliseconds kShortTimeout = 300ms;
  void run(std::chrono::milliseconds timeout, const Body& body) { GetParam().run(timeout, body); }
};

TEST_P(CommConformance, RecvMatchesTagsNotArrivalOrder) {
  run(kLongTimeout, [](Communicator& comm) {
    const int r = comm.rank(), p = comm.size(), next = (r + 1) % p, prev = (r + p - 1) % p;
    const float mine = 100.0f * r, theirs = 100.0f * prev;
    // Five micro-batches, two more messages differing from micro-batch 2 only in kind or index, and two
    // with equal tags (which keep their send order).
    for (int i = 0; i < 5; ++i) comm.send(next, CommTag{.micro_batch = i}, float_tensor({mine + i}), "a");
    comm.send(next, CommTag{.micro_batch = 2, .kind = CommTag::gradient}, float_tensor({mine + 20}), "g");
    comm.send(next, CommTag{.micro_batch = 2, .index = 1}, float_tensor({mine + 21}), "a1");
    comm.send(next, CommTag{.micro_batch = 9}, float_tensor({mine + 90}), "first");
    comm.send(next, CommTag{.micro_batch = 9}, float_tensor({mine + 91}), "second");
    EXPECT_EQ(values_of(comm.recv(prev, CommTag{.micro_batch = 2, .index = 1}, "a1")), std::vector{theirs + 21});
    EXPECT_EQ(values_of(comm.recv(prev, CommTag{.micro_batch = 2, .kind = CommTag::gradient}, "g")),
              std::vector{theirs + 20});
    for (int i = 4; i >= 0; --i)
      EXPECT_EQ(values_of(comm.recv(prev, CommTag{.micro_batch = i}, "a")), std::vector{theirs + i});
    EXPECT_EQ(values_of(comm.recv(prev, CommTag{.micro_batch = 9}, "first")), std::vector{theirs + 90});
    EXPECT_EQ(values_of(comm.recv(prev, CommTag{.micro_batch = 9}, "second")), std::vector{theirs + 91});

    // A receiver already waiting for a tag gets it when it arrives, a later tag arriving first
    // notwithstanding.
    comm.send(next, CommTag{.micro_batch = 11}, float_tensor({mine + 11}), "later tag first");
    std::this_thread::sleep_for(20ms);
    comm.send(next, CommTag{.micro_batch = 10}, float_tensor({mine + 10}), "wanted tag");
    EXPECT_EQ(values_of(comm.recv(prev, CommTag{.micro_batch = 10}, "wanted")), std::vector{theirs + 10});
    EXPECT_EQ(values_of(comm.recv(prev, CommTag{.micro_batch = 11}, "later")), std::vector{theirs + 11});
  });
}

TEST_P(CommConformance, KeepsDtypeShapeAndEmptyTensors) {
  run(kLongTimeout, [](Communicator& comm) {
    const int r = comm.rank(), p = comm.size(), next = (r + 1) % p, prev = (r + p - 1) % p;
    Tensor ints(DType::Int64, {2, 3});
    for (int i = 0; i < 6; ++i) ints.data<int64_t>()[static_cast<std::size_t>(i)] = int64_t{1} << (40 + i + r);
    comm.send(next, CommTag{.kind = CommTag::other}, ints, "int64 2x3");
    comm.send(next, CommTag{.kind = CommTag::other, .index = 1}, Tensor(DType::Float64, {0, 4}), "zero elements");
    comm.send(next, CommTag{.kind = CommTag::other, .index = 2}, Tensor(), "no tensor");
    const Tensor got = comm.recv(prev, CommTag{.kind = CommTag::other}, "int64 2x3");
    EXPECT_EQ(got.dtype(), DType::Int64);
    EXPECT_EQ(got.sizes(), (std::vector<int64_t>{2, 3}));
    for (int i = 0; i < 6; ++i)
      EXPECT_EQ(got.data<int64_t>()[static_cast<std::size_t>(i)], int64_t{1} << (40 + i + prev));
    const Tensor zero = comm.recv(prev, CommTag{.kind = CommTag::other, .index = 1}, "zero elements");
    EXPECT_EQ(zero.dtype(), DType::Float64);
    EXPECT_EQ(zero.sizes(), (std::vector<int64_t>{0, 4}));
    EXPECT_TRUE(comm.recv(prev, CommTag{.kind = CommTag::other, .index = 2}, "no tensor").empty());
  });
}

TEST_P(CommConformance, SenderMayReuseItsBufferAtOnce) {
  run(kLongTimeout, [](Communicator& comm) {
    const int r = comm.rank(), p = comm.size(), next = (r + 1) % p, prev = (r + p - 1) % p;
    // Large enough that no backend can have delivered it before send returns (MPI's rendezvous
    // protocol, full socket buffers).
    constexpr int64_t n = 1 << 20;
    Tensor x(DType::Float32, {n});
    for (int round = 0; round < 3; ++round) {
      for (int64_t i = 0; i < n; ++i)
        x.data<float>()[static_cast<std::size_t>(i)] = float(r * 10 + round) + float(i % 7);
      comm.send(next, CommTag{.micro_batch = round}, x, "activation");
      std::fill(x.data<float>().begin(), x.data<float>().end(), -1.0f);  // reused at once
      const Tensor y = comm.recv(prev, CommTag{.micro_batch = round}, "activation");
      ASSERT_EQ(y.numel(), n);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(y.data<float>()[static_cast<std::size_t>(i)], float(prev * 10 + round) + float(i % 7)) << i;
    }
  });
}

TEST_P(CommConformance, ManySendsBeforeAnyRecvDoNotDeadlock) {
  run(kLongTimeout, [](Communicator& comm) {
    const int r = comm.rank(), p = comm.size(), next = (r + 1) % p, prev = (r + p - 1) % p;
    // Every rank sends 40 x 256 KiB (more than socket buffers hold) before receiving anything.
    constexpr int count = 40;
    for (int i = 0; i < count; ++i) {
      Tensor t(DType::Float32, {64 * 1024});
      std::fill(t.data<float>().begin(), t.data<float>().end(), float(r * 1000 + i));
      comm.send(next, CommTag{.micro_batch = i, .kind = CommTag::gradient}, t, "gradient");
    }
    for (int i = count - 1; i >= 0; --i) {
      const Tensor t = comm.recv(prev, CommTag{.micro_batch = i, .kind = CommTag::gradient}, "gradient");
      EXPECT_EQ(t.data<float>()[0], float(prev * 1000 + i));
      EXPECT_EQ(t.data<float>()[64 * 1024 - 1], float(prev * 1000 + i));
    }
  });
}

TEST_P(CommConformance, AllReduceSumIsTheRankOrderSumBitIdentical) {
  run(kLongTimeout, [](Communicator& comm) {
    const int p = comm.size();
    // Not a multiple of any group size; the second has chunks over 1 MiB (sent without a copy by tcp).
    for (const std::size_t n : {std::size_t{10007}, (std::size_t{1} << 20) + 3}) {
      const std::vector<float> expected = rank_order_sum(p, n);
      std::vector<float> data = rank_values(comm.rank(), n);
      comm.all_reduce_sum(data, "gradients");
      ASSERT_EQ(std::memcmp(data.data(), expected.data(), n * sizeof(float)), 0)
          << "n " << n << ": rank " << comm.rank() << " differs from ((x0 + x1) + x2) + ..., first at element "
          << std::distance(data.begin(), std::mismatch(data.begin(), data.end(), expected.begin()).first);
      // Two in a row, the second on a prefix: it sums the first's (equal) results.
      comm.all_reduce_sum(std::span<float>(data).first(3), "first three again");
      for (std::size_t i = 0; i < 3; ++i) {
        float again = expected[i];
        for (int k = 1; k < p; ++k) again += expected[i];
        EXPECT_EQ(data[i], again) << "element " << i;
      }
    }
    std::vector<float> none;
    comm.all_reduce_sum(none, "nothing");
  });
  // The reference itself: for these values the order matters (a reversed sum differs somewhere), so the
  // bit-exact comparison above pins the order.
  std::vector<float> forward = rank_values(0, 10007), backward = rank_values(3, 10007);
  for (int r = 1; r < 4; ++r) {
    const std::vector<float> x = rank_values(r, 10007), y = rank_values(3 - r, 10007);
    for (std::size_t i = 0; i < forward.size(); ++i) forward[i] += x[i], backward[i] += y[i];
  }
  EXPECT_NE(forward, backward);
  EXPECT_EQ((1e8f + 1.0f) + -1e8f, 0.0f);
  EXPECT_EQ((1e8f + -1e8f) + 1.0f, 1.0f);
}

TEST_P(CommConformance, BroadcastCopiesTheRootsBytes) {
  run(kLongTimeout, [](Communicator& comm) {
    const int p = comm.size();
    for (int root = 0; root < p; ++root) {
      for (const std::size_t n : {std::size_t{37}, std::size_t{1} << 20}) {
        std::vector<std::byte> data(n);
        for (std::size_t i = 0; i < n; ++i) data[i] = std::byte(static_cast<unsigned char>(comm.rank() * 50 + i));
        comm.broadcast(data, root, "weights");
        for (std::size_t i = 0; i < n; ++i)
          ASSERT_EQ(data[i], std::byte(static_cast<unsigned char>(root * 50 + i))) << "root " << root << " byte " << i;
      }
    }
  });
}

TEST_P(CommConformance, BarrierHoldsEveryRankUntilTheLastArrives) {
  run(kLongTimeout, [](Communicator& comm) {
    const int p = comm.size();
    comm.barrier("start");
    for (int round = 0; round < 4; ++round) {
      // A different late rank each round; the others must wait for it (timed on each rank's own clock).
      const bool late = comm.rank() == round % p;
      if (late) std::this_thread::sleep_for(60ms);
      const auto start = std::chrono::steady_clock::now();
      comm.barrier("round " + std::to_string(round));
      if (!late) {
        EXPECT_GE(std::chrono::steady_clock::now() - start, 30ms) << "round " << round;
      }
    }
  });
}

TEST_P(CommConformance, RecvTimeoutNamesWhatTheRankAndThePeer) {
  run(kShortTimeout, [](Communicator& comm) {
    const int r = comm.rank(), p = comm.size(), prev = (r + p - 1) % p;
    const std::string what = "stage " + std::to_string(r) + ", micro-batch 7, activation 'conv1_out'";
    const auto start = std::chrono::steady_clock::now();
    const std::string e = error_of([&] {
      comm.recv(prev, CommTag{.micro_batch = 7, .kind = CommTag::activation, .index = 3}, what);  // nobody sends it
    });
    const auto waited = std::chrono::steady_clock::now() - start;
    EXPECT_GE(waited, kShortTimeout);
    EXPECT_LT(waited, 5s);
    EXPECT_TRUE(contains(e, what + ": rank " + std::to_string(r) +
                                " timed out after 300 ms receiving micro-batch 7, "
                                "activation #3 from rank " +
                                std::to_string(prev)))
        << e;
    // A point-to-point timeout leaves the group usable.
    comm.send(prev, CommTag{.micro_batch = 8}, float_tensor({1.0f}), "after the timeout");
    EXPECT_EQ(values_of(comm.recv((r + 1) % p, CommTag{.micro_batch = 8}, "after the timeout")), std::vector{1.0f});
  });
}

TEST_P(CommConformance, CollectiveTimeoutNamesTheMissingRank) {
  run(kShortTimeout, [](Communicator& comm) {
    const int r = comm.rank(), p = comm.size();
    if (p == 1) {  // nobody to miss: the barrier of one returns at once
      comm.barrier("epoch 3 barrier");
      return;
    }
    if (r == p - 1) return;  // never comes
    const std::string e = error_of([&] { comm.barrier("epoch 3 barrier"); });
    EXPECT_TRUE(contains(e, "epoch 3 barrier: rank " + std::to_string(r) +
                                " timed out after 300 ms in barrier "
                                "waiting for rank " +
                                std::to_string(p - 1)))
        << e;
    // Only the rank that never came is blamed, not the ones that timed out too.
    for (int other = 0; other < p - 1; ++other) EXPECT_FALSE(contains(e, "rank " + std::to_string(other) + ",")) << e;
  });
}

TEST_P(CommConformance, AbortWakesBlockedPeersWithTheFailedRank) {
  run(kLongTimeout, [](Communicator& comm) {
    const int r = comm.rank(), p = comm.size(), aborter = p > 1 ? 1 : 0;
    const std::string reason = "Conv 'conv2' failed: out of memory";
    const auto start = std::chrono::steady_clock::now();
    std::string e;
    if (r == aborter) {
      std::this_thread::sleep_for(50ms);  // let the others block first
      comm.abort(reason);
      comm.abort("secondary");  // the first abort stays the root cause
      e = error_of([&] { comm.barrier("after abort"); });
      EXPECT_TRUE(contains(e, "after abort: rank " + std::to_string(r) + " gave up in barrier: rank " +
                                  std::to_string(aborter) + " aborted: " + reason))
          << e;
    } else if (r == 2) {
      e = error_of([&] { comm.barrier("stage 2 barrier"); });
      EXPECT_TRUE(contains(e, "stage 2 barrier: rank 2 gave up in barrier")) << e;
    } else {
      e = error_of([&] { comm.recv(aborter, CommTag{.micro_batch = 3}, "stage waits for a gradient"); });
      EXPECT_TRUE(contains(e, "stage waits for a gradient: rank " + std::to_string(r) +
                                  " gave up receiving micro-batch 3, activation #0 from rank " +
                                  std::to_string(aborter)))
          << e;
    }
    EXPECT_TRUE(contains(e, "rank " + std::to_string(aborter) + " aborted: " + reason)) << e;
    EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);  // far below the timeout
    ASSERT_TRUE(comm.aborted().has_value());
    EXPECT_EQ(comm.aborted()->rank, aborter);
    EXPECT_EQ(comm.aborted()->reason, reason);
    // Later calls fail at once, naming the root cause.
    comm.abort("secondary, rank " + std::to_string(r));
    EXPECT_EQ(comm.aborted()->rank, aborter);
    const std::string later = error_of([&] { comm.send((r + 1) % p, CommTag{}, float_tensor({1.0f}), "after abort"); });
    EXPECT_TRUE(contains(later, "rank " + std::to_string(aborter) + " aborted")) << later;
  });
}

TEST_P(CommConformance, NotAbortedByDefault) {
  run(kLongTimeout, [](Communicator& comm) { EXPECT_FALSE(comm.aborted().has_value()); });
}

TEST_P(CommConformance, MismatchedCollectivesFailOnEveryRankAndLeaveTheGroupInStep) {
  run(kLongTimeout, [](Communicator& comm) {
    const int r = comm.rank(), p = comm.size();
    std::vector<float> data(r == 1 ? 5 : 4, 1.0f);
    const std::string e = error_of([&] { comm.all_reduce_sum(data, "gradients"); });
    if (p == 1) {
      EXPECT_EQ(e, "");
    } else {
      EXPECT_TRUE(contains(e, "gradients: rank " + std::to_string(r) +
                                  " in all_reduce_sum: ranks disagree: rank 0 "
                                  "called all_reduce_sum of 4 floats, rank 1 "
                                  "called all_reduce_sum of 5 floats"))
          << e;
    }
    std::vector<float> ones(3, 1.0f);
    comm.all_reduce_sum(ones, "after the mismatch");
    EXPECT_EQ(ones, std::vector<float>(3, float(p)));
  });
}

TEST_P(CommConformance, RejectsPeersOutsideTheGroup) {
  run(kLongTimeout, [](Communicator& comm) {
    const int r = comm.rank(), p = comm.size();
    const std::string range = "the group has ranks 0.." + std::to_string(p - 1);
    EXPECT_TRUE(
        contains(error_of([&] { comm.send(p, CommTag{}, float_tensor({1.0f}), "to nowhere"); }),
                 "to nowhere: rank " + std::to_string(r) + " cannot send to rank " + std::to_string(p) + ": " + range));
    EXPECT_TRUE(
        contains(error_of([&] { comm.recv(-1, CommTag{}, "from nowhere"); }), "cannot receive from rank -1: " + range));
    std::vector<std::byte> bytes(4);
    EXPECT_TRUE(contains(error_of([&] { comm.broadcast(bytes, -1, "bad root"); }), "cannot broadcast from rank -1"));
  });
}

}  // namespace onnxtrain::comm_test
