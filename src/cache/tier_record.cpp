#include "cache/tier_record.h"

#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "memory/snapshot_codec.h"

namespace ws {
namespace {

constexpr char kCheckpointMagic[8] = {'W', 'S', 'C', 'K', 'P', 'T', '0', '1'};
constexpr char kPageMagic[8] = {'W', 'S', 'P', 'A', 'G', 'E', '0', '1'};

uint64_t mix(uint64_t h, uint64_t v, uint64_t k) {
  h ^= v * k;
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ULL;
  return h ^ (h >> 32);
}

void put_key(ByteWriter& w, const RecordKey& k) {
  w.put(k.hi);
  w.put(k.lo);
}

RecordKey get_key(ByteReader& r) {
  RecordKey k;
  k.hi = r.get<uint64_t>("key");
  k.lo = r.get<uint64_t>("key");
  return k;
}

// Magic, version and identity: the part every record begins with.
void read_front(ByteReader& r, std::span<const uint8_t> bytes, const char (&magic)[8], uint64_t* identity) {
  if (bytes.size() < sizeof magic || std::memcmp(bytes.data(), magic, sizeof magic) != 0)
    r.fail(std::string("no ") + std::string(magic, 8) + " header");
  for (size_t i = 0; i < sizeof magic; ++i) r.get<char>("magic");
  if (const uint32_t v = r.get<uint32_t>("version"); v != kTierFormatVersion)
    r.fail("format version " + std::to_string(v) + " (this build reads version " +
           std::to_string(kTierFormatVersion) + ")");
  *identity = r.get<uint64_t>("identity");
}

void expect_identity(ByteReader& r, uint64_t got, uint64_t want) {
  if (got != want) r.fail("written for other weights or another KV layout");
}

}  // namespace

std::string RecordKey::hex() const {
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", (unsigned long long)hi, (unsigned long long)lo);
  return buf;
}

uint64_t tier_identity(uint64_t model_id, const MemoryOptions& m) {
  const uint64_t fields[] = {model_id, uint64_t(m.kv_types.k), uint64_t(m.kv_types.v), uint64_t(m.kv_types.rotate),
                             uint64_t(m.kv_page_size), kTierFormatVersion};
  return hash_bytes(fields, sizeof fields, 0x7469657273);
}

std::vector<RecordKey> prefix_keys(uint64_t identity, std::span<const Token> tokens) {
  // Two independent 64-bit chains: a collision would need both to collide, and even then
  // the record's own tokens are compared with the prompt before it is used.
  std::vector<RecordKey> keys(tokens.size());
  uint64_t a = mix(identity, 1, 0x9e3779b97f4a7c15ULL), b = mix(identity, 2, 0xc2b2ae3d27d4eb4fULL);
  for (size_t i = 0; i < tokens.size(); ++i) {
    const uint64_t t = uint32_t(tokens[i]);
    a = mix(a, t + 1, 0x9e3779b97f4a7c15ULL);
    b = mix(b, t + 1, 0xc2b2ae3d27d4eb4fULL);
    keys[i] = {a, b};
  }
  return keys;
}

RecordKey page_key(const KvPage& p) {
  // The low half is the page's own checksum (page_checksum), which a restored page needs
  // anyway: two passes over the bytes in all.
  return {hash_bytes(p.v.data(), p.v.size(), hash_bytes(p.k.data(), p.k.size(), 0x51) ^ 0x5bd1e995), page_checksum(p)};
}

EncodedCheckpoint encode_checkpoint(uint64_t identity, std::span<const Token> prefix, const Snapshot& s) {
  if (size_t(s.position) != prefix.size()) throw std::invalid_argument("encode_checkpoint: snapshot is not at the prefix's end");
  EncodedCheckpoint out;
  PageIndex index;
  for (const auto& l : s.layers)
    for (const auto& p : l.pages)
      if (index.emplace(p.get(), uint32_t(out.pages.size())).second) out.pages.emplace_back(page_key(*p), p);
  ByteWriter w;
  w.put_bytes(kCheckpointMagic, sizeof kCheckpointMagic);
  w.put(kTierFormatVersion);
  w.put(identity);
  w.put(int32_t(prefix.size()));
  w.put(uint32_t(out.pages.size()));
  for (const auto& [key, page] : out.pages) put_key(w, key);
  w.put_bytes(prefix.data(), prefix.size_bytes());
  write_snapshot(w, s, index);
  w.put(hash_bytes(w.bytes().data(), w.bytes().size()));
  out.bytes = std::move(w.bytes());
  return out;
}

namespace {

CheckpointHeader read_header(ByteReader& r, std::span<const uint8_t> bytes) {
  CheckpointHeader h;
  read_front(r, bytes, kCheckpointMagic, &h.identity);
  h.depth = r.get<int32_t>("depth");
  if (h.depth <= 0) r.fail("depth " + std::to_string(h.depth));
  h.pages.resize(r.get_count(16, "page count"));
  for (auto& k : h.pages) k = get_key(r);
  return h;
}

}  // namespace

CheckpointHeader read_checkpoint_header(std::span<const uint8_t> bytes, const std::string& label) {
  ByteReader r(label, bytes, "checkpoint record");
  return read_header(r, bytes);
}

Snapshot decode_checkpoint(std::span<const uint8_t> bytes, const std::string& label, uint64_t identity,
                           uint64_t model_id, std::span<const Token> prefix, const PageSource& page) {
  ByteReader r(label, bytes, "checkpoint record");
  if (!trailing_hash_matches(bytes)) r.fail("its contents do not match its hash (corrupted or cut short)");
  const CheckpointHeader h = read_header(r, bytes);
  expect_identity(r, h.identity, identity);
  if (size_t(h.depth) != prefix.size()) r.fail("its depth is not the prefix's");
  if (r.left() < prefix.size_bytes() || std::memcmp(bytes.data() + r.pos(), prefix.data(), prefix.size_bytes()) != 0)
    r.fail("its tokens are not the prompt's (a key collision)");
  for (size_t i = 0; i < prefix.size(); ++i) r.get<int32_t>("tokens");
  std::vector<std::shared_ptr<const KvPage>> pages;  // [n_pages], in the record's table order
  pages.reserve(h.pages.size());
  for (const auto& k : h.pages) {
    auto p = page(k);
    if (!p) throw TierMiss(label + ": page " + k.hex() + " is not stored");
    pages.push_back(std::move(p));
  }
  Snapshot s = read_snapshot(r, model_id, pages);
  if (s.position != h.depth) r.fail("its snapshot is not at its depth");
  if (r.pos() + 8 != bytes.size()) r.fail("bytes after the snapshot");
  return s;
}

std::vector<uint8_t> encode_page(uint64_t identity, const RecordKey& key, const KvPage& page) {
  ByteWriter w;
  w.put_bytes(kPageMagic, sizeof kPageMagic);
  w.put(kTierFormatVersion);
  w.put(identity);
  put_key(w, key);
  w.put(uint64_t(page.k.size()));
  w.put(uint64_t(page.v.size()));
  w.put(hash_bytes(w.bytes().data(), w.bytes().size()));  // of the header; the key is the bytes' checksum
  w.put_bytes(page.k.data(), page.k.size());
  w.put_bytes(page.v.data(), page.v.size());
  return std::move(w.bytes());
}

std::shared_ptr<const KvPage> decode_page(std::span<const uint8_t> bytes, const std::string& label,
                                          uint64_t identity, const RecordKey& key) {
  ByteReader r(label, bytes, "page record");
  uint64_t id = 0;
  read_front(r, bytes, kPageMagic, &id);
  const RecordKey stored = get_key(r);
  const uint64_t k_bytes = r.get<uint64_t>("key bytes"), v_bytes = r.get<uint64_t>("value bytes");
  if (!trailing_hash_matches(bytes.first(r.pos() + 8))) r.fail("its header does not match its hash");
  r.get<uint64_t>("header hash");
  expect_identity(r, id, identity);
  if (!(stored == key)) r.fail("stored under another key");
  if (k_bytes > r.left() || v_bytes != r.left() - k_bytes) r.fail("its sizes are not its length (cut short?)");
  auto p = std::make_shared<KvPage>();
  p->k.assign(bytes.begin() + std::ptrdiff_t(r.pos()), bytes.begin() + std::ptrdiff_t(r.pos() + k_bytes));
  p->v.assign(bytes.begin() + std::ptrdiff_t(r.pos() + k_bytes), bytes.end());
  if (!(page_key(*p) == key)) r.fail("its bytes are not the page its key names");
  p->checksum = key.lo;  // = page_checksum(*p), just verified
  return p;
}

}  // namespace ws
