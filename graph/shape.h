// Shapes with symbolic dimensions. A Dim is a known size, `factor * symbol` (the batch dimension of an
// exported model is `1 * "batch"`; flattening it with 4 gives `4 * "batch"`), or unknown. A Shape of
// unknown rank has `rank_known == false`.
//
//   Shape s{{Dim::symbol("N"), Dim(1), Dim(28), Dim(28)}};   // (N,1,28,28)
//   s.to_string();                                          // "(N,1,28,28)"
//   s.numel({{"N", 64}});                                   // 50176
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace onnxtrain {

using SymbolBindings = std::map<std::string, int64_t>;

class Dim {
 public:
  Dim() = default;                                            // unknown
  Dim(int64_t value) : kind_(Kind::Static), value_(value) {}  // NOLINT: implicit from a size is the point
  static Dim symbol(std::string name, int64_t factor = 1);
  static Dim unknown() { return Dim(); }

  bool is_static() const { return kind_ == Kind::Static; }
  bool is_symbolic() const { return kind_ == Kind::Symbolic; }
  bool is_unknown() const { return kind_ == Kind::Unknown; }
  int64_t value() const;  // only when static
  const std::string& symbol_name() const { return symbol_; }
  int64_t factor() const { return value_; }  // only when symbolic

  // Value under the bindings; nullopt when a symbol is unbound or the dim is unknown.
  std::optional<int64_t> evaluate(const SymbolBindings& bindings) const;
  // Substitutes bound symbols; unbound symbols stay symbolic.
  Dim bind(const SymbolBindings& bindings) const;

  // Dim arithmetic for shape inference: known results where they are known, unknown otherwise.
  Dim operator*(const Dim& other) const;
  Dim operator+(const Dim& other) const;
  Dim operator-(const Dim& other) const;
  Dim divide_exact(const Dim& other) const;  // unknown unless the division is exact
  bool operator==(const Dim& other) const;
  bool operator!=(const Dim& other) const { return !(*this == other); }

  std::string to_string() const;

 private:
  enum class Kind { Unknown, Static, Symbolic };
  Kind kind_ = Kind::Unknown;
  int64_t value_ = 0;  // the size when static, the factor when symbolic
  std::string symbol_;
};

struct Shape {
  std::vector<Dim> dims;
  bool rank_known = true;

  Shape() = default;
  Shape(std::vector<Dim> d) : dims(std::move(d)) {}  // NOLINT
  static Shape unknown_rank() {
    Shape s;
    s.rank_known = false;
    return s;
  }
  static Shape of(const std::vector<int64_t>& sizes);

  int64_t rank() const { return static_cast<int64_t>(dims.size()); }
  bool is_static() const;
  std::vector<int64_t> static_sizes() const;  // requires is_static()
  std::optional<int64_t> numel(const SymbolBindings& bindings = {}) const;
  Shape bind(const SymbolBindings& bindings) const;
  bool operator==(const Shape& other) const { return rank_known == other.rank_known && dims == other.dims; }
  std::string to_string() const;  // "(N,1,28,28)", "()" for a scalar, "(?)" for unknown rank
};

// Numpy-style multidirectional broadcast; nullopt when the shapes cannot broadcast.
std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b);

// The first index and element count of the numpy slice start:end:step over a dim of `size`: negative
// start/end count from the end and are clamped (walking backwards, end may be one before the first).
struct SliceExtent {
  int64_t first = 0;
  int64_t count = 0;
};
SliceExtent numpy_slice(int64_t start, int64_t end, int64_t step, int64_t size);

// Normalises a possibly negative axis against a rank; nullopt when out of range.
std::optional<int64_t> normalize_axis(int64_t axis, int64_t rank);

}  // namespace onnxtrain
