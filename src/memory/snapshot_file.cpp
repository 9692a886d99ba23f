#include "memory/snapshot_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <unistd.h>

namespace ws {
namespace {

constexpr char kMagic[8] = {'W', 'S', 'S', 'N', 'A', 'P', '0', '1'};
constexpr uint32_t kVersion = 1;

// Appends fixed-size values and byte runs to one buffer (the file is written at once).
class Writer {
 public:
  template <class T>
  void put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    out_.insert(out_.end(), p, p + sizeof v);
  }
  void put_bytes(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    out_.insert(out_.end(), p, p + n);
  }
  std::vector<uint8_t>& bytes() { return out_; }

 private:
  std::vector<uint8_t> out_;
};

// Reads the same back, refusing any length the remaining bytes cannot hold.
class Reader {
 public:
  Reader(const std::string& path, const std::vector<uint8_t>& data) : path_(path), data_(data) {}
  template <class T>
  T get(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_.data() + pos_, sizeof v);
    pos_ += sizeof v;
    return v;
  }
  // A u64 byte count followed by that many bytes.
  std::vector<uint8_t> get_blob(const char* what) {
    const uint64_t n = get<uint64_t>(what);
    need(n, what);
    std::vector<uint8_t> out(data_.begin() + std::ptrdiff_t(pos_), data_.begin() + std::ptrdiff_t(pos_ + n));
    pos_ += size_t(n);
    return out;
  }
  // A u32 count of elements of `elem_bytes` each, checked against the bytes left.
  uint32_t get_count(size_t elem_bytes, const char* what) {
    const uint32_t n = get<uint32_t>(what);
    need(uint64_t(n) * elem_bytes, what);
    return n;
  }
  size_t pos() const { return pos_; }
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error(path_ + ": not a valid warmstart slot file: " + what);
  }

 private:
  void need(uint64_t n, const char* what) const {
    if (n > data_.size() - pos_) fail(std::string("truncated at ") + what);
  }
  const std::string& path_;
  const std::vector<uint8_t>& data_;
  size_t pos_ = 0;
};

using PageIndex = std::map<const KvPage*, uint32_t>;  // a page's place in the file's page table

void write_layer(Writer& w, const LayerSnapshot& l, const PageIndex& pages) {
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

LayerSnapshot read_layer(Reader& r, const std::vector<std::shared_ptr<const KvPage>>& pages) {
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

Snapshot read_snapshot(Reader& r, uint64_t model_id, const std::vector<std::shared_ptr<const KvPage>>& pages) {
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

std::vector<uint8_t> read_all(const std::string& path, size_t max_bytes) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw std::runtime_error(path + ": cannot read: " + ec.message());
  if (size > max_bytes)
    throw std::runtime_error(path + ": " + std::to_string(size) + " bytes, more than a slot of this server can hold (" +
                             std::to_string(max_bytes) + ")");
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> data(size);  // [file size] bytes
  if (!in.read(reinterpret_cast<char*>(data.data()), std::streamsize(size)))
    throw std::runtime_error(path + ": cannot read");
  return data;
}

}  // namespace

std::vector<uint8_t> encode_snapshot_file(const std::vector<int32_t>& tokens,
                                          const std::vector<std::shared_ptr<const Snapshot>>& snapshots) {
  if (snapshots.empty()) throw std::invalid_argument("encode_snapshot_file: no snapshots");
  Writer w;
  w.put_bytes(kMagic, sizeof kMagic);
  w.put(kVersion);
  w.put(snapshots[0]->model_id);
  w.put(uint32_t(tokens.size()));
  w.put_bytes(tokens.data(), tokens.size() * sizeof(int32_t));
  PageIndex index;
  std::vector<const KvPage*> table;  // pages in file order, each once
  for (const auto& s : snapshots)
    for (const auto& l : s->layers)
      for (const auto& p : l.pages)
        if (index.emplace(p.get(), uint32_t(table.size())).second) table.push_back(p.get());
  w.put(uint32_t(table.size()));
  for (const KvPage* p : table)
    for (const auto* half : {&p->k, &p->v}) {
      w.put(uint64_t(half->size()));
      w.put_bytes(half->data(), half->size());
    }
  w.put(uint32_t(snapshots.size()));
  for (const auto& s : snapshots) {
    if (s->model_id != snapshots[0]->model_id || s->position < 0 || size_t(s->position) > tokens.size())
      throw std::invalid_argument("encode_snapshot_file: a snapshot of another model or past the tokens");
    w.put(int32_t(s->position));
    w.put(uint32_t(s->logits.size()));
    w.put_bytes(s->logits.data(), s->logits.size() * sizeof(float));
    w.put(uint32_t(s->layers.size()));
    for (const auto& l : s->layers) write_layer(w, l, index);
    w.put(s->checksum);
  }
  w.put(hash_bytes(w.bytes().data(), w.bytes().size()));
  return std::move(w.bytes());
}

size_t write_snapshot_file(const std::string& path, const std::vector<int32_t>& tokens,
                           const std::vector<std::shared_ptr<const Snapshot>>& snapshots) {
  const std::vector<uint8_t> bytes = encode_snapshot_file(tokens, snapshots);  // [file size]
  // Written beside the target and renamed: a crash mid-write never leaves half a file
  // under the name a later restore reads.
  const std::string tmp = path + ".tmp" + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    if (!out.flush()) {
      std::remove(tmp.c_str());
      throw std::runtime_error(path + ": cannot write: " + std::strerror(errno));
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw std::runtime_error(path + ": cannot write: " + ec.message());
  }
  return bytes.size();
}

SavedSequence read_snapshot_file(const std::string& path, uint64_t expected_model_id, size_t max_bytes) {
  return decode_snapshot_file(read_all(path, max_bytes), path, expected_model_id);
}

SavedSequence decode_snapshot_file(const std::vector<uint8_t>& data, const std::string& path,
                                   uint64_t expected_model_id) {
  Reader r(path, data);
  if (data.size() < sizeof kMagic + 8 || std::memcmp(data.data(), kMagic, sizeof kMagic) != 0)
    r.fail("no WSSNAP01 header");
  uint64_t stored_hash = 0;  // the file's last 8 bytes
  std::memcpy(&stored_hash, data.data() + data.size() - 8, 8);
  if (hash_bytes(data.data(), data.size() - 8) != stored_hash)
    r.fail("its contents do not match its hash (corrupted or cut short)");
  for (size_t i = 0; i < sizeof kMagic; ++i) r.get<char>("magic");
  if (const uint32_t v = r.get<uint32_t>("version"); v != kVersion)
    r.fail("version " + std::to_string(v) + " (this build reads version " + std::to_string(kVersion) + ")");
  const uint64_t model_id = r.get<uint64_t>("model id");
  if (model_id != expected_model_id)
    throw std::runtime_error(path + ": saved from another model's weights; restore it with the model that saved it");
  SavedSequence s;
  s.tokens.resize(r.get_count(sizeof(int32_t), "token count"));
  for (auto& t : s.tokens) t = r.get<int32_t>("tokens");
  std::vector<std::shared_ptr<const KvPage>> pages(r.get_count(16, "page count"));
  for (auto& page : pages) {
    auto p = std::make_shared<KvPage>();
    p->k = r.get_blob("page keys");
    p->v = r.get_blob("page values");
    p->checksum = page_checksum(*p);  // recomputed from the bytes: the layer checksums cover it
    page = std::move(p);
  }
  const uint32_t n_snapshots = r.get_count(4 + 4 + 4 + 8, "snapshot count");
  if (n_snapshots == 0) r.fail("no snapshots");
  for (uint32_t i = 0; i < n_snapshots; ++i) {
    s.snapshots.push_back(read_snapshot(r, model_id, pages));
    const int32_t pos = s.snapshots.back().position;
    if (pos < 0 || size_t(pos) > s.tokens.size()) r.fail("a snapshot lies past the saved tokens");
    if (i > 0 && pos <= s.snapshots[i - 1].position) r.fail("snapshots out of order");
  }
  if (r.pos() + 8 != data.size()) r.fail("bytes after the last snapshot");
  return s;
}

}  // namespace ws
