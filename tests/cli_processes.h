// Helpers of the command-line tests that start `onnxtrain` (ONNXTRAIN_BINARY) as separate processes:
// in the background, as torchrun-style ranks, and wait for their checkpoints and exit codes.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "tests/cli_run.h"

namespace onnxtrain::testing_support {

namespace fs = std::filesystem;

inline std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// A fresh directory per test: PREFIX_PID_NAME under the temp directory.
inline fs::path scratch_dir(const std::string& prefix, const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / (prefix + "_" + std::to_string(getpid()) + "_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Starts `onnxtrain ARGS` in the background, its output in `log`.
inline pid_t start(const std::string& args, const fs::path& log) {
  const pid_t pid = fork();
  if (pid == 0) {
    const std::string command = std::string(kFixedThreads) + "exec " + std::string(ONNXTRAIN_BINARY) + " " + args +
                                " > " + log.string() + " 2>&1";
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

// Waits until DIR holds a checkpoint of at least `step` steps; false when the process ended first.
inline bool wait_for_checkpoint(const fs::path& dir, int step, pid_t pid) {
  const std::string name = "checkpoint-" + std::string(8 - std::to_string(step).size(), '0') + std::to_string(step);
  for (int i = 0; i < 120000; ++i) {
    if (fs::exists(dir)) {
      for (const auto& entry : fs::directory_iterator(dir)) {
        const std::string file = entry.path().filename().string();
        if (file.ends_with(".otck") && file >= name) return true;
      }
    }
    if (waitpid(pid, nullptr, WNOHANG) == pid) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

// Starts `onnxtrain ARGS` as rank `rank` of `size` the way torchrun does (RANK, WORLD_SIZE, LOCAL_RANK,
// MASTER_ADDR, MASTER_PORT), with its output in `log`; returns its pid.
inline pid_t start_torchrun_rank(int rank, int size, int port, const std::string& args, const fs::path& log) {
  const pid_t pid = fork();
  if (pid == 0) {
    setenv("RANK", std::to_string(rank).c_str(), 1);
    setenv("WORLD_SIZE", std::to_string(size).c_str(), 1);
    setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
    setenv("OMP_NUM_THREADS", "1", 1);
    // exec: the pid is onnxtrain's own, so that a test can kill it.
    const std::string command = "exec " + std::string(ONNXTRAIN_BINARY) + " " + args + " > " + log.string() + " 2>&1";
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

inline int wait_exit_code(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace onnxtrain::testing_support
