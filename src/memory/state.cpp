#include "memory/state.h"

#include <algorithm>
#include <stdexcept>

namespace ws {

namespace {
size_t elem_size(KvType t) { return t == KvType::f32 ? 4 : 2; }
}  // namespace

FullKvState::FullKvState(int32_t n_kv_heads, int32_t head_dim, int32_t n_ctx, KvType type)
    : n_kv_heads_(n_kv_heads), head_dim_(head_dim), n_ctx_(n_ctx), type_(type) {}

void FullKvState::truncate(int32_t pos) {
  if (pos < 0 || pos > n_) throw std::logic_error("FullKvState::truncate: position out of range");
  n_ = pos;
  const size_t keep = size_t(n_) * row_size() * elem_size(type_);
  k_.resize(keep);
  v_.resize(keep);
}

size_t FullKvState::bytes() const { return k_.size() + v_.size(); }

std::unique_ptr<LayerState> FullKvState::fork() const {
  auto f = std::make_unique<FullKvState>(n_kv_heads_, head_dim_, n_ctx_, type_);
  f->n_ = n_;
  f->k_ = k_;
  f->v_ = v_;
  return f;
}

void FullKvState::store(std::vector<uint8_t>& buf, const float* src, int32_t n) {
  const size_t count = size_t(n) * row_size();
  const size_t old = buf.size();
  if (buf.capacity() < old + count * elem_size(type_))
    buf.reserve(std::max(old + count * elem_size(type_), std::min(buf.capacity() * 2,
                         size_t(n_ctx_) * row_size() * elem_size(type_))));
  buf.resize(old + count * elem_size(type_));
  if (type_ == KvType::f32) {
    std::copy(src, src + count, reinterpret_cast<float*>(buf.data() + old));
  } else {
    auto* dst = reinterpret_cast<f16_bits*>(buf.data() + old);
    for (size_t i = 0; i < count; ++i) dst[i] = f32_to_f16(src[i]);
  }
}

void FullKvState::append(const float* k, const float* v, int32_t n) {
  if (n_ + n > n_ctx_)
    throw std::runtime_error("context full: " + std::to_string(n_ + n) + " positions exceed the context size " +
                             std::to_string(n_ctx_) + " (raise -c)");
  store(k_, k, n);
  store(v_, v, n);
  n_ += n;
}

void FullKvState::read(const std::vector<uint8_t>& buf, int32_t h, int32_t n, float* dst) const {
  const size_t rs = size_t(row_size());
  if (type_ == KvType::f32) {
    const auto* src = reinterpret_cast<const float*>(buf.data());
    for (int32_t p = 0; p < n; ++p)
      std::copy_n(src + p * rs + size_t(h) * head_dim_, head_dim_, dst + size_t(p) * head_dim_);
  } else {
    const auto* src = reinterpret_cast<const f16_bits*>(buf.data());
    for (int32_t p = 0; p < n; ++p)
      for (int32_t d = 0; d < head_dim_; ++d)
        dst[size_t(p) * head_dim_ + d] = f16_to_f32(src[p * rs + size_t(h) * head_dim_ + d]);
  }
}

void FullKvState::read_keys(int32_t h, int32_t n, float* dst) const { read(k_, h, n, dst); }
void FullKvState::read_values(int32_t h, int32_t n, float* dst) const { read(v_, h, n, dst); }

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
  if (pos < 0 || pos > position_ || pos < truncate_floor()) return false;
  for (auto& l : layers_) l->truncate(pos);
  position_ = pos;
  return true;
}

size_t SeqState::bytes() const {
  size_t b = 0;
  for (const auto& l : layers_) b += l->bytes();
  return b;
}

SeqState SeqState::fork() const {
  std::vector<std::unique_ptr<LayerState>> layers;
  layers.reserve(layers_.size());
  for (const auto& l : layers_) layers.push_back(l->fork());
  SeqState s(std::move(layers), n_ctx_);
  s.position_ = position_;
  return s;
}

}  // namespace ws
