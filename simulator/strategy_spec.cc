#include "simulator/strategy_spec.h"

#include <charconv>

#include "executor/pipeline/schedule.h"
#include "graph/error.h"

namespace onnxtrain {
namespace {

constexpr char kForms[] =
    "single, dp:R, cs:R, ps:W:S, naive:N, pipedream:N, spectrain:N, gpipe:NxM, 1f1b:NxM, 2bw:NxM, the hybrids "
    "naive:NxR, pipedream:NxR, spectrain:NxR, gpipe:NxMxR, 1f1b:NxMxR, 2bw:NxMxR, or all (every one for the devices: "
    "bench's --devices, simulate's machine)";

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::string::size_type begin = 0;
  while (true) {
    const std::string::size_type end = text.find(separator, begin);
    parts.push_back(text.substr(begin, end == std::string::npos ? std::string::npos : end - begin));
    if (end == std::string::npos) return parts;
    begin = end + 1;
  }
}

int count_in(const std::string& item, const std::string& text) {
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 1 || value > 1024) {
    throw Error("--strategies: '" + item + "': '" + text + "' is not a count from 1 to 1024; expected " + kForms);
  }
  return value;
}

StrategySpec parse_one(const std::string& item) {
  const std::vector<std::string> parts = split(item, ':');
  const std::string& kind = parts[0];
  StrategySpec s{.spec = item, .kind = kind};
  auto expect_parts = [&](std::size_t n) {
    if (parts.size() != n) throw Error("--strategies: '" + item + "' has the wrong form; expected " + kForms);
  };
  if (kind == "single") {
    expect_parts(1);
    s.train_args = {"--strategy", "single"};
  } else if (kind == "dp" || kind == "cs") {
    expect_parts(2);
    s.workers = count_in(item, parts[1]);
    s.train_args = {"--strategy", "dp", "--replicas", parts[1]};
    if (kind == "cs") s.train_args.push_back("--central-storage");
  } else if (kind == "ps") {
    expect_parts(3);
    s.workers = count_in(item, parts[1]);
    s.servers = count_in(item, parts[2]);
    s.train_args = {"--strategy", "ps", "--replicas", parts[1], "--servers", parts[2]};
  } else if (is_pipeline_strategy(kind)) {
    expect_parts(2);
    const std::vector<std::string> sizes = split(parts[1], 'x');
    // M micro-batches per update (gpipe, 1f1b, 2bw): the strategy's row of the table says so.
    const StrategyTraits& traits = strategy_traits(parse_pipeline_strategy(kind));
    const bool gpipe = traits.flushes || traits.accumulates;
    if (sizes.size() != (gpipe ? 2u : 1u) && sizes.size() != (gpipe ? 3u : 2u))
      throw Error("--strategies: '" + item + "' has the wrong form; expected " + kForms);
    s.workers = count_in(item, sizes[0]);
    s.train_args = {"--strategy", kind, "--stages", sizes[0]};
    if (gpipe) {
      s.micro_batches = count_in(item, sizes[1]);
      s.train_args.insert(s.train_args.end(), {"--micro-batches", sizes[1]});
    }
    if (sizes.size() == (gpipe ? 3u : 2u)) {
      s.replicas = count_in(item, sizes.back());
      s.train_args.insert(s.train_args.end(), {"--replicas", sizes.back()});
    }
  } else {
    throw Error("--strategies: unknown strategy '" + item + "'; expected " + kForms);
  }
  return s;
}

}  // namespace

bool StrategySpec::is_pipeline() const { return is_pipeline_strategy(kind); }

std::vector<StrategySpec> parse_strategy_specs(const std::string& list, int devices) {
  std::vector<StrategySpec> strategies;
  for (const std::string& item : split(list, ',')) {
    if (item == "all") {
      const std::string d = std::to_string(devices);
      for (const std::string& expanded :
           std::vector<std::string>{"single", "dp:" + d, "cs:" + d, "ps:" + d + ":1", "naive:" + d, "pipedream:" + d,
                                    "spectrain:" + d, "gpipe:" + d + "x4"})
        strategies.push_back(parse_one(expanded));
    } else {
      strategies.push_back(parse_one(item));
    }
  }
  return strategies;
}

}  // namespace onnxtrain
