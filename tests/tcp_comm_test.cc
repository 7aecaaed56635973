// The TCP backend: the shared conformance suite with ranks as threads of this process on 127.0.0.1,
// then what only TCP has: the rendezvous, and peers whose connection closes (a rank that exits, or a
// child process killed with SIGKILL) making waits on them throw at once.
#include "executor/comm/tcp_comm.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <numeric>

#include "executor/comm/comm_wire.h"
#include "executor/comm/launch.h"
#include "tests/child_process.h"
#include "tests/comm_conformance.h"
#include "tests/free_port.h"

namespace onnxtrain::comm_test {
namespace {

using testing_support::free_loopback_port;

TcpRendezvous local_rendezvous(int port, int rank, int size) {
  // The mesh forms in milliseconds; a generous connect timeout keeps short call timeouts from failing it.
  return TcpRendezvous{.master_addr = "127.0.0.1",
                       .master_port = port,
                       .rank = rank,
                       .size = size,
                       .connect_timeout = std::chrono::seconds(20)};
}

// `size` connected communicators, built on one thread per rank (the rendezvous needs all at once).
std::vector<std::unique_ptr<Communicator>> make_tcp_group(int size, std::chrono::milliseconds timeout) {
  const int port = free_loopback_port();
  std::vector<std::unique_ptr<Communicator>> group(static_cast<std::size_t>(size));
  std::vector<std::string> errors(static_cast<std::size_t>(size));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] {
      try {
        group[static_cast<std::size_t>(r)] =
            std::make_unique<TcpCommunicator>(local_rendezvous(port, r, size), timeout);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (const std::string& e : errors)
    if (!e.empty()) throw Error("TCP test group: " + e);
  return group;
}

CommGroupRunner tcp_runner(int size) {
  return {"ranks" + std::to_string(size), size, [size](std::chrono::milliseconds timeout, const Body& body) {
            auto group = make_tcp_group(size, timeout);
            run_on_threads(group, body);
          }};
}

INSTANTIATE_TEST_SUITE_P(Tcp, CommConformance,
                         ::testing::Values(tcp_runner(1), tcp_runner(2), tcp_runner(3), tcp_runner(4)),
                         comm_runner_name);

TEST(TcpComm, ARankThatExitsMakesWaitsOnItThrowAtOnce) {
  auto group = make_tcp_group(3, 10s);
  const auto start = std::chrono::steady_clock::now();
  std::string recv_error, barrier_error, send_error;
  std::thread rank1([&] {
    group[1]->send(0, CommTag{.micro_batch = 1}, float_tensor({7.0f}), "last words");
    std::this_thread::sleep_for(50ms);
    group[1].reset();  // closes its connections, like a process that exits
  });
  std::thread rank2([&] { barrier_error = error_of([&] { group[2]->barrier("epoch barrier"); }); });
  // What rank 1 sent before it went is still delivered; the wait for more fails when it goes.
  EXPECT_EQ(values_of(group[0]->recv(1, CommTag{.micro_batch = 1}, "last words")), std::vector{7.0f});
  recv_error = error_of([&] { group[0]->recv(1, CommTag{.micro_batch = 2}, "stage 0 waits for rank 1"); });
  rank1.join();
  rank2.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);  // far below the 10 s timeout
  EXPECT_TRUE(contains(recv_error,
                       "stage 0 waits for rank 1: rank 0 gave up receiving micro-batch 2, activation #0 "
                       "from rank 1: rank 1 closed its connection (did it die?)"))
      << recv_error;
  EXPECT_TRUE(contains(barrier_error, "epoch barrier: rank 2 gave up in barrier: rank 1 closed its connection"))
      << barrier_error;
  // The survivors still talk to each other; sending to the gone rank fails at once.
  send_error = error_of([&] { group[0]->send(1, CommTag{}, float_tensor({1.0f}), "to the gone rank"); });
  EXPECT_TRUE(contains(send_error, "rank 1 closed its connection")) << send_error;
  group[0]->send(2, CommTag{}, float_tensor({3.0f}), "to rank 2");
  EXPECT_EQ(values_of(group[2]->recv(0, CommTag{}, "from rank 0")), std::vector{3.0f});
  // Rank 2's barrier failed: the group's collectives are out of step, and say so at once.
  const std::string later = error_of([&] { group[2]->barrier("next barrier"); });
  EXPECT_TRUE(contains(later,
                       "next barrier: rank 2 cannot run barrier: an earlier barrier ('epoch barrier') failed "
                       "on this rank"))
      << later;
}

TEST(TcpComm, AProcessKilledWithSigkillMakesItsPeerThrowAtOnce) {
  const int port = free_loopback_port();
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // rank 1: joins, then waits to be killed (or gives up after 20 s if the parent failed)
    ::alarm(20);
    try {
      TcpCommunicator comm(local_rendezvous(port, 1, 2), 10s);
      comm.send(0, CommTag{}, float_tensor({1.0f}), "hello");
      ::pause();
    } catch (...) {
    }
    ::_exit(3);
  }
  std::string e;
  const auto start = std::chrono::steady_clock::now();
  auto waited = start - start;
  try {
    TcpCommunicator comm(local_rendezvous(port, 0, 2), 10s);
    EXPECT_EQ(values_of(comm.recv(1, CommTag{}, "hello")), std::vector{1.0f});
    std::thread killer([&] {
      std::this_thread::sleep_for(50ms);
      ::kill(child, SIGKILL);
    });
    const auto begin = std::chrono::steady_clock::now();
    e = error_of([&] { comm.recv(1, CommTag{.micro_batch = 1}, "stage 0 gradient"); });
    waited = std::chrono::steady_clock::now() - begin;
    killer.join();
  } catch (const std::exception& ex) {
    ADD_FAILURE() << ex.what();
  }
  ::kill(child, SIGKILL);  // whatever happened above, never leave the child behind
  EXPECT_LT(waited, 3s);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_TRUE(contains(e,
                       "stage 0 gradient: rank 0 gave up receiving micro-batch 1, activation #0 from rank 1: "
                       "rank 1 closed its connection (did it die?)"))
      << e;
}

TEST(TcpComm, RendezvousTimeoutNamesTheRanksThatNeverCame) {
  TcpRendezvous rv = local_rendezvous(free_loopback_port(), 0, 3);
  rv.connect_timeout = 300ms;
  const std::string e = error_of([&] { TcpCommunicator comm(rv, 10s); });
  EXPECT_TRUE(contains(e, "rank 0 timed out after 300 ms waiting for ranks 1, 2 to connect")) << e;

  TcpRendezvous lonely = local_rendezvous(free_loopback_port(), 1, 2);  // rank 0 never listens
  lonely.connect_timeout = 300ms;
  const std::string e1 = error_of([&] { TcpCommunicator comm(lonely, 10s); });
  EXPECT_TRUE(contains(e1, "TCP rendezvous of rank 1 of 2 at 127.0.0.1:" + std::to_string(lonely.master_port) +
                               ": cannot reach rank 0 within 300 ms"))
      << e1;
}

// WORLD_SIZE=100000 printed every missing rank: a 689 KB error line. A few ranks, then a count.
TEST(TcpComm, RendezvousTimeoutListsAFewRanksNotAll) {
  TcpRendezvous rv = local_rendezvous(free_loopback_port(), 0, 200);
  rv.connect_timeout = 300ms;
  const std::string e = error_of([&] { TcpCommunicator comm(rv, 10s); });
  EXPECT_TRUE(contains(e,
                       "rank 0 timed out after 300 ms waiting for ranks 1, 2, 3, 4, 5, 6, 7, 8 and 191 more to "
                       "connect; are they running, with WORLD_SIZE 200?"))
      << e;
  EXPECT_LT(e.size(), 300u) << e;
  std::vector<int> all(100000);
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(comm_wire::ranks_phrase(all), "ranks 0, 1, 2, 3, 4, 5, 6, 7 and 99992 more");
  EXPECT_EQ(comm_wire::ranks_phrase({3}), "rank 3");
  EXPECT_EQ(comm_wire::ranks_phrase({1, 2}), "ranks 1, 2");
}

// A world too large for the full mesh's sockets is refused at once, naming WORLD_SIZE and the limit,
// rather than waiting out the timeout (or accept() failing with EMFILE in a loop).
TEST(TcpComm, RefusesAWorldLargerThanTheOpenFileLimit) {
  const testing_support::ChildResult r = testing_support::run_in_child([] {
    const rlimit files{256, 256};
    ::setrlimit(RLIMIT_NOFILE, &files);
    TcpRendezvous rv = local_rendezvous(free_loopback_port(), 0, 100000);
    rv.connect_timeout = 300ms;
    return error_of([&] { TcpCommunicator comm(rv, 1s); });
  });
  ASSERT_TRUE(r.exited) << r.describe();
  EXPECT_TRUE(contains(r.message, "TCP communicator: world size 100000 (WORLD_SIZE) is too large for this process"))
      << r.message.substr(0, 500);
  EXPECT_TRUE(contains(r.message, "open-file limit of 256 (ulimit -n; hard limit 256)")) << r.message.substr(0, 500);
  EXPECT_LT(r.message.size(), 400u);
}

TEST(TcpComm, RendezvousRejectsAWorldSizeMismatch) {
  const int port = free_loopback_port();
  std::string e0, e1;
  std::thread rank1([&] {
    TcpRendezvous rv = local_rendezvous(port, 1, 3);  // thinks the world has 3 ranks
    rv.connect_timeout = 2s;
    e1 = error_of([&] { TcpCommunicator comm(rv, 2s); });
  });
  TcpRendezvous rv = local_rendezvous(port, 0, 2);
  rv.connect_timeout = 2s;
  e0 = error_of([&] { TcpCommunicator comm(rv, 2s); });
  rank1.join();
  EXPECT_TRUE(contains(e0, "a process claiming rank 1 of 3 connected to rank 0 (expected one of ranks 1..1 of 2"))
      << e0;
  EXPECT_FALSE(e1.empty());
}

TEST(TcpComm, RejectsBadArguments) {
  EXPECT_TRUE(
      contains(error_of([] { TcpCommunicator c(TcpRendezvous{.rank = 2, .size = 2}, 1s); }), "rank 2 is outside 0..1"));
  EXPECT_TRUE(contains(error_of([] { TcpCommunicator c(TcpRendezvous{.master_port = 0, .rank = 0, .size = 2}, 1s); }),
                       "master port must be in 1..65535"));
  EXPECT_TRUE(contains(error_of([] { TcpCommunicator c(TcpRendezvous{}, 0ms); }), "timeout must be positive"));
  TcpCommunicator alone(TcpRendezvous{}, 1s);  // one rank needs no network
  EXPECT_EQ(alone.size(), 1);
}

TEST(TcpComm, WorldCommunicatorForATorchrunLaunch) {
  const int port = free_loopback_port();
  std::vector<std::unique_ptr<Communicator>> world(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      LaunchInfo launch{.kind = LaunchInfo::Kind::torchrun,
                        .rank = r,
                        .size = 2,
                        .local_rank = r,
                        .master_addr = "localhost",
                        .master_port = port,
                        .source = "RANK"};
      world[static_cast<std::size_t>(r)] = make_world_communicator(launch, 10s);
    });
  for (auto& t : threads) t.join();
  ASSERT_TRUE(world[0] && world[1]);
  EXPECT_NE(dynamic_cast<TcpCommunicator*>(world[1].get()), nullptr);
  run_on_threads(world, [](Communicator& comm) {
    std::vector<float> x{float(comm.rank() + 1)};
    comm.all_reduce_sum(x, "sum");
    EXPECT_EQ(x[0], 3.0f);
  });
}

}  // namespace
}  // namespace onnxtrain::comm_test
