// libFuzzer target for snapshot restore (memory/state): a genuine snapshot of a small
// hybrid sequence (paged full KV, sliding-window KV, recurrent buffers) is corrupted as the
// input says — positions, sizes, bytes, pages, shape tags, with checksums recomputed or
// not — and restored. Restore must either refuse with std::runtime_error, leaving the state
// exactly as it was, or accept a snapshot every read of which stays inside its memory.
// Half of the inputs go through a slot file first (memory/snapshot_file.h: encoded,
// flipped, cut or grown, decoded). Built and run by tests/fuzz.sh with ASan + UBSan.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

#include "memory/snapshot_file.h"
#include "memory/state.h"
#include "support/fuzz_input.h"

namespace {

using ws::FullKvState;
using ws::KvStore;
using ws::KvType;
using ws::LayerSnapshot;
using ws::RecurrentState;
using ws::SeqState;
using ws::SlidingKvState;
using ws::Snapshot;
using ws::fuzz::FuzzInput;

// head_dim 64: whole q8_0/q4_0 blocks, and the Hadamard rotation of the block types.
constexpr int32_t kHeads = 2, kHeadDim = 64, kPage = 4, kWindow = 3, kSlack = 2, kCtx = 64;
constexpr uint64_t kModelId = 0x5eed;

SeqState make_state(ws::KvTypes type) {
  std::vector<std::unique_ptr<ws::LayerState>> layers;
  layers.push_back(std::make_unique<FullKvState>(kHeads, kHeadDim, type, kPage));
  layers.push_back(std::make_unique<SlidingKvState>(kHeads, kHeadDim, type, kWindow, kSlack));
  layers.push_back(std::make_unique<RecurrentState>(std::vector<size_t>{5, 3}));
  return SeqState(std::move(layers), kCtx, kModelId);
}

// Feeds n tokens of deterministic K/V and recurrent values into every layer.
void feed(SeqState& s, int32_t n, float base) {
  std::vector<float> kv(size_t(n) * kHeads * kHeadDim);  // [n][kHeads * kHeadDim] f32
  for (size_t i = 0; i < kv.size(); ++i) kv[i] = base + float(i);
  for (size_t l = 0; l < s.n_layers(); ++l) {
    if (auto* kvs = dynamic_cast<KvStore*>(&s.layer(l))) kvs->append(kv.data(), kv.data(), n);
    if (auto* r = dynamic_cast<RecurrentState*>(&s.layer(l))) {
      for (float& x : r->buffer(0)) x += base;
      r->advance(n);
    }
  }
  s.advance(n);
}

// Reads every held key and value: ASan reports any read outside the layer's memory.
float read_all(const SeqState& s) {
  float sum = 0;
  std::vector<float> row;  // [positions][kHeadDim] f32
  for (size_t l = 0; l < s.n_layers(); ++l) {
    const auto* kvs = dynamic_cast<const KvStore*>(&s.layer(l));
    if (!kvs) continue;
    const int32_t b = kvs->first_position(), e = kvs->position();
    if (b < 0 || b > e) std::abort();  // an accepted snapshot left an impossible range
    row.assign(size_t(e - b) * kHeadDim, 0.f);
    for (int32_t h = 0; h < kHeads; ++h) {
      kvs->read_keys(h, b, e, row.data());
      for (float x : row) sum += x;
      kvs->read_values(h, b, e, row.data());
      for (float x : row) sum += x;
    }
  }
  return sum;
}

void corrupt_layer(FuzzInput& in, LayerSnapshot& l) {
  switch (in.range(0, 7)) {
    case 0: l.position += int32_t(in.range(-9, 9)); break;
    case 1: l.first_position += int32_t(in.range(-9, 9)); break;
    case 2: l.bytes.resize(size_t(in.range(0, int64_t(l.bytes.size()) + 64))); break;
    case 3:
      if (!l.bytes.empty()) l.bytes[size_t(in.range(0, int64_t(l.bytes.size()) - 1))] ^= uint8_t(in.range(1, 255));
      break;
    case 4: l.shape_tag = uint64_t(in.range(0, INT64_MAX)); break;
    case 5:
      if (!l.pages.empty()) l.pages.pop_back();
      else l.pages.push_back(nullptr);
      break;
    case 6:
      if (!l.pages.empty() && l.pages.back()) {  // a page whose halves are uneven but whose total is right
        auto p = std::make_shared<ws::KvPage>(*l.pages.back());
        const size_t move = size_t(in.range(0, int64_t(p->v.size())));
        p->k.insert(p->k.end(), p->v.end() - long(move), p->v.end());
        p->v.resize(p->v.size() - move);
        l.pages.back() = std::move(p);
      }
      break;
    default: l.kind = ws::LayerKind(in.range(0, 2)); break;
  }
}

// Flips, cuts or grows the encoded file; then, half of the time, recomputes its trailing
// hash so that the structural checks behind it are what must refuse.
void corrupt_file(FuzzInput& in, std::vector<uint8_t>& file) {
  for (int64_t edits = in.range(0, 4); edits > 0 && !file.empty(); --edits) {
    const size_t at = size_t(in.range(0, int64_t(file.size()) - 1));
    switch (in.range(0, 2)) {
      case 0: file[at] ^= uint8_t(in.range(1, 255)); break;
      case 1: file.resize(at); break;
      default: file.insert(file.begin() + long(at), size_t(in.range(1, 16)), uint8_t(in.range(0, 255))); break;
    }
  }
  if (file.size() >= 8 && in.flag()) {
    const uint64_t h = ws::hash_bytes(file.data(), file.size() - 8);
    std::memcpy(file.data() + file.size() - 8, &h, 8);
  }
}

// Restore must refuse (leaving the state as it was) or give a state that reads inside its
// memory and keeps working.
void check_restore(SeqState& target, const Snapshot& snap, uint64_t before) {
  try {
    target.restore(snap);
  } catch (const std::runtime_error&) {
    if (target.snapshot().checksum != before) std::abort();  // a refusal changed the state
    return;
  }
  if (target.position() < 0 || target.position() > kCtx) std::abort();
  volatile float sink = read_all(target);
  (void)sink;
  // The restored state must keep working: grow it, snapshot it, cut it back.
  if (target.position() < kCtx) feed(target, 1, 7.f);
  const Snapshot again = target.snapshot();
  if (again.compute_checksum() != again.checksum) std::abort();
  if (!target.try_truncate(target.truncate_floor())) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  // K and V storage, each of the four types (the block types rotated, head_dim 64).
  const KvType kinds[] = {KvType::f32, KvType::f16, KvType::q8_0, KvType::q4_0};
  const ws::KvTypes type{kinds[in.range(0, 3)], kinds[in.range(0, 3)]};
  SeqState source = make_state(type);
  feed(source, int32_t(in.range(0, kCtx / 2)), 1.f);
  Snapshot snap = source.snapshot();

  SeqState target = make_state(type);
  feed(target, int32_t(in.range(0, kCtx / 2)), 100.f);
  const uint64_t before = target.snapshot().checksum;

  for (int64_t edits = in.range(0, 6); edits > 0; --edits) {
    const int64_t what = in.range(0, int64_t(snap.layers.size()) + 1);
    if (what < int64_t(snap.layers.size())) corrupt_layer(in, snap.layers[size_t(what)]);
    else if (what == int64_t(snap.layers.size())) snap.position += int32_t(in.range(-9, 9));
    else snap.model_id ^= uint64_t(in.range(0, 3));
  }
  if (in.flag()) {  // a well-formed checksum, so the structural checks are what refuses
    for (auto& l : snap.layers) l.checksum = l.compute_checksum();
    snap.checksum = snap.compute_checksum();
  }

  bool whole_pages = true;  // the server only ever writes snapshots without null pages
  for (const auto& l : snap.layers)
    for (const auto& p : l.pages) whole_pages = whole_pages && p != nullptr;
  if (whole_pages && in.flag()) {  // through llama-server-style slot files (memory/snapshot_file.h)
    std::vector<int32_t> tokens(size_t(std::max(0, snap.position)));  // [position] token ids
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t(i % 97);
    std::vector<uint8_t> file;  // the encoded file
    try {
      file = ws::encode_snapshot_file(tokens, {std::make_shared<const Snapshot>(snap)});
    } catch (const std::invalid_argument&) {
      return 0;  // the writer refuses a position past its tokens; a server never asks it to
    }
    corrupt_file(in, file);
    ws::SavedSequence saved;
    try {
      saved = ws::decode_snapshot_file(file, "fuzz", kModelId);
    } catch (const std::runtime_error&) {
      return 0;
    }
    if (saved.snapshots.empty()) std::abort();  // decoded files hold at least one
    snap = std::move(saved.snapshots.back());
  }
  check_restore(target, snap, before);
  return 0;
}
