// Runs the `onnxtrain` binary (ONNXTRAIN_BINARY, set by tests/CMakeLists.txt) as a user would and
// returns its exit code and output: the helper of the command-line tests.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace onnxtrain::testing_support {

struct CliRun {
  int exit_code;       // -1 when the process did not exit normally
  std::string output;  // stdout and stderr together
};

// The command's environment: OMP_NUM_THREADS as the test has it, else 2. Unset, `train` lowers its thread
// count while other processes keep the CPUs busy (as a parallel test run does), and the tests that compare
// two runs bit for bit need one fixed count.
inline const char* kFixedThreads = "export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}; ";

// `prefix` goes before the binary: "env -u OMP_NUM_THREADS taskset -c 0".
inline CliRun run_cli_prefixed(const std::string& prefix, const std::string& args) {
  const std::string command =
      std::string(kFixedThreads) + prefix + " " + std::string(ONNXTRAIN_BINARY) + " " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  std::string output;
  std::array<char, 4096> buffer;
  while (size_t n = fread(buffer.data(), 1, buffer.size(), pipe)) output.append(buffer.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

inline CliRun run_cli(const std::string& args) { return run_cli_prefixed("", args); }

}  // namespace onnxtrain::testing_support
