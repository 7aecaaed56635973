// The discrete-event core every simulated strategy shares: tasks on in-order resources.
//
// A resource is anything that does one thing at a time: a device's compute stream, one direction of a
// link, the ring an all-reduce runs on, a parameter-server shard. It runs its tasks in the order they
// were added (a stage walks its instruction list in order; a link carries its messages first come, first
// served), and a task starts when its resource has finished the task before it and every task it waits
// for (`after`) has ended: start = max(end of the resource's previous task, max end of `after`). A task
// of zero seconds marks a point in time (a Recv: the moment the stage has its input). A task can wait
// only on tasks added before it, so every set of tasks completes: the builders add them in an order in
// which each Send exists before its Recv (pipeline_simulation.cc walks the stages' programs that way).
//
// Concurrent transfers on one link are served one after another, not side by side: the last of them
// ends when fair sharing would end it (the same bytes through the same bandwidth), the first ones earlier.
//
// Processors: compute tasks of several resources may share a pool of processors (bench's pipeline stages
// beyond this machine's CPUs, which the operating system time-slices). Such a task also needs one of the
// pool's processors for its whole length: it starts at the earliest time, not before it could start
// otherwise, at which fewer than `count` of the pool's tasks run throughout it (a gap between tasks placed
// before it may take it). Tasks outside any pool, zero-second ones included, need none.
//
// Memory: a task may allocate bytes on a memory pool (a device) when it starts and release bytes when
// it ends; `peak_memory` replays those events in time order (releases before allocations at equal
// times) on top of each pool's resident bytes.
//
//   EventSimulation sim;
//   int gpu = sim.add_resource("stage 0"), link = sim.add_resource("link 0->1");
//   int f = sim.add_task({.resource = gpu, .seconds = 2e-3, .kind = TaskKind::forward, .micro_batch = 0});
//   sim.add_task({.resource = link, .seconds = 1e-4, .after = {f}, .kind = TaskKind::send});
//   sim.run();
//   double t = sim.makespan();
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace onnxtrain {

enum class TaskKind { forward, backward, update, send, recv, allreduce, push, pull };
const char* task_kind_name(TaskKind kind);  // "forward", ...

struct SimTask {
  int resource = 0;
  double seconds = 0;
  std::vector<int> after;  // task ids that must end before this one starts
  TaskKind kind = TaskKind::forward;
  int64_t micro_batch = -1;  // for traces: the (micro-)batch, -1 for none
  int64_t bytes = 0;         // transfers: the message size
  int processors = -1;       // the processor pool whose processor it occupies while it runs; -1: none
  int memory_pool = -1;      // the pool `allocate`/`release` apply to; -1: none
  int64_t allocate = 0;      // bytes taken on memory_pool when the task starts
  int64_t release = 0;       // bytes given back when it ends
};

class EventSimulation {
 public:
  int add_resource(std::string name);
  int add_memory_pool(std::string name, int64_t resident_bytes);
  int add_processors(int count);  // a pool of `count` >= 1 processors
  int add_task(SimTask task);     // returns its id; `after` must name tasks already added

  void run();  // computes every start and end

  double start(int task) const { return start_[static_cast<size_t>(task)]; }
  double end(int task) const { return end_[static_cast<size_t>(task)]; }
  double makespan() const { return makespan_; }
  // Seconds the resource spent running tasks (zero-second tasks add nothing).
  double busy_seconds(int resource) const;
  // The same within [from, to): each task counts for the part of it inside the window.
  double busy_between(int resource, double from, double to) const;
  int64_t peak_memory(int pool) const;
  // The most of the pool's tasks that ran at one time (at most its count).
  int processors_in_use(int pool) const;

  const std::vector<SimTask>& tasks() const { return tasks_; }
  const std::vector<std::string>& resource_names() const { return resources_; }
  const std::vector<int>& tasks_of(int resource) const { return queues_[static_cast<size_t>(resource)]; }

 private:
  std::vector<std::string> resources_;
  std::vector<std::vector<int>> queues_;  // per resource: its tasks in order
  std::vector<std::string> pools_;
  std::vector<int64_t> resident_;
  std::vector<int> processor_counts_;  // per processor pool
  std::vector<SimTask> tasks_;
  std::vector<double> start_, end_;
  double makespan_ = 0;
  bool ran_ = false;
};

}  // namespace onnxtrain
