// Byte-level helpers of the dataset readers: whole files, gzip and raw deflate through zlib.
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "frontend/dataset_readers.h"
#include "graph/error.h"

namespace onnxtrain {

namespace {

// Inflates all of `input` with zlib's `window_bits` (16 + MAX_WBITS: gzip, -MAX_WBITS: raw deflate).
std::string inflate_all(const std::string& input, int window_bits, std::size_t size_hint, const std::string& what) {
  z_stream stream{};
  if (inflateInit2(&stream, window_bits) != Z_OK) throw Error("zlib could not start inflating " + what);
  std::string out(size_hint > 0 ? size_hint : input.size() * 4 + 1024, '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(input.data()));
  stream.avail_in = static_cast<uInt>(input.size());
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    if (stream.total_out == out.size()) out.resize(out.size() * 2);
    stream.next_out = reinterpret_cast<Bytef*>(out.data() + stream.total_out);
    stream.avail_out = static_cast<uInt>(out.size() - stream.total_out);
    rc = inflate(&stream, Z_NO_FLUSH);
    if (rc == Z_BUF_ERROR && stream.avail_in == 0) rc = Z_DATA_ERROR;  // input ended before the stream did
    if (rc != Z_OK && rc != Z_STREAM_END) {
      const std::string detail =
          rc == Z_DATA_ERROR && stream.avail_in == 0
              ? "truncated: the compressed data ends early"
              : std::string("corrupt compressed data (") + (stream.msg ? stream.msg : "zlib error") + ")";
      inflateEnd(&stream);
      throw Error(detail + " in " + what);
    }
  }
  out.resize(stream.total_out);
  inflateEnd(&stream);
  return out;
}

}  // namespace

std::string read_file_bytes(const std::string& path) {
  // An ifstream opens a folder and reads nothing: text:DIR said its "stream has 0 tokens".
  if (std::error_code ec; std::filesystem::is_directory(path, ec))
    throw Error("is a folder; expected a file").in_file(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open the file (missing?)").in_file(path);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::string read_maybe_gzipped(const std::string& path) {
  std::string bytes = read_file_bytes(path);
  if (bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
      static_cast<unsigned char>(bytes[1]) == 0x8b) {
    try {
      return inflate_all(bytes, 16 + MAX_WBITS, 0, "the gzip stream");
    } catch (Error& e) {
      e.in_file(path);
      throw;
    }
  }
  return bytes;
}

std::string inflate_raw(const std::string& compressed, std::size_t expected_size, const std::string& what) {
  // Deflate expands at most 1032-fold: a larger size in the zip directory is a lie, and allocating it
  // up front would let a few bytes claim gigabytes.
  constexpr std::size_t kMaxDeflateRatio = 1032;
  if (expected_size / kMaxDeflateRatio > compressed.size() + 1) {
    throw Error(what + " claims " + std::to_string(expected_size) + " bytes uncompressed, more than its " +
                std::to_string(compressed.size()) + " deflated bytes can hold (corrupt zip directory)");
  }
  std::string out = inflate_all(compressed, -MAX_WBITS, expected_size + 1, what);
  if (out.size() != expected_size) {
    throw Error(what + " inflates to " + std::to_string(out.size()) + " bytes, expected " +
                std::to_string(expected_size));
  }
  return out;
}

}  // namespace onnxtrain
