// The local (threads) backend against the shared conformance suite (tests/comm_conformance.h); the
// local-only behaviour (bounded channels, ...) is in local_comm_test.cc.
#include "executor/comm/local_comm.h"
#include "tests/comm_conformance.h"

namespace onnxtrain::comm_test {
namespace {

CommGroupRunner local_runner(int size) {
  return {"ranks" + std::to_string(size), size, [size](std::chrono::milliseconds timeout, const Body& body) {
            auto group = make_local_group(size, timeout);
            run_on_threads(group, body);
          }};
}

INSTANTIATE_TEST_SUITE_P(Local, CommConformance,
                         ::testing::Values(local_runner(1), local_runner(2), local_runner(3), local_runner(4)),
                         comm_runner_name);

}  // namespace
}  // namespace onnxtrain::comm_test
