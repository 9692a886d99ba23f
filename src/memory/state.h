// Per-layer memory of one sequence and their composition. A model declares the kind of
// each layer; SeqState is just that list — no class per combination of kinds.
// (Snapshots, paged KV and the recurrent kinds build on these seams.)
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensor/dtype.h"

namespace ws {

enum class KvType { f32, f16 };

struct MemoryOptions {
  int32_t n_ctx = 4096;        // maximum positions a sequence may hold
  KvType kv_type = KvType::f32;
};

class LayerState {
 public:
  virtual ~LayerState() = default;
  virtual int32_t position() const = 0;        // tokens consumed so far
  virtual int32_t truncate_floor() const = 0;  // lowest position it can be cut back to exactly
  virtual void truncate(int32_t pos) = 0;      // pre: truncate_floor() <= pos <= position()
  virtual size_t bytes() const = 0;            // memory held for this sequence
  virtual std::unique_ptr<LayerState> fork() const = 0;  // deep, isolated copy
};

// Full attention KV of one layer: every position is kept, so any cut is exact.
class FullKvState final : public LayerState {
 public:
  FullKvState(int32_t n_kv_heads, int32_t head_dim, int32_t n_ctx, KvType type);

  int32_t position() const override { return n_; }
  int32_t truncate_floor() const override { return 0; }
  void truncate(int32_t pos) override;
  size_t bytes() const override;
  std::unique_ptr<LayerState> fork() const override;

  int32_t row_size() const { return n_kv_heads_ * head_dim_; }
  int32_t head_dim() const { return head_dim_; }
  int32_t n_kv_heads() const { return n_kv_heads_; }
  KvType type() const { return type_; }
  // Appends n positions: k, v are [n][n_kv_heads * head_dim] f32 (stored as type()).
  void append(const float* k, const float* v, int32_t n);
  // Copies head h of positions [0, n) into dst: [n][head_dim] f32.
  void read_keys(int32_t h, int32_t n, float* dst) const;
  void read_values(int32_t h, int32_t n, float* dst) const;

 private:
  void store(std::vector<uint8_t>& buf, const float* src, int32_t n);
  void read(const std::vector<uint8_t>& buf, int32_t h, int32_t n, float* dst) const;

  int32_t n_kv_heads_, head_dim_, n_ctx_;
  KvType type_;
  int32_t n_ = 0;
  std::vector<uint8_t> k_;  // [n_][n_kv_heads][head_dim] of f32 or f16 (type_)
  std::vector<uint8_t> v_;  // [n_][n_kv_heads][head_dim] of f32 or f16 (type_)
};

// All layers of one sequence. Copying is only by fork().
class SeqState {
 public:
  SeqState() = default;
  SeqState(std::vector<std::unique_ptr<LayerState>> layers, int32_t n_ctx)
      : layers_(std::move(layers)), n_ctx_(n_ctx) {}
  SeqState(SeqState&&) = default;
  SeqState& operator=(SeqState&&) = default;
  SeqState(const SeqState&) = delete;
  SeqState& operator=(const SeqState&) = delete;

  int32_t position() const { return position_; }
  int32_t n_ctx() const { return n_ctx_; }
  void advance(int32_t n) { position_ += n; }
  // Throws a user-facing error unless n more positions fit in the context.
  void check_room(int64_t n) const;
  int32_t truncate_floor() const;          // max over layers
  bool try_truncate(int32_t pos);          // all-or-nothing; false => unchanged
  size_t bytes() const;
  SeqState fork() const;

  size_t n_layers() const { return layers_.size(); }
  LayerState& layer(size_t i) { return *layers_[i]; }
  const LayerState& layer(size_t i) const { return *layers_[i]; }

 private:
  std::vector<std::unique_ptr<LayerState>> layers_;  // [n_layer], kinds declared by the model
  int32_t n_ctx_ = 0;
  int32_t position_ = 0;
};

}  // namespace ws
