// Software prefetch for the kernels that read weights straight from the GGUF mapping
// (experts, never repacked): they walk a panel's rows a chunk at a time, dozens of short
// interleaved streams the hardware prefetchers do not follow, so decode waited on memory
// at a fifth of the bandwidth a repacked (sequential) copy gets. Prefetching the next
// chunk's lines while this one is computed keeps enough reads in flight. Prefetches never
// fault, so ranges past the end of the matrix are harmless. Internal to the kernels.
#pragma once
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "tensor/kernels_impl.h"

namespace ws::detail {
namespace {

// Bytes [offset, offset + bytes) of n_rows rows (stride apart) prefetched a few lines at a
// time, interleaved with the packing of the current chunk: a burst of hundreds of
// prefetches would overflow the miss buffers and be dropped.
class PrefetchStream {
 public:
  PrefetchStream() = default;
  // The range spread over `steps` calls of step().
  PrefetchStream(const uint8_t* first_row, int64_t n_rows, size_t stride, size_t offset, size_t bytes, int64_t steps)
      : row_(reinterpret_cast<const char*>(first_row) + offset), stride_(stride), bytes_(bytes),
        rows_left_(bytes > 0 && n_rows > 0 ? n_rows : 0) {
    const int64_t lines = rows_left_ * int64_t((bytes + 63) / 64);
    per_step_ = steps > 0 ? (lines + steps - 1) / steps : lines;
  }
  void step() {
    for (int64_t i = 0; i < per_step_ && rows_left_ > 0; ++i) {
      _mm_prefetch(row_ + b_, _MM_HINT_T0);
      if ((b_ += 64) >= bytes_) {
        b_ = 0;
        row_ += stride_;
        --rows_left_;
      }
    }
  }

 private:
  const char* row_ = nullptr;  // the row being prefetched, at `offset`
  size_t stride_ = 0, bytes_ = 0, b_ = 0;  // row stride, bytes per row, next byte in the row
  int64_t rows_left_ = 0, per_step_ = 0;
};

// What a panel walk over unpacked weights reads after bytes [off, off + len) of rows
// [r0, r0 + n_rows): the next chunk (chunk bytes) of those rows, or, after a row's last
// chunk, the first chunk of the next n_rows rows (none past the matrix), spread over
// `steps` steps.
inline PrefetchStream next_chunk(const MatmulArgs& a, int64_t r0, int64_t n_rows, size_t off, size_t len, size_t chunk,
                                 int64_t steps) {
  const bool last = off + len >= a.w_stride;
  const int64_t r = last ? r0 + n_rows : r0;
  const size_t next_off = last ? 0 : off + len;
  const size_t next_len = a.w_stride - next_off < chunk ? a.w_stride - next_off : chunk;
  const int64_t rows = r < a.y_stride ? (a.y_stride - r < n_rows ? a.y_stride - r : n_rows) : 0;
  return PrefetchStream(a.w + size_t(rows > 0 ? r : r0) * a.w_stride, rows, a.w_stride, next_off, next_len, steps);
}

}  // namespace
}  // namespace ws::detail
