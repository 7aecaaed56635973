// The strategies `onnxtrain bench` measures and `onnxtrain simulate` plays, as written on their command
// lines (--strategies LIST), and the `onnxtrain train` options each one stands for:
//
//   single          one device (the CPU's threads)         --strategy single
//   dp:R            data parallelism over R replicas        --strategy dp --replicas R
//   cs:R            central storage, R replicas             --strategy dp --central-storage --replicas R
//   ps:W:S          parameter server: W workers, S shards   --strategy ps --replicas W --servers S
//   naive:N  pipedream:N  spectrain:N                       --strategy NAME --stages N
//   gpipe:NxM       N stages, M micro-batches               --strategy gpipe --stages N --micro-batches M
//   1f1b:NxM        the same flush in 1F1B order            --strategy 1f1b --stages N --micro-batches M
//   2bw:NxM         PipeDream-2BW, an update every M        --strategy 2bw --stages N --micro-batches M
//   naive:NxR  pipedream:NxR  spectrain:NxR  gpipe:NxMxR    hybrids: every stage on R replicas (N·R devices;
//                   over processes: mpirun -np N*R onnxtrain train --stages N --replicas R)
//   all             every one of them for --devices D (gpipe with M = 4, ps with one shard)
//
//   std::vector<StrategySpec> s = parse_strategy_specs("single,dp:2,gpipe:2x4", 2);
//   s[2].train_args == {"--strategy", "gpipe", "--stages", "2", "--micro-batches", "4"}
#pragma once

#include <string>
#include <vector>

namespace onnxtrain {

struct StrategySpec {
  std::string spec;                     // as given: "gpipe:2x4"
  std::string kind;                     // single | dp | cs | ps | naive | pipedream | spectrain | gpipe
  int workers = 1;                      // stages, replicas or ps workers (a hybrid's stages)
  int replicas = 1;                     // hybrids: replicas of every stage (devices = workers · replicas)
  int servers = 0;                      // ps: the shards
  int64_t micro_batches = 1;            // gpipe's M
  std::vector<std::string> train_args;  // what `onnxtrain train` is given for it
  bool is_pipeline() const;
  int devices() const { return workers * replicas; }
};

// Throws Error naming the item and the accepted forms (an unknown name, a count below 1).
std::vector<StrategySpec> parse_strategy_specs(const std::string& list, int devices);

}  // namespace onnxtrain
