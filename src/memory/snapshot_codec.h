// The byte-level pieces shared by the slot file (snapshot_file.h) and the cache tiers'
// records (cache/tier_record.h): a writer of little-endian values, a reader that checks
// every length against the bytes left before it reads, and one snapshot with its KV pages
// named by their index in a page table the caller writes (each page stored once).
#pragma once
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "memory/state.h"

namespace ws {

class ByteWriter {
 public:
  template <class T>
  void put(T v) {
    put_bytes(&v, sizeof v);
  }
  void put_bytes(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    out_.insert(out_.end(), p, p + n);
  }
  std::vector<uint8_t>& bytes() { return out_; }

 private:
  std::vector<uint8_t> out_;
};

// Reads what ByteWriter wrote from untrusted bytes: a length the rest cannot hold, an
// unknown kind or a checksum that does not match throws std::runtime_error
// "<label>: not a valid warmstart <what_kind>: <why>".
class ByteReader {
 public:
  ByteReader(std::string label, std::span<const uint8_t> data, std::string what_kind)
      : label_(std::move(label)), kind_(std::move(what_kind)), data_(data) {}
  template <class T>
  T get(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_.data() + pos_, sizeof v);
    pos_ += sizeof v;
    return v;
  }
  // A u64 byte count followed by that many bytes.
  std::vector<uint8_t> get_blob(const char* what);
  // A u32 count of elements of `elem_bytes` each, checked against the bytes left.
  uint32_t get_count(size_t elem_bytes, const char* what);
  size_t pos() const { return pos_; }
  size_t left() const { return data_.size() - pos_; }
  [[noreturn]] void fail(const std::string& why) const;

 private:
  void need(uint64_t n, const char* what) const {
    if (n > data_.size() - pos_) fail(std::string("truncated at ") + what);
  }
  std::string label_, kind_;
  std::span<const uint8_t> data_;
  size_t pos_ = 0;
};

// A page's place in the page table written before the snapshots.
using PageIndex = std::map<const KvPage*, uint32_t>;

// i32 position, u32 n_logits + f32 logits[], u32 n_layers, per layer (u8 kind, i32
// position, i32 first_position, u64 shape_tag, u64 checksum, u32 n_pages + u32 page
// indices[], u64 n_bytes + bytes), u64 snapshot checksum.
void write_snapshot(ByteWriter& w, const Snapshot& s, const PageIndex& pages);
// Reads one back with its pages from `pages`, checking every layer's and the snapshot's
// checksum (so a page table entry that is not the page the layer was taken with is refused).
Snapshot read_snapshot(ByteReader& r, uint64_t model_id, const std::vector<std::shared_ptr<const KvPage>>& pages);

// The last 8 bytes of `data` are hash_bytes of the rest (every record ends so).
bool trailing_hash_matches(std::span<const uint8_t> data);

}  // namespace ws
