#include "frontend/tensorboard_events.h"

#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "frontend/tensorboard_event.pb.h"
#include "graph/error.h"

namespace onnxtrain {
namespace {

constexpr std::array<uint32_t, 256> crc32c_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0x82F63B78u ^ (c >> 1) : c >> 1;  // the reflected polynomial
    table[i] = c;
  }
  return table;
}

constexpr std::array<uint32_t, 256> kCrc32cTable = crc32c_table();

std::span<const uint8_t> bytes_of(const void* data, size_t size) { return {static_cast<const uint8_t*>(data), size}; }

void put_le(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

uint64_t get_le(const std::string& in, size_t at, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value |= static_cast<uint64_t>(static_cast<uint8_t>(in[at + i])) << (8 * i);
  return value;
}

}  // namespace

uint32_t crc32c(std::span<const uint8_t> bytes) {
  uint32_t c = 0xFFFFFFFFu;
  for (uint8_t b : bytes) c = kCrc32cTable[(c ^ b) & 0xff] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(std::span<const uint8_t> bytes) {
  const uint32_t c = crc32c(bytes);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

TensorBoardEvents::TensorBoardEvents(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir))
    throw Error("--tensorboard " + dir + ": cannot make the folder for the event files" +
                (ec ? ": " + ec.message() : ": a file of that name exists"));
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  char host[256] = "localhost";
  ::gethostname(host, sizeof host - 1);
  // TensorBoard reads every file whose name holds "tfevents"; this is SummaryWriter's pattern.
  path_ = (std::filesystem::path(dir) / ("events.out.tfevents." + std::to_string(static_cast<int64_t>(now)) + "." +
                                         host + "." + std::to_string(::getpid())))
              .string();
  file_ = std::fopen(path_.c_str(), "wb");
  if (!file_) throw Error(path_ + ": cannot write the TensorBoard event file: " + std::strerror(errno));
  tensorboard::Event version;
  version.set_wall_time(now);
  version.set_file_version("brain.Event:2");
  write_record(version.SerializeAsString());
}

TensorBoardEvents::~TensorBoardEvents() {
  if (file_) std::fclose(file_);
}

void TensorBoardEvents::scalar(const std::string& tag, double value, int64_t step, double wall_time) {
  tensorboard::Event event;
  event.set_wall_time(wall_time);
  event.set_step(step);
  tensorboard::SummaryValue* v = event.mutable_summary()->add_value();
  v->set_tag(tag);
  v->set_simple_value(static_cast<float>(value));
  write_record(event.SerializeAsString());
}

void TensorBoardEvents::write_record(const std::string& bytes) {
  std::string record;
  put_le(record, bytes.size(), 8);
  put_le(record, masked_crc32c(bytes_of(record.data(), 8)), 4);
  record += bytes;
  put_le(record, masked_crc32c(bytes_of(bytes.data(), bytes.size())), 4);
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size() || std::fflush(file_) != 0)
    throw Error(path_ + ": writing the TensorBoard event file failed: " + std::strerror(errno));
}

std::vector<TensorBoardScalar> read_tensorboard_scalars(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot read the event file");
  const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<TensorBoardScalar> scalars;
  for (size_t at = 0; at < data.size();) {
    const std::string where = path + ": the record at byte " + std::to_string(at);
    if (data.size() - at < 12) throw Error(where + " is cut short");
    const uint64_t length = get_le(data, at, 8);
    if (get_le(data, at + 8, 4) != masked_crc32c(bytes_of(data.data() + at, 8)))
      throw Error(where + ": its length's checksum does not match");
    if (length > data.size() - at - 16) throw Error(where + " is cut short");
    const std::span<const uint8_t> body = bytes_of(data.data() + at + 12, length);
    if (get_le(data, at + 12 + length, 4) != masked_crc32c(body)) throw Error(where + ": its checksum does not match");
    tensorboard::Event event;
    if (!event.ParseFromArray(body.data(), static_cast<int>(body.size())))
      throw Error(where + " is not an Event protobuf");
    for (const tensorboard::SummaryValue& v : event.summary().value())
      scalars.push_back({v.tag(), event.step(), v.simple_value(), event.wall_time()});
    at += 16 + length;
  }
  return scalars;
}

}  // namespace onnxtrain
