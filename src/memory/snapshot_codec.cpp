#include "memory/snapshot_codec.h"

#include <stdexcept>

namespace ws {

std::vector<uint8_t> ByteReader::get_blob(const char* what) {
  const uint64_t n = get<uint64_t>(what);
  need(n, what);
  std::vector<uint8_t> out(data_.begin() + std::ptrdiff_t(pos_), data_.begin() + std::ptrdiff_t(pos_ + n));
  pos_ += size_t(n);
  return out;
}

uint32_t ByteReader::get_count(size_t elem_bytes, const char* what) {
  const uint32_t n = get<uint32_t>(what);
  need(uint64_t(n) * elem_bytes, what);
  return n;
}

void ByteReader::fail(const std::string& why) const {
  throw std::runtime_error(label_ + ": not a valid warmstart " + kind_ + ": " + why);
}

namespace {

void write_layer(ByteWriter& w, const LayerSnapshot& l, const PageIndex& pages) {
  w.put(uint8_t(l.kind));
  w.put(int32_t(l.position));
  w.put(int32_t(l.first_position));
  w.put(l.shape_tag);
  w.put(l.checksum);
  w.put(uint32_t(l.pages.size()));
  for (const auto& page : l.pages) w.put(pages.at(page.get()));
  w.put(uint64_t(l.bytes.size()));
  w.put_bytes(l.bytes.data(), l.bytes.size());
}

LayerSnapshot read_layer(ByteReader& r, const std::vector<std::shared_ptr<const KvPage>>& pages) {
  LayerSnapshot l;
  const uint8_t kind = r.get<uint8_t>("layer kind");
  if (kind > uint8_t(LayerKind::recurrent)) r.fail("unknown layer kind " + std::to_string(kind));
  l.kind = LayerKind(kind);
  l.position = r.get<int32_t>("layer position");
  l.first_position = r.get<int32_t>("layer first position");
  l.shape_tag = r.get<uint64_t>("layer shape");
  l.checksum = r.get<uint64_t>("layer checksum");
  const uint32_t n_pages = r.get_count(sizeof(uint32_t), "page count");
  for (uint32_t i = 0; i < n_pages; ++i) {
    const uint32_t at = r.get<uint32_t>("page index");
    if (at >= pages.size()) r.fail("a layer names page " + std::to_string(at) + " of " + std::to_string(pages.size()));
    l.pages.push_back(pages[at]);
  }
  l.bytes = r.get_blob("layer state");
  if (l.compute_checksum() != l.checksum) r.fail("a layer's checksum does not match its contents");
  return l;
}

}  // namespace

void write_snapshot(ByteWriter& w, const Snapshot& s, const PageIndex& pages) {
  w.put(int32_t(s.position));
  w.put(uint32_t(s.logits.size()));
  w.put_bytes(s.logits.data(), s.logits.size() * sizeof(float));
  w.put(uint32_t(s.layers.size()));
  for (const auto& l : s.layers) write_layer(w, l, pages);
  w.put(s.checksum);
}

Snapshot read_snapshot(ByteReader& r, uint64_t model_id, const std::vector<std::shared_ptr<const KvPage>>& pages) {
  Snapshot s;
  s.model_id = model_id;
  s.position = r.get<int32_t>("position");
  s.logits.resize(r.get_count(sizeof(float), "logit count"));
  for (auto& x : s.logits) x = r.get<float>("logits");
  const uint32_t n_layers = r.get_count(1 + 4 + 4 + 8 + 8 + 4 + 8, "layer count");
  for (uint32_t i = 0; i < n_layers; ++i) s.layers.push_back(read_layer(r, pages));
  s.checksum = r.get<uint64_t>("snapshot checksum");
  if (s.compute_checksum() != s.checksum) r.fail("a snapshot's checksum does not match its layers");
  return s;
}

bool trailing_hash_matches(std::span<const uint8_t> data) {
  if (data.size() < 8) return false;
  uint64_t stored = 0;
  std::memcpy(&stored, data.data() + data.size() - 8, 8);
  return hash_bytes(data.data(), data.size() - 8) == stored;
}

}  // namespace ws
