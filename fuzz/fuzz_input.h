// What every fuzz target shares. The readers under test take paths, so a target writes its input to a
// file in a folder of its own process (scratch_dir(), removed at exit). The rule for a finding:
// onnxtrain::Error is a correct rejection, and so is std::filesystem::filesystem_error (a path that
// cannot be used), the two exceptions the command line turns into exit code 1 (tools/onnxtrain.cc);
// any other exception (std::bad_alloc, std::length_error, std::out_of_range, a failed ONNXTRAIN_CHECK's
// std::logic_error) is printed and aborts, so libFuzzer saves the input as a crash, like a sanitizer
// report, a leak or a timeout.
//
//   extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
//     const std::string path = onnxtrain::fuzz::write_input("x.npy", data, size);
//     onnxtrain::fuzz::expect_clean([&] { onnxtrain::read_npy(path); });
//     return 0;
//   }
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <typeinfo>

#include "graph/error.h"

namespace onnxtrain::fuzz {

// $TMPDIR/onnxtrain-fuzz-XXXXXX, made on first use, removed when the process exits normally.
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    std::string pattern = (std::filesystem::temp_directory_path() / "onnxtrain-fuzz-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) {
      std::perror("onnxtrain fuzz: mkdtemp");
      std::abort();
    }
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(scratch_dir(), ec);
    });
    return std::filesystem::path(pattern);
  }();
  return dir;
}

inline std::string write_bytes(const std::string& name, const void* data, size_t size) {
  const std::string path = (scratch_dir() / name).string();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
  out.close();
  if (!out) {
    std::fprintf(stderr, "onnxtrain fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
  return path;
}

// The fuzzer's input as scratch_dir()/name.
inline std::string write_input(const std::string& name, const uint8_t* data, size_t size) {
  return write_bytes(name, data, size);
}

// ONNXTRAIN_FUZZ_VERBOSE=1 prints each rejection (to see what an input from the corpus or a saved finding
// is refused for: ONNXTRAIN_FUZZ_VERBOSE=1 build/fuzz/fuzz/fuzz_npy FILE).
inline bool verbose() {
  static const bool on = std::getenv("ONNXTRAIN_FUZZ_VERBOSE") != nullptr;
  return on;
}

template <class F>
void expect_clean(F&& f) {
  try {
    f();
    if (verbose()) std::fprintf(stderr, "onnxtrain fuzz: accepted\n");
  } catch (const onnxtrain::Error& e) {
    if (verbose()) std::fprintf(stderr, "onnxtrain fuzz: Error: %s\n", e.describe().c_str());
  } catch (const std::filesystem::filesystem_error& e) {
    if (verbose()) std::fprintf(stderr, "onnxtrain fuzz: filesystem_error: %s\n", e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "onnxtrain fuzz finding: uncaught %s: %s\n", typeid(e).name(), e.what());
    std::abort();
  }
}

}  // namespace onnxtrain::fuzz
