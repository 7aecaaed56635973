#include "simulator/recommend.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <tuple>

#include "graph/error.h"

namespace onnxtrain {
namespace {

std::vector<int> powers_of_two_up_to(int n) {
  std::vector<int> out;
  for (int p = 1; p <= n; p *= 2) out.push_back(p);
  return out;
}

}  // namespace

std::vector<StrategySpec> recommendation_candidates(int devices, int64_t batch) {
  std::vector<std::string> specs = {"single"};
  for (int r : powers_of_two_up_to(devices)) {
    if (r < 2) continue;
    const std::string rs = std::to_string(r);
    specs.insert(specs.end(), {"dp:" + rs, "cs:" + rs, "ps:" + rs + ":1", "ps:" + rs + ":2"});
  }
  for (int n : powers_of_two_up_to(devices)) {
    if (n < 2) continue;
    const std::string ns = std::to_string(n);
    for (int r : powers_of_two_up_to(devices / n)) {
      const std::string suffix = r > 1 ? "x" + std::to_string(r) : "";
      for (const char* kind : {"naive", "pipedream", "spectrain"})
        specs.push_back(std::string(kind) + ":" + ns + suffix);
      for (int m : {n, 2 * n, 4 * n})
        if (m <= batch) specs.push_back("gpipe:" + ns + "x" + std::to_string(m) + suffix);
    }
  }
  std::vector<StrategySpec> out;
  for (const std::string& s : specs) out.push_back(parse_strategy_specs(s, devices).front());
  return out;
}

std::string staleness_warning(const StrategySpec& s) {
  const int n = s.workers;
  if ((s.kind == "naive" || s.kind == "spectrain") && n >= 4)
    return s.kind +
           " diverged at 4 and 8 stages in the convergence study (README.md): prefer pipedream or fewer stages";
  if (s.kind == "naive" && n >= 2)
    return "naive computes with weights " + std::to_string(n - 1) + (n == 2 ? " update" : " updates") +
           " stale, without any correction";
  if (s.kind == "pipedream" && n >= 8)
    return "pipedream at 8 stages trained to lower accuracy in the convergence study (84.17%)";
  if (s.kind == "ps" && n >= 4)
    return "asynchronous: with " + std::to_string(n) +
           " workers pushes are stale; with 4 the convergence study "
           "diverged in about half the seeds at lr 0.04 (staleness 11-24)";
  return "";
}

size_t recommended_index(const std::vector<std::string>& staleness_warnings) {
  for (size_t i = 0; i < staleness_warnings.size(); ++i)
    if (staleness_warnings[i].empty()) return i;
  return 0;
}

std::string train_command(const std::string& model, const StrategySpec& strategy, int64_t batch,
                          const std::string& plan_path, bool cuda, bool processes, const std::string& data) {
  std::string cmd =
      processes ? "mpirun -np " + std::to_string(strategy.devices()) + " onnxtrain train " : "onnxtrain train ";
  cmd += model;
  if (!data.empty()) cmd += " --data " + data;
  cmd += " --batch " + std::to_string(batch);
  for (const std::string& a : strategy.train_args) cmd += " " + a;
  if (!plan_path.empty()) cmd += " --plan " + plan_path;
  if (cuda) cmd += " --device cuda";
  return cmd + " -o " + std::filesystem::path(model).stem().string() + ".trained.onnx";
}

Recommendation recommend(const Machine& machine, const ProfileAt& profiles, const SimulationSettings& settings) {
  Recommendation out;
  for (const StrategySpec& s : recommendation_candidates(machine.devices(), settings.batch)) {
    try {
      StrategySimulation sim = simulate_strategy(s, machine, profiles, settings);
      if (!sim.fits_memory) {
        out.left_out.push_back(s.spec + ": " + sim.limited_by);
        continue;
      }
      out.ranked.push_back({std::move(sim), staleness_warning(s)});
    } catch (const Error& e) {
      out.left_out.push_back(s.spec + ": " + e.message());
    }
  }
  // Fastest first; within 0.5% of each other (the same speed, for a model), no staleness risk first, then
  // the least memory.
  const auto key = [](const RankedStrategy& r) {
    const double rate = std::max(r.simulation.samples_per_s, 1e-300);
    return std::tuple(-std::floor(std::log(rate) / std::log(1.005)), !r.staleness_warning.empty(),
                      r.simulation.peak_memory);
  };
  std::stable_sort(out.ranked.begin(), out.ranked.end(),
                   [&](const RankedStrategy& a, const RankedStrategy& b) { return key(a) < key(b); });
  return out;
}

}  // namespace onnxtrain
