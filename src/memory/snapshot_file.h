// The checkpoints of one token sequence, as one file (llama-server's slot save and
// restore): every snapshot taken along it, so that a later conversation diverging anywhere
// finds the checkpoint before its divergence, as it would in the prefix cache. KV pages
// shared between the snapshots are written once. The reader trusts nothing: every length is checked against the bytes left, every
// page's checksum is recomputed from its bytes, and the layer and snapshot checksums must
// match, so a truncated, corrupted or hostile file is refused with a message, never
// restored. (Whether the layers' shapes fit the model is checked again by the restore.)
//
// Layout, little-endian: "WSSNAP01", u32 version, u64 model_id, u32 n_tokens + i32
// tokens[n_tokens], u32 n_pages + per page (u64 k bytes, k, u64 v bytes, v), u32
// n_snapshots, then per snapshot: i32 position, u32 n_logits + f32 logits[], u32 n_layers,
// per layer (u8 kind, i32 position, i32 first_position, u64 shape_tag, u64 checksum, u32
// n_pages + u32 page indices[], u64 n_bytes + bytes), u64 snapshot checksum; last, a hash
// of everything before it (u64).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "memory/state.h"

namespace ws {

struct SavedSequence {
  std::vector<int32_t> tokens;     // the sequence; snapshot i holds its first snapshots[i].position
  std::vector<Snapshot> snapshots;  // by position, the deepest last
};

// The file's bytes for `tokens` and `snapshots` (each of the same model, taken after a
// prefix of `tokens`, by increasing position).
std::vector<uint8_t> encode_snapshot_file(const std::vector<int32_t>& tokens,
                                          const std::vector<std::shared_ptr<const Snapshot>>& snapshots);
// Decodes them. `expected_model_id`: a snapshot of other weights is refused. Throws
// std::runtime_error naming `label` (the file) and what is wrong.
SavedSequence decode_snapshot_file(const std::vector<uint8_t>& data, const std::string& label,
                                   uint64_t expected_model_id);

// `bytes` into `path` through a temporary file (PATH.tmpPID) renamed into place: a crash
// mid-write never leaves part of a file under `path`. Throws std::runtime_error "PATH:
// cannot write: REASON" (the temporary file removed).
void write_file_atomically(const std::string& path, std::span<const uint8_t> bytes);
// encode_snapshot_file into `path` with write_file_atomically. Returns
// bytes written; throws std::runtime_error on an I/O error.
size_t write_snapshot_file(const std::string& path, const std::vector<int32_t>& tokens,
                           const std::vector<std::shared_ptr<const Snapshot>>& snapshots);
// decode_snapshot_file of the file at `path`; larger than `max_bytes` is refused unread.
SavedSequence read_snapshot_file(const std::string& path, uint64_t expected_model_id, size_t max_bytes);

}  // namespace ws
