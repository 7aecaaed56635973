#include "graph/shape.h"

#include <algorithm>

#include "graph/error.h"

namespace onnxtrain {

namespace {

// Dims come from model files: a hostile or broken one can hold 2^62 x 64. Such a shape describes no tensor
// that can exist, so arithmetic that leaves int64 is the model's error, never a wrapped (negative) size.
int64_t checked(int64_t a, char op, int64_t b) {
  int64_t r = 0;
  const bool overflow = op == '*'   ? __builtin_mul_overflow(a, b, &r)
                        : op == '+' ? __builtin_add_overflow(a, b, &r)
                                    : __builtin_sub_overflow(a, b, &r);
  if (overflow) {
    throw Error("shape arithmetic leaves int64: " + std::to_string(a) + " " + op + " " + std::to_string(b) +
                " (a dim of the model is too large)");
  }
  return r;
}

}  // namespace

Dim Dim::symbol(std::string name, int64_t factor) {
  Dim d;
  d.kind_ = Kind::Symbolic;
  d.value_ = factor;
  d.symbol_ = std::move(name);
  return d;
}

int64_t Dim::value() const {
  ONNXTRAIN_CHECK(is_static(), "value() of a non-static dim " + to_string());
  return value_;
}

std::optional<int64_t> Dim::evaluate(const SymbolBindings& bindings) const {
  if (is_static()) return value_;
  if (is_symbolic()) {
    auto it = bindings.find(symbol_);
    int64_t v = 0;  // a value past int64 is not known, as in numel
    if (it != bindings.end() && !__builtin_mul_overflow(value_, it->second, &v)) return v;
  }
  return std::nullopt;
}

Dim Dim::bind(const SymbolBindings& bindings) const {
  if (auto v = evaluate(bindings)) return Dim(*v);
  return *this;
}

Dim Dim::operator*(const Dim& other) const {
  if (is_static() && other.is_static()) return Dim(checked(value_, '*', other.value_));
  if (is_static() && value_ == 0) return Dim(0);
  if (other.is_static() && other.value_ == 0) return Dim(0);
  if (is_symbolic() && other.is_static()) return symbol(symbol_, checked(value_, '*', other.value_));
  if (is_static() && other.is_symbolic()) return symbol(other.symbol_, checked(value_, '*', other.value_));
  return unknown();
}

Dim Dim::operator+(const Dim& other) const {
  if (is_static() && other.is_static()) return Dim(checked(value_, '+', other.value_));
  if (is_symbolic() && other.is_symbolic() && symbol_ == other.symbol_)
    return symbol(symbol_, checked(value_, '+', other.value_));
  if (is_static() && value_ == 0) return other;
  if (other.is_static() && other.value_ == 0) return *this;
  return unknown();
}

Dim Dim::operator-(const Dim& other) const {
  if (is_static() && other.is_static()) return Dim(checked(value_, '-', other.value_));
  if (is_symbolic() && other.is_symbolic() && symbol_ == other.symbol_) {
    return value_ == other.value_ ? Dim(0) : symbol(symbol_, checked(value_, '-', other.value_));
  }
  if (other.is_static() && other.value_ == 0) return *this;
  return unknown();
}

Dim Dim::divide_exact(const Dim& other) const {
  // 0 divides nothing, and INT64_MIN / -1 leaves int64.
  if (other.is_unknown() || other.value_ == 0 || (other.value_ == -1 && value_ == INT64_MIN)) return unknown();
  if (other.is_static()) {
    if (is_static() && value_ % other.value_ == 0) return Dim(value_ / other.value_);
    if (is_symbolic() && value_ % other.value_ == 0) return symbol(symbol_, value_ / other.value_);
  }
  if (is_symbolic() && other.is_symbolic() && symbol_ == other.symbol_ && value_ % other.value_ == 0) {
    return Dim(value_ / other.value_);
  }
  return unknown();
}

bool Dim::operator==(const Dim& other) const {
  if (kind_ != other.kind_) return false;
  if (kind_ == Kind::Unknown) return false;  // two unknown dims are not known to be equal
  return value_ == other.value_ && symbol_ == other.symbol_;
}

std::string Dim::to_string() const {
  switch (kind_) {
    case Kind::Static:
      return std::to_string(value_);
    case Kind::Symbolic:
      return value_ == 1 ? symbol_ : std::to_string(value_) + "*" + symbol_;
    case Kind::Unknown:
      return "?";
  }
  return "?";
}

Shape Shape::of(const std::vector<int64_t>& sizes) {
  Shape s;
  for (int64_t v : sizes) s.dims.emplace_back(v);
  return s;
}

bool Shape::is_static() const {
  if (!rank_known) return false;
  for (const Dim& d : dims)
    if (!d.is_static()) return false;
  return true;
}

std::vector<int64_t> Shape::static_sizes() const {
  ONNXTRAIN_CHECK(is_static(), "static_sizes() of " + to_string());
  std::vector<int64_t> sizes;
  for (const Dim& d : dims) sizes.push_back(d.value());
  return sizes;
}

// None when a count does not fit int64 (a batch of 2^31 of a large model): callers see "unknown", never a
// wrapped, negative count.
std::optional<int64_t> Shape::numel(const SymbolBindings& bindings) const {
  if (!rank_known) return std::nullopt;
  std::vector<int64_t> sizes;
  sizes.reserve(dims.size());
  for (const Dim& d : dims) {
    auto v = d.evaluate(bindings);
    if (!v) return std::nullopt;
    if (*v == 0) return 0;  // empty, however large the other dims
    sizes.push_back(*v);
  }
  int64_t n = 1;
  for (int64_t v : sizes)
    if (__builtin_mul_overflow(n, v, &n)) return std::nullopt;
  return n;
}

Shape Shape::bind(const SymbolBindings& bindings) const {
  Shape s = *this;
  for (Dim& d : s.dims) d = d.bind(bindings);
  return s;
}

std::string Shape::to_string() const {
  if (!rank_known) return "(?)";
  std::string text = "(";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) text += ',';
    text += dims[i].to_string();
  }
  return text + ")";
}

std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  if (!a.rank_known || !b.rank_known) return Shape::unknown_rank();
  size_t rank = std::max(a.dims.size(), b.dims.size());
  Shape out;
  out.dims.resize(rank);
  for (size_t i = 0; i < rank; ++i) {
    const Dim one(1);
    const Dim& da = i < rank - a.dims.size() ? one : a.dims[i - (rank - a.dims.size())];
    const Dim& db = i < rank - b.dims.size() ? one : b.dims[i - (rank - b.dims.size())];
    if (da.is_static() && da.value() == 1) {
      out.dims[i] = db;
    } else if (db.is_static() && db.value() == 1) {
      out.dims[i] = da;
    } else if (da == db) {
      out.dims[i] = da;
    } else if (da.is_static() && db.is_static()) {
      return std::nullopt;
    } else {
      // One side static (not 1), the other symbolic or unknown: the static one must win at run time.
      out.dims[i] = da.is_static() ? da : (db.is_static() ? db : Dim::unknown());
    }
  }
  return out;
}

SliceExtent numpy_slice(int64_t start, int64_t end, int64_t step, int64_t size) {
  if (size == 0) return {};
  if (start < 0) start += size;
  if (end < 0) end += size;
  int64_t distance = 0;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, size);
    end = std::clamp<int64_t>(end, 0, size);
    distance = end - start;
  } else {
    start = std::clamp<int64_t>(start, 0, size - 1);
    end = std::clamp<int64_t>(end, -1, size - 1);
    distance = start - end;
  }
  const int64_t magnitude = step > 0 ? step : (step == INT64_MIN ? INT64_MAX : -step);
  return {start, distance > 0 ? (distance - 1) / magnitude + 1 : 0};
}

std::optional<int64_t> normalize_axis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) return std::nullopt;
  return axis < 0 ? axis + rank : axis;
}

}  // namespace onnxtrain
