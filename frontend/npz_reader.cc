// NumPy .npz: a zip archive (numpy.savez stores, numpy.savez_compressed deflates; both may write zip64
// extra fields) whose members NAME.npy are .npy files. The central directory gives each member's method,
// sizes and CRC-32; the data follows the member's local header.
#include <zlib.h>

#include <charconv>
#include <cstring>
#include <regex>

#include "frontend/dataset_readers.h"
#include "graph/error.h"
#include "graph/shape.h"

namespace onnxtrain {

namespace {

uint64_t little_endian(const std::string& bytes, std::size_t offset, int width) {
  if (offset > bytes.size() ||
      static_cast<std::size_t>(width) > bytes.size() - offset)  // offset may be any 64-bit value
    throw Error("truncated file: a zip record runs past the end of the file");
  uint64_t v = 0;
  for (int i = width - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(bytes[offset + i]);
  return v;
}

struct ZipMember {
  std::string name;
  uint16_t method = 0;
  uint32_t crc = 0;
  uint64_t compressed = 0, uncompressed = 0, local_offset = 0;
};

// Replaces the 0xFFFFFFFF fields of a central directory entry by its zip64 extra field (id 0x0001).
void apply_zip64_extra(const std::string& bytes, std::size_t extra, std::size_t extra_len, ZipMember& m) {
  for (std::size_t p = extra; p + 4 <= extra + extra_len;) {
    const uint64_t id = little_endian(bytes, p, 2), len = little_endian(bytes, p + 2, 2);
    if (id == 0x0001) {
      std::size_t q = p + 4;
      for (uint64_t* field : {&m.uncompressed, &m.compressed, &m.local_offset}) {
        if (*field == 0xFFFFFFFFu) {
          *field = little_endian(bytes, q, 8);
          q += 8;
        }
      }
    }
    p += 4 + len;
  }
}

std::vector<ZipMember> central_directory(const std::string& bytes) {
  // The end-of-central-directory record: signature 0x06054b50, at most 64 KiB of comment after it.
  std::size_t eocd = std::string::npos;
  for (std::size_t p = bytes.size() >= 22 ? bytes.size() - 22 : std::string::npos; p != std::string::npos; --p) {
    if (little_endian(bytes, p, 4) == 0x06054b50) {
      eocd = p;
      break;
    }
    if (p == 0 || bytes.size() - p > 22 + 65535) break;
  }
  if (eocd == std::string::npos) {
    throw Error(bytes.size() >= 4 && little_endian(bytes, 0, 4) == 0x04034b50
                    ? "truncated file: the zip archive has no end-of-central-directory record"
                    : "not an .npz file: expected a zip archive (magic PK\\3\\4)");
  }
  const uint64_t entries = little_endian(bytes, eocd + 10, 2);
  std::size_t p = little_endian(bytes, eocd + 16, 4);
  if (p == 0xFFFFFFFFu) throw Error("zip64 archives over 4 GiB are not supported: split the arrays");
  std::vector<ZipMember> members;
  for (uint64_t e = 0; e < entries; ++e) {
    if (little_endian(bytes, p, 4) != 0x02014b50) throw Error("corrupt zip archive: bad central directory entry");
    ZipMember m;
    m.method = static_cast<uint16_t>(little_endian(bytes, p + 10, 2));
    m.crc = static_cast<uint32_t>(little_endian(bytes, p + 16, 4));
    m.compressed = little_endian(bytes, p + 20, 4);
    m.uncompressed = little_endian(bytes, p + 24, 4);
    const std::size_t name_len = little_endian(bytes, p + 28, 2), extra_len = little_endian(bytes, p + 30, 2),
                      comment_len = little_endian(bytes, p + 32, 2);
    m.local_offset = little_endian(bytes, p + 42, 4);
    if (p + 46 + name_len > bytes.size()) throw Error("truncated file: a zip entry name runs past the end");
    m.name = bytes.substr(p + 46, name_len);
    apply_zip64_extra(bytes, p + 46 + name_len, extra_len, m);
    members.push_back(m);
    p += 46 + name_len + extra_len + comment_len;
  }
  return members;
}

std::string member_bytes(const std::string& bytes, const ZipMember& m) {
  const std::size_t local = m.local_offset;
  if (little_endian(bytes, local, 4) != 0x04034b50) throw Error("corrupt zip archive: bad local header of " + m.name);
  const std::size_t start = local + 30 + little_endian(bytes, local + 26, 2) + little_endian(bytes, local + 28, 2);
  if (start > bytes.size() || m.compressed > bytes.size() - start) {
    throw Error("truncated file: member " + m.name + " expected " + std::to_string(m.compressed) + " bytes, got " +
                std::to_string(bytes.size() > start ? bytes.size() - start : 0));
  }
  const std::string stored = bytes.substr(start, m.compressed);
  std::string data;
  if (m.method == 0) {
    data = stored;
  } else if (m.method == 8) {
    data = inflate_raw(stored, m.uncompressed, "member " + m.name);
  } else {
    throw Error("member " + m.name + " uses zip compression method " + std::to_string(m.method) +
                ": expected 0 (stored, numpy.savez) or 8 (deflated, numpy.savez_compressed)");
  }
  const uint32_t crc =
      static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size())));
  if (crc != m.crc) throw Error("member " + m.name + " fails its CRC-32 check (corrupt file)");
  return data;
}

}  // namespace

const Tensor* NpzArchive::find(const std::string& name) const {
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return &arrays[i];
  return nullptr;
}

NpzArchive read_npz(const std::string& path) {
  const std::string bytes = read_file_bytes(path);
  try {
    NpzArchive archive;
    for (const ZipMember& m : central_directory(bytes)) {
      if (!m.name.ends_with(".npy")) continue;
      archive.names.push_back(m.name.substr(0, m.name.size() - 4));
      archive.arrays.push_back(parse_npy_bytes(member_bytes(bytes, m), "member " + m.name));
    }
    return archive;
  } catch (Error& e) {
    e.in_file(path);
    throw;
  }
}

Tensor parse_npy_bytes(const std::string& bytes, const std::string& what) {
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0)
    throw Error(what + " is not .npy data (no \\x93NUMPY magic)");
  const int major = static_cast<unsigned char>(bytes[6]);
  const std::size_t header_start = major == 1 ? 10 : 12;
  if (major < 1 || major > 3 || bytes.size() < header_start)
    throw Error(what + ": unsupported .npy version " + std::to_string(major));
  const std::size_t header_len = little_endian(bytes, 8, major == 1 ? 2 : 4);
  if (header_start + header_len > bytes.size())
    throw Error("truncated file: the .npy header of " + what + " is cut off");
  // numpy itself refuses longer headers (np.load's max_header_size, numpy.lib.format's _MAX_HEADER_SIZE),
  // and std::regex recurses once per character: a 30 kB header overflowed the stack.
  constexpr std::size_t kMaxHeaderBytes = 10000;
  if (header_len > kMaxHeaderBytes)
    throw Error(what + ": the .npy header is " + std::to_string(header_len) + " bytes, more than numpy's limit of " +
                std::to_string(kMaxHeaderBytes) + " (corrupt?)");
  const std::string header = bytes.substr(header_start, header_len);
  std::smatch m;
  struct Descr {
    const char* text;
    DType dtype;
  };
  static const Descr kDescrs[] = {{"<f4", DType::Float32}, {"<f8", DType::Float64}, {"|u1", DType::UInt8},
                                  {"|i1", DType::Int8},    {"<i2", DType::Int16},   {"<u2", DType::UInt16},
                                  {"<i4", DType::Int32},   {"<u4", DType::UInt32},  {"<i8", DType::Int64},
                                  {"<u8", DType::UInt64},  {"|b1", DType::Bool}};
  DType dtype = DType::Undefined;
  if (std::regex_search(header, m, std::regex("'descr'\\s*:\\s*'([^']*)'"))) {
    for (const Descr& d : kDescrs)
      if (m[1] == d.text) dtype = d.dtype;
  }
  if (dtype == DType::Undefined) {
    throw Error(what + " has dtype '" + std::string(m.size() > 1 ? m[1].str() : "?") +
                "': expected little-endian float32/float64 inputs or integer labels");
  }
  if (std::regex_search(header, std::regex("'fortran_order'\\s*:\\s*True"))) {
    throw Error(what + " is Fortran-ordered: save it with np.ascontiguousarray");
  }
  if (!std::regex_search(header, m, std::regex("'shape'\\s*:\\s*\\(([^)]*)\\)")))
    throw Error(what + ": the .npy header has no shape");
  std::vector<int64_t> sizes;
  const std::string dims = m[1];
  const std::regex number("\\d+");
  // The data's size from the header, checked for overflow and against the bytes before any allocation.
  uint64_t nbytes = dtype_size(dtype);
  for (std::sregex_iterator it(dims.begin(), dims.end(), number), end; it != end; ++it) {
    int64_t size = 0;
    const std::string digits = it->str();
    const auto [last, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), size);
    if (ec != std::errc() || __builtin_mul_overflow(nbytes, static_cast<uint64_t>(size), &nbytes) ||
        nbytes > uint64_t{INT64_MAX})
      throw Error(what + ": the .npy header's shape (" + dims + ") holds more bytes than a file can");
    sizes.push_back(size);
  }
  const std::size_t data_start = header_start + header_len;
  if (bytes.size() - data_start < nbytes) {
    throw Error("truncated file: " + what + " " + Shape::of(sizes).to_string() + " expected " + std::to_string(nbytes) +
                " bytes, got " + std::to_string(bytes.size() - data_start));
  }
  Tensor t(dtype, sizes);
  if (t.nbytes() > 0) std::memcpy(t.raw(), bytes.data() + data_start, t.nbytes());
  return t;
}

}  // namespace onnxtrain
