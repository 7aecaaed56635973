#include "simulator/event_simulation.h"

#include <algorithm>
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

int EventSimulation::add_task(SimTask task) {
  const int id = static_cast<int>(tasks_.size());
  ONNXTRAIN_CHECK(task.resource >= 0 && task.resource < static_cast<int>(resources_.size()),
                  "add_task: unknown resource");
  ONNXTRAIN_CHECK(task.seconds >= 0, "add_task: negative duration");
  ONNXTRAIN_CHECK(task.memory_pool < static_cast<int>(pools_.size()), "add_task: unknown memory pool");
  for (int a : task.after) ONNXTRAIN_CHECK(a >= 0 && a < id, "add_task: waits on a task not yet added");
  queues_[static_cast<size_t>(task.resource)].push_back(id);
  tasks_.push_back(std::move(task));
  ran_ = false;
  return id;
}

// A task waits only on tasks added before it, and follows only those on its resource: in the order of
// addition every task's predecessors are already placed, so one pass places them all.
void EventSimulation::run() {
  const size_t n = tasks_.size();
  start_.assign(n, 0);
  end_.assign(n, 0);
  std::vector<double> free_at(resources_.size(), 0);
  makespan_ = 0;
  for (size_t id = 0; id < n; ++id) {
    const SimTask& t = tasks_[id];
    double ready = free_at[static_cast<size_t>(t.resource)];
    for (int a : t.after) ready = std::max(ready, end_[static_cast<size_t>(a)]);
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
