#include "graph/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "graph/error.h"

namespace onnxtrain {
namespace fs = std::filesystem;

namespace {

std::atomic<unsigned> temp_counter{0};

// Paths that name a stream of this process (its stdout, an inherited descriptor) rather than a file to
// replace, even when the descriptor is a regular file (`onnxtrain ... --json /dev/stdout > out.json`).
bool is_process_stream(const std::string& path) {
  return path == "/dev/stdout" || path == "/dev/stderr" || path.starts_with("/dev/fd/") ||
         path.starts_with("/proc/self/fd/");
}

}  // namespace

AtomicFile::AtomicFile(std::string path, AtomicFileOptions options)
    : path_(std::move(path)), options_(std::move(options)) {
  if (path_.empty()) fail(ENOENT, "no file name");
  target_ = path_;
  std::error_code ec;
  if (!is_process_stream(path_) && fs::is_symlink(path_, ec)) {
    const fs::path resolved = fs::weakly_canonical(path_, ec);
    if (!ec) target_ = resolved.string();
  }
  struct stat st {};
  const bool exists = ::stat(target_.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode)) fail(EISDIR, "");
  if (is_process_stream(path_) || (exists && !S_ISREG(st.st_mode))) {
    // A device, a pipe, /dev/stdout: it cannot be replaced, so it is written in place (checked all the same).
    // Appended to this process's own stream (after what it printed there), truncated otherwise.
    const int mode = is_process_stream(path_) ? O_APPEND : O_TRUNC;
    if (is_process_stream(path_)) std::fflush(nullptr);  // what was printed comes first
    fd_ = ::open(target_.c_str(), O_WRONLY | mode | O_CLOEXEC | (exists ? 0 : O_CREAT), 0666);
    if (fd_ < 0) fail(errno, "cannot open it");
    return;
  }
  const fs::path parent = fs::path(target_).parent_path();
  if (options_.create_folders && !parent.empty()) {
    fs::create_directories(parent, ec);
    if (ec) fail(ec.value(), "cannot create the folder " + parent.string());
  }
  temp_ = !options_.temp_path.empty() ? options_.temp_path
                                      : target_ + ".tmp." + std::to_string(::getpid()) + "." +
                                            std::to_string(temp_counter.fetch_add(1, std::memory_order_relaxed));
  fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd_ < 0) {
    const int e = errno;
    temp_.clear();  // not ours to remove
    fail(e, "cannot create a temporary file beside it");
  }
  if (exists) (void)::fchmod(fd_, st.st_mode & 07777);  // the replacement keeps the old file's permissions
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !temp_.empty()) ::unlink(temp_.c_str());
}

void AtomicFile::fail(int error, const std::string& doing) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!temp_.empty()) ::unlink(temp_.c_str());
  temp_.clear();
  committed_ = true;  // nothing left to clean up
  throw Error("write failed: " + std::string(std::strerror(error)) + (doing.empty() ? "" : " (" + doing + ")"))
      .in_file(path_);
}

bool AtomicFile::try_write(const void* data, size_t n) noexcept {
  if (error_ != 0 || fd_ < 0) {
    if (error_ == 0) error_ = EBADF;
    return false;
  }
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd_, p, std::min<size_t>(n, size_t{1} << 30));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      error_ = w < 0 ? errno : EIO;
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

void AtomicFile::write(const void* data, size_t n) {
  if (!try_write(data, n)) fail(error_, "");
}

void AtomicFile::commit() {
  if (error_ != 0) fail(error_, "");
  if (fd_ < 0) fail(EBADF, "");
  if (options_.durable && !temp_.empty() && ::fsync(fd_) != 0) fail(errno, "syncing it to disk");
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0 && errno != EINTR) fail(errno, "closing it");
  if (temp_.empty()) {  // written in place
    committed_ = true;
    return;
  }
  if (::rename(temp_.c_str(), target_.c_str()) != 0) fail(errno, "renaming " + temp_ + " to it");
  committed_ = true;
  if (options_.durable) {
    const fs::path parent = fs::path(target_).parent_path();
    const std::string folder = parent.empty() ? "." : parent.string();
    const int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) fail(errno, "opening the folder " + folder + " to sync it");
    const int synced = ::fsync(dir), e = errno;
    ::close(dir);
    if (synced != 0 && e != EINVAL) fail(e, "syncing the folder " + folder);
  }
}

void write_file_atomically(const std::string& path, std::string_view bytes, const AtomicFileOptions& options) {
  AtomicFile file(path, options);
  file.write(bytes);
  file.commit();
}

}  // namespace onnxtrain
