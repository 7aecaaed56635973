// The grouped transport of pipeline stages in separate processes on GPUs (executor/pipeline/
// grouped_transport.h), over the host stand-in for NCCL (tests/rendezvous_links.h): headers go ahead and
// the receiver allocates from them; payloads land only when both sides have flushed; a flush gives up
// with a clear error when the communicator is aborted or its timeout passes; and the stand-in itself tells
// a deadlock (crossing sends posted alone) from the grouped exchange that avoids it. The pipelines over it:
// pipeline_trainer_test (TransfersInNcclStyleGroups..., UngroupedUnbufferedTransfersDeadlock1F1B).
#include "executor/pipeline/grouped_transport.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <exception>
#include <thread>

#include "executor/comm/local_comm.h"
#include "graph/error.h"
#include "tests/rendezvous_links.h"

namespace onnxtrain {
namespace {

using testing_support::RendezvousLinks;
using namespace std::chrono_literals;

Tensor counting(DType dtype, std::vector<int64_t> sizes, int first) {
  Tensor t(dtype, std::move(sizes));
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (dtype == DType::Float32) t.data<float>()[i] = static_cast<float>(first + i);
    if (dtype == DType::Int64) t.data<int64_t>()[i] = first + i;
  }
  return t;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.sizes() == b.sizes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

const CommTag kTag{.micro_batch = 2, .kind = CommTag::activation, .index = 0};

TEST(GroupedTransport, ReceiverAllocatesFromTheHeaderAndThePayloadLandsAtFlush) {
  auto group = make_local_group(2, 10s);
  RendezvousLinks links;
  GroupedTransport sender(*group[0], links.link(0), 10s), receiver(*group[1], links.link(1), 10s);
  const Tensor a = counting(DType::Float32, {2, 3}, 1), b = counting(DType::Int64, {4}, 7);
  const Tensor empty(DType::Float32, {0, 5});
  const CommTag tb{.micro_batch = 2, .kind = CommTag::activation, .index = 1};
  const CommTag te{.micro_batch = 2, .kind = CommTag::activation, .index = 2};
  std::exception_ptr error;
  std::thread stage0([&] {
    try {
      sender.send(1, kTag, {.host = a, .device = nullptr}, "a");
      sender.send(1, tb, {.host = b, .device = nullptr}, "b");
      sender.send(1, te, {.host = empty, .device = nullptr}, "empty");
      sender.flush();  // waits until the receiver has flushed too (nothing is buffered)
    } catch (...) {
      error = std::current_exception();
    }
  });
  StageValue ra, rb, re;
  EXPECT_TRUE(receiver.try_recv(0, kTag, "a", ra));
  EXPECT_TRUE(receiver.try_recv(0, tb, "b", rb));
  EXPECT_TRUE(receiver.try_recv(0, te, "empty", re));
  EXPECT_EQ(ra.host.dtype(), DType::Float32);
  EXPECT_EQ(ra.host.sizes(), a.sizes());
  EXPECT_EQ(rb.host.dtype(), DType::Int64);
  EXPECT_EQ(rb.host.sizes(), b.sizes());
  EXPECT_EQ(re.host.sizes(), empty.sizes());
  EXPECT_EQ(ra.host.data<float>()[5], 0.0f) << "the payload cannot have landed before the receiver's flush";
  receiver.flush();
  stage0.join();
  if (error) std::rethrow_exception(error);
  EXPECT_TRUE(same_bits(ra.host, a));
  EXPECT_TRUE(same_bits(rb.host, b));
  EXPECT_EQ(links.groups_posted(), 2);
  EXPECT_EQ(links.largest_group(), 3u);
}

TEST(GroupedTransport, AHeaderThatIsNotOneIsABrokenInvariant) {
  auto group = make_local_group(2, 10s);
  RendezvousLinks links;
  GroupedTransport receiver(*group[1], links.link(1), 10s);
  group[0]->send(1, kTag, Tensor(DType::Float32, {3}), "not a header");
  StageValue out;
  EXPECT_THROW(receiver.try_recv(0, kTag, "g", out), std::logic_error);
}

// The message of what `flush` threw (empty when it returned).
std::string flush_error(GroupedTransport& transport) {
  try {
    transport.flush();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A neighbour's failure reaches a stage waiting for its transfers through the communicator's abort, long
// before the timeout, and names the failed rank and its reason.
TEST(GroupedTransport, AFlushGivesUpWhenTheCommunicatorIsAborted) {
  auto group = make_local_group(2, 30s);
  RendezvousLinks links;
  GroupedTransport sender(*group[1], links.link(1), 30s);
  sender.send(0, kTag, {.host = counting(DType::Float32, {4}, 0), .device = nullptr}, "stage 1, activation 'x'");
  std::thread failing([&] {
    std::this_thread::sleep_for(50ms);
    group[0]->abort("stage 0 failed");
  });
  const auto start = std::chrono::steady_clock::now();
  const std::string error = flush_error(sender);
  failing.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  EXPECT_NE(error.find("abandoned stage 1, activation 'x'"), std::string::npos) << error;
  EXPECT_NE(error.find("stage 0 failed"), std::string::npos) << error;
}

TEST(GroupedTransport, AFlushThatNeverCompletesTimesOut) {
  auto group = make_local_group(2, 10s);
  RendezvousLinks links;
  GroupedTransport sender(*group[1], links.link(1), 100ms);
  sender.send(0, kTag, {.host = counting(DType::Float32, {4}, 0), .device = nullptr}, "stage 1, activation 'x'");
  const std::string error = flush_error(sender);
  EXPECT_NE(error.find("stage 1, activation 'x' did not complete in 100 ms"), std::string::npos) << error;
}

// Two ranks that each send to the other, then receive from it, then wait up to 200 ms: whether each
// rank's transfers completed, and what it received.
void crossing_exchange(RendezvousLinks& links, bool completed[2], Tensor received[2]) {
  std::thread threads[2];
  for (int r = 0; r < 2; ++r) {
    threads[r] = std::thread([&, r] {
      std::unique_ptr<PeerLink> link = links.link(r);
      link->send(1 - r, {.host = counting(DType::Float32, {3}, 10 * r), .device = nullptr});
      StageValue into = link->allocate(DType::Float32, {3});
      link->recv(1 - r, into);
      link->post();
      const auto deadline = std::chrono::steady_clock::now() + 200ms;
      while (!(completed[r] = link->done()) && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(1ms);
      received[r] = into.host;
    });
  }
  for (std::thread& t : threads) t.join();
}

TEST(RendezvousLinks, CrossingSendsPostedAloneDeadlock) {
  RendezvousLinks links(/*grouped=*/false);
  bool completed[2] = {false, false};
  Tensor received[2];
  crossing_exchange(links, completed, received);
  EXPECT_FALSE(completed[0]) << "rank 0's send completed although rank 1 never reached its recv";
  EXPECT_FALSE(completed[1]);
}

TEST(RendezvousLinks, CrossingSendsInOneGroupComplete) {
  RendezvousLinks links;
  bool completed[2] = {false, false};
  Tensor received[2];
  crossing_exchange(links, completed, received);
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(completed[r]) << "rank " << r;
    EXPECT_TRUE(same_bits(received[r], counting(DType::Float32, {3}, 10 * (1 - r)))) << "rank " << r;
  }
}

}  // namespace
}  // namespace onnxtrain
