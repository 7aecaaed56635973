// Number and text formatting shared by the commands' tables.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace onnxtrain::cli {

// 1234567 → "1.23M"; exact below 10,000.
inline std::string human(double x) {
  const char* units[] = {"", "K", "M", "G", "T", "P", "E"};
  int u = 0;
  if (x < 1e4) return std::to_string(static_cast<int64_t>(x));
  while (x >= 1000 && u < 6) x /= 1000, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f%s", x, units[u]);
  return buf;
}

// The last `width` characters of s, "…" marking a cut.
inline std::string clip(const std::string& s, size_t width) {
  return s.size() <= width ? s : "…" + s.substr(s.size() - (width - 1));
}

}  // namespace onnxtrain::cli
