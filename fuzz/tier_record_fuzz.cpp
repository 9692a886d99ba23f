// libFuzzer target for the storage tiers' records (cache/tier_record.h), which come back
// from a disk or a Redis server another process writes: genuine checkpoint and page
// records of a small hybrid state are flipped, cut, overwritten or replaced by the input,
// with the trailing hash recomputed or not, and decoded. A decode must either throw
// std::runtime_error (TierMiss included) or give a snapshot that the state's restore
// checks (and accepts or refuses with std::runtime_error). Built and run by tests/fuzz.sh
// with ASan + UBSan.
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <vector>

#include "cache/tier_record.h"
#include "support/fuzz_input.h"

namespace {

using ws::fuzz::FuzzInput;

constexpr uint64_t kModelId = 0x5eed;

ws::MemoryOptions layout() {
  ws::MemoryOptions m;
  m.kv_types = {ws::KvType::f16, ws::KvType::f16, false};
  m.kv_page_size = 4;
  return m;
}

ws::SeqState make_state() {
  std::vector<std::unique_ptr<ws::LayerState>> layers;
  layers.push_back(std::make_unique<ws::FullKvState>(2, 32, layout().kv_types, 4));
  layers.push_back(std::make_unique<ws::RecurrentState>(std::vector<size_t>{5, 3}));
  return ws::SeqState(std::move(layers), 64, kModelId);
}

struct Genuine {
  std::vector<int32_t> prefix;
  ws::EncodedCheckpoint checkpoint;
  std::vector<std::vector<uint8_t>> pages;  // encoded, in the checkpoint's table order
};

const Genuine& genuine() {
  static const Genuine g = [] {
    Genuine out;
    ws::SeqState s = make_state();
    auto& kv = static_cast<ws::KvStore&>(s.layer(0));
    for (int i = 0; i < 10; ++i) {
      std::vector<float> k(64, 0.25f * float(i)), v(64, -0.5f * float(i));  // [1][2 * 32] f32
      kv.append(k.data(), v.data(), 1);
      static_cast<ws::RecurrentState&>(s.layer(1)).advance(1);
      s.advance(1);
      out.prefix.push_back(7 * i + 1);
    }
    const uint64_t id = ws::tier_identity(kModelId, layout());
    out.checkpoint = ws::encode_checkpoint(id, out.prefix, s.snapshot());
    for (const auto& [key, page] : out.checkpoint.pages) out.pages.push_back(ws::encode_page(id, key, *page));
    return out;
  }();
  return g;
}

// Flips, cuts, overwrites or replaces `bytes` as the input says.
void mutate(std::vector<uint8_t>& bytes, FuzzInput& in) {
  switch (in.range(0, 3)) {
    case 0:
      for (int64_t n = in.range(1, 4); n > 0 && !bytes.empty(); --n)
        bytes[size_t(in.range(0, int64_t(bytes.size()) - 1))] ^= uint8_t(in.range(1, 255));
      break;
    case 1: bytes.resize(size_t(in.range(0, int64_t(bytes.size())))); break;
    case 2: {
      const size_t at = size_t(in.range(0, int64_t(bytes.size())));
      const auto b = in.bytes(64);
      bytes.resize(std::max(bytes.size(), at + b.size()));
      std::memcpy(bytes.data() + at, b.data(), b.size());
      break;
    }
    default: {
      const auto r = in.rest();
      bytes.assign(r.begin(), r.end());
    }
  }
  if (in.flag() && bytes.size() >= 8) {  // a forger that recomputes the trailing hash
    const uint64_t h = ws::hash_bytes(bytes.data(), bytes.size() - 8);
    std::memcpy(bytes.data() + bytes.size() - 8, &h, 8);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  const Genuine& g = genuine();
  const uint64_t id = ws::tier_identity(kModelId, layout());
  const int64_t which = in.range(0, int64_t(g.pages.size()));  // 0: the checkpoint, else a page
  std::vector<uint8_t> checkpoint = g.checkpoint.bytes;
  std::vector<std::vector<uint8_t>> pages = g.pages;
  mutate(which == 0 ? checkpoint : pages[size_t(which - 1)], in);
  try {
    (void)ws::read_checkpoint_header(checkpoint, "fuzz");
  } catch (const std::runtime_error&) {
  }
  std::map<size_t, std::shared_ptr<const ws::KvPage>> decoded;
  for (size_t i = 0; i < pages.size(); ++i) {
    try {
      decoded[i] = ws::decode_page(pages[i], "fuzz page", id, g.checkpoint.pages[i].first);
    } catch (const std::runtime_error&) {
    }
  }
  try {
    const ws::Snapshot s = ws::decode_checkpoint(checkpoint, "fuzz", id, kModelId, g.prefix, [&](const ws::RecordKey& k) {
      for (size_t i = 0; i < pages.size(); ++i)
        if (g.checkpoint.pages[i].first == k && decoded.count(i)) return decoded[i];
      return std::shared_ptr<const ws::KvPage>();
    });
    ws::SeqState state = make_state();
    state.restore(s);
  } catch (const std::runtime_error&) {
  }
  return 0;
}
