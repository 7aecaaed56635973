// Internal to tcp_comm.cc: the TCP backend's rendezvous (the protocol is described in tcp_comm.h).
#pragma once

#include <chrono>
#include <vector>

#include "executor/comm/tcp_comm.h"

namespace onnxtrain {

// Connects rank rv.rank to every other rank of rv.size (> 1): fds[r] is the connection to rank r, -1 for
// this rank. Waits up to `connect_timeout` for the others; throws Error naming the master address and
// the ranks missing (having closed what it opened).
std::vector<int> connect_tcp_mesh(const TcpRendezvous& rv, std::chrono::milliseconds connect_timeout);

}  // namespace onnxtrain
