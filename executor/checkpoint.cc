#include "executor/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <sstream>
#include <utility>

#include "graph/atomic_file.h"

namespace onnxtrain {

namespace fs = std::filesystem;

// Tensor bytes are written and read as they lie in memory; the format says little-endian.
static_assert(std::endian::native == std::endian::little, "checkpoints assume a little-endian host");

namespace {

constexpr std::array<char, 14> kMagic = {'O', 'N', 'N', 'X', 'T', 'R', 'A', 'I', 'N', 'C', 'K', 'P', 'T', '\0'};
constexpr uint32_t kVersion = 1;
constexpr size_t kPrefixBytes = kMagic.size() + 4 + 8;  // magic, version, header length
constexpr const char* kFormat = "onnxtrain training checkpoint";
constexpr const char* kPrefix = "checkpoint-";
constexpr const char* kSuffix = ".otck";
constexpr const char* kTempMarker = ".tmp-";

[[noreturn]] void fail(const std::string& path, const std::string& message) { throw Error(message).in_file(path); }

bool is_count_signed(const nlohmann::json& v) { return v.is_number_integer() && v.get<int64_t>() >= 0; }

std::string errno_text() { return std::strerror(errno); }

uint32_t crc32_of(const std::byte* data, size_t n) {
  uLong crc = crc32(0L, Z_NULL, 0);
  while (n > 0) {  // zlib's length is 32-bit
    const uInt chunk = static_cast<uInt>(std::min<size_t>(n, size_t{1} << 30));
    crc = crc32(crc, reinterpret_cast<const Bytef*>(data), chunk);
    data += chunk;
    n -= chunk;
  }
  return static_cast<uint32_t>(crc);
}

template <typename T>
void put_le(std::string& out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((static_cast<uint64_t>(v) >> (8 * i)) & 0xff));
}
template <typename T>
T get_le(const unsigned char* p) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return static_cast<T>(v);
}

// An owned file descriptor.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  int release() { return std::exchange(fd, -1); }
};

// Reads exactly n bytes; false at end of file (the caller reports truncation).
bool read_all(int fd, void* data, size_t n, const std::string& path) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t r = ::read(fd, p, std::min<size_t>(n, size_t{1} << 30));
    if (r < 0) {
      if (errno == EINTR) continue;
      fail(path, "cannot read checkpoint: " + errno_text());
    }
    if (r == 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

std::optional<DType> dtype_from_name(const std::string& name) {
  for (int i = 0; i <= static_cast<int>(DType::Complex128); ++i) {
    const auto d = static_cast<DType>(i);
    if (dtype_name(d) == name) return d;
  }
  return std::nullopt;
}

bool storable(DType d) { return d != DType::Undefined && d != DType::String && dtype_size(d) > 0; }

std::string describe_tensor(const Tensor& t) {
  std::string s = std::string(dtype_name(t.dtype())) + " (";
  for (size_t i = 0; i < t.sizes().size(); ++i) s += (i ? "," : "") + std::to_string(t.sizes()[i]);
  return s + ")";
}

// The step in "checkpoint-<digits>.otck", or nullopt for any other name (temp files included).
std::optional<int64_t> step_of_file_name(const std::string& name) {
  const size_t prefix = std::strlen(kPrefix), suffix = std::strlen(kSuffix);
  if (name.size() <= prefix + suffix || name.compare(0, prefix, kPrefix) != 0 ||
      name.compare(name.size() - suffix, suffix, kSuffix) != 0)
    return std::nullopt;
  const std::string digits = name.substr(prefix, name.size() - prefix - suffix);
  if (digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
    return std::nullopt;
  return std::stoll(digits);
}

bool is_temp_file_name(const std::string& name) {
  const size_t marker = name.find(std::string(kSuffix) + kTempMarker);
  return name.rfind(kPrefix, 0) == 0 && marker != std::string::npos &&
         step_of_file_name(name.substr(0, marker + std::strlen(kSuffix))).has_value();
}

struct TableEntry {
  const std::string* name;
  const char* section;
  const Tensor* tensor;
};

// Writes the whole file through an AtomicFile (its temp name PATH.tmp-PID, which write_checkpoint's
// cleanup recognises): every write checked, fsync, rename, and an fsync of the folder. A failure (full
// disk, EFBIG) is "PATH: write failed: <strerror>" and leaves no partial file under PATH.
void write_file(const std::string& temp, const std::string& final_path, const std::string& prefix_and_header,
                const std::vector<TableEntry>& table) {
  AtomicFile file(final_path, {.durable = true, .temp_path = temp});
  file.write(prefix_and_header);
  for (const TableEntry& e : table)
    if (e.tensor->nbytes() > 0) file.write(e.tensor->raw(), e.tensor->nbytes());
  file.commit();
}

}  // namespace

std::string checkpoint_file_name(int64_t step) {
  char digits[32];
  std::snprintf(digits, sizeof digits, "%08lld", static_cast<long long>(step));
  return kPrefix + std::string(digits) + kSuffix;
}

namespace {

// Writes `c` to exactly `final_path` via a temp file, fsync, rename and a directory fsync (creating the
// directory when missing).
void write_checkpoint_file(const fs::path& final_path, const TrainingCheckpoint& c) {
  const std::string path = final_path.string();
  const std::string dir = final_path.parent_path().empty() ? "." : final_path.parent_path().string();
  if (c.step < 0 || c.next_epoch < 0 || c.next_batch < 0)
    fail(path, "cannot write a checkpoint with a negative step or loader position");

  // The tensor table: parameters, then optimizer state, each by name.
  std::vector<TableEntry> table;
  for (const auto& [name, t] : c.tensors) table.push_back({&name, "param", &t});
  for (const auto& [name, t] : c.optimizer_state) table.push_back({&name, "optimizer", &t});
  for (const auto& [name, t] : c.predictor_state) table.push_back({&name, "predictor", &t});
  nlohmann::json entries = nlohmann::json::array();
  uint64_t offset = 0;
  for (const TableEntry& e : table) {
    const Tensor& t = *e.tensor;
    if (!storable(t.dtype()) || (t.nbytes() == 0 && t.numel() != 0) ||
        t.nbytes() != static_cast<size_t>(t.numel()) * dtype_size(t.dtype()))
      fail(path, std::string("cannot store ") + e.section + " tensor '" + *e.name + "': its dtype is " +
                     std::string(dtype_name(t.dtype())) + " (only fixed-size dtypes can be checkpointed)");
    entries.push_back({{"name", *e.name},
                       {"section", e.section},
                       {"dtype", dtype_name(t.dtype())},
                       {"sizes", t.sizes()},
                       {"offset", offset},
                       {"bytes", t.nbytes()},
                       {"crc32", t.nbytes() ? crc32_of(t.raw(), t.nbytes()) : crc32_of(nullptr, 0)}});
    offset += t.nbytes();
  }
  nlohmann::json header = {{"format", kFormat},          {"step", c.step},    {"next_epoch", c.next_epoch},
                           {"next_batch", c.next_batch}, {"seed", c.seed},    {"config", c.config},
                           {"data_bytes", offset},       {"tensors", entries}};
  if (!c.shards.empty()) header["shards"] = c.shards;
  if (!c.export_info.empty()) header["export"] = c.export_info;
  std::string text;
  try {
    text = header.dump();  // strict: a name or config string that is not UTF-8 throws
  } catch (const nlohmann::json::exception& e) {
    fail(path, std::string("cannot write checkpoint header: ") + e.what());
  }

  std::string head(kMagic.data(), kMagic.size());
  put_le<uint32_t>(head, kVersion);
  put_le<uint64_t>(head, text.size());
  head += text;
  put_le<uint32_t>(head, crc32_of(reinterpret_cast<const std::byte*>(text.data()), text.size()));

  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail(path, "cannot create checkpoint directory " + dir + ": " + ec.message());
  write_file(path + kTempMarker + std::to_string(::getpid()), path, head, table);
}

}  // namespace

std::vector<std::string> shard_files(int64_t step, int ranks) {
  std::vector<std::string> out;
  for (int r = 0; r < ranks; ++r) {
    char name[32];
    std::snprintf(name, sizeof name, "rank-%05d", r);
    out.push_back(checkpoint_file_name(step) + ".shards/" + name + kSuffix);
  }
  return out;
}

std::string write_checkpoint_shard(const std::string& dir_arg, const TrainingCheckpoint& c, int rank) {
  const std::string dir = dir_arg.empty() ? "." : dir_arg;
  const fs::path path = fs::path(dir) / shard_files(c.step, rank + 1).back();
  if (!c.shards.empty()) fail(path.string(), "a shard cannot list shards of its own");
  write_checkpoint_file(path, c);
  return path.string();
}

void take_shard(const TrainingCheckpoint& all, int rank, int ranks, TrainingCheckpoint& shard) {
  shard.tensors.clear();
  shard.optimizer_state.clear();
  std::map<std::string, int> index_of;  // the tensors in name order
  for (const auto& [name, t] : all.tensors) {
    const int index = static_cast<int>(index_of.size());
    if (index % ranks == rank) shard.tensors[name] = t;
    index_of[name] = index;
  }
  for (const auto& [key, value] : all.optimizer_state) {
    // Its tensor: the longest name that the key extends by "/..." (names may hold '/' themselves, so "a/b/m"
    // is a/b's, not a's). None: the run's own entries (global_step, an fp16 run's loss_scaler/...), rank 0's.
    int owner = 0;
    for (size_t slash = key.rfind('/'); slash != std::string::npos && slash > 0; slash = key.rfind('/', slash - 1)) {
      if (auto it = index_of.find(key.substr(0, slash)); it != index_of.end()) {
        owner = it->second % ranks;
        break;
      }
    }
    if (owner == rank) shard.optimizer_state[key] = value;
  }
}

std::string write_checkpoint(const std::string& dir_arg, const TrainingCheckpoint& c, int keep_last) {
  const std::string dir = dir_arg.empty() ? "." : dir_arg;
  const fs::path final_path = fs::path(dir) / checkpoint_file_name(c.step);
  const std::string path = final_path.string();
  if (keep_last < 0) fail(path, "keep_last must be >= 0 (0 keeps every checkpoint)");
  for (const std::string& shard : c.shards) {  // a manifest comes after its shards
    std::error_code exists;
    if (!fs::is_regular_file(fs::path(dir) / shard, exists))
      fail(path, "cannot write the manifest: its shard " + shard + " is not there");
  }
  write_checkpoint_file(final_path, c);
  std::error_code ec;

  // Rotation, and temp files of writers killed mid-write (there is one writer per directory).
  std::vector<CheckpointFile> all = list_checkpoints(dir);
  if (keep_last > 0 && all.size() > static_cast<size_t>(keep_last)) {
    for (size_t i = 0; i + keep_last < all.size(); ++i)  // ascending steps: the oldest come first
      if (all[i].step != c.step) {
        fs::remove(all[i].path, ec);
        fs::remove_all(all[i].path + ".shards", ec);
      }
  }
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (is_temp_file_name(name)) fs::remove(entry.path(), ec);
    // Shards of an earlier step whose manifest never came (a rank died before it): nothing reads them.
    // Later steps' shards may be being written by faster ranks right now, so only earlier ones go.
    const std::string shards_suffix = ".shards";
    if (name.size() > shards_suffix.size() && name.ends_with(shards_suffix)) {
      const std::string manifest = name.substr(0, name.size() - shards_suffix.size());
      const std::optional<int64_t> step = step_of_file_name(manifest);
      if (step && *step < c.step && !fs::exists(fs::path(dir) / manifest, ec)) fs::remove_all(entry.path(), ec);
    }
  }
  return path;
}

// `manifest`: the manifest that lists `path` as a shard ("" when `path` is the file asked for). A shard
// never lists shards: following them would let a manifest that names itself recurse until the stack ends.
static TrainingCheckpoint read_checkpoint_file(const std::string& path, const std::string& manifest) {
  Fd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (f.fd < 0) fail(path, "cannot open checkpoint: " + errno_text());
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) fail(path, "cannot stat checkpoint: " + errno_text());
  if (!S_ISREG(st.st_mode)) fail(path, "not an onnxtrain checkpoint (not a regular file)");
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);

  std::array<unsigned char, kPrefixBytes> prefix{};
  const size_t got = static_cast<size_t>(std::min<uint64_t>(file_size, prefix.size()));
  if (!read_all(f.fd, prefix.data(), got, path)) fail(path, "truncated checkpoint (the file shrank while read)");
  const size_t magic_seen = std::min(got, kMagic.size());
  if (std::memcmp(prefix.data(), kMagic.data(), magic_seen) != 0 || got == 0)
    fail(path, "not an onnxtrain checkpoint (the file does not start with \"ONNXTRAINCKPT\")");
  if (got < prefix.size())
    fail(path, "truncated checkpoint: " + std::to_string(file_size) + " bytes, shorter than its fixed prefix");
  const auto version = get_le<uint32_t>(prefix.data() + kMagic.size());
  if (version != kVersion)
    fail(path, "unsupported checkpoint format version " + std::to_string(version) + " (this onnxtrain reads version " +
                   std::to_string(kVersion) + ")");
  const auto header_bytes = get_le<uint64_t>(prefix.data() + kMagic.size() + 4);
  if (header_bytes > file_size - kPrefixBytes || file_size - kPrefixBytes - header_bytes < 4)
    fail(path, "truncated checkpoint: the header claims " + std::to_string(header_bytes) + " bytes, the file has " +
                   std::to_string(file_size) + " in all");

  std::string text(header_bytes, '\0');
  std::array<unsigned char, 4> crc_bytes{};
  if (!read_all(f.fd, text.data(), text.size(), path) || !read_all(f.fd, crc_bytes.data(), 4, path))
    fail(path, "truncated checkpoint (the file shrank while read)");
  if (get_le<uint32_t>(crc_bytes.data()) != crc32_of(reinterpret_cast<const std::byte*>(text.data()), text.size()))
    fail(path, "corrupt checkpoint: header checksum mismatch");

  // From here on the header is what the writer wrote; a bad one is a writer bug or a forged file.
  auto bad = [&](const std::string& what) { fail(path, "bad checkpoint header: " + what); };
  nlohmann::json h;
  try {
    h = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    bad(std::string("not JSON: ") + e.what());
  }
  auto field = [&](const nlohmann::json& obj, const char* key, auto check, const char* expected,
                   const std::string& where) -> const nlohmann::json& {
    if (!obj.is_object() || !obj.contains(key) || !check(obj.at(key)))
      bad(where + "'" + key + "' is missing or not " + expected);
    return obj.at(key);
  };
  auto is_count = [](const nlohmann::json& v) {  // non-negative and within int64
    if (v.is_number_unsigned()) return v.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX);
    return v.is_number_integer() && v.get<int64_t>() >= 0;
  };
  auto is_u64 = [](const nlohmann::json& v) { return v.is_number_unsigned() || is_count_signed(v); };
  auto is_int = [](const nlohmann::json& v) { return v.is_number_integer(); };
  auto is_string = [](const nlohmann::json& v) { return v.is_string(); };
  auto is_array = [](const nlohmann::json& v) { return v.is_array(); };
  auto is_any = [](const nlohmann::json&) { return true; };
  if (!h.is_object() || h.value("format", "") != kFormat) bad("'format' is not \"" + std::string(kFormat) + "\"");

  TrainingCheckpoint c;
  c.step = field(h, "step", is_count, "a non-negative integer", "").get<int64_t>();
  c.next_epoch = field(h, "next_epoch", is_count, "a non-negative integer", "").get<int64_t>();
  c.next_batch = field(h, "next_batch", is_count, "a non-negative integer", "").get<int64_t>();
  c.seed = field(h, "seed", is_u64, "a non-negative integer", "").get<uint64_t>();
  c.config = field(h, "config", is_any, "JSON", "");
  if (h.contains("export")) {
    auto is_object = [](const nlohmann::json& v) { return v.is_object(); };
    c.export_info = field(h, "export", is_object, "an object", "");
  }
  const uint64_t data_bytes = field(h, "data_bytes", is_u64, "a non-negative integer", "").get<uint64_t>();
  const nlohmann::json& tensors = field(h, "tensors", is_array, "an array", "");

  const uint64_t data_start = kPrefixBytes + header_bytes + 4;
  const uint64_t data_present = file_size - data_start;
  if (data_present < data_bytes)
    fail(path, "truncated checkpoint: " + std::to_string(data_present) + " bytes of tensor data, the header lists " +
                   std::to_string(data_bytes));
  if (data_present > data_bytes)
    fail(path,
         "bad checkpoint: " + std::to_string(data_present - data_bytes) + " unexpected bytes after the tensor data");

  uint64_t expected_offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const nlohmann::json& e = tensors[i];
    const std::string where = "tensor " + std::to_string(i) + ": ";
    const auto name = field(e, "name", is_string, "a string", where).get<std::string>();
    const auto section = field(e, "section", is_string, "a string", where).get<std::string>();
    const std::string what = (section == "param"       ? "parameter tensor '"
                              : section == "predictor" ? "predictor state tensor '"
                                                       : "optimizer state tensor '") +
                             name + "'";
    if (section != "param" && section != "optimizer" && section != "predictor")
      bad(what + ": section \"" + section + "\" is unknown");
    const auto dtype_text = field(e, "dtype", is_string, "a string", where).get<std::string>();
    const std::optional<DType> dtype = dtype_from_name(dtype_text);
    if (!dtype || !storable(*dtype)) bad(what + ": dtype \"" + dtype_text + "\" cannot be stored");
    const nlohmann::json& sizes_json = field(e, "sizes", is_array, "an array", where);
    std::vector<int64_t> sizes;
    uint64_t numel = 1;
    bool overflow = false;
    for (const nlohmann::json& s : sizes_json) {
      if (!is_count(s)) bad(what + ": a size is not a non-negative integer");
      sizes.push_back(s.get<int64_t>());
      // within int64 at every step: a later 0 size must not hide a product Tensor cannot count
      overflow = overflow || __builtin_mul_overflow(numel, s.get<uint64_t>(), &numel) || numel > uint64_t{INT64_MAX};
    }
    const uint64_t offset = field(e, "offset", is_count, "a non-negative integer", where).get<uint64_t>();
    const uint64_t bytes = field(e, "bytes", is_count, "a non-negative integer", where).get<uint64_t>();
    const auto crc = field(e, "crc32", is_int, "an integer", where).get<uint64_t>();
    uint64_t expected_bytes = 0;
    if (overflow || __builtin_mul_overflow(numel, dtype_size(*dtype), &expected_bytes) || expected_bytes != bytes)
      bad(what + ": " + std::to_string(bytes) + " bytes do not hold its dtype and sizes");
    if (offset != expected_offset || bytes > data_bytes - offset)
      bad(what + ": its bytes are not where the table says (offset " + std::to_string(offset) + ")");
    expected_offset += bytes;

    std::map<std::string, Tensor>& into = section == "param"       ? c.tensors
                                          : section == "predictor" ? c.predictor_state
                                                                   : c.optimizer_state;
    if (into.count(name)) bad(what + " appears twice");
    Tensor t(*dtype, sizes);
    if (bytes > 0 && !read_all(f.fd, t.raw(), bytes, path))
      fail(path, "truncated checkpoint (the file shrank while read)");
    if (crc32_of(bytes ? t.raw() : nullptr, bytes) != crc)
      fail(path, "corrupt checkpoint: checksum mismatch in " + what);
    into.emplace(name, std::move(t));
  }
  if (expected_offset != data_bytes)
    bad("'data_bytes' is " + std::to_string(data_bytes) + ", the tensors hold " + std::to_string(expected_offset));
  if (h.contains("shards") && !manifest.empty())
    bad("'shards' in a shard of the manifest " + manifest + " (a shard holds tensors, never other shards)");
  if (h.contains("shards")) {
    const nlohmann::json& shards = field(h, "shards", is_array, "an array", "");
    const fs::path dir = fs::path(path).parent_path();
    for (const nlohmann::json& s : shards) {
      if (!s.is_string() || s.get<std::string>().find("..") != std::string::npos)
        bad("a shard name is not a relative file name");
      const std::string shard_path = (dir / s.get<std::string>()).string();
      std::error_code ec;
      if (!fs::exists(shard_path, ec))
        fail(path, "the checkpoint's shard " + s.get<std::string>() +
                       " is missing (deleted after the manifest was written?)");
      TrainingCheckpoint part = read_checkpoint_file(shard_path, path);
      if (part.step != c.step || !part.shards.empty())
        fail(shard_path, "shard of step " + std::to_string(part.step) + " listed by the manifest of step " +
                             std::to_string(c.step));
      const std::pair<std::map<std::string, Tensor>*, std::map<std::string, Tensor>*> sections[] = {
          {&part.tensors, &c.tensors},
          {&part.optimizer_state, &c.optimizer_state},
          {&part.predictor_state, &c.predictor_state}};
      for (auto [from, into] : sections)
        for (auto& [name, t] : *from)
          if (!into->emplace(name, std::move(t)).second) fail(shard_path, "tensor '" + name + "' is in two shards");
      c.shards.push_back(s.get<std::string>());
    }
  }
  return c;
}

TrainingCheckpoint read_checkpoint(const std::string& path) { return read_checkpoint_file(path, ""); }

std::vector<CheckpointFile> list_checkpoints(const std::string& dir) {
  std::vector<CheckpointFile> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    if (!entry.is_regular_file(ec)) continue;
    if (std::optional<int64_t> step = step_of_file_name(entry.path().filename().string()))
      out.push_back({*step, entry.path().string()});
  }
  std::sort(out.begin(), out.end(), [](const CheckpointFile& a, const CheckpointFile& b) {
    return a.step != b.step ? a.step < b.step : a.path < b.path;  // "01" and "1": same step, both listed
  });
  return out;
}

std::optional<std::string> latest_checkpoint(const std::string& dir) {
  std::vector<CheckpointFile> all = list_checkpoints(dir);
  if (all.empty()) return std::nullopt;
  return all.back().path;
}

void check_checkpoint_matches(const TrainingCheckpoint& c, const std::map<std::string, Tensor>& model_tensors,
                              const std::string& path) {
  std::vector<std::string> missing, extra, differ;
  for (const auto& [name, t] : model_tensors) {
    auto it = c.tensors.find(name);
    if (it == c.tensors.end())
      missing.push_back(name);
    else if (it->second.dtype() != t.dtype() || it->second.sizes() != t.sizes())
      differ.push_back(name + " is " + describe_tensor(it->second) + " there, " + describe_tensor(t) + " in the model");
  }
  for (const auto& [name, t] : c.tensors)
    if (!model_tensors.count(name)) extra.push_back(name);
  if (missing.empty() && extra.empty() && differ.empty()) return;

  std::ostringstream m;
  m << "checkpoint does not match the model (" << missing.size() << " missing, " << extra.size() << " extra, "
    << differ.size() << " with another dtype or shape): ";
  const char* sep = "";
  for (const std::string& d : differ) m << std::exchange(sep, "; ") << d;
  if (!missing.empty()) {
    m << std::exchange(sep, "; ") << "in the model but not the checkpoint:";
    for (size_t i = 0; i < missing.size(); ++i) m << (i ? ", " : " ") << missing[i];
  }
  if (!extra.empty()) {
    m << std::exchange(sep, "; ") << "in the checkpoint but not the model:";
    for (size_t i = 0; i < extra.size(); ++i) m << (i ? ", " : " ") << extra[i];
  }
  fail(path, m.str());
}

void copy_checkpoint_tensors(const TrainingCheckpoint& c, std::map<std::string, Tensor>& model_tensors,
                             const std::string& path) {
  check_checkpoint_matches(c, model_tensors, path);
  for (auto& [name, t] : model_tensors) {
    const Tensor& saved = c.tensors.at(name);
    if (saved.nbytes() > 0) std::memcpy(t.raw(), saved.raw(), saved.nbytes());
  }
}

void check_checkpoint_config(const TrainingCheckpoint& c, const nlohmann::json& expected, const std::string& path,
                             const std::vector<std::string>& ignore) {
  if (!c.config.is_object() || !expected.is_object()) {
    if (c.config != expected)
      fail(path,
           "checkpoint was written with other options: " + c.config.dump() + " there, " + expected.dump() + " here");
    return;
  }
  const std::set<std::string> skip(ignore.begin(), ignore.end());
  std::set<std::string> keys;
  for (const auto& [k, v] : c.config.items()) keys.insert(k);
  for (const auto& [k, v] : expected.items()) keys.insert(k);
  std::vector<std::string> differ;
  for (const std::string& k : keys) {
    if (skip.count(k)) continue;
    const bool there = c.config.contains(k), here = expected.contains(k);
    if (there && here && c.config.at(k) == expected.at(k)) continue;
    differ.push_back(k + " is " + (there ? c.config.at(k).dump() : "not set") + " there, " +
                     (here ? expected.at(k).dump() : "not set") + " here");
  }
  if (differ.empty()) return;
  std::string m = "checkpoint was written with other options (resume with the same ones): ";
  for (size_t i = 0; i < differ.size(); ++i) m += (i ? "; " : "") + differ[i];
  fail(path, m);
}

}  // namespace onnxtrain
