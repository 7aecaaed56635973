// A sub-group of a communicator's ranks as a Communicator of its own (what MPI_Comm_split gives), for
// layouts with two kinds of group — pipeline × data parallelism: the stages of one pipeline replica
// exchange activations in their pipeline group, the R replicas of one stage all-reduce gradients in
// their stage group. Built only on the parent's point-to-point messages, so it works over every backend.
//
//   // world of N·R ranks, rank = r·N + k (pipeline replica r, stage k):
//   auto pipeline = make_subgroup(*world, {r*N, r*N+1, ..., r*N+N-1}, 0);   // ranks 0..N-1 inside
//   auto stage = make_subgroup(*world, {k, N+k, ..., (R-1)·N+k}, 1);          // ranks 0..R-1 inside
//
// Point-to-point messages keep their tags (two groups never share a pair of parent ranks in this use,
// and when they do their tags must differ). Collectives are messages to and from the group's first rank
// with CommTag kind `kCollectiveKind + channel` and the collective's sequence number as micro_batch, so
// groups on different channels never mix. all_reduce_sum adds in group-rank order, like the backends.
// abort and aborted are the parent's. Blocking calls time out as the parent's do.
#pragma once

#include <memory>
#include <vector>

#include "executor/comm/comm.h"

namespace onnxtrain {

constexpr int kCollectiveKind = 16;

// `ranks`: the parent ranks of the group in group-rank order (distinct, containing parent.rank()).
// `channel`: distinguishes the collectives of groups that share parent ranks. The parent must outlive
// the group. Throws Error for an empty list, duplicates, out-of-range ranks or a list without this rank.
std::unique_ptr<Communicator> make_subgroup(Communicator& parent, std::vector<int> ranks, int channel);

}  // namespace onnxtrain
