#include "kernels/cpu/data_movement.h"

#include <algorithm>

#if defined(__SSE2__)
#include <xmmintrin.h>
#endif

#include "graph/error.h"

namespace onnxtrain::cpu {

CpuDataMovementKernel::CpuDataMovementKernel(const KernelSpec& spec) : spec_(spec) {
  const KernelEntry* entry =
      KernelRegistry::builtin().find(spec.domain, spec.op_type, DeviceKind::Cpu, kernel_dtype(spec), "reference");
  if (!entry) reference::kernel_fail(spec, "no reference kernel for this op and dtype");
  reference_ = entry->prepare(spec);
}

bool RunKey::changed(std::span<const TensorView> inputs, std::span<const TensorView> outputs,
                     std::initializer_list<size_t> value_inputs) {
  scratch_.clear();
  auto add_sizes = [&](const TensorView& v) {
    scratch_.push_back(v.present() ? static_cast<int64_t>(v.sizes.size()) : -1);
    scratch_.insert(scratch_.end(), v.sizes.begin(), v.sizes.end());
  };
  for (const TensorView& v : inputs) add_sizes(v);
  for (const TensorView& v : outputs) add_sizes(v);
  for (size_t i : value_inputs) {
    if (i >= inputs.size() || !inputs[i].present()) {
      scratch_.push_back(-2);
      continue;
    }
    const int64_t n = inputs[i].numel();
    scratch_.push_back(n);
    for (int64_t j = 0; j < n; ++j) scratch_.push_back(int_at(inputs[i], j));
  }
  if (!empty_ && scratch_ == key_) return false;
  key_.swap(scratch_);
  empty_ = false;
  return true;
}

void parallel_copy(void* dst, const void* src, int64_t bytes) {
  if (bytes <= 0) return;
  parallel_for(bytes, 2 * kCopyGrainBytes, [&](int64_t begin, int64_t end) {
    std::memcpy(static_cast<std::byte*>(dst) + begin, static_cast<const std::byte*>(src) + begin, end - begin);
  });
}

void parallel_zero(void* dst, int64_t bytes) {
  if (bytes <= 0) return;
  parallel_for(bytes, 2 * kCopyGrainBytes,
               [&](int64_t begin, int64_t end) { std::memset(static_cast<std::byte*>(dst) + begin, 0, end - begin); });
}

bool StridedCopy::plan(size_t element, const std::vector<int64_t>& sizes, const std::vector<int64_t>& src_strides,
                       const std::vector<int64_t>& dst_strides, int64_t src_base, int64_t dst_base, StridedCopy& out) {
  out = StridedCopy();
  if (element != 1 && element != 2 && element != 4 && element != 8) return false;
  out.element_ = element;
  out.src_base_ = src_base;
  out.dst_base_ = dst_base;
  out.numel_ = 1;
  for (int64_t s : sizes) out.numel_ *= s;
  if (out.numel_ == 0) return true;
  // Drop unit dims, then merge each dim into the one before it where both views step through them as one.
  struct Dim {
    int64_t size, src, dst;
  };
  std::vector<Dim> dims;
  for (size_t k = 0; k < sizes.size(); ++k) {
    if (sizes[k] == 1) continue;
    const Dim d{sizes[k], src_strides[k], dst_strides[k]};
    if (!dims.empty() && dims.back().src == d.src * d.size && dims.back().dst == d.dst * d.size) {
      dims.back() = {dims.back().size * d.size, d.src, d.dst};
    } else {
      dims.push_back(d);
    }
  }
  if (dims.empty()) dims.push_back({1, 1, 1});
  if (dims.size() > kMaxRank) return false;
  out.rank_ = static_cast<int>(dims.size());
  for (int k = 0; k < out.rank_; ++k) {
    out.sizes_[k] = dims[k].size;
    out.src_[k] = dims[k].src;
    out.dst_[k] = dims[k].dst;
  }
  const Dim& inner = dims.back();
  if (inner.dst == 1 && inner.src == 1) {
    out.loop_ = Loop::Rows;
  } else if (inner.dst == 1 && inner.src == 0) {
    out.loop_ = Loop::Fill;
  } else {
    out.loop_ = Loop::Strided;
    if (inner.dst == 1) {
      for (int k = 0; k + 1 < out.rank_; ++k) {
        if (dims[k].src == 1) {
          out.loop_ = Loop::Tiles;
          out.tile_dim_ = k;
        }
      }
    }
  }
  return true;
}

namespace {

// Steps an index over dims [0, rank) of `sizes` (the last fastest), moving two offsets along.
struct Odometer {
  int64_t index[StridedCopy::kMaxRank];
  int64_t src = 0, dst = 0;

  // Positions the odometer on flat position `flat` of dims [0, rank).
  void seek(int64_t flat, int rank, const int64_t* sizes, const int64_t* src_strides, const int64_t* dst_strides,
            int64_t src_base, int64_t dst_base) {
    src = src_base;
    dst = dst_base;
    for (int d = rank - 1; d >= 0; --d) {
      index[d] = flat % sizes[d];
      flat /= sizes[d];
      src += index[d] * src_strides[d];
      dst += index[d] * dst_strides[d];
    }
  }
  void next(int rank, const int64_t* sizes, const int64_t* src_strides, const int64_t* dst_strides) {
    for (int d = rank - 1; d >= 0; --d) {
      src += src_strides[d];
      dst += dst_strides[d];
      if (++index[d] < sizes[d]) return;
      src -= src_strides[d] * sizes[d];
      dst -= dst_strides[d] * sizes[d];
      index[d] = 0;
    }
  }
};

// to[i * dt + a] = from[a * sa + i] for i < ni, a < na, 4-byte elements: 4x4 blocks through SSE registers.
void transpose_tile_4(const uint32_t* from, int64_t sa, uint32_t* to, int64_t dt, int64_t ni, int64_t na) {
  int64_t i = 0;
#if defined(__SSE2__)
  for (; i + 4 <= ni; i += 4) {
    int64_t a = 0;
    for (; a + 4 <= na; a += 4) {
      const auto* f = reinterpret_cast<const float*>(from + a * sa + i);
      __m128 r0 = _mm_loadu_ps(f), r1 = _mm_loadu_ps(f + sa), r2 = _mm_loadu_ps(f + 2 * sa),
             r3 = _mm_loadu_ps(f + 3 * sa);
      _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
      auto* t = reinterpret_cast<float*>(to + i * dt + a);
      _mm_storeu_ps(t, r0);
      _mm_storeu_ps(t + dt, r1);
      _mm_storeu_ps(t + 2 * dt, r2);
      _mm_storeu_ps(t + 3 * dt, r3);
    }
    for (; a < na; ++a)
      for (int64_t k = 0; k < 4; ++k) to[(i + k) * dt + a] = from[a * sa + i + k];
  }
#endif
  for (; i < ni; ++i)
    for (int64_t a = 0; a < na; ++a) to[i * dt + a] = from[a * sa + i];
}

}  // namespace

template <typename T>
void StridedCopy::run_typed(const T* src, T* dst) const {
  const int last = rank_ - 1;
  const int64_t n = sizes_[last];
  if (loop_ != Loop::Tiles) {
    const int64_t rows = numel_ / n;
    const int64_t grain = std::max<int64_t>(1, kCopyGrainBytes / (n * static_cast<int64_t>(sizeof(T))));
    const int64_t sn = src_[last], dn = dst_[last];
    parallel_for(rows, grain, [&](int64_t begin, int64_t end) {
      Odometer at;
      at.seek(begin, last, sizes_, src_, dst_, src_base_, dst_base_);
      for (int64_t r = begin; r < end; ++r) {
        const T* from = src + at.src;
        T* to = dst + at.dst;
        switch (loop_) {
          case Loop::Rows:
            if (n * sizeof(T) >= 64) {
              std::memcpy(to, from, n * sizeof(T));
            } else {
#pragma omp simd
              for (int64_t i = 0; i < n; ++i) to[i] = from[i];
            }
            break;
          case Loop::Fill: {
            const T v = *from;
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) to[i] = v;
            break;
          }
          default:
            if (dn == 1) {  // a strided read (a slice with a step), a contiguous write
              for (int64_t i = 0; i < n; ++i) to[i] = from[i * sn];
            } else if (sn == 1) {  // a contiguous read, a strided write (SliceGrad)
              for (int64_t i = 0; i < n; ++i) to[i * dn] = from[i];
            } else {
              for (int64_t i = 0; i < n; ++i) to[i * dn] = from[i * sn];
            }
        }
        at.next(last, sizes_, src_, dst_);
      }
    });
    return;
  }
  // Tiles: dst is contiguous along the inner dim `last`, src along `tile_dim_`. Copy blocks of kTile x kTile
  // elements, so that both the lines read and the lines written stay in L1.
  constexpr int64_t kTile = std::max<int64_t>(8, 64 / sizeof(T));
  const int t = tile_dim_;
  const int64_t nt = sizes_[t], dt = dst_[t], sa = src_[last];
  int64_t outer_sizes[kMaxRank], outer_src[kMaxRank], outer_dst[kMaxRank];
  int outer_rank = 0;
  for (int k = 0; k < last; ++k) {
    if (k == t) continue;
    outer_sizes[outer_rank] = sizes_[k];
    outer_src[outer_rank] = src_[k];
    outer_dst[outer_rank] = dst_[k];
    ++outer_rank;
  }
  // Work items: (outer index, block of kTile along `tile_dim_`, span of kSpan along the inner dim).
  constexpr int64_t kSpan = 16 * kTile;
  const int64_t t_blocks = (nt + kTile - 1) / kTile, spans = (n + kSpan - 1) / kSpan;
  const int64_t items = numel_ / (n * nt) * t_blocks * spans;
  const int64_t grain =
      std::max<int64_t>(1, kCopyGrainBytes / (kTile * std::min(n, kSpan) * static_cast<int64_t>(sizeof(T))));
  parallel_for(items, grain, [&](int64_t begin, int64_t end) {
    Odometer at;
    for (int64_t item = begin; item < end; ++item) {
      at.seek(item / (t_blocks * spans), outer_rank, outer_sizes, outer_src, outer_dst, src_base_, dst_base_);
      const int64_t t0 = item / spans % t_blocks * kTile, t1 = std::min(t0 + kTile, nt);
      const int64_t span = item % spans * kSpan, span_end = std::min(span + kSpan, n);
      for (int64_t a0 = span; a0 < span_end; a0 += kTile) {
        const int64_t a1 = std::min(a0 + kTile, span_end);
        const T* from = src + at.src + t0 + a0 * sa;
        T* to = dst + at.dst + t0 * dt + a0;
        if constexpr (sizeof(T) == 4) {
          transpose_tile_4(from, sa, to, dt, t1 - t0, a1 - a0);
        } else {
          for (int64_t i = 0; i < t1 - t0; ++i)
            for (int64_t a = 0; a < a1 - a0; ++a) to[i * dt + a] = from[a * sa + i];
        }
      }
    }
  });
}

void StridedCopy::run(const void* src, void* dst) const {
  if (numel_ == 0) return;
  dispatch_bytes(element_, [&](auto zero) {
    using T = decltype(zero);
    run_typed<T>(static_cast<const T*>(src), static_cast<T*>(dst));
  });
}

}  // namespace onnxtrain::cpu
