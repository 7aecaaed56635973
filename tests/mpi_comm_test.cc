// The MPI backend against the shared conformance suite. ctest runs this binary under mpirun (-np 1, 3
// and 4); every rank runs every test, each test on a fresh MpiCommunicator. Only rank 0 prints gtest's
// report (the others print their failures, prefixed with their rank), and every rank exits non-zero
// when any rank failed.
#include "executor/comm/mpi_comm.h"

#include <iostream>

#include "executor/comm/launch.h"
#include "tests/comm_conformance.h"

namespace onnxtrain::comm_test {
namespace {

// Lines every rank up before each test, so that one test's short timeouts do not run into the
// stragglers of the one before (e.g. a rank that skipped a barrier and moved on).
MpiCommunicator& sync_communicator() {
  static MpiCommunicator sync(std::chrono::seconds(60));
  return sync;
}

CommGroupRunner mpi_runner() {
  const int size = detect_launch().size;
  return {"ranks" + std::to_string(size), size, [](std::chrono::milliseconds timeout, const Body& body) {
            sync_communicator().barrier("before the test");
            MpiCommunicator comm(timeout);
            try {
              body(comm);
            } catch (const std::exception& e) {
              ADD_FAILURE() << "rank " << comm.rank() << " threw: " << e.what();
            }
          }};
}

INSTANTIATE_TEST_SUITE_P(Mpi, CommConformance, ::testing::Values(mpi_runner()), comm_runner_name);

TEST(MpiComm, WorldMatchesTheLauncher) {
  const LaunchInfo launch = detect_launch();
  auto world = make_world_communicator(launch, std::chrono::seconds(20));
  ASSERT_NE(dynamic_cast<MpiCommunicator*>(world.get()), nullptr);
  EXPECT_EQ(world->rank(), launch.rank);
  EXPECT_EQ(world->size(), launch.size);
  EXPECT_NE(MpiCommunicator::library_version(), "");
}

TEST(MpiComm, ACollectiveTimeoutLeavesLaterCollectivesFailingAtOnce) {
  sync_communicator().barrier("before the test");
  MpiCommunicator comm(std::chrono::milliseconds(300));
  if (comm.size() == 1) {
    comm.barrier("alone");
    return;
  }
  if (comm.rank() == comm.size() - 1) return;  // never comes
  EXPECT_NE(error_of([&] { comm.barrier("first"); }).find("timed out"), std::string::npos);
  const auto start = std::chrono::steady_clock::now();
  const std::string e = error_of([&] { comm.barrier("second"); });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(100));
  EXPECT_NE(e.find("second: rank " + std::to_string(comm.rank()) +
                   " cannot run barrier: an earlier barrier ('first') failed on this rank"),
            std::string::npos)
      << e;
}

// On ranks other than 0: no report, only failures, each prefixed with the rank.
class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (result.failed())
      std::cerr << "[rank " << rank_ << "] " << (result.file_name() ? result.file_name() : "?") << ":"
                << result.line_number() << ": " << result.summary() << "\n";
  }

 private:
  int rank_;
};

}  // namespace
}  // namespace onnxtrain::comm_test

int main(int argc, char** argv) {
  using namespace onnxtrain;
  ::testing::InitGoogleTest(&argc, argv);
  const LaunchInfo launch = detect_launch();
  if (launch.kind != LaunchInfo::Kind::mpi) {
    std::cerr << "mpi_comm_test: run me under mpirun, e.g. mpirun -np 3 " << argv[0] << "\n";
    return 2;
  }
  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (launch.rank != 0) {
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new comm_test::FailurePrinter(launch.rank));
  }
  const int result = RUN_ALL_TESTS();
  // Every rank learns whether any rank failed, so that each exits non-zero then.
  try {
    std::vector<float> failed{result != 0 ? 1.0f : 0.0f};
    comm_test::sync_communicator().all_reduce_sum(failed, "test results");
    if (launch.rank == 0 && failed[0] > 0) std::cerr << "mpi_comm_test: " << failed[0] << " rank(s) failed\n";
    return failed[0] > 0 ? 1 : 0;
  } catch (const std::exception& e) {
    std::cerr << "[rank " << launch.rank << "] mpi_comm_test: " << e.what() << "\n";
    return 1;
  }
}
