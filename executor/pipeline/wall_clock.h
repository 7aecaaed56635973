// Wall-clock seconds for the pipeline's busy, idle and trace accounting.
#pragma once

#include <chrono>

namespace onnxtrain {

inline double seconds_between(std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

inline double seconds_since(std::chrono::steady_clock::time_point t) {
  return seconds_between(t, std::chrono::steady_clock::now());
}

}  // namespace onnxtrain
