// Per-layer memory of one sequence and their composition. A model declares the kind of
// each layer; SeqState is just that list — no class per combination of kinds.
//
// Kinds:
//   FullKvState     attention KV in fixed-size pages; full pages are immutable and shared
//                   (reference-counted) between forks and snapshots. Cut anywhere.
//   SlidingKvState  attention KV of a sliding-window layer: the window plus `slack` cells.
//                   Keeping W-1+k cells allows a cut of k positions.
//   RecurrentState  fixed-size f32 buffers (conv tail, SSM state, delta-net state) that
//                   each token overwrites: it can only be "cut" to where it is.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/dtype.h"

namespace ws {

// Storage of K or V, as llama.cpp's --cache-type-k / --cache-type-v name them: f16, f32, or
// the 32-element block formats q8_0 and q4_0 (head_dim a multiple of 32), stored as
// llama.cpp's quantizer writes them and widened exactly where attention reads them.
enum class KvType { f32, f16, q8_0, q4_0 };
const char* kv_type_name(KvType t);
std::optional<KvType> parse_kv_type(std::string_view name);
DType kv_dtype(KvType t);
// rotate: a quantized K (V) is stored rotated by the Walsh-Hadamard matrix as llama.cpp
// does by default (tensor/hadamard.h; head_dim a multiple of 64; K in the largest
// power-of-two block dividing head_dim, V in blocks of 64), attention rotating the
// queries and its output to match. llama.cpp turns it off when the layers' head_dim differ.
struct KvTypes {
  KvType k = KvType::f16;
  KvType v = KvType::f16;
  bool rotate = true;
};
enum class LayerKind : uint8_t { full_kv, sliding_kv, recurrent };
const char* layer_kind_name(LayerKind k);

struct MemoryOptions {
  int32_t n_ctx = 4096;        // maximum positions a sequence may hold
  KvTypes kv_types{KvType::f32, KvType::f32};
  int32_t kv_page_size = 64;   // positions per KV page
  int32_t swa_slack = 256;     // cells kept beyond a sliding window (how far it can be cut back)
};

// One page of attention KV: page_size positions of every kv head. A sealed page is
// head-major, [n_kv_heads][page_size][head_dim], so that attention streams one head's rows
// contiguously; the tail being filled is position-major, [n][n_kv_heads][head_dim], so
// that appends and cuts touch one run of bytes.
struct KvPage {
  std::vector<uint8_t> k;  // K's storage type (rows of head_dim elements), layout as above
  std::vector<uint8_t> v;  // V's storage type, layout as above
  uint64_t checksum = 0;   // of k and v (page_checksum), set when the page is sealed (full, immutable)
};
uint64_t page_checksum(const KvPage& page);

// The saved state of one layer. Full pages are shared by reference; everything else is a
// copy. Isolated: nothing done to the live state afterwards can change it.
struct LayerSnapshot {
  LayerKind kind = LayerKind::full_kv;
  int32_t position = 0;
  int32_t first_position = 0;                         // sliding KV: oldest cell held
  std::vector<std::shared_ptr<const KvPage>> pages;   // full KV: sealed pages, in order
  std::vector<uint8_t> bytes;                         // copied state (tail page / cells / buffers)
  uint64_t shape_tag = 0;                             // the layer's geometry; restore checks it
  uint64_t checksum = 0;                              // over bytes, page checksums and shape
  uint64_t compute_checksum() const;
};

struct Snapshot {
  uint64_t model_id = 0;
  int32_t position = 0;
  std::vector<LayerSnapshot> layers;
  // [n_vocab] f32: the logits after `position` tokens, kept with a prompt's frontier so
  // that the same prompt again computes nothing; empty otherwise. restore() ignores them.
  std::vector<float> logits;
  uint64_t checksum = 0;  // over the layer checksums, logits, position and model id
  uint64_t compute_checksum() const;
  size_t copied_bytes() const;  // bytes owned by this snapshot alone
  size_t page_bytes() const;    // bytes of the distinct pages it references (maybe shared)
  size_t bytes() const { return copied_bytes() + page_bytes(); }
};

class LayerState {
 public:
  virtual ~LayerState() = default;
  virtual LayerKind kind() const = 0;
  virtual int32_t position() const = 0;        // tokens consumed so far
  virtual int32_t truncate_floor() const = 0;  // lowest position it can be cut back to exactly
  virtual void truncate(int32_t pos) = 0;      // pre: truncate_floor() <= pos <= position()
  virtual size_t bytes() const = 0;            // memory held (shared pages counted in full)
  // bytes() after n_positions tokens fed from empty, the last n_last of them in one batch
  // (a sliding window holds a batch beyond its window): sizes -c before anything is
  // allocated, so a context that cannot fit is refused at start-up, not killed later.
  virtual size_t bytes_at(int32_t n_positions, int32_t n_last) const = 0;
  virtual std::unique_ptr<LayerState> fork() const = 0;  // isolated copy (shares sealed pages)
  virtual LayerSnapshot snapshot() const = 0;
  // Bytes every snapshot of this layer copies whatever its position (recurrent buffers),
  // 0 for KV layers: memory that can be prepared before the snapshot is due.
  virtual size_t fixed_copy_bytes() const { return 0; }
  // snapshot(), copying into `storage` when it holds fixed_copy_bytes() (prepared memory).
  virtual LayerSnapshot snapshot_into(std::vector<uint8_t> /*storage*/) const { return snapshot(); }
  // Throws std::runtime_error if the snapshot's kind, shape or checksum does not fit
  // this layer.
  virtual void check(const LayerSnapshot& s) const = 0;
  // Replaces this layer's state with a checked snapshot.
  virtual void apply(const LayerSnapshot& s) = 0;
  // check() then apply(): a refused snapshot leaves the state unchanged.
  void restore(const LayerSnapshot& s) {
    check(s);
    apply(s);
  }
};

// Attention KV of one layer, read by position.
class KvStore : public LayerState {
 public:
  // Throws std::invalid_argument for a block type head_dim does not divide into.
  KvStore(int32_t n_kv_heads, int32_t head_dim, KvTypes types);
  int32_t n_kv_heads() const { return n_kv_heads_; }
  int32_t head_dim() const { return head_dim_; }
  int32_t row_size() const { return n_kv_heads_ * head_dim_; }
  KvTypes types() const { return types_; }
  // Bytes of one head's row of K (keys) or V, and of one position (all heads).
  size_t head_bytes(bool keys) const { return keys ? k_head_bytes_ : v_head_bytes_; }
  // The Hadamard block K (V) is stored rotated in, 0 if none (KvTypes::rotate).
  int32_t rotation(bool keys) const { return keys ? k_rotation_ : v_rotation_; }
  size_t position_bytes(bool keys) const { return size_t(n_kv_heads_) * head_bytes(keys); }
  virtual int32_t first_position() const = 0;  // oldest position still held
  // Appends n positions: k, v are [n][n_kv_heads * head_dim] f32 (stored as types()).
  virtual void append(const float* k, const float* v, int32_t n) = 0;
  // dst: [p_end - p_begin][head_dim] f32 of head h as stored (rotated where rotation() says),
  // first_position() <= p_begin <= p_end <= position().
  virtual void read_keys(int32_t h, int32_t p_begin, int32_t p_end, float* dst) const = 0;
  virtual void read_values(int32_t h, int32_t p_begin, int32_t p_end, float* dst) const = 0;
  // Keys and values of positions [p, p + n) where they are stored: the row of position
  // p + i, kv head h starts at k + (i * row_stride + h * head_stride) * head_bytes(true)
  // bytes (v likewise with head_bytes(false)): strides count head rows, so one span serves
  // K and V of different types. n >= 1 is as many positions as one storage chunk (a page)
  // holds before p_end. Lets attention read K/V in place.
  // pre: first_position() <= p < p_end <= position(); valid until the next append/cut.
  struct RowSpan {
    const uint8_t* k = nullptr;
    const uint8_t* v = nullptr;
    int32_t n = 0;
    size_t row_stride = 0;   // head rows between consecutive positions of one head
    size_t head_stride = 0;  // head rows between the same position of consecutive heads
  };
  virtual RowSpan rows(int32_t p, int32_t p_end) const = 0;

 protected:
  uint64_t shape_tag() const;
  int32_t n_kv_heads_, head_dim_;
  KvTypes types_;
  size_t k_head_bytes_, v_head_bytes_;
  int32_t k_rotation_, v_rotation_;
};

class FullKvState final : public KvStore {
 public:
  FullKvState(int32_t n_kv_heads, int32_t head_dim, KvTypes types, int32_t page_size);
  LayerKind kind() const override { return LayerKind::full_kv; }
  int32_t position() const override { return n_; }
  int32_t truncate_floor() const override { return 0; }
  void truncate(int32_t pos) override;
  size_t bytes() const override;
  size_t bytes_at(int32_t n_positions, int32_t n_last) const override;
  std::unique_ptr<LayerState> fork() const override;
  LayerSnapshot snapshot() const override;
  void check(const LayerSnapshot& s) const override;
  void apply(const LayerSnapshot& s) override;
  int32_t first_position() const override { return 0; }
  void append(const float* k, const float* v, int32_t n) override;
  void read_keys(int32_t h, int32_t p_begin, int32_t p_end, float* dst) const override;
  void read_values(int32_t h, int32_t p_begin, int32_t p_end, float* dst) const override;
  RowSpan rows(int32_t p, int32_t p_end) const override;
  size_t page_bytes() const;  // bytes of one full page

 private:
  void read(bool keys, int32_t h, int32_t p_begin, int32_t p_end, float* dst) const;
  void seal_tail();

  int32_t page_size_;
  int32_t n_ = 0;
  std::vector<std::shared_ptr<const KvPage>> sealed_;  // full, immutable pages, in order
  KvPage tail_;  // positions [sealed_.size() * page_size_, n_): k/v hold exactly those rows
};

class SlidingKvState final : public KvStore {
 public:
  SlidingKvState(int32_t n_kv_heads, int32_t head_dim, KvTypes types, int32_t window, int32_t slack);
  LayerKind kind() const override { return LayerKind::sliding_kv; }
  int32_t position() const override { return n_; }
  int32_t truncate_floor() const override;
  void truncate(int32_t pos) override;
  size_t bytes() const override { return k_.size() + v_.size(); }
  size_t bytes_at(int32_t n_positions, int32_t n_last) const override;
  std::unique_ptr<LayerState> fork() const override;
  LayerSnapshot snapshot() const override;  // holds the last window-1 cells
  void check(const LayerSnapshot& s) const override;
  void apply(const LayerSnapshot& s) override;
  int32_t first_position() const override { return first_; }
  void append(const float* k, const float* v, int32_t n) override;
  void read_keys(int32_t h, int32_t p_begin, int32_t p_end, float* dst) const override;
  void read_values(int32_t h, int32_t p_begin, int32_t p_end, float* dst) const override;
  RowSpan rows(int32_t p, int32_t p_end) const override;
  int32_t window() const { return window_; }

 private:
  int32_t window_, slack_;
  int32_t first_ = 0, n_ = 0;
  std::vector<uint8_t> k_;  // [n_ - first_][n_kv_heads] head rows of K's type
  std::vector<uint8_t> v_;  // [n_ - first_][n_kv_heads] head rows of V's type
};

// Fixed-size f32 buffers that every token overwrites (conv tails, SSM / delta-net state).
class RecurrentState final : public LayerState {
 public:
  explicit RecurrentState(std::vector<size_t> buffer_sizes);  // element counts, zero-initialised
  LayerKind kind() const override { return LayerKind::recurrent; }
  int32_t position() const override { return n_; }
  int32_t truncate_floor() const override { return n_; }
  void truncate(int32_t pos) override;
  size_t bytes() const override { return data_.size() * sizeof(float); }
  size_t bytes_at(int32_t, int32_t) const override { return bytes(); }  // fixed size
  std::unique_ptr<LayerState> fork() const override;
  LayerSnapshot snapshot() const override { return snapshot_into({}); }
  size_t fixed_copy_bytes() const override { return bytes(); }
  LayerSnapshot snapshot_into(std::vector<uint8_t> storage) const override;
  void check(const LayerSnapshot& s) const override;
  void apply(const LayerSnapshot& s) override;

  std::span<float> buffer(size_t i);
  uint64_t shape_tag() const;
  std::span<const float> buffer(size_t i) const;
  void advance(int32_t n) { n_ += n; }  // the model calls this after updating the buffers

 private:
  std::vector<size_t> sizes_, offsets_;
  std::vector<float> data_;  // all buffers back to back, f32
  int32_t n_ = 0;
};

// All layers of one sequence. Copying is only by fork().
class SeqState {
 public:
  SeqState() = default;
  SeqState(std::vector<std::unique_ptr<LayerState>> layers, int32_t n_ctx, uint64_t model_id)
      : layers_(std::move(layers)), n_ctx_(n_ctx), model_id_(model_id) {}
  SeqState(SeqState&&) = default;
  SeqState& operator=(SeqState&&) = default;
  SeqState(const SeqState&) = delete;
  SeqState& operator=(const SeqState&) = delete;

  int32_t position() const { return position_; }
  int32_t n_ctx() const { return n_ctx_; }
  uint64_t model_id() const { return model_id_; }
  void advance(int32_t n) { position_ += n; }
  // Throws a user-facing error unless n more positions fit in the context.
  void check_room(int64_t n) const;
  int32_t truncate_floor() const;  // max over layers
  // All-or-nothing: checks every layer's floor first (the parts that can refuse), then
  // cuts. false => unchanged.
  bool try_truncate(int32_t pos);
  size_t bytes() const;
  // bytes() once the whole context is filled, its last n_batch positions in one batch
  // (LayerState::bytes_at): the most one sequence of this model holds.
  size_t bytes_at_full_context(int32_t n_batch) const;
  SeqState fork() const;
  // prepared: per layer, memory for its fixed copy (see prepare_snapshot_memory), or empty.
  Snapshot snapshot(std::vector<std::vector<uint8_t>> prepared = {}) const;
  std::vector<size_t> fixed_copy_bytes() const;  // [n_layers] LayerState::fixed_copy_bytes
  // Refuses (std::runtime_error, state unchanged) a snapshot of another model, of another
  // layer layout, or whose checksums do not match its contents.
  void restore(const Snapshot& s);

  size_t n_layers() const { return layers_.size(); }
  LayerState& layer(size_t i) { return *layers_[i]; }
  const LayerState& layer(size_t i) const { return *layers_[i]; }

 private:
  std::vector<std::unique_ptr<LayerState>> layers_;  // [n_layer], kinds declared by the model
  int32_t n_ctx_ = 0;
  uint64_t model_id_ = 0;
  int32_t position_ = 0;
};

// Touched memory of the given sizes ([n_layers] bytes, 0 = none) for SeqState::snapshot:
// a copy into fresh memory pays its page faults (1-5 ms per MiB on a VM), so a snapshot
// due later is cheaper with memory prepared beforehand, off the critical path.
std::vector<std::vector<uint8_t>> prepare_snapshot_memory(std::span<const size_t> sizes);

// 64-bit hash used for checksums and model identity (not cryptographic).
uint64_t hash_bytes(const void* data, size_t n, uint64_t seed = 0);

}  // namespace ws
