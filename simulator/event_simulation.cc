#include "simulator/event_simulation.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "graph/error.h"

namespace onnxtrain {

const char* task_kind_name(TaskKind kind) {
  switch (kind) {
    case TaskKind::forward:
      return "forward";
    case TaskKind::backward:
      return "backward";
    case TaskKind::update:
      return "update";
    case TaskKind::send:
      return "send";
    case TaskKind::recv:
      return "recv";
    case TaskKind::allreduce:
      return "allreduce";
    case TaskKind::push:
      return "push";
    case TaskKind::pull:
      return "pull";
  }
  return "?";
}

int EventSimulation::add_resource(std::string name) {
  resources_.push_back(std::move(name));
  queues_.emplace_back();
  return static_cast<int>(resources_.size()) - 1;
}

int EventSimulation::add_memory_pool(std::string name, int64_t resident_bytes) {
  pools_.push_back(std::move(name));
  resident_.push_back(resident_bytes);
  return static_cast<int>(pools_.size()) - 1;
}

int EventSimulation::add_processors(int count) {
  ONNXTRAIN_CHECK(count >= 1, "add_processors: a pool needs at least one processor");
  processor_counts_.push_back(count);
  return static_cast<int>(processor_counts_.size()) - 1;
}

int EventSimulation::add_task(SimTask task) {
  const int id = static_cast<int>(tasks_.size());
  ONNXTRAIN_CHECK(task.resource >= 0 && task.resource < static_cast<int>(resources_.size()),
                  "add_task: unknown resource");
  ONNXTRAIN_CHECK(task.seconds >= 0, "add_task: negative duration");
  ONNXTRAIN_CHECK(task.memory_pool < static_cast<int>(pools_.size()), "add_task: unknown memory pool");
  ONNXTRAIN_CHECK(task.processors < static_cast<int>(processor_counts_.size()), "add_task: unknown processor pool");
  for (int a : task.after) ONNXTRAIN_CHECK(a >= 0 && a < id, "add_task: waits on a task not yet added");
  queues_[static_cast<size_t>(task.resource)].push_back(id);
  tasks_.push_back(std::move(task));
  ran_ = false;
  return id;
}

namespace {

using Interval = std::pair<double, double>;  // [start, end)

// The most intervals running at one time within [from, to).
int most_at_once(const std::vector<Interval>& busy, double from, double to) {
  std::vector<std::pair<double, int>> edges;  // (time, +1 start / -1 end); ends sort first at equal times
  for (const auto& [start, end] : busy) {
    if (start >= to || end <= from) continue;
    edges.emplace_back(std::max(start, from), +1);
    if (end < to) edges.emplace_back(end, -1);
  }
  std::sort(edges.begin(), edges.end());
  int now = 0, most = 0;
  for (const auto& [time, delta] : edges) most = std::max(most, now += delta);
  return most;
}

// The earliest start from `ready` at which fewer than `count` of `busy` run throughout [start, start +
// seconds): `ready` or the end of one of them (where the number running only falls). The latest end always
// fits, so there is one.
double earliest_fit(const std::vector<Interval>& busy, int count, double ready, double seconds) {
  std::vector<double> candidates{ready};
  for (const auto& [start, end] : busy)
    if (end > ready) candidates.push_back(end);
  std::sort(candidates.begin(), candidates.end());
  for (double at : candidates)
    if (most_at_once(busy, at, at + seconds) < count) return at;
  return candidates.back();
}

}  // namespace

// A task waits only on tasks added before it, and follows only those on its resource: in the order of
// addition every task's predecessors are already placed, so one pass places them all. A task in a processor
// pool then goes to the pool's earliest gap from there.
void EventSimulation::run() {
  const size_t n = tasks_.size();
  start_.assign(n, 0);
  end_.assign(n, 0);
  std::vector<double> free_at(resources_.size(), 0);
  std::vector<std::vector<Interval>> pool_busy(processor_counts_.size());
  // A resource's next task starts no earlier than its last one ended: intervals that end before every
  // resource with pool tasks still to place is free can no longer overlap anything, and are dropped.
  std::vector<int64_t> pool_tasks_left(resources_.size(), 0);
  for (const SimTask& t : tasks_)
    if (t.processors >= 0) ++pool_tasks_left[static_cast<size_t>(t.resource)];
  int64_t placed_in_pools = 0;
  makespan_ = 0;
  for (size_t id = 0; id < n; ++id) {
    const SimTask& t = tasks_[id];
    double ready = free_at[static_cast<size_t>(t.resource)];
    for (int a : t.after) ready = std::max(ready, end_[static_cast<size_t>(a)]);
    if (t.processors >= 0) {
      std::vector<Interval>& busy = pool_busy[static_cast<size_t>(t.processors)];
      if (t.seconds > 0) {
        ready = earliest_fit(busy, processor_counts_[static_cast<size_t>(t.processors)], ready, t.seconds);
        busy.emplace_back(ready, ready + t.seconds);
      }
      --pool_tasks_left[static_cast<size_t>(t.resource)];
      if (++placed_in_pools % 64 == 0) {
        double low = ready;
        for (size_t r = 0; r < resources_.size(); ++r)
          if (pool_tasks_left[r] > 0) low = std::min(low, free_at[r]);
        for (std::vector<Interval>& intervals : pool_busy)
          std::erase_if(intervals, [&](const Interval& i) { return i.second <= low; });
      }
    }
    start_[id] = ready;
    end_[id] = ready + t.seconds;
    free_at[static_cast<size_t>(t.resource)] = end_[id];
    makespan_ = std::max(makespan_, end_[id]);
  }
  ran_ = true;
}

double EventSimulation::busy_seconds(int resource) const {
  ONNXTRAIN_CHECK(ran_, "busy_seconds before run()");
  double busy = 0;
  for (int id : queues_[static_cast<size_t>(resource)]) busy += tasks_[static_cast<size_t>(id)].seconds;
  return busy;
}

double EventSimulation::busy_between(int resource, double from, double to) const {
  ONNXTRAIN_CHECK(ran_, "busy_between before run()");
  double busy = 0;
  for (int id : queues_[static_cast<size_t>(resource)])
    busy += std::max(0.0, std::min(end(id), to) - std::max(start(id), from));
  return busy;
}

int EventSimulation::processors_in_use(int pool) const {
  ONNXTRAIN_CHECK(ran_, "processors_in_use before run()");
  std::vector<Interval> busy;
  for (size_t i = 0; i < tasks_.size(); ++i)
    if (tasks_[i].processors == pool && tasks_[i].seconds > 0) busy.emplace_back(start_[i], end_[i]);
  return most_at_once(busy, 0, std::numeric_limits<double>::infinity());
}

int64_t EventSimulation::peak_memory(int pool) const {
  ONNXTRAIN_CHECK(ran_, "peak_memory before run()");
  std::vector<std::pair<double, int64_t>> events;  // (time, delta)
  for (size_t i = 0; i < tasks_.size(); ++i) {
    const SimTask& t = tasks_[i];
    if (t.memory_pool != pool) continue;
    if (t.allocate) events.emplace_back(start_[i], t.allocate);
    if (t.release) events.emplace_back(end_[i], -t.release);
  }
  // At equal times a release (negative delta) sorts first: memory freed at t is reusable at t.
  std::sort(events.begin(), events.end());
  int64_t now = resident_[static_cast<size_t>(pool)], peak = now;
  for (const auto& [time, delta] : events) peak = std::max(peak, now += delta);
  return peak;
}

}  // namespace onnxtrain
