// Internal to the process-crossing comm backends (tcp_comm.cc, mpi_comm.cc): the byte layout of a
// point-to-point message, the descriptor every rank sends before a collective, the chunking of the
// all-reduce, and the error texts they share with the local backend.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "executor/comm/comm.h"
#include "graph/error.h"

namespace onnxtrain::comm_wire {

// [MessageHeader][int64 sizes x ndim][payload bytes]
struct MessageHeader {
  uint32_t magic = 0x4f545432;  // "OTT2"
  int32_t dtype = 0;
  int32_t empty = 0;  // a default-constructed Tensor (no buffer at all)
  int32_t ndim = 0;
  int64_t micro_batch = 0;
  int32_t kind = 0;
  int32_t index = 0;
};

inline std::size_t packed_size(const Tensor& t) {
  return sizeof(MessageHeader) + t.sizes().size() * sizeof(int64_t) + t.nbytes();
}

// Writes the message into `out` (packed_size(t) bytes).
inline void pack_message(const CommTag& tag, const Tensor& t, std::byte* out) {
  MessageHeader h;
  h.dtype = static_cast<int32_t>(t.dtype());
  h.empty = t.empty() ? 1 : 0;
  h.ndim = static_cast<int32_t>(t.sizes().size());
  h.micro_batch = tag.micro_batch;
  h.kind = tag.kind;
  h.index = tag.index;
  std::memcpy(out, &h, sizeof h);
  out += sizeof h;
  if (!t.sizes().empty()) std::memcpy(out, t.sizes().data(), t.sizes().size() * sizeof(int64_t));
  out += t.sizes().size() * sizeof(int64_t);
  if (t.nbytes() > 0) std::memcpy(out, t.raw(), t.nbytes());
}

inline std::vector<std::byte> pack_message(const CommTag& tag, const Tensor& t) {
  std::vector<std::byte> out(packed_size(t));
  pack_message(tag, t, out.data());
  return out;
}

// The tag and tensor of a packed message; Error (naming `from`) if the bytes are not one.
inline std::pair<CommTag, Tensor> unpack_message(const std::byte* data, std::size_t size, int from) {
  const auto bad = [&](const std::string& why) {
    return Error("malformed message from rank " + std::to_string(from) + ": " + why);
  };
  MessageHeader h;
  if (size < sizeof h) throw bad(std::to_string(size) + " bytes, shorter than a header");
  std::memcpy(&h, data, sizeof h);
  if (h.magic != MessageHeader{}.magic) throw bad("wrong magic number (a different onnxtrain version?)");
  if (h.ndim < 0 || static_cast<std::size_t>(h.ndim) > (size - sizeof h) / sizeof(int64_t))
    throw bad("bad rank " + std::to_string(h.ndim));
  std::vector<int64_t> sizes(static_cast<std::size_t>(h.ndim));
  if (h.ndim > 0) std::memcpy(sizes.data(), data + sizeof h, sizes.size() * sizeof(int64_t));
  const std::size_t offset = sizeof h + sizes.size() * sizeof(int64_t);
  const CommTag tag{.micro_batch = h.micro_batch, .kind = h.kind, .index = h.index};
  if (h.empty) {
    if (size != offset) throw bad("an empty tensor with a payload");
    return {tag, Tensor()};
  }
  for (int64_t s : sizes)
    if (s < 0) throw bad("negative size");
  Tensor t(static_cast<DType>(h.dtype), std::move(sizes));
  if (t.nbytes() != size - offset)
    throw bad("payload of " + std::to_string(size - offset) + " bytes for a tensor of " + std::to_string(t.nbytes()) +
              " bytes");
  if (t.nbytes() > 0) std::memcpy(t.raw(), data + offset, t.nbytes());
  return {tag, std::move(t)};
}

enum class CollectiveOp : int32_t { all_reduce_sum = 1, broadcast = 2, barrier = 3 };

inline const char* op_name(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::all_reduce_sum:
      return "all_reduce_sum";
    case CollectiveOp::broadcast:
      return "broadcast";
    case CollectiveOp::barrier:
      return "barrier";
  }
  return "?";
}

// What one rank called; every rank sends its descriptor to every other rank before a collective.
struct CollectiveDescriptor {
  int32_t op = 0;
  int32_t root = 0;
  uint64_t bytes = 0;
};

inline std::string describe(const CollectiveDescriptor& d) {
  switch (static_cast<CollectiveOp>(d.op)) {
    case CollectiveOp::all_reduce_sum:
      return "all_reduce_sum of " + std::to_string(d.bytes / sizeof(float)) + " floats";
    case CollectiveOp::broadcast:
      return "broadcast of " + std::to_string(d.bytes) + " bytes from rank " + std::to_string(d.root);
    case CollectiveOp::barrier:
      return "barrier";
  }
  return "an unknown collective (op " + std::to_string(d.op) + ")";
}

// "" when all ranks agree, else the same text on every rank (the local backend's wording).
inline std::string disagreement(const std::vector<CollectiveDescriptor>& all) {
  const CollectiveDescriptor& first = all[0];
  for (std::size_t r = 1; r < all.size(); ++r) {
    const CollectiveDescriptor& a = all[r];
    if (a.op != first.op || a.bytes != first.bytes ||
        (first.op == static_cast<int32_t>(CollectiveOp::broadcast) && a.root != first.root))
      return "ranks disagree: rank 0 called " + describe(first) + ", rank " + std::to_string(r) + " called " +
             describe(a);
  }
  return "";
}

// The all-reduce's chunks: rank j owns [offset[j], offset[j] + count[j]), the first n % size ranks one more.
struct Chunks {
  std::vector<std::size_t> offset, count;
};

inline Chunks split(std::size_t n, int size) {
  Chunks c;
  const std::size_t p = static_cast<std::size_t>(size), base = n / p, extra = n % p;
  std::size_t at = 0;
  for (std::size_t j = 0; j < p; ++j) {
    c.offset.push_back(at);
    c.count.push_back(base + (j < extra ? 1 : 0));
    at += c.count.back();
  }
  return c;
}

// "1, 2, 3": at most `shown` ranks, then " and N more", so an error about a world of 100000 ranks stays one
// short line.
inline std::string rank_list(const std::vector<int>& ranks, std::size_t shown = 8) {
  std::string s;
  for (std::size_t i = 0; i < ranks.size() && i < shown; ++i) s += (s.empty() ? "" : ", ") + std::to_string(ranks[i]);
  if (ranks.size() > shown) s += " and " + std::to_string(ranks.size() - shown) + " more";
  return s;
}

inline std::string ranks_phrase(const std::vector<int>& ranks) {
  return std::string("rank") + (ranks.size() == 1 ? " " : "s ") + rank_list(ranks);
}

inline std::string ms_text(std::chrono::milliseconds t) { return std::to_string(t.count()) + " ms"; }

inline void check_peer(int me, int size, int peer, const char* verb, const std::string& what) {
  if (peer < 0 || peer >= size)
    throw Error(what + ": rank " + std::to_string(me) + " cannot " + verb + " rank " + std::to_string(peer) +
                ": the group has ranks 0.." + std::to_string(size - 1));
}

// An abort reason travels in one small message; longer ones are cut here.
inline std::string clip_reason(const std::string& reason) {
  constexpr std::size_t max = 2000;
  return reason.size() <= max ? reason : reason.substr(0, max) + "...";
}

}  // namespace onnxtrain::comm_wire
