// The per-layer state kinds: paged full KV, sliding-window KV, recurrent buffers, and their
// composition. Pins isolation (no aliasing between a state, its forks and snapshots),
// truncate_floor semantics, all-or-nothing cuts, refusal of foreign or corrupted
// snapshots, and byte accounting.
#include <gtest/gtest.h>

#include <numeric>

#include "memory/prepared_memory.h"
#include "memory/state.h"

using namespace ws;

namespace {

constexpr int32_t kHeads = 2, kDim = 4, kRow = kHeads * kDim;

// k row of position p: distinct values so any mix-up shows. v = -k.
std::vector<float> rows_for(int32_t p0, int32_t n, float sign = 1.f) {
  std::vector<float> r(size_t(n) * kRow);  // [n][kHeads*kDim]
  for (int32_t t = 0; t < n; ++t)
    for (int32_t i = 0; i < kRow; ++i) r[size_t(t) * kRow + i] = sign * float((p0 + t) * 100 + i);
  return r;
}

void append(KvStore& kv, int32_t n, float sign = 1.f) {
  const int32_t p0 = kv.position();
  const auto k = rows_for(p0, n, sign), v = rows_for(p0, n, -sign);
  kv.append(k.data(), v.data(), n);
}

// Keys of head h at [b, e) must be those of `rows_for` with `sign`.
void expect_keys(const KvStore& kv, int32_t b, int32_t e, float sign = 1.f) {
  std::vector<float> got(size_t(e - b) * kDim);  // [e-b][kDim]
  for (int32_t h = 0; h < kHeads; ++h) {
    kv.read_keys(h, b, e, got.data());
    for (int32_t p = b; p < e; ++p)
      for (int32_t d = 0; d < kDim; ++d)
        ASSERT_EQ(got[size_t(p - b) * kDim + d], sign * float(p * 100 + h * kDim + d)) << "pos " << p;
  }
}

TEST(FullKv, AppendsAcrossPagesAndReadsBack) {
  FullKvState kv(kHeads, kDim, KvTypes{KvType::f32, KvType::f32}, 8);
  append(kv, 5);
  append(kv, 20);  // crosses two page boundaries
  EXPECT_EQ(kv.position(), 25);
  expect_keys(kv, 0, 25);
  std::vector<float> vals(size_t(25) * kDim);
  kv.read_values(1, 0, 25, vals.data());
  EXPECT_EQ(vals[3 * kDim + 2], -float(3 * 100 + kDim + 2));
  EXPECT_EQ(kv.truncate_floor(), 0);
  EXPECT_EQ(kv.bytes(), 25u * kRow * 4 * 2);
}

// Sealed pages are stored head by head, the tail position by position: a cut inside a
// sealed page brings its first rows back into the tail, and every read path agrees.
TEST(FullKv, CutInsideSealedPageKeepsItsRows) {
  FullKvState kv(kHeads, kDim, KvTypes{KvType::f32, KvType::f32}, 8);
  append(kv, 21);
  auto fork = kv.fork();  // shares the sealed pages the cut must not change
  kv.truncate(11);        // inside the second sealed page
  expect_keys(kv, 0, 11);
  append(kv, 14);  // refills and seals that page again, then one more
  expect_keys(kv, 0, 25);
  expect_keys(*static_cast<FullKvState*>(fork.get()), 0, 21);
  std::vector<float> vals(size_t(25) * kDim);  // [25][kDim] values of head 1
  kv.read_values(1, 0, 25, vals.data());
  for (int32_t p = 0; p < 25; ++p) ASSERT_EQ(vals[size_t(p) * kDim], -float(p * 100 + kDim)) << "pos " << p;
  const KvStore::RowSpan r = kv.rows(9, 25);  // a sealed page from position 9 on: head-major
  EXPECT_EQ(r.n, 7);
  // Strides count head rows (kDim f32 each): position 10, head 1.
  EXPECT_EQ(reinterpret_cast<const float*>(r.k)[(r.row_stride + r.head_stride) * kDim], float(10 * 100 + kDim));
}

TEST(FullKv, F16StorageRoundsOnly) {
  FullKvState kv(kHeads, kDim, KvTypes{KvType::f16, KvType::f16}, 8);
  append(kv, 10);
  std::vector<float> got(size_t(10) * kDim);
  kv.read_keys(0, 0, 10, got.data());
  for (int32_t p = 0; p < 10; ++p)
    for (int32_t d = 0; d < kDim; ++d) EXPECT_EQ(got[size_t(p) * kDim + d], f16_to_f32(f32_to_f16(float(p * 100 + d))));
  EXPECT_EQ(kv.bytes(), 10u * kRow * 2 * 2);
}

TEST(FullKv, ForkAndSnapshotAreIsolated) {
  FullKvState kv(kHeads, kDim, KvTypes{KvType::f32, KvType::f32}, 8);
  append(kv, 13);  // one sealed page + 5 in the tail
  auto fork = kv.fork();
  const LayerSnapshot snap = kv.snapshot();
  EXPECT_EQ(snap.pages.size(), 1u);  // the sealed page is referenced, not copied
  EXPECT_EQ(snap.bytes.size(), 2u * 5 * kRow * 4);

  // Cut the origin into its sealed page and write different values there.
  kv.truncate(3);
  append(kv, 20, -1.f);
  expect_keys(kv, 0, 3);
  expect_keys(kv, 3, 23, -1.f);
  // The fork and the snapshot still hold the old history.
  expect_keys(static_cast<FullKvState&>(*fork), 0, 13);
  FullKvState restored(kHeads, kDim, KvTypes{KvType::f32, KvType::f32}, 8);
  restored.restore(snap);
  expect_keys(restored, 0, 13);
  // Extending the fork leaves the origin alone.
  append(static_cast<FullKvState&>(*fork), 7, -1.f);
  expect_keys(kv, 3, 23, -1.f);
}

TEST(FullKv, RestoreRefusesMismatchAndCorruption) {
  FullKvState kv(kHeads, kDim, KvTypes{KvType::f32, KvType::f32}, 8);
  append(kv, 10);
  LayerSnapshot snap = kv.snapshot();
  FullKvState other(kHeads, kDim * 2, KvTypes{KvType::f32, KvType::f32}, 8);
  EXPECT_THROW(other.restore(snap), std::runtime_error);
  snap.bytes[5] ^= 0x40;
  FullKvState target(kHeads, kDim, KvTypes{KvType::f32, KvType::f32}, 8);
  append(target, 3, -1.f);
  EXPECT_THROW(target.restore(snap), std::runtime_error);
  expect_keys(target, 0, 3, -1.f);  // unchanged
}

TEST(SlidingKv, FloorIsWhatTheKeptCellsAllow) {
  const int32_t window = 4, slack = 3;
  SlidingKvState kv(kHeads, kDim, KvTypes{KvType::f32, KvType::f32}, window, slack);
  append(kv, 3);
  EXPECT_EQ(kv.truncate_floor(), 0);  // nothing dropped yet: any cut is exact
  for (int i = 0; i < 20; ++i) append(kv, 1);
  // Cells kept: W-1+slack before the last append, plus the new one.
  EXPECT_EQ(kv.position() - kv.first_position(), window - 1 + slack + 1);
  // W-1+k cells allow a cut of k.
  const int32_t k = kv.position() - kv.first_position() - (window - 1);
  EXPECT_EQ(kv.truncate_floor(), kv.position() - k);
  expect_keys(kv, kv.first_position(), kv.position());

  SeqState seq([&] {
    std::vector<std::unique_ptr<LayerState>> l;
    l.push_back(kv.fork());
    return l;
  }(), 100, 7);
  seq.advance(kv.position());
  EXPECT_FALSE(seq.try_truncate(kv.truncate_floor() - 1));
  EXPECT_EQ(seq.position(), kv.position());
  EXPECT_TRUE(seq.try_truncate(kv.truncate_floor()));
}

TEST(SlidingKv, SnapshotHoldsOneWindowAndRestoresExactly) {
  const int32_t window = 5;
  SlidingKvState kv(kHeads, kDim, KvTypes{KvType::f32, KvType::f32}, window, 10);
  append(kv, 30);
  const LayerSnapshot snap = kv.snapshot();
  EXPECT_EQ(snap.position - snap.first_position, window - 1);
  EXPECT_EQ(snap.bytes.size(), 2u * (window - 1) * kRow * 4);
  append(kv, 4, -1.f);
  SlidingKvState restored(kHeads, kDim, KvTypes{KvType::f32, KvType::f32}, window, 10);
  restored.restore(snap);
  EXPECT_EQ(restored.position(), 30);
  expect_keys(restored, 30 - (window - 1), 30);
  // A restored window can continue but not be cut back.
  EXPECT_EQ(restored.truncate_floor(), 30);
}

TEST(Recurrent, CannotBeCutAndSnapshotsAreIsolated) {
  RecurrentState r({3, 5});
  std::iota(r.buffer(1).begin(), r.buffer(1).end(), 1.f);
  r.advance(4);
  EXPECT_EQ(r.truncate_floor(), 4);
  const LayerSnapshot snap = r.snapshot();
  auto fork = r.fork();
  r.buffer(1)[0] = 99.f;
  r.advance(1);
  RecurrentState restored({3, 5});
  restored.restore(snap);
  EXPECT_EQ(restored.position(), 4);
  EXPECT_EQ(restored.buffer(1)[0], 1.f);
  EXPECT_EQ(static_cast<RecurrentState&>(*fork).buffer(1)[0], 1.f);
  RecurrentState wrong({3, 6});
  EXPECT_THROW(wrong.restore(snap), std::runtime_error);
}

// A hybrid of every kind: a refused cut changes nothing, an accepted one is all-or-nothing.
SeqState hybrid(uint64_t model_id) {
  std::vector<std::unique_ptr<LayerState>> l;
  l.push_back(std::make_unique<FullKvState>(kHeads, kDim, KvTypes{KvType::f32, KvType::f32}, 8));
  l.push_back(std::make_unique<RecurrentState>(std::vector<size_t>{4}));
  l.push_back(std::make_unique<SlidingKvState>(kHeads, kDim, KvTypes{KvType::f32, KvType::f32}, 4, 2));
  return SeqState(std::move(l), 64, model_id);
}

void advance_hybrid(SeqState& s, int32_t n, float sign) {
  append(static_cast<KvStore&>(s.layer(0)), n, sign);
  auto& r = static_cast<RecurrentState&>(s.layer(1));
  for (float& x : r.buffer(0)) x += sign * float(n);
  r.advance(n);
  append(static_cast<KvStore&>(s.layer(2)), n, sign);
  s.advance(n);
}

TEST(SeqStateTest, HybridCutIsAllOrNothing) {
  SeqState s = hybrid(1);
  advance_hybrid(s, 10, 1.f);
  EXPECT_EQ(s.truncate_floor(), 10);  // the recurrent layer decides
  const size_t before = s.bytes();
  EXPECT_FALSE(s.try_truncate(5));
  EXPECT_EQ(s.position(), 10);
  EXPECT_EQ(s.layer(0).position(), 10);  // the full KV layer, which could cut, was not cut
  EXPECT_EQ(s.bytes(), before);
  EXPECT_TRUE(s.try_truncate(10));
}

TEST(SeqStateTest, SnapshotRestoreRefusesForeignOrCorrupted) {
  SeqState s = hybrid(1);
  advance_hybrid(s, 12, 1.f);
  Snapshot snap = s.snapshot();
  EXPECT_EQ(snap.copied_bytes() + snap.page_bytes(), snap.bytes());
  // Page bytes: one sealed page of 8 positions (k and v) in the full KV layer.
  EXPECT_EQ(snap.page_bytes(), 2u * 8 * kRow * 4);

  SeqState other_model = hybrid(2);
  EXPECT_THROW(other_model.restore(snap), std::runtime_error);

  SeqState target = hybrid(1);
  advance_hybrid(target, 3, -1.f);
  Snapshot corrupted = snap;
  corrupted.layers[1].bytes[2] ^= 1;
  EXPECT_THROW(target.restore(corrupted), std::runtime_error);
  EXPECT_EQ(target.position(), 3);
  expect_keys(static_cast<KvStore&>(target.layer(0)), 0, 3, -1.f);

  target.restore(snap);
  EXPECT_EQ(target.position(), 12);
  expect_keys(static_cast<KvStore&>(target.layer(0)), 0, 12);
  // Two snapshots of one state share its sealed pages: counted once across both.
  const Snapshot again = s.snapshot();
  EXPECT_EQ(again.layers[0].pages[0].get(), snap.layers[0].pages[0].get());
}

// Memory prepared ahead receives the recurrent copy; the snapshot is the same either way,
// and logits kept with it are covered by its checksum.
TEST(SeqStateTest, SnapshotIntoPreparedMemoryIsTheSameSnapshot) {
  SeqState s = hybrid(1);
  advance_hybrid(s, 12, 1.f);
  const std::vector<size_t> sizes = s.fixed_copy_bytes();
  EXPECT_EQ(sizes, (std::vector<size_t>{0, 4 * sizeof(float), 0})) << "only the recurrent layer copies fixed bytes";
  auto prepared = prepare_snapshot_memory(sizes);
  const uint8_t* where = prepared[1].data();
  const Snapshot plain = s.snapshot(), into = s.snapshot(std::move(prepared));
  EXPECT_EQ(into.layers[1].bytes.data(), where) << "the prepared buffer holds the copy";
  EXPECT_EQ(into.checksum, plain.checksum);
  for (size_t i = 0; i < plain.layers.size(); ++i) EXPECT_EQ(into.layers[i].bytes, plain.layers[i].bytes);
  // A set of the wrong size is not used (the layer allocates its own).
  std::vector<std::vector<uint8_t>> wrong(3, std::vector<uint8_t>(1));
  EXPECT_EQ(s.snapshot(std::move(wrong)).checksum, plain.checksum);

  Snapshot with_logits = s.snapshot();
  with_logits.logits = {0.5f, -1.f, 2.f};
  EXPECT_NE(with_logits.compute_checksum(), with_logits.checksum) << "the checksum covers the logits";
  with_logits.checksum = with_logits.compute_checksum();
  EXPECT_EQ(with_logits.copied_bytes(), plain.copied_bytes() + 3 * sizeof(float));
}

TEST(PreparedSnapshotMemoryTest, HandsOutTheSetsStartedAndThenNone) {
  PreparedSnapshotMemory memory({0, 4096, 16});
  EXPECT_TRUE(memory.take().empty()) << "nothing started";
  memory.start(5);
  for (int i = 0; i < 5; ++i) {
    const auto set = memory.take();
    ASSERT_EQ(set.size(), 3u) << "set " << i;
    EXPECT_EQ(set[0].size(), 0u);
    EXPECT_EQ(set[1].size(), 4096u);
    EXPECT_EQ(set[2].size(), 16u);
  }
  EXPECT_TRUE(memory.take().empty()) << "all taken";
  PreparedSnapshotMemory nothing_to_copy({0, 0});
  nothing_to_copy.start(3);
  EXPECT_TRUE(nothing_to_copy.take().empty()) << "full-KV models prepare nothing";
  PreparedSnapshotMemory abandoned({1 << 20});
  abandoned.start(100);  // destroyed with 100 untaken: the helper stops, nothing hangs
}

}  // namespace
