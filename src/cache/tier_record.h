// The records of the storage tiers (cache/tiers.h): one format for the disk directory and
// for Redis, documented with its version in docs/cache-tiers.md. Two kinds:
//
//   checkpoint  the state after a token prefix: "WSCKPT01", u32 version, u64 identity,
//               i32 depth, u32 n_pages, n_pages x 16-byte page keys, i32 tokens[depth], one
//               snapshot (memory/snapshot_codec.h, its pages named by index in the keys),
//               u64 hash of everything before it.
//   page        one sealed KV page, stored once however many checkpoints name it:
//               "WSPAGE01", u32 version, u64 identity, 16-byte key, u64 K size, u64 V size,
//               u64 hash of the header so far, then the K bytes and the V bytes. The key
//               is a 128-bit hash of K and V: it is the bytes' checksum.
//
// A checkpoint's key derives from the identity and its token prefix (prefix_keys), a
// page's from its bytes (page_key), so equal contents get equal keys in every process.
// The identity is the model's weights and the KV layout (tier_identity). A record read
// back is untrusted: the decoders check the hash, the identity, every length, the tokens
// against the prompt, a page's bytes against its key and every layer checksum before
// anything is used.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "memory/state.h"

namespace ws {

using Token = int32_t;

constexpr uint32_t kTierFormatVersion = 1;

struct RecordKey {
  uint64_t hi = 0, lo = 0;
  bool operator==(const RecordKey&) const = default;
  std::string hex() const;  // 32 lowercase hex digits
};
struct RecordKeyHash {
  size_t operator()(const RecordKey& k) const { return size_t(k.hi ^ (k.lo * 0x9e3779b97f4a7c15ULL)); }
};

// The model's weights and the layout of its KV pages: records of one identity restore into
// a state of the other only if both match.
uint64_t tier_identity(uint64_t model_id, const MemoryOptions& memory);
// [n]: key i names the checkpoint after tokens[0..i] (i + 1 tokens).
std::vector<RecordKey> prefix_keys(uint64_t identity, std::span<const Token> tokens);
RecordKey page_key(const KvPage& page);  // from the page's bytes

// A checkpoint's bytes, and the pages it names (the table, in order, each once).
struct EncodedCheckpoint {
  std::vector<uint8_t> bytes;
  std::vector<std::pair<RecordKey, std::shared_ptr<const KvPage>>> pages;
};
EncodedCheckpoint encode_checkpoint(uint64_t identity, std::span<const Token> prefix, const Snapshot& s);

// What the front of a checkpoint record says (read without the rest: the disk index at
// start-up); throws std::runtime_error if the front is not one.
struct CheckpointHeader {
  uint64_t identity = 0;
  int32_t depth = 0;
  std::vector<RecordKey> pages;
};
CheckpointHeader read_checkpoint_header(std::span<const uint8_t> bytes, const std::string& label);

// Decodes a checkpoint of `identity` whose tokens must equal `prefix`; its pages come from
// `page` (by key; null when missing, which throws TierMiss). Throws std::runtime_error
// naming `label` for anything wrong with the bytes.
struct TierMiss : std::runtime_error {
  using std::runtime_error::runtime_error;
};
using PageSource = std::function<std::shared_ptr<const KvPage>(const RecordKey&)>;
Snapshot decode_checkpoint(std::span<const uint8_t> bytes, const std::string& label, uint64_t identity,
                           uint64_t model_id, std::span<const Token> prefix, const PageSource& page);

std::vector<uint8_t> encode_page(uint64_t identity, const RecordKey& key, const KvPage& page);
std::shared_ptr<const KvPage> decode_page(std::span<const uint8_t> bytes, const std::string& label,
                                          uint64_t identity, const RecordKey& key);

}  // namespace ws
