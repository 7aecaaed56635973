#include "executor/comm/comm_info.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace onnxtrain;

TEST(CommInfo, ListsAllBackendsLocalAlwaysCompiled) {
  const std::vector<CommBackendInfo> backends = comm_backends();
  ASSERT_EQ(backends.size(), 4u);
  EXPECT_EQ(backends[0].name, "local");
  EXPECT_EQ(backends[1].name, "mpi");
  EXPECT_EQ(backends[2].name, "nccl");
  EXPECT_EQ(backends[3].name, "tcp");
  EXPECT_TRUE(backends[0].compiled);
  EXPECT_TRUE(backends[3].compiled);
  for (const CommBackendInfo& b : backends) {
    if (b.compiled) {
      EXPECT_FALSE(b.version.empty()) << b.name;
    } else {
      EXPECT_NE(b.detail.find("not compiled in"), std::string::npos) << b.name << ": " << b.detail;
    }
    std::cout << b.name << ": " << (b.compiled ? b.version : b.detail) << "\n";
  }
  const std::vector<std::string> names = compiled_comm_backend_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "local"), names.end());
}

TEST(CommInfo, MpiVersionNamesTheLibrary) {
  const CommBackendInfo mpi = comm_backends()[1];
  if (!mpi.compiled) GTEST_SKIP() << "MPI not compiled in";
  EXPECT_NE(mpi.version.find("MPI"), std::string::npos) << mpi.version;
}

TEST(CommInfo, NcclVersionLooksLikeOne) {
  const CommBackendInfo nccl = comm_backends()[2];
  if (!nccl.compiled) GTEST_SKIP() << "NCCL not compiled in";
  EXPECT_EQ(nccl.version.rfind("NCCL 2.", 0), 0u) << nccl.version;
}
