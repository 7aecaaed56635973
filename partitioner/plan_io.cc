#include "partitioner/plan_io.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "graph/atomic_file.h"
#include "graph/error.h"

namespace onnxtrain {
namespace {

using nlohmann::json;
using ojson = nlohmann::ordered_json;  // written in the order of the struct, "format" first

constexpr const char* kFormat = "onnxtrain-plan";
constexpr int kVersion = 1;

ojson link_json(const PlanLink& l) {
  return {{"name", l.name}, {"bandwidth", l.bandwidth}, {"latency_s", l.latency_s}};
}

ojson memory_json(const StageMemory& m) {
  return {{"weights", m.weights},       {"stashed_weights", m.stashed_weights},
          {"gradients", m.gradients},   {"optimizer_state", m.optimizer_state},
          {"state", m.state},           {"activations", m.activations},
          {"in_transit", m.in_transit}, {"total", m.total}};
}

ojson stage_json(const StagePlan& s) {
  return {{"index", s.index},
          {"first_node", s.first_node},
          {"end_node", s.end_node},
          {"first_name", s.first_name},
          {"last_name", s.last_name},
          {"replicas", s.replicas},
          {"devices", s.devices},
          {"weight_versions", s.weight_versions},
          {"in_flight", s.in_flight},
          {"parameter_bytes", s.parameter_bytes},
          {"flops", s.flops},
          {"compute_seconds", s.compute_seconds},
          {"send_forward_seconds", s.send_forward_seconds},
          {"send_backward_seconds", s.send_backward_seconds},
          {"allreduce_seconds", s.allreduce_seconds},
          {"time_seconds", s.time_seconds},
          {"idle_fraction", s.idle_fraction},
          {"bytes_sent_forward", s.bytes_sent_forward},
          {"bytes_sent_backward", s.bytes_sent_backward},
          {"memory", memory_json(s.memory)},
          {"fits_memory_cap", s.fits_memory_cap}};
}

// Field access with errors that say where: "plan.json: bad plan: stages[2].memory: 'total' is missing
// or not an integer".
class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void fail(const std::string& what) const { throw Error("bad plan: " + what).in_file(source_); }

  const json& at(const json& obj, const char* key, const std::string& where) const {
    if (!obj.is_object() || !obj.contains(key)) fail(where + "'" + key + "' is missing");
    return obj.at(key);
  }
  int64_t integer(const json& obj, const char* key, const std::string& where) const {
    const json& v = at(obj, key, where);
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      fail(where + "'" + key + "' is out of range");
    if (!v.is_number_integer()) fail(where + "'" + key + "' is not an integer");
    return v.get<int64_t>();
  }
  int small(const json& obj, const char* key, const std::string& where) const {
    const int64_t v = integer(obj, key, where);
    if (v < INT32_MIN || v > INT32_MAX) fail(where + "'" + key + "' is out of range");
    return static_cast<int>(v);
  }
  double number(const json& obj, const char* key, const std::string& where) const {
    const json& v = at(obj, key, where);
    if (!v.is_number()) fail(where + "'" + key + "' is not a number");
    return v.get<double>();
  }
  std::string string(const json& obj, const char* key, const std::string& where) const {
    const json& v = at(obj, key, where);
    if (!v.is_string()) fail(where + "'" + key + "' is not a string");
    return v.get<std::string>();
  }
  bool boolean(const json& obj, const char* key, const std::string& where) const {
    const json& v = at(obj, key, where);
    if (!v.is_boolean()) fail(where + "'" + key + "' is not true or false");
    return v.get<bool>();
  }
  const json& array(const json& obj, const char* key, const std::string& where) const {
    const json& v = at(obj, key, where);
    if (!v.is_array()) fail(where + "'" + key + "' is not an array");
    return v;
  }
  std::vector<int> ints(const json& obj, const char* key, const std::string& where) const {
    std::vector<int> out;
    for (const json& v : array(obj, key, where)) {
      if (!v.is_number_integer() || v.get<int64_t>() < INT32_MIN || v.get<int64_t>() > INT32_MAX)
        fail(where + "'" + key + "' holds something other than integers");
      out.push_back(v.get<int>());
    }
    return out;
  }
  PlanLink link(const json& obj, const char* key, const std::string& where) const {
    const json& l = at(obj, key, where);
    const std::string w = where + key + ": ";
    return {string(l, "name", w), number(l, "bandwidth", w), number(l, "latency_s", w)};
  }

 private:
  std::string source_;
};

}  // namespace

std::string plan_to_json(const Plan& p) {
  const PlanOptions& o = p.options;
  ojson stages = ojson::array();
  for (const StagePlan& s : p.stages) stages.push_back(stage_json(s));
  const ojson doc = {{"format", kFormat},
                     {"version", kVersion},
                     {"model", p.model},
                     {"device", p.device},
                     {"batch", p.batch},
                     {"nodes", p.node_names},
                     {"user_split", p.user_split},
                     {"options",
                      {{"stages", o.stages},
                       {"schedule", pipeline_strategy_name(o.schedule)},
                       {"micro_batches", o.micro_batches},
                       {"replicas", o.replicas},
                       {"devices", o.devices},
                       {"link", link_json(o.link)},
                       {"allreduce_link", link_json(o.allreduce_link)},
                       {"optimizer_slots", o.optimizer_slots},
                       {"prediction_average", o.prediction_average},
                       {"prediction_metrics", o.prediction_metrics},
                       {"memory_cap", o.memory_cap},
                       {"gradients_into_sum", o.gradients_into_sum},
                       {"update_writes_working", o.update_writes_working}}},
                     {"stages", stages},
                     {"predicted",
                      {{"bottleneck_seconds", p.bottleneck_seconds},
                       {"single_device_seconds", p.single_device_seconds},
                       {"makespan_seconds", p.makespan_seconds},
                       {"throughput", p.throughput},
                       {"steady_throughput", p.steady_throughput},
                       {"single_device_throughput", p.single_device_throughput},
                       {"speedup", p.speedup},
                       {"steady_speedup", p.steady_speedup},
                       {"bubble_fraction", p.bubble_fraction},
                       {"utilisation", p.utilisation},
                       {"balance", p.balance},
                       {"fits_memory_cap", p.fits_memory_cap}}}};
  try {
    return doc.dump(2) + "\n";
  } catch (const ojson::exception& e) {  // a node name that is not UTF-8
    throw Error(std::string("cannot write the plan as JSON: ") + e.what());
  }
}

Plan plan_from_json(std::string_view text, const std::string& source) {
  const Reader r(source);
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    r.fail(std::string("not JSON: ") + e.what());
  }
  if (!doc.is_object() || !doc.contains("format") || doc["format"] != kFormat)
    r.fail(std::string("not an onnxtrain plan ('format' is not \"") + kFormat + "\")");
  if (const int64_t v = r.integer(doc, "version", ""); v != kVersion)
    r.fail("unsupported plan version " + std::to_string(v) + " (this onnxtrain reads version " +
           std::to_string(kVersion) + ")");
  Plan p;
  p.model = r.string(doc, "model", "");
  p.device = r.string(doc, "device", "");
  p.batch = r.integer(doc, "batch", "");
  for (const json& name : r.array(doc, "nodes", "")) {
    if (!name.is_string()) r.fail("'nodes' holds something other than names");
    p.node_names.push_back(name.get<std::string>());
  }
  p.user_split = r.boolean(doc, "user_split", "");

  const json& o = r.at(doc, "options", "");
  const std::string ow = "options: ";
  PlanOptions& opt = p.options;
  opt.stages = r.small(o, "stages", ow);
  try {
    opt.schedule = parse_pipeline_strategy(r.string(o, "schedule", ow));
  } catch (const Error& e) {
    r.fail(ow + e.message());
  }
  opt.micro_batches = r.integer(o, "micro_batches", ow);
  opt.replicas = r.ints(o, "replicas", ow);
  opt.devices = r.small(o, "devices", ow);
  opt.link = r.link(o, "link", ow);
  opt.allreduce_link = r.link(o, "allreduce_link", ow);
  opt.optimizer_slots = r.small(o, "optimizer_slots", ow);
  // Absent from plans written before they existed: the defaults.
  if (o.contains("prediction_average")) opt.prediction_average = r.boolean(o, "prediction_average", ow);
  if (o.contains("prediction_metrics")) opt.prediction_metrics = r.boolean(o, "prediction_metrics", ow);
  opt.memory_cap = r.integer(o, "memory_cap", ow);
  if (o.contains("gradients_into_sum")) opt.gradients_into_sum = r.boolean(o, "gradients_into_sum", ow);
  if (o.contains("update_writes_working")) opt.update_writes_working = r.boolean(o, "update_writes_working", ow);

  const json& stages = r.array(doc, "stages", "");
  const int64_t n = static_cast<int64_t>(p.node_names.size());
  if (opt.stages < 1 || static_cast<int64_t>(stages.size()) != opt.stages)
    r.fail("'stages' lists " + std::to_string(stages.size()) + " stages, options.stages says " +
           std::to_string(opt.stages));
  int64_t next = 0;
  for (size_t k = 0; k < stages.size(); ++k) {
    const json& j = stages[k];
    const std::string w = "stages[" + std::to_string(k) + "]: ";
    StagePlan s;
    s.index = r.small(j, "index", w);
    s.first_node = r.integer(j, "first_node", w);
    s.end_node = r.integer(j, "end_node", w);
    // The executor trusts these ranges: they must tile the nodes in order, each stage non-empty.
    if (s.index != static_cast<int>(k)) r.fail(w + "'index' is " + std::to_string(s.index));
    if (s.first_node != next || s.end_node <= s.first_node || s.end_node > n)
      r.fail(w + "nodes [" + std::to_string(s.first_node) + ", " + std::to_string(s.end_node) +
             ") do not continue the previous stage (expected to start at " + std::to_string(next) + ", end by " +
             std::to_string(n) + ", non-empty)");
    next = s.end_node;
    s.first_name = r.string(j, "first_name", w);
    s.last_name = r.string(j, "last_name", w);
    if (s.first_name != p.node_names[static_cast<size_t>(s.first_node)] ||
        s.last_name != p.node_names[static_cast<size_t>(s.end_node - 1)])
      r.fail(w + "first/last names '" + s.first_name + "'/'" + s.last_name + "' are not nodes " +
             std::to_string(s.first_node) + " and " + std::to_string(s.end_node - 1) + " of 'nodes'");
    s.replicas = r.small(j, "replicas", w);
    s.devices = r.ints(j, "devices", w);
    if (s.replicas < 1 || s.devices.size() != static_cast<size_t>(s.replicas))
      r.fail(w + std::to_string(s.replicas) + " replicas but " + std::to_string(s.devices.size()) + " devices");
    s.weight_versions = r.small(j, "weight_versions", w);
    s.in_flight = r.small(j, "in_flight", w);
    s.parameter_bytes = r.integer(j, "parameter_bytes", w);
    s.flops = r.number(j, "flops", w);
    s.compute_seconds = r.number(j, "compute_seconds", w);
    s.send_forward_seconds = r.number(j, "send_forward_seconds", w);
    s.send_backward_seconds = r.number(j, "send_backward_seconds", w);
    s.allreduce_seconds = r.number(j, "allreduce_seconds", w);
    s.time_seconds = r.number(j, "time_seconds", w);
    s.idle_fraction = r.number(j, "idle_fraction", w);
    s.bytes_sent_forward = r.integer(j, "bytes_sent_forward", w);
    s.bytes_sent_backward = r.integer(j, "bytes_sent_backward", w);
    const json& m = r.at(j, "memory", w);
    const std::string mw = w + "memory: ";
    s.memory = {.weights = r.integer(m, "weights", mw),
                .stashed_weights = r.integer(m, "stashed_weights", mw),
                .gradients = r.integer(m, "gradients", mw),
                .optimizer_state = r.integer(m, "optimizer_state", mw),
                .state = r.integer(m, "state", mw),
                .activations = r.integer(m, "activations", mw),
                // plans written before 2026-12-02 folded it into activations
                .in_transit = m.contains("in_transit") ? r.integer(m, "in_transit", mw) : 0,
                .total = r.integer(m, "total", mw)};
    s.fits_memory_cap = r.boolean(j, "fits_memory_cap", w);
    p.stages.push_back(std::move(s));
  }
  if (next != n) r.fail("the stages cover nodes [0, " + std::to_string(next) + ") of " + std::to_string(n));

  const json& pr = r.at(doc, "predicted", "");
  const std::string pw = "predicted: ";
  p.bottleneck_seconds = r.number(pr, "bottleneck_seconds", pw);
  p.single_device_seconds = r.number(pr, "single_device_seconds", pw);
  p.makespan_seconds = r.number(pr, "makespan_seconds", pw);
  p.throughput = r.number(pr, "throughput", pw);
  p.steady_throughput = r.number(pr, "steady_throughput", pw);
  p.single_device_throughput = r.number(pr, "single_device_throughput", pw);
  p.speedup = r.number(pr, "speedup", pw);
  p.steady_speedup = r.number(pr, "steady_speedup", pw);
  p.bubble_fraction = r.number(pr, "bubble_fraction", pw);
  p.utilisation = r.number(pr, "utilisation", pw);
  p.balance = r.number(pr, "balance", pw);
  p.fits_memory_cap = r.boolean(pr, "fits_memory_cap", pw);
  return p;
}

void write_plan(const Plan& plan, const std::string& path) {
  write_file_atomically(path, plan_to_json(plan));  // "PATH: write failed: ..." rather than a truncated plan
}

Plan read_plan(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(std::string("cannot open the plan: ") + std::strerror(errno)).in_file(path);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error("cannot read the plan").in_file(path);
  return plan_from_json(text.str(), path);
}

void check_plan_matches(const Plan& plan, std::span<const std::string> node_names, const std::string& source) {
  const std::string model = plan.model.empty() ? "another model" : "model '" + plan.model + "'";
  if (plan.node_names.size() != node_names.size())
    throw Error("the plan was made for " + model + " with " + std::to_string(plan.node_names.size()) +
                " nodes; this model has " + std::to_string(node_names.size()))
        .in_file(source);
  for (size_t i = 0; i < node_names.size(); ++i)
    if (plan.node_names[i] != node_names[i])
      throw Error("the plan was made for " + model + ": its node " + std::to_string(i) + " is '" + plan.node_names[i] +
                  "', this model's is '" + node_names[i] + "'")
          .in_file(source);
}

Plan read_plan(const std::string& path, std::span<const std::string> node_names) {
  Plan p = read_plan(path);
  check_plan_matches(p, node_names, path);
  return p;
}

}  // namespace onnxtrain
