#include "memory/state.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "tensor/hadamard.h"
#include "tensor/kernels.h"
#include "tensor/quant.h"

namespace ws {
namespace {


uint64_t mix64(uint64_t h) {  // murmur3's finaliser: every input bit affects every output bit
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

uint64_t hash_values(std::initializer_list<uint64_t> values) {
  uint64_t h = 0x9e3779b97f4a7c15ULL;
  for (uint64_t v : values) h = mix64(h ^ v) + 0x9e3779b97f4a7c15ULL;
  return h;
}

// Appends count f32 elements of `src` (whole head rows) to `dst`, stored as `type`, each
// run of `rotation` elements rotated first (0: none).
void append_rows(std::vector<uint8_t>& dst, const float* src, size_t count, KvType type, int32_t rotation) {
  if (count == 0) return;  // src and dst may both be null then, which memcpy does not allow
  std::vector<float> rotated;  // [count] f32
  if (rotation > 0) {
    rotated.assign(src, src + count);
    hadamard_rotate(rotated.data(), int64_t(count) / rotation, rotation);
    src = rotated.data();
  }
  const size_t old = dst.size();
  dst.resize(old + row_bytes(kv_dtype(type), int64_t(count)));
  switch (type) {
    case KvType::f32: std::memcpy(dst.data() + old, src, count * 4); break;
    case KvType::f16: f32_to_f16_row(src, reinterpret_cast<f16_bits*>(dst.data() + old), int64_t(count)); break;
    default: quantize_row(kv_dtype(type), src, dst.data() + old, int64_t(count)); break;
  }
}

// dst[n] = the head row at `src` (n elements of `type`) as f32.
void load_row(const uint8_t* src, int32_t n, KvType type, float* dst) {
  dequantize_row(kv_dtype(type), src, dst, n);
}

[[noreturn]] void refuse(const std::string& why) { throw std::runtime_error("snapshot refused: " + why); }

}  // namespace

const char* layer_kind_name(LayerKind k) {
  switch (k) {
    case LayerKind::full_kv: return "full KV";
    case LayerKind::sliding_kv: return "sliding-window KV";
    case LayerKind::recurrent: return "recurrent";
  }
  return "?";
}

uint64_t hash_bytes(const void* data, size_t n, uint64_t seed) {
  // Four independent lanes over 32-byte blocks so the multiplies overlap (~4x the speed
  // of one lane): checksums of multi-MiB recurrent states stay cheap.
  constexpr uint64_t k1 = 0x87c37b91114253d5ULL, k2 = 0x4cf5ad432745937fULL;
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t lane[4] = {mix64(seed ^ n), mix64(seed + k1), mix64(seed + k2), mix64(seed ^ k1 ^ k2)};
  size_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int l = 0; l < 4; ++l) {
      uint64_t w;
      std::memcpy(&w, p + i + 8 * l, 8);
      lane[l] = (lane[l] ^ (w * k1)) * k2;
      lane[l] = (lane[l] << 31) | (lane[l] >> 33);
    }
  uint64_t h = hash_values({lane[0], lane[1], lane[2], lane[3]});
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = ((h ^ (w * k1)) * k2);
    h = (h << 31) | (h >> 33);
  }
  uint64_t tail = 0;
  for (size_t k = 0; i < n; ++i, ++k) tail |= uint64_t(p[i]) << (8 * k);
  return mix64(h ^ tail);
}

uint64_t page_checksum(const KvPage& page) {
  return hash_bytes(page.v.data(), page.v.size(), hash_bytes(page.k.data(), page.k.size()));
}

uint64_t LayerSnapshot::compute_checksum() const {
  uint64_t h = hash_bytes(bytes.data(), bytes.size(),
                          hash_values({uint64_t(kind), uint64_t(position), uint64_t(first_position), shape_tag}));
  for (const auto& p : pages) h = hash_values({h, p ? p->checksum : 0});  // a null page is refused by check()
  return h;
}

uint64_t Snapshot::compute_checksum() const {
  uint64_t h = hash_values({model_id, uint64_t(position), layers.size()});
  for (const auto& l : layers) h = hash_values({h, l.checksum});
  return hash_bytes(logits.data(), logits.size() * sizeof(float), h);
}

size_t Snapshot::copied_bytes() const {
  size_t b = logits.size() * sizeof(float);
  for (const auto& l : layers) b += l.bytes.size();
  return b;
}

size_t Snapshot::page_bytes() const {
  std::vector<const KvPage*> seen;
  size_t b = 0;
  for (const auto& l : layers)
    for (const auto& p : l.pages) {
      if (std::find(seen.begin(), seen.end(), p.get()) != seen.end()) continue;
      seen.push_back(p.get());
      b += p->k.size() + p->v.size();
    }
  return b;
}

const char* kv_type_name(KvType t) {
  switch (t) {
    case KvType::f32: return "f32";
    case KvType::f16: return "f16";
    case KvType::q8_0: return "q8_0";
    case KvType::q4_0: return "q4_0";
  }
  return "?";
}

std::optional<KvType> parse_kv_type(std::string_view name) {
  for (KvType t : {KvType::f32, KvType::f16, KvType::q8_0, KvType::q4_0})
    if (name == kv_type_name(t)) return t;
  return std::nullopt;
}

DType kv_dtype(KvType t) {
  switch (t) {
    case KvType::f32: return DType::f32;
    case KvType::f16: return DType::f16;
    case KvType::q8_0: return DType::q8_0;
    case KvType::q4_0: return DType::q4_0;
  }
  return DType::f32;
}

KvStore::KvStore(int32_t n_kv_heads, int32_t head_dim, KvTypes types)
    : n_kv_heads_(n_kv_heads), head_dim_(head_dim), types_(types) {
  for (KvType t : {types.k, types.v})
    if ((t == KvType::q8_0 || t == KvType::q4_0) && head_dim % 32 != 0)
      throw std::invalid_argument(std::string("KV cache type ") + kv_type_name(t) + " stores blocks of 32 elements, " +
                                  "but this model's head_dim is " + std::to_string(head_dim) + "; use f16 or f32");
  k_head_bytes_ = row_bytes(kv_dtype(types.k), head_dim);
  v_head_bytes_ = row_bytes(kv_dtype(types.v), head_dim);
  // llama.cpp's choice (llama-kv-cache.cpp, attn_rot_k / attn_rot_v): K in the largest
  // power of two >= 64 dividing head_dim, V in blocks of 64 ("smaller seems beneficial").
  auto rotation = [&](KvType t, bool keys) {
    if (!types.rotate || (t != KvType::q8_0 && t != KvType::q4_0) || head_dim % 64 != 0) return 0;
    int32_t n = 64;
    while (keys && head_dim % (2 * n) == 0) n *= 2;
    return n;
  };
  k_rotation_ = rotation(types.k, true);
  v_rotation_ = rotation(types.v, false);
}

uint64_t KvStore::shape_tag() const {
  return hash_values({uint64_t(kind()), uint64_t(n_kv_heads_), uint64_t(head_dim_), uint64_t(types_.k),
                      uint64_t(types_.v), uint64_t(k_rotation_), uint64_t(v_rotation_)});
}

// ---------------------------------------------------------------- FullKvState

FullKvState::FullKvState(int32_t n_kv_heads, int32_t head_dim, KvTypes types, int32_t page_size)
    : KvStore(n_kv_heads, head_dim, types), page_size_(page_size) {
  if (page_size <= 0) throw std::invalid_argument("KV page size must be positive");
}

size_t FullKvState::page_bytes() const { return size_t(page_size_) * (position_bytes(true) + position_bytes(false)); }

size_t FullKvState::bytes() const { return sealed_.size() * page_bytes() + tail_.k.size() + tail_.v.size(); }
size_t FullKvState::bytes_at(int32_t n_positions, int32_t /*n_last*/) const {
  const size_t pages = size_t(n_positions / page_size_), tail = size_t(n_positions % page_size_);
  return pages * page_bytes() + tail * (position_bytes(true) + position_bytes(false));
}

// The first n positions of a page between position-major [n][heads][row_bytes] and
// head-major [heads][page_rows][row_bytes] (head_major: from the first to the second).
static void transpose_heads(const uint8_t* src, uint8_t* dst, size_t page_rows, size_t n, size_t heads,
                            size_t row_bytes, bool head_major) {
  for (size_t r = 0; r < n; ++r)
    for (size_t h = 0; h < heads; ++h) {
      const size_t pos_major = (r * heads + h) * row_bytes, by_head = (h * page_rows + r) * row_bytes;
      std::memcpy(dst + (head_major ? by_head : pos_major), src + (head_major ? pos_major : by_head), row_bytes);
    }
}

void FullKvState::seal_tail() {
  auto page = std::make_shared<KvPage>();
  for (bool keys : {true, false}) {
    const auto& src = keys ? tail_.k : tail_.v;
    auto& dst = keys ? page->k : page->v;
    dst.resize(src.size());
    transpose_heads(src.data(), dst.data(), size_t(page_size_), size_t(page_size_), size_t(n_kv_heads_),
                    head_bytes(keys), true);
  }
  page->checksum = page_checksum(*page);
  sealed_.push_back(std::move(page));
  tail_ = KvPage{};
}

void FullKvState::append(const float* k, const float* v, int32_t n) {
  const size_t row = size_t(row_size());
  int32_t done = 0;
  while (done < n) {
    const int32_t in_tail = n_ - int32_t(sealed_.size()) * page_size_;
    const int32_t take = std::min(n - done, page_size_ - in_tail);
    if (in_tail == 0) {
      tail_.k.reserve(size_t(page_size_) * position_bytes(true));
      tail_.v.reserve(size_t(page_size_) * position_bytes(false));
    }
    append_rows(tail_.k, k + size_t(done) * row, size_t(take) * row, types_.k, k_rotation_);
    append_rows(tail_.v, v + size_t(done) * row, size_t(take) * row, types_.v, v_rotation_);
    n_ += take;
    done += take;
    if (in_tail + take == page_size_) seal_tail();
  }
}

void FullKvState::read(bool keys, int32_t h, int32_t p_begin, int32_t p_end, float* dst) const {
  for (int32_t p = p_begin; p < p_end;) {
    const RowSpan r = rows(p, p_end);
    for (int32_t i = 0; i < r.n; ++i)
      load_row((keys ? r.k : r.v) + (size_t(i) * r.row_stride + size_t(h) * r.head_stride) * head_bytes(keys),
               head_dim_, keys ? types_.k : types_.v, dst + size_t(p - p_begin + i) * head_dim_);
    p += r.n;
  }
}
KvStore::RowSpan FullKvState::rows(int32_t p, int32_t p_end) const {
  const size_t page = size_t(p / page_size_), in_page = size_t(p % page_size_);
  const int32_t n = std::min(p_end, int32_t(page + 1) * page_size_) - p;
  if (page < sealed_.size())  // head-major
    return {sealed_[page]->k.data() + in_page * head_bytes(true), sealed_[page]->v.data() + in_page * head_bytes(false),
            n, 1, size_t(page_size_)};
  return {tail_.k.data() + in_page * position_bytes(true), tail_.v.data() + in_page * position_bytes(false), n,
          size_t(n_kv_heads_), 1};
}
void FullKvState::read_keys(int32_t h, int32_t b, int32_t e, float* dst) const { read(true, h, b, e, dst); }
void FullKvState::read_values(int32_t h, int32_t b, int32_t e, float* dst) const { read(false, h, b, e, dst); }

void FullKvState::truncate(int32_t pos) {
  if (pos < 0 || pos > n_) throw std::logic_error("FullKvState::truncate: position out of range");
  const size_t page = size_t(pos / page_size_);
  if (page < sealed_.size()) {
    // The cut falls inside a sealed (shared) page: copy its first positions into a private
    // tail, back in position-major order.
    const KvPage& src = *sealed_[page];
    const size_t keep = size_t(pos % page_size_);
    for (bool keys : {true, false}) {
      auto& to = keys ? tail_.k : tail_.v;
      to.resize(keep * position_bytes(keys));
      transpose_heads((keys ? src.k : src.v).data(), to.data(), size_t(page_size_), keep, size_t(n_kv_heads_),
                      head_bytes(keys), false);
    }
    sealed_.resize(page);
  } else {
    const size_t keep = size_t(pos - int32_t(sealed_.size()) * page_size_);
    tail_.k.resize(keep * position_bytes(true));
    tail_.v.resize(keep * position_bytes(false));
  }
  n_ = pos;
}

std::unique_ptr<LayerState> FullKvState::fork() const {
  auto f = std::make_unique<FullKvState>(n_kv_heads_, head_dim_, types_, page_size_);
  f->n_ = n_;
  f->sealed_ = sealed_;  // shared, immutable
  f->tail_.k = tail_.k;  // private copy: the only mutable part
  f->tail_.v = tail_.v;
  return f;
}

LayerSnapshot FullKvState::snapshot() const {
  LayerSnapshot s;
  s.kind = kind();
  s.position = n_;
  s.pages = sealed_;
  s.bytes.reserve(tail_.k.size() + tail_.v.size());
  s.bytes.insert(s.bytes.end(), tail_.k.begin(), tail_.k.end());
  s.bytes.insert(s.bytes.end(), tail_.v.begin(), tail_.v.end());
  s.shape_tag = hash_values({shape_tag(), uint64_t(page_size_)});
  s.checksum = s.compute_checksum();
  return s;
}

void FullKvState::check(const LayerSnapshot& s) const {
  if (s.kind != kind()) refuse(std::string("layer kind ") + layer_kind_name(s.kind) + ", expected full KV");
  if (s.shape_tag != hash_values({shape_tag(), uint64_t(page_size_)})) refuse("KV layer shape differs");
  const int32_t tail_rows = s.position - int32_t(s.pages.size()) * page_size_;
  if (tail_rows < 0 || tail_rows >= page_size_ ||
      s.bytes.size() != size_t(tail_rows) * (position_bytes(true) + position_bytes(false)))
    refuse("KV layer sizes are inconsistent");
  for (const auto& p : s.pages)  // k and v on their own: reads index them separately
    if (!p || p->k.size() != size_t(page_size_) * position_bytes(true) ||
        p->v.size() != size_t(page_size_) * position_bytes(false))
      refuse("KV page has the wrong size");
  if (s.compute_checksum() != s.checksum) refuse("KV layer checksum mismatch (corrupted)");
}

void FullKvState::apply(const LayerSnapshot& s) {
  sealed_ = s.pages;
  const size_t k_bytes = size_t(s.position - int32_t(s.pages.size()) * page_size_) * position_bytes(true);
  tail_.k.assign(s.bytes.begin(), s.bytes.begin() + long(k_bytes));
  tail_.v.assign(s.bytes.begin() + long(k_bytes), s.bytes.end());
  n_ = s.position;
}

// ------------------------------------------------------------- SlidingKvState

SlidingKvState::SlidingKvState(int32_t n_kv_heads, int32_t head_dim, KvTypes types, int32_t window, int32_t slack)
    : KvStore(n_kv_heads, head_dim, types), window_(window), slack_(std::max(0, slack)) {
  if (window <= 0) throw std::invalid_argument("sliding window must be positive");
}

int32_t SlidingKvState::truncate_floor() const {
  // The next token at position c needs keys c-W+1 .. c-1: they must all still be held.
  return first_ == 0 ? 0 : std::min(n_, first_ + window_ - 1);
}

void SlidingKvState::truncate(int32_t pos) {
  if (pos < truncate_floor() || pos > n_) throw std::logic_error("SlidingKvState::truncate below its floor");
  k_.resize(size_t(pos - first_) * position_bytes(true));
  v_.resize(size_t(pos - first_) * position_bytes(false));
  n_ = pos;
}

size_t SlidingKvState::bytes_at(int32_t n_positions, int32_t n_last) const {
  // append() drops cells before the last batch, keeping window-1+slack of the earlier ones.
  if (n_positions <= 0) return 0;
  const int64_t last = std::clamp<int64_t>(n_last, 1, n_positions);
  const int64_t kept = std::min<int64_t>(n_positions - last, int64_t(window_) - 1 + slack_);
  return size_t(std::max<int64_t>(0, kept + last)) * (position_bytes(true) + position_bytes(false));
}

void SlidingKvState::append(const float* k, const float* v, int32_t n) {
  // Drop cells no query of this batch (or a cut within the slack) can need.
  const int32_t new_first = std::max(first_, n_ - (window_ - 1) - slack_);
  if (new_first > first_) {
    const size_t drop = size_t(new_first - first_);
    k_.erase(k_.begin(), k_.begin() + long(drop * position_bytes(true)));
    v_.erase(v_.begin(), v_.begin() + long(drop * position_bytes(false)));
    first_ = new_first;
  }
  append_rows(k_, k, size_t(n) * row_size(), types_.k, k_rotation_);
  append_rows(v_, v, size_t(n) * row_size(), types_.v, v_rotation_);
  n_ += n;
}

KvStore::RowSpan SlidingKvState::rows(int32_t p, int32_t p_end) const {
  const size_t i = size_t(p - first_);
  return {k_.data() + i * position_bytes(true), v_.data() + i * position_bytes(false), p_end - p,
          size_t(n_kv_heads_), 1};
}
void SlidingKvState::read_keys(int32_t h, int32_t b, int32_t e, float* dst) const {
  for (int32_t p = b; p < e; ++p)
    load_row(k_.data() + (size_t(p - first_) * size_t(n_kv_heads_) + size_t(h)) * head_bytes(true), head_dim_,
             types_.k, dst + size_t(p - b) * head_dim_);
}
void SlidingKvState::read_values(int32_t h, int32_t b, int32_t e, float* dst) const {
  for (int32_t p = b; p < e; ++p)
    load_row(v_.data() + (size_t(p - first_) * size_t(n_kv_heads_) + size_t(h)) * head_bytes(false), head_dim_,
             types_.v, dst + size_t(p - b) * head_dim_);
}

std::unique_ptr<LayerState> SlidingKvState::fork() const {
  auto f = std::make_unique<SlidingKvState>(n_kv_heads_, head_dim_, types_, window_, slack_);
  f->first_ = first_;
  f->n_ = n_;
  f->k_ = k_;
  f->v_ = v_;
  return f;
}

LayerSnapshot SlidingKvState::snapshot() const {
  // Only the last W-1 cells matter for continuing from here.
  LayerSnapshot s;
  s.kind = kind();
  s.position = n_;
  s.first_position = std::max(first_, n_ - (window_ - 1));
  const size_t skip = size_t(s.first_position - first_);
  const size_t k_skip = skip * position_bytes(true), v_skip = skip * position_bytes(false);
  s.bytes.reserve(k_.size() - k_skip + v_.size() - v_skip);
  s.bytes.insert(s.bytes.end(), k_.begin() + long(k_skip), k_.end());
  s.bytes.insert(s.bytes.end(), v_.begin() + long(v_skip), v_.end());
  s.shape_tag = hash_values({shape_tag(), uint64_t(window_)});
  s.checksum = s.compute_checksum();
  return s;
}

void SlidingKvState::check(const LayerSnapshot& s) const {
  if (s.kind != kind()) refuse(std::string("layer kind ") + layer_kind_name(s.kind) + ", expected sliding-window KV");
  if (s.shape_tag != hash_values({shape_tag(), uint64_t(window_)})) refuse("sliding-window layer shape differs");
  if (s.first_position < 0 || s.first_position > s.position ||
      s.bytes.size() != size_t(s.position - s.first_position) * (position_bytes(true) + position_bytes(false)))
    refuse("sliding-window layer sizes are inconsistent");
  if (s.compute_checksum() != s.checksum) refuse("sliding-window layer checksum mismatch (corrupted)");
}

void SlidingKvState::apply(const LayerSnapshot& s) {
  const size_t k_bytes = size_t(s.position - s.first_position) * position_bytes(true);
  k_.assign(s.bytes.begin(), s.bytes.begin() + long(k_bytes));
  v_.assign(s.bytes.begin() + long(k_bytes), s.bytes.end());
  first_ = s.first_position;
  n_ = s.position;
}

// ------------------------------------------------------------- RecurrentState

RecurrentState::RecurrentState(std::vector<size_t> buffer_sizes) : sizes_(std::move(buffer_sizes)) {
  size_t total = 0;
  for (size_t s : sizes_) {
    offsets_.push_back(total);
    total += s;
  }
  data_.assign(total, 0.f);
}

std::span<float> RecurrentState::buffer(size_t i) { return {data_.data() + offsets_.at(i), sizes_.at(i)}; }
std::span<const float> RecurrentState::buffer(size_t i) const {
  return {data_.data() + offsets_.at(i), sizes_.at(i)};
}

void RecurrentState::truncate(int32_t pos) {
  if (pos != n_) throw std::logic_error("RecurrentState::truncate: recurrent state cannot be cut back");
}

std::unique_ptr<LayerState> RecurrentState::fork() const {
  auto f = std::make_unique<RecurrentState>(sizes_);
  f->data_ = data_;
  f->n_ = n_;
  return f;
}

uint64_t RecurrentState::shape_tag() const {
  uint64_t tag = hash_values({uint64_t(kind()), sizes_.size()});
  for (size_t z : sizes_) tag = hash_values({tag, z});
  return tag;
}

LayerSnapshot RecurrentState::snapshot_into(std::vector<uint8_t> storage) const {
  LayerSnapshot s;
  s.kind = kind();
  s.position = n_;
  const auto* src = reinterpret_cast<const uint8_t*>(data_.data());
  if (storage.size() == bytes()) {
    std::memcpy(storage.data(), src, bytes());
    s.bytes = std::move(storage);
  } else {
    s.bytes.assign(src, src + bytes());  // one pass over fresh memory (resize would zero it first)
  }
  s.shape_tag = shape_tag();
  s.checksum = s.compute_checksum();
  return s;
}

void RecurrentState::check(const LayerSnapshot& s) const {
  if (s.kind != kind()) refuse(std::string("layer kind ") + layer_kind_name(s.kind) + ", expected recurrent");
  if (s.shape_tag != shape_tag() || s.bytes.size() != data_.size() * sizeof(float)) refuse("recurrent layer shape differs");
  if (s.compute_checksum() != s.checksum) refuse("recurrent layer checksum mismatch (corrupted)");
}

void RecurrentState::apply(const LayerSnapshot& s) {
  std::memcpy(data_.data(), s.bytes.data(), s.bytes.size());
  n_ = s.position;
}

// ------------------------------------------------------------------- SeqState

void SeqState::check_room(int64_t n) const {
  if (position_ + n > n_ctx_)
    throw std::runtime_error("context full: " + std::to_string(position_ + n) +
                             " positions exceed the context size " + std::to_string(n_ctx_) + " (raise -c)");
}

int32_t SeqState::truncate_floor() const {
  int32_t f = 0;
  for (const auto& l : layers_) f = std::max(f, l->truncate_floor());
  return f;
}

bool SeqState::try_truncate(int32_t pos) {
  if (pos < 0 || pos > position_) return false;
  for (const auto& l : layers_)  // the parts that can refuse answer first
    if (pos < l->truncate_floor()) return false;
  for (auto& l : layers_) l->truncate(pos);
  position_ = pos;
  return true;
}

size_t SeqState::bytes() const {
  size_t b = 0;
  for (const auto& l : layers_) b += l->bytes();
  return b;
}

size_t SeqState::bytes_at_full_context(int32_t n_batch) const {
  size_t b = 0;  // a full batch last: a sliding window's peak, an upper bound otherwise
  for (const auto& l : layers_) b += l->bytes_at(n_ctx_, std::min(std::max(1, n_batch), n_ctx_));
  return b;
}

SeqState SeqState::fork() const {
  std::vector<std::unique_ptr<LayerState>> layers;
  layers.reserve(layers_.size());
  for (const auto& l : layers_) layers.push_back(l->fork());
  SeqState s(std::move(layers), n_ctx_, model_id_);
  s.position_ = position_;
  return s;
}

Snapshot SeqState::snapshot(std::vector<std::vector<uint8_t>> prepared) const {
  Snapshot s;
  s.model_id = model_id_;
  s.position = position_;
  s.layers.reserve(layers_.size());
  for (size_t i = 0; i < layers_.size(); ++i)
    s.layers.push_back(i < prepared.size() ? layers_[i]->snapshot_into(std::move(prepared[i])) : layers_[i]->snapshot());
  s.checksum = s.compute_checksum();
  return s;
}

std::vector<size_t> SeqState::fixed_copy_bytes() const {
  std::vector<size_t> out;
  for (const auto& l : layers_) out.push_back(l->fixed_copy_bytes());
  return out;
}

std::vector<std::vector<uint8_t>> prepare_snapshot_memory(std::span<const size_t> sizes) {
  std::vector<std::vector<uint8_t>> out;
  out.reserve(sizes.size());
  for (size_t n : sizes) out.emplace_back(n, uint8_t(0));  // value-initialised: every page written
  return out;
}

void SeqState::restore(const Snapshot& s) {
  if (s.model_id != model_id_) refuse("it was taken from a different model");
  if (s.layers.size() != layers_.size())
    refuse("it has " + std::to_string(s.layers.size()) + " layers, the model " + std::to_string(layers_.size()));
  if (s.compute_checksum() != s.checksum) refuse("checksum mismatch (corrupted)");
  if (s.position > n_ctx_) refuse("its position exceeds the context size");
  // Every layer is checked before any is changed: a refusal leaves this state as it was.
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (s.layers[i].position != s.position) refuse("layer positions disagree");
    layers_[i]->check(s.layers[i]);
  }
  for (size_t i = 0; i < layers_.size(); ++i) layers_[i]->apply(s.layers[i]);
  position_ = s.position;
}

}  // namespace ws
