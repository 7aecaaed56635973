// BatchFeed (executor/pipeline/stage_worker.h): the pipeline's mini-batches fetched once each, in order,
// held until every stage has released them; prefetch fetches ahead within the feed's mini-batches only,
// and a stage taking a fetched mini-batch does not wait for another stage's fetch in progress. Labelled
// `threads`: it also runs under ThreadSanitizer.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "executor/pipeline/stage_worker.h"

namespace onnxtrain {
namespace {

// A source whose k-th fetch holds k rows of the value k (so a batch names the fetch that made it).
struct CountingSource {
  std::atomic<int> fetches{0};
  BatchFeed::Batch operator()() {
    const int k = fetches++;
    BatchFeed::Batch b;
    b.rows = k;
    b.labels = Tensor(DType::Int64, {1});
    b.labels.data<int64_t>()[0] = k;
    return b;
  }
};

TEST(BatchFeedTest, FetchesEachMiniBatchOnceInOrder) {
  CountingSource source;
  BatchFeed feed([&] { return source(); }, /*first=*/10, /*count=*/3, /*consumers=*/2);
  EXPECT_EQ(feed.get(11).rows, 1);  // 10 and 11 fetched, in order
  EXPECT_EQ(source.fetches, 2);
  EXPECT_EQ(feed.get(10).rows, 0);
  EXPECT_EQ(feed.get(11).rows, 1);
  EXPECT_EQ(source.fetches, 2);
}

TEST(BatchFeedTest, PrefetchFetchesAheadWithinTheFeedOnly) {
  CountingSource source;
  BatchFeed feed([&] { return source(); }, /*first=*/0, /*count=*/2, /*consumers=*/1);
  feed.prefetch(1);
  EXPECT_EQ(source.fetches, 2);
  EXPECT_EQ(feed.get(1).rows, 1);  // the prefetched batch, not a new fetch
  EXPECT_EQ(source.fetches, 2);
  feed.prefetch(2);  // past the feed's mini-batches: the source's next batch belongs to a later train() call
  feed.prefetch(1);  // fetched already
  EXPECT_EQ(source.fetches, 2);
}

TEST(BatchFeedTest, AMiniBatchIsDroppedWhenEveryConsumerReleasedIt) {
  CountingSource source;
  BatchFeed feed([&] { return source(); }, /*first=*/0, /*count=*/2, /*consumers=*/2);
  feed.get(0);
  feed.release(0);
  EXPECT_EQ(feed.get(0).rows, 0);  // one consumer still holds it
  feed.release(0);
  EXPECT_THROW(feed.get(0), std::logic_error);  // an internal error: the pipeline never asks again
  feed.prefetch(0);                             // released: not fetched again
  EXPECT_EQ(source.fetches, 1);
}

TEST(BatchFeedTest, TakingAFetchedMiniBatchDoesNotWaitForAFetchInProgress) {
  std::mutex mutex;
  std::condition_variable cv;
  bool fetching_second = false, let_go = false;
  int fetches = 0;
  BatchFeed feed(
      [&] {
        std::unique_lock lock(mutex);
        BatchFeed::Batch b;
        b.rows = fetches++;
        if (b.rows == 1) {  // the second fetch waits until the main thread has taken the first batch
          fetching_second = true;
          cv.notify_all();
          cv.wait(lock, [&] { return let_go; });
        }
        return b;
      },
      /*first=*/0, /*count=*/2, /*consumers=*/2);
  EXPECT_EQ(feed.get(0).rows, 0);
  std::thread prefetching([&] { feed.prefetch(1); });
  {
    std::unique_lock lock(mutex);
    cv.wait(lock, [&] { return fetching_second; });
  }
  EXPECT_EQ(feed.get(0).rows, 0);  // would deadlock if the fetch held the feed's lock
  {
    std::lock_guard lock(mutex);
    let_go = true;
  }
  cv.notify_all();
  prefetching.join();
  EXPECT_EQ(feed.get(1).rows, 1);
}

}  // namespace
}  // namespace onnxtrain
