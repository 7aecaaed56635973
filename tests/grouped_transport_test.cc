// The grouped transport of pipeline stages in separate processes on GPUs (executor/pipeline/
// grouped_transport.h), over the host stand-in for NCCL (tests/rendezvous_links.h): headers go ahead and
// the receiver allocates from them; payloads land only when both sides have flushed; and the stand-in
// itself tells a deadlock (crossing sends posted alone) from the grouped exchange that avoids it. The
// pipelines over it: pipeline_trainer_test (TransfersInNcclStyleGroups...).
#include "executor/pipeline/grouped_transport.h"

#include <gtest/gtest.h>

#include <chrono>
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

TEST(GroupedTransport, ReceiverAllocatesFromTheHeaderAndThePayloadLandsAtFlush) {
  auto group = make_local_group(2, 10s);
  RendezvousLinks links(10s);
  GroupedTransport sender(*group[0], links.link(0)), receiver(*group[1], links.link(1));
  const Tensor a = counting(DType::Float32, {2, 3}, 1), b = counting(DType::Int64, {4}, 7);
  const Tensor empty(DType::Float32, {0, 5});
  const CommTag ta{.micro_batch = 2, .kind = CommTag::activation, .index = 0};
  const CommTag tb{.micro_batch = 2, .kind = CommTag::activation, .index = 1};
  const CommTag te{.micro_batch = 2, .kind = CommTag::activation, .index = 2};
  std::exception_ptr error;
  std::thread stage0([&] {
    try {
      sender.send(1, ta, {.host = a, .device = nullptr}, "a");
      sender.send(1, tb, {.host = b, .device = nullptr}, "b");
      sender.send(1, te, {.host = empty, .device = nullptr}, "empty");
      sender.flush();  // waits (the stand-in's strictness) until the receiver has flushed too
    } catch (...) {
      error = std::current_exception();
    }
  });
  StageValue ra, rb, re;
  ASSERT_TRUE(receiver.try_recv(0, ta, "a", ra));
  ASSERT_TRUE(receiver.try_recv(0, tb, "b", rb));
  ASSERT_TRUE(receiver.try_recv(0, te, "empty", re));
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
  RendezvousLinks links(10s);
  GroupedTransport receiver(*group[1], links.link(1));
  const CommTag tag{.micro_batch = 0, .kind = CommTag::gradient, .index = 0};
  group[0]->send(1, tag, Tensor(DType::Float32, {3}), "not a header");
  StageValue out;
  EXPECT_THROW(receiver.try_recv(0, tag, "g", out), std::logic_error);
}

// Two ranks that each send to the other, then receive from it.
void crossing_exchange(RendezvousLinks& links, std::exception_ptr errors[2], Tensor received[2]) {
  std::thread threads[2];
  for (int r = 0; r < 2; ++r) {
    threads[r] = std::thread([&, r] {
      try {
        std::unique_ptr<PeerLink> link = links.link(r);
        link->send(1 - r, {.host = counting(DType::Float32, {3}, 10 * r), .device = nullptr});
        StageValue into = link->allocate(DType::Float32, {3});
        link->recv(1 - r, into);
        link->post();
        received[r] = into.host;
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (std::thread& t : threads) t.join();
}

TEST(RendezvousLinks, CrossingSendsPostedAloneDeadlock) {
  RendezvousLinks links(200ms, /*grouped=*/false);
  std::exception_ptr errors[2];
  Tensor received[2];
  crossing_exchange(links, errors, received);
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(errors[r]) << "rank " << r << " completed a send nobody received";
    try {
      std::rethrow_exception(errors[r]);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("deadlock"), std::string::npos) << e.what();
    }
  }
}

TEST(RendezvousLinks, CrossingSendsInOneGroupComplete) {
  RendezvousLinks links(10s);
  std::exception_ptr errors[2];
  Tensor received[2];
  crossing_exchange(links, errors, received);
  for (int r = 0; r < 2; ++r) {
    if (errors[r]) std::rethrow_exception(errors[r]);
    EXPECT_TRUE(same_bits(received[r], counting(DType::Float32, {3}, 10 * (1 - r)))) << "rank " << r;
  }
}

}  // namespace
}  // namespace onnxtrain
