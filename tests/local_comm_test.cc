// The local communicator: tagged point-to-point messages, bounded channels, the deterministic all-reduce,
// broadcast, barrier, timeouts and abort. Each rank runs on its own thread, as in the pipeline executor.
#include "executor/comm/local_comm.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <exception>
#include <functional>
#include <random>
#include <thread>

#include "graph/error.h"
#include "tests/error_of.h"

namespace onnxtrain {
namespace {

using namespace std::chrono_literals;

// Generous: nothing in these tests should wait this long unless the communicator is broken.
constexpr std::chrono::milliseconds kLongTimeout = 10s;

Tensor float_tensor(std::vector<float> values) {
  Tensor t(DType::Float32, {static_cast<int64_t>(values.size())});
  std::copy(values.begin(), values.end(), t.data<float>().begin());
  return t;
}

std::vector<float> values_of(const Tensor& t) {
  auto d = t.data<float>();
  return {d.begin(), d.end()};
}

// Runs fn(rank) on one thread per rank; returns each rank's error message ("" if it returned).
std::vector<std::string> run_ranks(int size, const std::function<void(int)>& fn) {
  std::vector<std::string> errors(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
        if (errors[static_cast<size_t>(r)].empty()) errors[static_cast<size_t>(r)] = "(empty error)";
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

using testing_support::error_of;

TEST(LocalComm, PingPongCopiesTheTensor) {
  auto group = make_local_group(2, kLongTimeout);
  EXPECT_EQ(group[0]->rank(), 0);
  EXPECT_EQ(group[1]->rank(), 1);
  EXPECT_EQ(group[1]->size(), 2);
  constexpr int rounds = 100;
  auto errors = run_ranks(2, [&](int r) {
    Communicator& comm = *group[static_cast<size_t>(r)];
    if (r == 0) {
      Tensor x = float_tensor({0.0f, 1.0f});
      for (int i = 0; i < rounds; ++i) {
        comm.send(1, CommTag{.micro_batch = i}, x, "ping");
        // The sender may reuse its buffer at once: the receiver must still see what was sent.
        x.data<float>()[0] = -1.0f;
        x = comm.recv(1, CommTag{.micro_batch = i, .kind = CommTag::gradient}, "pong");
        for (float& v : x.data<float>()) v += 1.0f;
      }
      EXPECT_EQ(values_of(x), (std::vector<float>{2.0f * rounds, 1.0f + 2.0f * rounds}));
    } else {
      for (int i = 0; i < rounds; ++i) {
        Tensor y = comm.recv(0, CommTag{.micro_batch = i}, "ping");
        EXPECT_EQ(y.data<float>()[0], 2.0f * i);
        for (float& v : y.data<float>()) v += 1.0f;
        comm.send(0, CommTag{.micro_batch = i, .kind = CommTag::gradient}, y, "pong");
        y.data<float>()[0] = -100.0f;
      }
    }
  });
  EXPECT_EQ(errors, (std::vector<std::string>{"", ""}));
}

// send_shared hands the receiver the sender's buffer itself (a pipeline stage's activations and gradients,
// which nobody writes again); send copies. Once the receiver drops it, the sender is its sole owner again.
TEST(LocalComm, SendSharedHandsOverTheBufferItself) {
  auto group = make_local_group(2, kLongTimeout);
  const Tensor x = float_tensor({1.0f, 2.0f, 3.0f});
  std::atomic<const std::byte*> received_shared{nullptr}, received_copy{nullptr};
  auto errors = run_ranks(2, [&](int r) {
    Communicator& comm = *group[static_cast<size_t>(r)];
    if (r == 0) {
      comm.send_shared(1, CommTag{.micro_batch = 0}, x, "shared");
      comm.send(1, CommTag{.micro_batch = 1}, x, "copied");
    } else {
      Tensor shared = comm.recv(0, CommTag{.micro_batch = 0}, "shared");
      Tensor copied = comm.recv(0, CommTag{.micro_batch = 1}, "copied");
      EXPECT_EQ(values_of(shared), values_of(copied));
      received_shared = shared.raw();
      received_copy = copied.raw();
    }
  });
  EXPECT_EQ(errors, (std::vector<std::string>{"", ""}));
  EXPECT_EQ(received_shared.load(), x.raw());
  EXPECT_NE(received_copy.load(), x.raw());
  EXPECT_TRUE(x.sole_owner()) << "the receiver's Tensors are gone";
}

TEST(LocalComm, RecvMatchesTagsNotArrivalOrder) {
  auto group = make_local_group(2, kLongTimeout);
  // Five micro-batches and, for micro-batch 2, two more messages differing only in kind or index.
  for (int i = 0; i < 5; ++i) group[0]->send(1, CommTag{.micro_batch = i}, float_tensor({float(i)}), "a");
  group[0]->send(1, CommTag{.micro_batch = 2, .kind = CommTag::gradient}, float_tensor({20.0f}), "g");
  group[0]->send(1, CommTag{.micro_batch = 2, .index = 1}, float_tensor({21.0f}), "a1");
  // Equal tags keep send order.
  group[0]->send(1, CommTag{.micro_batch = 9}, float_tensor({90.0f}), "first");
  group[0]->send(1, CommTag{.micro_batch = 9}, float_tensor({91.0f}), "second");

  Communicator& r1 = *group[1];
  EXPECT_EQ(values_of(r1.recv(0, CommTag{.micro_batch = 2, .index = 1}, "a1")), std::vector<float>{21.0f});
  EXPECT_EQ(values_of(r1.recv(0, CommTag{.micro_batch = 2, .kind = CommTag::gradient}, "g")),
            std::vector<float>{20.0f});
  for (int i = 4; i >= 0; --i)
    EXPECT_EQ(values_of(r1.recv(0, CommTag{.micro_batch = i}, "a")), std::vector<float>{float(i)});
  EXPECT_EQ(values_of(r1.recv(0, CommTag{.micro_batch = 9}, "first")), std::vector<float>{90.0f});
  EXPECT_EQ(values_of(r1.recv(0, CommTag{.micro_batch = 9}, "second")), std::vector<float>{91.0f});

  // A receiver waiting for a tag that is not there yet gets it when it arrives, later ones notwithstanding.
  auto errors = run_ranks(2, [&](int r) {
    if (r == 0) {
      group[0]->send(1, CommTag{.micro_batch = 11}, float_tensor({11.0f}), "later tag first");
      std::this_thread::sleep_for(20ms);
      group[0]->send(1, CommTag{.micro_batch = 10}, float_tensor({10.0f}), "wanted tag");
    } else {
      EXPECT_EQ(values_of(group[1]->recv(0, CommTag{.micro_batch = 10}, "wanted")), std::vector<float>{10.0f});
      EXPECT_EQ(values_of(group[1]->recv(0, CommTag{.micro_batch = 11}, "later")), std::vector<float>{11.0f});
    }
  });
  EXPECT_EQ(errors, (std::vector<std::string>{"", ""}));
}

TEST(LocalComm, FullChannelBlocksTheSenderUntilTheReceiverTakesOne) {
  auto group = make_local_group(2, kLongTimeout, /*capacity=*/2);
  std::atomic<int> sent{0};
  std::thread sender([&] {
    for (int i = 0; i < 3; ++i) {
      group[0]->send(1, CommTag{.micro_batch = i}, float_tensor({float(i)}), "send");
      ++sent;
    }
  });
  while (sent.load() < 2) std::this_thread::sleep_for(1ms);
  // The third send must stay blocked while both slots are taken (it would finish within microseconds).
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(sent.load(), 2);
  // Other channels are independent of the full one.
  group[1]->send(0, CommTag{}, float_tensor({5.0f}), "reverse direction");
  EXPECT_EQ(values_of(group[0]->recv(1, CommTag{}, "reverse")), std::vector<float>{5.0f});
  EXPECT_EQ(values_of(group[1]->recv(0, CommTag{.micro_batch = 1}, "recv")), std::vector<float>{1.0f});
  sender.join();
  EXPECT_EQ(sent.load(), 3);
  EXPECT_EQ(values_of(group[1]->recv(0, CommTag{.micro_batch = 2}, "recv")), std::vector<float>{2.0f});
  EXPECT_EQ(values_of(group[1]->recv(0, CommTag{.micro_batch = 0}, "recv")), std::vector<float>{0.0f});
}

// Several tensors in one collective (what the data-parallel replicas do with their gradients): each is
// the same rank-order sum as its own all_reduce_sum, bit for bit, on every rank; ranks that pass other
// tensor counts or sizes are told which.
TEST(LocalComm, AllReduceSumEachEqualsOneAllReducePerTensor) {
  constexpr int kRanks = 3;
  const std::vector<size_t> sizes = {5, 10000, 1, 4097};
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-1e3f, 1e3f);
  std::vector<std::vector<std::vector<float>>> each(kRanks), one_by_one(kRanks);  // [rank][tensor]
  for (int r = 0; r < kRanks; ++r)
    for (size_t n : sizes) {
      std::vector<float> v(n);
      for (float& x : v) x = dist(rng);
      each[static_cast<size_t>(r)].push_back(v);
      one_by_one[static_cast<size_t>(r)].push_back(v);
    }
  auto group = make_local_group(kRanks, kLongTimeout);
  auto errors = run_ranks(kRanks, [&](int r) {
    std::vector<std::span<float>> spans;
    for (auto& v : each[static_cast<size_t>(r)]) spans.push_back(v);
    group[static_cast<size_t>(r)]->all_reduce_sum_each(spans, "step 1");
    for (auto& v : one_by_one[static_cast<size_t>(r)]) group[static_cast<size_t>(r)]->all_reduce_sum(v, "step 1");
  });
  for (const std::string& e : errors) EXPECT_EQ(e, "");
  for (int r = 0; r < kRanks; ++r)
    for (size_t t = 0; t < sizes.size(); ++t) {
      EXPECT_EQ(std::memcmp(each[static_cast<size_t>(r)][t].data(), one_by_one[0][t].data(), sizes[t] * sizeof(float)),
                0)
          << "rank " << r << " tensor " << t;
    }
  EXPECT_EQ(one_by_one[0][2][0], one_by_one[2][2][0]);

  // The same 8 floats, as two tensors on rank 0 and one on rank 1: refused on both, naming the calls.
  auto pair = make_local_group(2, kLongTimeout);
  errors = run_ranks(2, [&](int r) {
    std::vector<float> a(4), b(4), c(8);
    const std::vector<std::span<float>> spans =
        r == 0 ? std::vector<std::span<float>>{a, b} : std::vector<std::span<float>>{c};
    pair[static_cast<size_t>(r)]->all_reduce_sum_each(spans, "step 2");
  });
  for (const std::string& e : errors)
    EXPECT_NE(e.find("ranks disagree: rank 0 called all_reduce_sum of 8 floats in 2 tensors, rank 1 called "
                     "all_reduce_sum of 8 floats"),
              std::string::npos)
        << e;
}

TEST(LocalComm, TimeoutsNameWhatTheRankAndThePeer) {
  auto group = make_local_group(3, 50ms, /*capacity=*/1);
  const auto start = std::chrono::steady_clock::now();
  const std::string recv_error = error_of([&] {
    group[2]->recv(1, CommTag{.micro_batch = 7, .kind = CommTag::activation, .index = 3},
                   "stage 2, micro-batch 7, activation 'conv1_out'");
  });
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, 50ms);
  EXPECT_LT(waited, 2s);
  EXPECT_NE(recv_error.find("stage 2, micro-batch 7, activation 'conv1_out'"), std::string::npos) << recv_error;
  EXPECT_NE(recv_error.find("rank 2 timed out after 50 ms receiving micro-batch 7, activation #3 from rank 1"),
            std::string::npos)
      << recv_error;

  group[0]->send(1, CommTag{.micro_batch = 0}, float_tensor({1.0f}), "fills the channel");
  const std::string send_error = error_of([&] {
    group[0]->send(1, CommTag{.micro_batch = 1, .kind = CommTag::gradient}, float_tensor({1.0f}),
                   "stage 0, micro-batch 1, gradient 'x'");
  });
  EXPECT_NE(send_error.find("stage 0, micro-batch 1, gradient 'x': rank 0 timed out after 50 ms sending "
                            "micro-batch 1, gradient #0 to rank 1"),
            std::string::npos)
      << send_error;
  EXPECT_NE(send_error.find("capacity 1"), std::string::npos) << send_error;

  // Ranks 0 and 1 reach the barrier, rank 2 never does: both name rank 2 and only rank 2 (not each
  // other, though one of them withdraws first). A longer timeout so that both surely arrive in time.
  group = make_local_group(3, 300ms);
  auto errors = run_ranks(2, [&](int r) { group[static_cast<size_t>(r)]->barrier("epoch 3 barrier"); });
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(errors[static_cast<size_t>(r)].find("epoch 3 barrier: rank " + std::to_string(r) +
                                                  " timed out after 300 ms in barrier waiting for rank 2"),
              std::string::npos)
        << errors[static_cast<size_t>(r)];
    EXPECT_EQ(errors[static_cast<size_t>(r)].find("rank 1,"), std::string::npos);
  }
  // The timed-out ranks withdrew: a later barrier of all three still works.
  errors = run_ranks(3, [&](int r) { group[static_cast<size_t>(r)]->barrier("full barrier"); });
  EXPECT_EQ(errors, (std::vector<std::string>{"", "", ""}));
}

// A timeout in a big group names a few missing ranks and counts the rest (100000 ranks made a 689 KB line).
TEST(LocalComm, ATimeoutInABigGroupListsAFewRanksNotAll) {
  auto group = make_local_group(300, 100ms);
  const std::string e = error_of([&] { group[0]->barrier("epoch 1 barrier"); });
  EXPECT_NE(e.find("epoch 1 barrier: rank 0 timed out after 100 ms in barrier waiting for ranks 1, 2, 3, 4, 5, 6, 7, "
                   "8 and 291 more"),
            std::string::npos)
      << e;
  EXPECT_LT(e.size(), 200u) << e;
}

TEST(LocalComm, AbortWakesBlockedPeersWithTheFailedRank) {
  auto group = make_local_group(4, kLongTimeout);
  const auto start = std::chrono::steady_clock::now();
  auto errors = run_ranks(4, [&](int r) {
    Communicator& comm = *group[static_cast<size_t>(r)];
    switch (r) {
      case 0:
        comm.recv(1, CommTag{.micro_batch = 3}, "stage 0 waits for a gradient");
        break;
      case 1:
        std::this_thread::sleep_for(30ms);  // let the others block first
        comm.abort("Conv 'conv2' failed: out of memory");
        break;
      case 2:
        comm.barrier("stage 2 barrier");
        break;
      case 3: {
        // Fill the channel to rank 1 so that this rank blocks in send.
        for (int i = 0; i < 65; ++i) comm.send(1, CommTag{.micro_batch = i}, float_tensor({0.0f}), "stage 3 send");
        break;
      }
    }
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);  // far below the 10 s timeout
  EXPECT_EQ(errors[1], "");
  for (int r : {0, 2, 3}) {
    const std::string& e = errors[static_cast<size_t>(r)];
    EXPECT_NE(e.find("rank " + std::to_string(r) + " gave up"), std::string::npos) << e;
    EXPECT_NE(e.find("rank 1 aborted: Conv 'conv2' failed: out of memory"), std::string::npos) << e;
  }
  EXPECT_NE(errors[0].find("stage 0 waits for a gradient: rank 0 gave up receiving micro-batch 3, activation #0 "
                           "from rank 1"),
            std::string::npos)
      << errors[0];

  // The first abort stays the root cause; later calls fail at once.
  group[0]->abort("secondary");
  ASSERT_TRUE(group[3]->aborted().has_value());
  EXPECT_EQ(group[3]->aborted()->rank, 1);
  EXPECT_EQ(group[3]->aborted()->reason, "Conv 'conv2' failed: out of memory");
  const std::string later = error_of([&] { group[2]->send(0, CommTag{}, float_tensor({1.0f}), "after abort"); });
  EXPECT_NE(later.find("rank 1 aborted"), std::string::npos) << later;
}

TEST(LocalComm, NotAbortedByDefault) {
  auto group = make_local_group(2, kLongTimeout);
  EXPECT_FALSE(group[0]->aborted().has_value());
}

// Values of very different magnitudes, so that a different summation order would change the bits.
std::vector<float> rank_values(int rank, size_t n) {
  std::mt19937 rng(1234u + static_cast<unsigned>(rank));
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-20, 20);
  std::vector<float> v(n);
  for (float& x : v) x = std::ldexp(mantissa(rng), exponent(rng));
  return v;
}

TEST(LocalComm, AllReduceSumIsTheRankOrderSumBitIdenticalOnEveryRank) {
  constexpr size_t n = 10007;  // more than one internal block, not a multiple of it
  for (int size = 1; size <= 4; ++size) {
    SCOPED_TRACE("ranks " + std::to_string(size));
    std::vector<float> expected = rank_values(0, n);
    for (int r = 1; r < size; ++r) {
      const std::vector<float> x = rank_values(r, n);
      for (size_t i = 0; i < n; ++i) expected[i] += x[i];
    }
    std::vector<std::vector<float>> first_run;
    for (int run = 0; run < 2; ++run) {
      auto group = make_local_group(size, kLongTimeout);
      std::vector<std::vector<float>> data(static_cast<size_t>(size));
      for (int r = 0; r < size; ++r) data[static_cast<size_t>(r)] = rank_values(r, n);
      auto errors = run_ranks(size, [&](int r) {
        // Two all-reduces in a row: the second sums the first's results (size times the sum).
        group[static_cast<size_t>(r)]->all_reduce_sum(data[static_cast<size_t>(r)], "gradients");
        group[static_cast<size_t>(r)]->all_reduce_sum(std::span<float>(data[static_cast<size_t>(r)]).first(3),
                                                      "first three again");
      });
      EXPECT_EQ(errors, std::vector<std::string>(static_cast<size_t>(size)));
      for (int r = 0; r < size; ++r) {
        const std::vector<float>& d = data[static_cast<size_t>(r)];
        for (size_t i = 3; i < n; ++i) ASSERT_EQ(d[i], expected[i]) << "rank " << r << " element " << i;
        for (size_t i = 0; i < 3; ++i) {
          float again = expected[i];
          for (int k = 1; k < size; ++k) again += expected[i];
          EXPECT_EQ(d[i], again) << "rank " << r << " element " << i;
        }
        EXPECT_EQ(std::memcmp(d.data(), data[0].data(), n * sizeof(float)), 0) << "rank " << r;
      }
      if (run == 0)
        first_run = data;
      else
        EXPECT_EQ(data, first_run);
    }
  }
  // Sanity of the reference itself: with 4 ranks the order matters for these values, so the bit-exact
  // comparison above really pins the order (a reversed sum differs somewhere).
  std::vector<float> forward = rank_values(0, n), backward = rank_values(3, n);
  for (int r = 1; r < 4; ++r) {
    const std::vector<float> x = rank_values(r, n), y = rank_values(3 - r, n);
    for (size_t i = 0; i < n; ++i) forward[i] += x[i], backward[i] += y[i];
  }
  EXPECT_NE(forward, backward);
}

TEST(LocalComm, BroadcastCopiesTheRootsBytes) {
  constexpr int size = 4;
  auto group = make_local_group(size, kLongTimeout);
  for (int root = 0; root < size; ++root) {
    std::vector<std::vector<std::byte>> data(size, std::vector<std::byte>(37));
    for (int r = 0; r < size; ++r)
      for (size_t i = 0; i < 37; ++i)
        data[static_cast<size_t>(r)][i] = std::byte(static_cast<unsigned char>(r * 50 + i));
    const std::vector<std::byte> sent = data[static_cast<size_t>(root)];
    auto errors = run_ranks(
        size, [&](int r) { group[static_cast<size_t>(r)]->broadcast(data[static_cast<size_t>(r)], root, "weights"); });
    EXPECT_EQ(errors, std::vector<std::string>(size));
    for (int r = 0; r < size; ++r) EXPECT_EQ(data[static_cast<size_t>(r)], sent) << "root " << root << " rank " << r;
  }
}

TEST(LocalComm, BarrierHoldsEveryRankUntilAllArrive) {
  constexpr int size = 4, rounds = 20;
  auto group = make_local_group(size, kLongTimeout);
  std::atomic<int> arrived{0};
  auto errors = run_ranks(size, [&](int r) {
    for (int round = 0; round < rounds; ++round) {
      if (r == round % size) std::this_thread::sleep_for(2ms);  // a different late rank each round
      ++arrived;
      group[static_cast<size_t>(r)]->barrier("round " + std::to_string(round));
      // Nobody leaves round k before all have arrived at it; nobody can be past round k + 1 yet.
      const int seen = arrived.load();
      EXPECT_GE(seen, size * (round + 1));
      EXPECT_LE(seen, size * (round + 2));
    }
  });
  EXPECT_EQ(errors, std::vector<std::string>(size));
}

TEST(LocalComm, MismatchedCollectivesFailOnEveryRank) {
  auto group = make_local_group(2, kLongTimeout);
  std::vector<float> a(4), b(5);
  auto errors = run_ranks(2, [&](int r) {
    if (r == 0)
      group[0]->all_reduce_sum(a, "gradients");
    else
      group[1]->all_reduce_sum(b, "gradients");
  });
  for (const std::string& e : errors)
    EXPECT_NE(
        e.find("ranks disagree: rank 0 called all_reduce_sum of 4 floats, rank 1 called all_reduce_sum of 5 floats"),
        std::string::npos)
        << e;
}

TEST(LocalComm, RejectsBadArguments) {
  EXPECT_NE(error_of([] { make_local_group(0, 1s); }).find("size must be at least 1"), std::string::npos);
  EXPECT_NE(error_of([] { make_local_group(2, 1s, 0); }).find("capacity must be at least 1"), std::string::npos);
  EXPECT_NE(error_of([] { make_local_group(2, 0ms); }).find("timeout must be positive"), std::string::npos);
  auto group = make_local_group(2, 1s);
  EXPECT_NE(error_of([&] {
              group[0]->send(2, CommTag{}, float_tensor({1.0f}), "to nowhere");
            }).find("to nowhere: rank 0 cannot send to rank 2: the group has ranks 0..1"),
            std::string::npos);
  std::vector<std::byte> bytes(4);
  EXPECT_NE(error_of([&] { group[1]->broadcast(bytes, -1, "bad root"); }).find("cannot broadcast from rank -1"),
            std::string::npos);
}

}  // namespace
}  // namespace onnxtrain
