// IDX files (the MNIST family): a big-endian header {0, 0, type 0x08 = uint8, rank} then rank sizes, then
// the bytes. Gzip or plain.
#include <cstdio>
#include <cstring>

#include "frontend/dataset_readers.h"
#include "graph/error.h"
#include "graph/shape.h"

namespace onnxtrain {

namespace {

uint32_t big_endian_u32(const std::string& bytes, std::size_t offset) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data() + offset);
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

std::string hex32(uint32_t v) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", v);
  return text;
}

// The sizes of an IDX file of uint8 elements and `rank` dims; the bytes follow at 4 + 4·rank.
std::vector<int64_t> idx_sizes(const std::string& bytes, uint32_t rank, const char* what) {
  const uint32_t expected_magic = 0x0800u | rank;
  if (bytes.size() < 4) {
    throw Error("truncated file: expected an IDX " + std::string(what) + " header of " + std::to_string(4 + 4 * rank) +
                " bytes, got " + std::to_string(bytes.size()));
  }
  const uint32_t magic = big_endian_u32(bytes, 0);
  if (magic != expected_magic) {
    throw Error("wrong magic number " + hex32(magic) + ": expected " + hex32(expected_magic) + " (IDX " + what +
                ", uint8, " + std::to_string(rank) + " dims)");
  }
  const std::size_t header = 4 + 4 * std::size_t{rank};
  if (bytes.size() < header) {
    throw Error("truncated file: expected an IDX header of " + std::to_string(header) + " bytes, got " +
                std::to_string(bytes.size()));
  }
  std::vector<int64_t> sizes;
  uint64_t count = 1;
  // Three 32-bit sizes can overflow 64 bits; int64 is checked at every step, so that a later 0 does not
  // hide a product that Tensor's signed count overflows on.
  bool overflow = false;
  for (uint32_t d = 0; d < rank; ++d) {
    sizes.push_back(big_endian_u32(bytes, 4 + 4 * d));
    overflow = overflow || __builtin_mul_overflow(count, static_cast<uint64_t>(sizes.back()), &count) ||
               count > uint64_t{INT64_MAX};
  }
  if (overflow || count > bytes.size() - header) {
    throw Error("truncated file: expected " +
                (overflow ? "the IDX sizes " + Shape::of(sizes).to_string() + ", more than 2^63"
                          : std::to_string(header + count)) +
                " bytes, got " + std::to_string(bytes.size()));
  }
  return sizes;
}

}  // namespace

Tensor read_idx_images(const std::string& path) {
  const std::string bytes = read_maybe_gzipped(path);
  try {
    const std::vector<int64_t> s = idx_sizes(bytes, 3, "images");
    Tensor images(DType::UInt8, {s[0], 1, s[1], s[2]});
    if (images.nbytes() > 0) std::memcpy(images.raw(), bytes.data() + 16, images.nbytes());
    return images;
  } catch (Error& e) {
    e.in_file(path);
    throw;
  }
}

Tensor read_idx_labels(const std::string& path) {
  const std::string bytes = read_maybe_gzipped(path);
  try {
    const std::vector<int64_t> s = idx_sizes(bytes, 1, "labels");
    Tensor labels(DType::Int64, {s[0]});
    auto out = labels.data<int64_t>();
    for (int64_t i = 0; i < s[0]; ++i) out[i] = static_cast<unsigned char>(bytes[8 + i]);
    return labels;
  } catch (Error& e) {
    e.in_file(path);
    throw;
  }
}

}  // namespace onnxtrain
