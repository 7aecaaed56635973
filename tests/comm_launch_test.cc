// How a process was started (detect_launch over a fake environment) and the world communicator that
// goes with it, for a process not started by mpirun.
#include <gtest/gtest.h>

#include <map>

#include "executor/comm/launch.h"
#include "graph/error.h"

namespace onnxtrain {
namespace {

LaunchInfo detect(const std::map<std::string, std::string>& env) {
  return detect_launch([&](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

std::string error_of(const std::map<std::string, std::string>& env) {
  try {
    detect(env);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(CommLaunch, DirectWhenNoLauncherSetAnything) {
  const LaunchInfo info = detect({{"HOME", "/root"}});
  EXPECT_EQ(info.kind, LaunchInfo::Kind::direct);
  EXPECT_EQ(info.rank, 0);
  EXPECT_EQ(info.size, 1);
  EXPECT_EQ(info.source, "");
  EXPECT_STREQ(launch_kind_name(info.kind), "direct");
}

TEST(CommLaunch, OpenMpi) {
  const LaunchInfo info = detect({{"OMPI_COMM_WORLD_RANK", "2"},
                                  {"OMPI_COMM_WORLD_SIZE", "4"},
                                  {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                                  {"PMIX_RANK", "2"},
                                  {"RANK", "9"}});  // a stray torchrun variable does not matter under mpirun
  EXPECT_EQ(info.kind, LaunchInfo::Kind::mpi);
  EXPECT_EQ(info.rank, 2);
  EXPECT_EQ(info.size, 4);
  EXPECT_EQ(info.local_rank, 0);
  EXPECT_EQ(info.source, "OMPI_COMM_WORLD_RANK");
}

TEST(CommLaunch, PmixAndMpich) {
  LaunchInfo info = detect({{"PMIX_RANK", "1"}, {"PMI_SIZE", "3"}, {"MPI_LOCALRANKID", "1"}});
  EXPECT_EQ(info.kind, LaunchInfo::Kind::mpi);
  EXPECT_EQ(info.source, "PMIX_RANK");
  EXPECT_EQ(info.rank, 1);
  EXPECT_EQ(info.size, 3);
  EXPECT_EQ(info.local_rank, 1);
  info = detect({{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}});
  EXPECT_EQ(info.source, "PMI_RANK");
  EXPECT_EQ(info.size, 2);
}

TEST(CommLaunch, Torchrun) {
  const LaunchInfo info = detect(
      {{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "node0"}, {"MASTER_PORT", "29500"}});
  EXPECT_EQ(info.kind, LaunchInfo::Kind::torchrun);
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.size, 8);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.master_addr, "node0");
  EXPECT_EQ(info.master_port, 29500);
  EXPECT_EQ(info.source, "RANK");
}

TEST(CommLaunch, MalformedOrPartialEnvironmentsNameTheVariable) {
  EXPECT_NE(error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}})
                .find("RANK, WORLD_SIZE are set but MASTER_ADDR, "
                      "MASTER_PORT are missing"),
            std::string::npos);
  EXPECT_NE(error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}}).find("MASTER_PORT is missing"),
            std::string::npos);
  const std::map<std::string, std::string> good = {
      {"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "29500"}};
  auto with = [&](const std::string& name, const std::string& value) {
    auto env = good;
    env[name] = value;
    return error_of(env);
  };
  EXPECT_NE(with("RANK", "one").find("torchrun environment: RANK='one' is not an integer"), std::string::npos);
  EXPECT_NE(with("RANK", "2").find("RANK=2 is outside 0..1 (WORLD_SIZE=2)"), std::string::npos);
  EXPECT_NE(with("WORLD_SIZE", "0").find("WORLD_SIZE=0 must be at least 1"), std::string::npos);
  EXPECT_NE(with("MASTER_PORT", "70000").find("MASTER_PORT=70000 is outside 1..65535"), std::string::npos);
  EXPECT_NE(with("MASTER_PORT", "29500x").find("MASTER_PORT='29500x' is not an integer"), std::string::npos);
  EXPECT_NE(with("LOCAL_RANK", "-1").find("LOCAL_RANK=-1 is negative"), std::string::npos);
  EXPECT_NE(error_of({{"OMPI_COMM_WORLD_RANK", "4"}, {"OMPI_COMM_WORLD_SIZE", "4"}})
                .find("OMPI_COMM_WORLD_RANK=4 is outside 0..3"),
            std::string::npos);
  EXPECT_NE(error_of({{"PMI_RANK", "0"}}).find("PMI_RANK is set but no world size is"), std::string::npos);
}

TEST(CommLaunch, DirectGetsAOneRankCommunicator) {
  auto comm = make_world_communicator(LaunchInfo{}, std::chrono::seconds(1));
  ASSERT_NE(comm, nullptr);
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->size(), 1);
  std::vector<float> x{1.5f};
  comm->all_reduce_sum(x, "alone");
  EXPECT_EQ(x[0], 1.5f);
}

TEST(CommLaunch, MpiLaunchOutsideMpirunIsAClearError) {
  // This process was not started by mpirun: the MPI backend refuses before touching MPI (a build
  // without MPI says so instead).
  LaunchInfo launch{.kind = LaunchInfo::Kind::mpi, .rank = 0, .size = 2, .source = "OMPI_COMM_WORLD_RANK"};
  std::string e;
  try {
    make_world_communicator(launch, std::chrono::seconds(1));
  } catch (const Error& error) {
    e = error.what();
  }
#if ONNXTRAIN_HAVE_MPI
  EXPECT_NE(e.find("this process was not started by mpirun"), std::string::npos) << e;
#else
  EXPECT_NE(e.find("built without MPI"), std::string::npos) << e;
#endif
}

}  // namespace
}  // namespace onnxtrain
