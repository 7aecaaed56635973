// Writing a small text file (a JSON document, a report) so that it appears whole or not at all.
//
//   write_text_file("out/report.md", text);   // throws Error naming the path when it cannot
#pragma once

#include <string>

namespace onnxtrain::cli {

// Writes `text` to `path` through a temporary file beside it and a rename (graph/atomic_file.h); makes
// missing folders. A failed write (full disk, file-size limit) is Error "PATH: write failed: <strerror>",
// and an existing PATH keeps its old content.
void write_text_file(const std::string& path, const std::string& text);

}  // namespace onnxtrain::cli
