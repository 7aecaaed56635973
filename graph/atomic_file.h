// Writing a file whole or not at all, with every failure reported: the bytes go to a temporary file in
// the same folder, every write, the close (and, for checkpoints and models, an fsync of the file and of
// the folder) are checked, and only then is the temporary renamed over the target. A full disk, a quota,
// a file-size limit (EFBIG) or a read-only folder is an Error "PATH: write failed: <strerror>"; the
// temporary is removed and an existing PATH keeps its old content.
//
//   write_file_atomically("out/report.json", text);                      // small files in one call
//
//   AtomicFile file("model.onnx", {.durable = true});                     // or piece by piece
//   file.write(header);
//   file.write(tensor.raw(), tensor.nbytes());
//   file.commit();                                                        // without it, nothing replaces model.onnx
//
// A target that exists and is not a regular file (/dev/stdout, a pipe) is written in place, since it
// cannot be replaced; its writes are checked all the same (`--json /dev/full` fails with ENOSPC). A
// symbolic link is followed: the file it names is replaced and the link stays.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace onnxtrain {

struct AtomicFileOptions {
  bool durable = false;         // fsync the file before the rename and its folder after (checkpoints, models)
  bool create_folders = false;  // create the missing folders above the file
  std::string temp_path;        // where the bytes go first; "" is PATH.tmp.<pid>.<n> beside PATH
};

class AtomicFile {
 public:
  // Creates the temporary file; throws Error "PATH: write failed: ..." when it cannot.
  explicit AtomicFile(std::string path, AtomicFileOptions options = {});
  // Without commit() (an exception on the way): removes the temporary; the target is left as it was.
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Appends; throws Error "PATH: write failed: <strerror>" on a failed or short write.
  void write(const void* data, size_t n);
  void write(std::string_view text) { write(text.data(), text.size()); }
  // The same without throwing (for callbacks that must not throw, e.g. a protobuf output stream): false
  // on failure, which commit() then reports.
  bool try_write(const void* data, size_t n) noexcept;
  // Flushes, syncs (durable), closes and renames over the target; throws Error on any failure (the
  // temporary is removed and the target keeps its old content).
  void commit();

  const std::string& path() const { return path_; }

 private:
  [[noreturn]] void fail(int error, const std::string& doing);

  std::string path_;    // as given (for messages)
  std::string target_;  // the file replaced (a symbolic link resolved)
  std::string temp_;    // "" when writing in place (not a regular file)
  AtomicFileOptions options_;
  int fd_ = -1;
  int error_ = 0;  // the first failed write of try_write
  bool committed_ = false;
};

// The whole of `bytes` to `path` (an AtomicFile, committed).
void write_file_atomically(const std::string& path, std::string_view bytes, const AtomicFileOptions& options = {});

}  // namespace onnxtrain
