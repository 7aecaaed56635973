#include "frontend/npy.h"

#include <charconv>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

#include "frontend/tensor_file.h"
#include "graph/atomic_file.h"
#include "graph/error.h"
#include "graph/shape.h"

namespace onnxtrain {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMaxHeaderBytes = 10000;  // numpy.lib.format's _MAX_HEADER_SIZE

struct NpyType {
  const char* descr;
  DType dtype;
};
constexpr NpyType kTypes[] = {{"<f4", DType::Float32}, {"<f8", DType::Float64}, {"<f2", DType::Float16},
                              {"|i1", DType::Int8},    {"|u1", DType::UInt8},   {"<i2", DType::Int16},
                              {"<u2", DType::UInt16},  {"<i4", DType::Int32},   {"<u4", DType::UInt32},
                              {"<i8", DType::Int64},   {"<u8", DType::UInt64},  {"|b1", DType::Bool}};

DType dtype_of_descr(const std::string& descr) {
  for (const NpyType& t : kTypes)
    if (descr == t.descr || (descr.size() == 3 && descr[0] == '=' && descr.substr(1) == std::string(t.descr).substr(1)))
      return t.dtype;
  throw Error("unsupported .npy dtype '" + descr +
              "' (onnxtrain reads little-endian float16/32/64, int8..64, uint8..64, bool)");
}

const char* descr_of(DType dtype) {
  for (const NpyType& t : kTypes)
    if (t.dtype == dtype) return t.descr;
  throw Error("cannot write a " + std::string(dtype_name(dtype)) + " tensor as .npy");
}

}  // namespace

Tensor read_npy(const std::string& path) {
  try {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error("cannot open the file (missing?)");
    std::ostringstream buffer;
    buffer << in.rdbuf();
    const std::string bytes = buffer.str();
    if (bytes.size() < 10 || bytes.compare(0, 6, kMagic, 6) != 0) throw Error("not a .npy file (no \\x93NUMPY magic)");
    const int major = static_cast<unsigned char>(bytes[6]);
    size_t header_len, header_start;
    if (major == 1) {
      header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
      header_start = 10;
    } else if (major == 2 || major == 3) {
      if (bytes.size() < 12) throw Error("truncated .npy header");
      uint32_t len;
      std::memcpy(&len, bytes.data() + 8, 4);
      header_len = len;
      header_start = 12;
    } else {
      throw Error(".npy format version " + std::to_string(major) + " is not supported");
    }
    if (header_start + header_len > bytes.size()) throw Error("truncated .npy header");
    // numpy itself refuses longer headers (np.load's max_header_size), and std::regex recurses once per
    // character: a 30 kB header overflowed the stack.
    if (header_len > kMaxHeaderBytes)
      throw Error("the .npy header is " + std::to_string(header_len) + " bytes, more than numpy's limit of " +
                  std::to_string(kMaxHeaderBytes) + " (corrupt?)");
    const std::string header = bytes.substr(header_start, header_len);
    std::smatch m;
    if (!std::regex_search(header, m, std::regex("'descr'\\s*:\\s*'([^']*)'")))
      throw Error("the .npy header has no descr");
    const DType dtype = dtype_of_descr(m[1]);
    if (std::regex_search(header, m, std::regex("'fortran_order'\\s*:\\s*True"))) {
      throw Error("Fortran-ordered arrays are not supported: save with np.ascontiguousarray");
    }
    if (!std::regex_search(header, m, std::regex("'shape'\\s*:\\s*\\(([^)]*)\\)")))
      throw Error("the .npy header has no shape");
    std::vector<int64_t> sizes;
    const std::string dims = m[1];
    const std::regex number("\\d+");
    // The data's size from the header, checked for overflow and against the file before any allocation.
    uint64_t nbytes = dtype_size(dtype);
    for (std::sregex_iterator it(dims.begin(), dims.end(), number), end; it != end; ++it) {
      int64_t size = 0;
      const std::string digits = it->str();
      const auto [last, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), size);
      // (within int64 at every step: a later 0 size must not hide a product Tensor cannot count)
      if (ec != std::errc() || __builtin_mul_overflow(nbytes, static_cast<uint64_t>(size), &nbytes) ||
          nbytes > uint64_t{INT64_MAX})
        throw Error("the .npy header's shape (" + dims + ") holds more bytes than a file can");
      sizes.push_back(size);
    }
    const size_t data_start = header_start + header_len;
    if (bytes.size() - data_start < nbytes) {
      throw Error("truncated: the header says " + Shape::of(sizes).to_string() + " " + std::string(dtype_name(dtype)) +
                  " (" + std::to_string(nbytes) + " bytes) but the file holds " +
                  std::to_string(bytes.size() - data_start));
    }
    Tensor t(dtype, sizes);
    if (t.nbytes() > 0) std::memcpy(t.raw(), bytes.data() + data_start, t.nbytes());
    return t;
  } catch (Error& e) {
    e.in_file(path);
    throw;
  }
}

void write_npy(const std::string& path, const Tensor& tensor) {
  std::string shape = "(";
  for (int64_t s : tensor.sizes()) shape += std::to_string(s) + ",";
  if (tensor.rank() > 1) shape.pop_back();
  shape += ")";
  std::string header =
      "{'descr': '" + std::string(descr_of(tensor.dtype())) + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Version 1.0: the magic, version, header length and header end on a multiple of 64 bytes.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  const uint16_t len = static_cast<uint16_t>(header.size());
  std::string head(kMagic, 6);
  head.push_back(1);
  head.push_back(0);
  head.push_back(static_cast<char>(len & 0xff));
  head.push_back(static_cast<char>(len >> 8));
  head += header;
  AtomicFile out(path);  // a full disk is an error, and never leaves a truncated file
  out.write(head);
  if (!tensor.empty()) out.write(tensor.raw(), tensor.nbytes());
  out.commit();
}

Tensor read_tensor_file(const std::string& path) {
  if (path.ends_with(".pb")) return read_tensor_proto_file(path);
  return read_npy(path);
}

}  // namespace onnxtrain
