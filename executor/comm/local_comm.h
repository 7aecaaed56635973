// The `local` communication backend: N ranks as threads of one process, sharing bounded in-memory
// queues (condition variables, after a short poll: graph/spin_then_wait.h). Used by the threaded pipeline
// executor, data-parallel replicas on threads and their tests.
//
//   auto group = make_local_group(4, std::chrono::seconds(60));   // group[r] belongs to rank r's thread
//   std::thread t([&] { group[1]->send(0, CommTag{.micro_batch = 0}, x, "stage 1 activation"); });
//   Tensor y = group[0]->recv(1, CommTag{.micro_batch = 0}, "stage 0 activation");
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "executor/comm/comm.h"

namespace onnxtrain {

// `size` communicators of one group. `capacity`: messages a (from, to) channel holds before send blocks;
// with tag matching, a sender blocked on a channel full of tags its receiver does not want yet waits
// until the timeout, so size it above the messages a schedule keeps in flight per pair. `timeout`: the
// longest any one blocking call waits. Throws Error for size < 1, capacity < 1 or timeout <= 0.
std::vector<std::unique_ptr<Communicator>> make_local_group(int size, std::chrono::milliseconds timeout,
                                                            int capacity = 64);

}  // namespace onnxtrain
