// Language-model data from a flat token stream: `tokens:FILE` (.npy of integers, or a raw little-endian
// uint16 .bin as nanoGPT's prepare.py writes) and `text:FILE` (the file's bytes, tokens 0-255). The
// stream is cut into windows of seq_len + 1 tokens that overlap by one: a window's first seq_len tokens
// are the inputs, its last seq_len tokens the next-token targets. The windows start at an offset in
// [0, seq_len) drawn by the seed and follow each other in stream order, so the last rows are the
// stream's tail (what the data loader holds out for validation; Dataset::hold_out_tail).
#include <cstring>
#include <random>

#include "frontend/dataset_readers.h"
#include "frontend/npy.h"
#include "graph/error.h"

namespace onnxtrain {

namespace {

std::vector<int64_t> tokens_of_npy(const std::string& path) {
  const Tensor t = read_npy(path);
  if (!is_integer(t.dtype())) {
    throw Error("token ids are " + std::string(dtype_name(t.dtype())) + ": expected an integer array").in_file(path);
  }
  return t.to_int64();
}

std::vector<int64_t> tokens_of_uint16_bin(const std::string& path) {
  const std::string bytes = read_file_bytes(path);
  if (bytes.size() % 2 != 0) {
    throw Error("a .bin token file holds little-endian uint16 ids, but its size (" + std::to_string(bytes.size()) +
                " bytes) is odd")
        .in_file(path);
  }
  std::vector<int64_t> ids(bytes.size() / 2);
  const auto* b = reinterpret_cast<const unsigned char*>(bytes.data());
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = b[2 * i] | (int64_t{b[2 * i + 1]} << 8);
  return ids;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::vector<int64_t> read_token_stream(const std::string& path, TokenFormat format) {
  if (format == TokenFormat::TextBytes) {
    const std::string bytes = read_file_bytes(path);
    std::vector<int64_t> ids(bytes.size());
    for (std::size_t i = 0; i < bytes.size(); ++i) ids[i] = static_cast<unsigned char>(bytes[i]);
    return ids;
  }
  if (ends_with(path, ".npy")) return tokens_of_npy(path);
  if (ends_with(path, ".bin")) return tokens_of_uint16_bin(path);
  throw Error("tokens:FILE takes a .npy array of token ids or a raw uint16 .bin (nanoGPT's train.bin)").in_file(path);
}

RawDataset token_windows(const std::vector<int64_t>& stream, int64_t seq_len, uint64_t seed, const std::string& path) {
  if (seq_len < 1) {
    throw Error("a token stream needs --seq-len T (the tokens per sample; the model's sequence length)").in_file(path);
  }
  for (std::size_t i = 0; i < stream.size(); ++i) {
    if (stream[i] < 0)
      throw Error("token " + std::to_string(stream[i]) + " at position " + std::to_string(i) + " is negative")
          .in_file(path);
  }
  const auto length = static_cast<int64_t>(stream.size());
  if (length < seq_len + 1) {
    throw Error("the stream has " + std::to_string(length) + " tokens: too few for one window of --seq-len " +
                std::to_string(seq_len) + " plus its next token")
        .in_file(path);
  }
  // The offset shifts every window boundary, so different seeds cut the text differently.
  std::mt19937_64 rng(seed ^ 0x746f6b656e73ull);
  const int64_t room = (length - 1) % seq_len, offset = static_cast<int64_t>(rng() % static_cast<uint64_t>(room + 1));
  const int64_t windows = (length - 1 - offset) / seq_len;
  RawDataset raw{Tensor(DType::Int64, {windows, seq_len}), Tensor(DType::Int64, {windows, seq_len})};
  auto x = raw.inputs.data<int64_t>(), y = raw.labels.data<int64_t>();
  for (int64_t w = 0; w < windows; ++w) {
    const int64_t* start = stream.data() + offset + w * seq_len;
    std::memcpy(x.data() + w * seq_len, start, sizeof(int64_t) * seq_len);
    std::memcpy(y.data() + w * seq_len, start + 1, sizeof(int64_t) * seq_len);
  }
  return raw;
}

}  // namespace onnxtrain
