// Storage tiers under the prefix cache (cache/tiers.h): the record format against
// truncation, bit flips, other identities and key collisions; the disk store's restart,
// dedup, budget, leftovers and a full disk; the Redis store with AUTH, down, silent and
// corrupted; and on every fixture architecture, a conversation continued by a second
// "process" from the disk tier, bit-identical to cold.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "cache/prefix_cache.h"
#include "cache/tiers.h"
#include "chat/chat_prompt.h"
#include "engine/replay.h"
#include "model_fixtures.h"
#include "not_supported.h"

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace ws;

namespace {

// A temporary directory removed at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/ws-tiers-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

constexpr uint64_t kModel = 0x1234;

// A state of a full-KV layer (pages of 16 positions) and a recurrent layer, fed `n`
// random positions: its snapshots name pages and copy bytes, as hybrid models' do.
SeqState make_state() {
  std::vector<std::unique_ptr<LayerState>> layers;
  layers.push_back(std::make_unique<FullKvState>(2, 32, KvTypes{KvType::f16, KvType::f16, false}, 16));
  layers.push_back(std::make_unique<RecurrentState>(std::vector<size_t>{48, 80}));
  return SeqState(std::move(layers), 4096, kModel);
}

MemoryOptions layout() {
  MemoryOptions m;
  m.kv_types = {KvType::f16, KvType::f16, false};
  m.kv_page_size = 16;
  return m;
}

void feed(SeqState& s, int32_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  auto& kv = static_cast<KvStore&>(s.layer(0));
  auto& rec = static_cast<RecurrentState&>(s.layer(1));
  for (int32_t i = 0; i < n; ++i) {
    std::vector<float> k(64), v(64);  // [1][2 * 32] f32
    for (auto& x : k) x = u(rng);
    for (auto& x : v) x = u(rng);
    kv.append(k.data(), v.data(), 1);
    for (size_t b = 0; b < 2; ++b)
      for (auto& x : rec.buffer(b)) x = u(rng);
    rec.advance(1);
    s.advance(1);
  }
}

std::vector<Token> tokens(int32_t n, Token first = 100) {
  std::vector<Token> t(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) t[size_t(i)] = first + i * 7 % 50;
  return t;
}

std::shared_ptr<const KvPage> no_page(const RecordKey&) { return nullptr; }

TEST(TierRecord, RoundTripsAndRefusesEveryDamagedCopy) {
  SeqState s = make_state();
  feed(s, 40, 1);
  const Snapshot snap = s.snapshot();
  const auto prefix = tokens(40);
  const uint64_t id = tier_identity(kModel, layout());
  const EncodedCheckpoint enc = encode_checkpoint(id, prefix, snap);
  ASSERT_EQ(enc.pages.size(), 2u) << "40 positions in pages of 16: two sealed pages";
  std::map<std::string, std::shared_ptr<const KvPage>> by_key;
  for (const auto& [k, p] : enc.pages) {
    const auto bytes = encode_page(id, k, *p);
    by_key[k.hex()] = decode_page(bytes, "page", id, k);
  }
  auto source = [&](const RecordKey& k) { return by_key.count(k.hex()) ? by_key[k.hex()] : nullptr; };
  const Snapshot back = decode_checkpoint(enc.bytes, "rec", id, kModel, prefix, source);
  EXPECT_EQ(back.checksum, snap.checksum);
  SeqState restored = make_state();
  restored.restore(back);  // the layers accept it as their own
  EXPECT_EQ(restored.position(), 40);

  for (size_t cut = 0; cut < enc.bytes.size(); cut += 7)
    EXPECT_THROW(decode_checkpoint(std::span(enc.bytes).first(cut), "rec", id, kModel, prefix, source),
                 std::runtime_error)
        << "cut at " << cut;
  std::mt19937 rng(3);
  for (int i = 0; i < 300; ++i) {
    auto bad = enc.bytes;
    bad[rng() % bad.size()] ^= uint8_t(1u << (rng() % 8));
    EXPECT_THROW(decode_checkpoint(bad, "rec", id, kModel, prefix, source), std::runtime_error);
  }
  EXPECT_THROW(decode_checkpoint(enc.bytes, "rec", id + 1, kModel, prefix, source), std::runtime_error);
  auto other = prefix;
  other[5] += 1;  // the same key for other tokens (a collision) is refused on the tokens
  EXPECT_THROW(decode_checkpoint(enc.bytes, "rec", id, kModel, other, source), std::runtime_error);
  EXPECT_THROW(decode_checkpoint(enc.bytes, "rec", id, kModel, prefix, no_page), TierMiss);

  const auto& [key, page] = enc.pages[0];
  auto page_bytes = encode_page(id, key, *page);
  EXPECT_THROW(decode_page(page_bytes, "p", id, enc.pages[1].first), std::runtime_error) << "under another key";
  EXPECT_THROW(decode_page(page_bytes, "p", id + 1, key), std::runtime_error) << "of another identity";
  for (int i = 0; i < 100; ++i) {
    auto bad = page_bytes;
    bad[rng() % bad.size()] ^= 0x10;
    EXPECT_THROW(decode_page(bad, "p", id, key), std::runtime_error);
  }
}

TEST(TierRecord, KeysDependOnIdentityAndEveryToken) {
  const auto t = tokens(30);
  const auto a = prefix_keys(1, t), b = prefix_keys(2, t);
  EXPECT_FALSE(a[29] == b[29]);
  auto t2 = t;
  t2[3] += 1;
  const auto c = prefix_keys(1, t2);
  EXPECT_TRUE(a[2] == c[2]);
  EXPECT_FALSE(a[3] == c[3]);
  EXPECT_FALSE(a[29] == c[29]);
  MemoryOptions q = layout();
  q.kv_types.k = KvType::q8_0;
  EXPECT_NE(tier_identity(kModel, layout()), tier_identity(kModel, q)) << "another KV type is another identity";
}

std::unique_ptr<CheckpointTiers> disk_tiers(const fs::path& dir, size_t budget = size_t(64) << 20) {
  std::vector<std::unique_ptr<RecordStore>> stores;
  stores.push_back(std::make_unique<DiskStore>(dir.string(), budget));
  return std::make_unique<CheckpointTiers>(std::move(stores), layout());
}

// Checkpoints at 20 and 40 positions of one sequence, offered to `tiers` and written.
void store_two(CheckpointTiers& tiers, const std::vector<Token>& seq, uint32_t seed = 1) {
  SeqState s = make_state();
  feed(s, 20, seed);
  tiers.offer(kModel, std::span(seq).first(20), std::make_shared<Snapshot>(s.snapshot()));
  feed(s, 20, seed + 1);
  tiers.offer(kModel, std::span(seq).first(40), std::make_shared<Snapshot>(s.snapshot()));
  tiers.flush();
}

fs::path nth_smallest_file(const fs::path& dir, const std::string& ext, size_t n) {
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().extension() == ext) files.push_back(e.path());
  std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) { return fs::file_size(a) < fs::file_size(b); });
  return files.at(n);
}

TEST(DiskTier, ARestartedProcessFindsTheDeepestStoredPrefix) {
  TempDir dir;
  const auto seq = tokens(60);
  {
    auto tiers = disk_tiers(dir.path);
    store_two(*tiers, seq);
    const auto st = tiers->stats()[0];
    EXPECT_EQ(st.checkpoints_written, 2u);
    EXPECT_EQ(st.pages_written, 2u) << "the page both checkpoints name is stored once";
  }
  auto tiers = disk_tiers(dir.path);
  const auto hit = tiers->find(kModel, seq, 0);
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->depth, 40);
  EXPECT_EQ(hit->tier, "disk");
  EXPECT_GT(hit->bytes, 0u);
  SeqState s = make_state();
  feed(s, 20, 1);
  feed(s, 20, 2);
  EXPECT_EQ(hit->snapshot->checksum, s.snapshot().checksum) << "the same state as the one stored";
  EXPECT_FALSE(tiers->find(kModel, seq, 40)) << "nothing deeper than asked";
  EXPECT_FALSE(tiers->find(kModel + 1, seq, 0)) << "another model's weights";
  EXPECT_EQ(tiers->find(kModel, std::span(seq).first(30), 0)->depth, 20);
  // A prompt of exactly 40 tokens needs the logits after them, which this one lacks.
  const auto whole = tiers->find(kModel, std::span(seq).first(40), 0);
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole->depth, 20);
}

TEST(DiskTier, ABadRecordIsDroppedCountedAndTheLookupGoesOn) {
  TempDir dir;
  const auto seq = tokens(60);
  { store_two(*disk_tiers(dir.path), seq); }
  const fs::path deep = nth_smallest_file(dir.path, ".rec", 1);  // the 40-token checkpoint is the larger
  {
    std::fstream f(deep, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(std::streamoff(fs::file_size(deep) / 2));
    f.put('\x5a');
  }
  auto tiers = disk_tiers(dir.path);
  const auto hit = tiers->find(kModel, seq, 0);
  ASSERT_TRUE(hit) << "the shallower checkpoint is still good";
  EXPECT_EQ(hit->depth, 20);
  EXPECT_EQ(tiers->stats()[0].records_rejected, 1u);
  EXPECT_FALSE(fs::exists(deep)) << "dropped from the store";
}

TEST(DiskTier, ACheckpointLargerThanTheRamBudgetIsSkipped) {
  TempDir dir;
  const auto seq = tokens(60);
  { store_two(*disk_tiers(dir.path), seq); }
  {
    std::vector<std::unique_ptr<RecordStore>> stores;
    stores.push_back(std::make_unique<DiskStore>(dir.path.string(), size_t(64) << 20));
    CheckpointTiers tiers(std::move(stores), layout(), /*max_checkpoint_bytes=*/1000);
    EXPECT_FALSE(tiers.find(kModel, seq, 0));
    EXPECT_EQ(tiers.stats()[0].records_rejected, 2u);
  }
  EXPECT_TRUE(disk_tiers(dir.path)->find(kModel, seq, 0)) << "skipped, not dropped: a larger budget uses them";
}

TEST(DiskTier, ATruncatedPageIsRefused) {
  TempDir dir;
  const auto seq = tokens(60);
  { store_two(*disk_tiers(dir.path), seq); }
  for (const auto& e : fs::recursive_directory_iterator(dir.path))
    if (e.path().extension() == ".page") fs::resize_file(e.path(), fs::file_size(e.path()) - 9);
  auto tiers = disk_tiers(dir.path);
  EXPECT_FALSE(tiers->find(kModel, seq, 0)) << "both checkpoints name a truncated page";
  EXPECT_GE(tiers->stats()[0].records_rejected, 1u);
}

TEST(DiskTier, StartUpRemovesWhatAKilledWriteLeft) {
  TempDir dir;
  const auto seq = tokens(60);
  { store_two(*disk_tiers(dir.path), seq); }
  const fs::path rec = nth_smallest_file(dir.path, ".rec", 1);
  // A process killed mid-write leaves its temporary file (never a record's name), and a
  // page whose checkpoint was never written.
  std::ofstream(rec.string() + ".tmp4242") << "half a record";
  std::ofstream(rec.parent_path().parent_path() / "p" / (std::string(32, 'a') + ".page")) << "orphan";
  DiskStore store(dir.path.string(), size_t(64) << 20);
  EXPECT_EQ(store.recovery().removed, 2u);
  EXPECT_EQ(store.recovery().checkpoints, 2u);
  EXPECT_EQ(store.recovery().pages, 2u);
  EXPECT_THROW(DiskStore(dir.path.string(), 1 << 20), std::runtime_error) << "one process per directory";
}

TEST(DiskTier, StaysWithinItsBudget) {
  TempDir dir;
  size_t one = 0;
  {
    auto tiers = disk_tiers(dir.path);
    store_two(*tiers, tokens(60));
    one = tiers->stats()[0].bytes_in_use;
  }
  TempDir small;
  auto tiers = disk_tiers(small.path, one + one / 4);  // room for about one sequence's records
  store_two(*tiers, tokens(60, 1000), 10);
  store_two(*tiers, tokens(60, 2000), 20);
  const auto st = tiers->stats()[0];
  EXPECT_GT(st.evictions, 0u);
  EXPECT_LE(st.bytes_in_use, one + one / 4);
  EXPECT_TRUE(tiers->find(kModel, tokens(60, 2000), 0)) << "the newest stays";
  EXPECT_FALSE(tiers->find(kModel, tokens(60, 1000), 0)) << "the least recently used went";
}

TEST(DiskTier, AFullDiskFailsTheWriteNotTheProcess) {
  TempDir dir;
  auto tiers = disk_tiers(dir.path);
  // A file-size limit makes every write past 1 KiB fail with EFBIG, as a full disk fails
  // with ENOSPC (SIGXFSZ ignored, as `warmstart serve` does).
  rlimit old{};
  getrlimit(RLIMIT_FSIZE, &old);
  auto prev = std::signal(SIGXFSZ, SIG_IGN);
  rlimit tight = old;
  tight.rlim_cur = 1024;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &tight), 0);
  store_two(*tiers, tokens(60));
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, prev);
  auto st = tiers->stats()[0];
  EXPECT_GT(st.write_errors, 0u);
  EXPECT_FALSE(st.available);
  EXPECT_NE(st.last_error.find("cannot write"), std::string::npos) << st.last_error;
  EXPECT_FALSE(tiers->find(kModel, tokens(60), 0));
  for (const auto& e : fs::recursive_directory_iterator(dir.path))
    EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << "left " << e.path();
  store_two(*tiers, tokens(60));  // room again
  st = tiers->stats()[0];
  EXPECT_TRUE(st.available);
  EXPECT_TRUE(tiers->find(kModel, tokens(60), 0));
}

// ---- Redis ----

int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

// A redis-server of Debian's package on a free loopback port, with a password.
class RedisServer {
 public:
  RedisServer() : port_(free_port()) {
    pid_ = fork();
    if (pid_ == 0) {
      const std::string port = std::to_string(port_), dir = dir_.path.string();
      execlp("redis-server", "redis-server", "--port", port.c_str(), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--requirepass", "s3cret", "--dir", dir.c_str(), "--logfile", "redis.log",
             static_cast<char*>(nullptr));
      _exit(127);
    }
    for (int i = 0; i < 100 && !up(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ~RedisServer() { stop(); }
  void stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  bool up() const {
    RedisStore probe(options());
    try {
      probe.contains(RecordKind::page, 0, std::vector<RecordKey>(1));
      return true;
    } catch (const StoreUnavailable&) {
      return false;
    }
  }
  RedisOptions options(const std::string& password = "s3cret") const {
    RedisOptions o;
    o.port = port_;
    o.password = password;
    o.timeout_ms = 300;
    o.retry_after_ms = 0;
    o.key_prefix = "test:";
    return o;
  }

 private:
  TempDir dir_;
  int port_;
  pid_t pid_ = -1;
};

std::unique_ptr<CheckpointTiers> redis_tiers(const RedisOptions& o) {
  std::vector<std::unique_ptr<RecordStore>> stores;
  stores.push_back(std::make_unique<RedisStore>(o));
  return std::make_unique<CheckpointTiers>(std::move(stores), layout());
}

TEST(RedisTier, AReplicaFindsWhatAnotherStored) {
  RedisServer redis;
  ASSERT_TRUE(redis.up()) << "redis-server (Debian's package) did not start";
  const auto seq = tokens(60);
  store_two(*redis_tiers(redis.options()), seq);
  auto other = redis_tiers(redis.options());
  const auto hit = other->find(kModel, seq, 0);
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->depth, 40);
  EXPECT_EQ(hit->tier, "redis");
  EXPECT_EQ(other->stats()[0].bytes_read, hit->bytes);
  EXPECT_FALSE(other->find(kModel, tokens(60, 500), 0)) << "another conversation";
}

TEST(RedisTier, AWrongPasswordIsAFailedTierNotAFailedTurn) {
  RedisServer redis;
  ASSERT_TRUE(redis.up());
  auto tiers = redis_tiers(redis.options("wrong"));
  EXPECT_FALSE(tiers->find(kModel, tokens(60), 0));
  const auto st = tiers->stats()[0];
  EXPECT_EQ(st.read_errors, 1u);
  EXPECT_FALSE(st.available);
  EXPECT_NE(st.last_error.find("AUTH"), std::string::npos) << st.last_error;
}

TEST(RedisTier, ACorruptedRecordIsDroppedFromRedis) {
  RedisServer redis;
  ASSERT_TRUE(redis.up());
  const auto seq = tokens(60);
  store_two(*redis_tiers(redis.options()), seq);
  // Overwrite the deeper checkpoint with a copy with one bit flipped, as a faulty peer might.
  const uint64_t id = tier_identity(kModel, layout());
  const RecordKey key = prefix_keys(id, seq)[39];
  RedisStore raw(redis.options());
  auto bytes = *raw.get(RecordKind::checkpoint, id, key);
  bytes[bytes.size() / 3] ^= 4;
  const StoredRecord rec{RecordKind::checkpoint, key, bytes, 40};
  raw.put(id, {&rec, 1});
  auto tiers = redis_tiers(redis.options());
  const auto hit = tiers->find(kModel, seq, 0);
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->depth, 20);
  EXPECT_EQ(tiers->stats()[0].records_rejected, 1u);
  EXPECT_FALSE(raw.contains(RecordKind::checkpoint, id, {&key, 1})[0]);
}

TEST(RedisTier, DownOrSilentIsSkippedWithinTheTimeout) {
  const auto seq = tokens(60);
  {
    RedisServer redis;
    ASSERT_TRUE(redis.up());
    auto tiers = redis_tiers(redis.options());
    store_two(*tiers, seq);
    redis.stop();  // killed: connection refused from now on
    EXPECT_FALSE(tiers->find(kModel, seq, 0));
    store_two(*tiers, tokens(60, 300));
    const auto st = tiers->stats()[0];
    EXPECT_EQ(st.read_errors, 1u);
    EXPECT_GE(st.write_errors, 1u);
    EXPECT_FALSE(st.available);
  }
  // A server that accepts and never answers (a hung Redis): every call times out.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  listen(fd, 8);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  RedisOptions o;
  o.port = ntohs(a.sin_port);
  o.timeout_ms = 200;
  auto tiers = redis_tiers(o);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(tiers->find(kModel, seq, 0));
  store_two(*tiers, seq);
  // Not a speed check: a hang would never get here; 30 s only bounds a broken timeout.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));
  const auto st = tiers->stats()[0];
  EXPECT_EQ(st.read_errors, 1u);
  EXPECT_NE(st.last_error.find("timed out"), std::string::npos) << st.last_error;
  close(fd);
}

// ---- A conversation continued from the disk tier, on every architecture ----

std::pair<std::string, std::vector<size_t>> chatml(const json& messages) {
  chat::RenderedPrompt r = chat::render_chatml(messages, true);
  return {std::move(r.text), std::move(r.message_ends)};
}

class TiersAcrossRestart : public ::testing::TestWithParam<std::string> {};

TEST_P(TiersAcrossRestart, TheNextTurnReusesFromDiskBitIdenticalToCold) {
  const auto file = gguf::File::open(GetParam());
  if (const auto* u = test::needs_unsupported(file)) GTEST_SKIP() << test::not_supported_message(*u, file.path());
  const auto model = load_model(file);
  const auto tok = Tokenizer::from_gguf(file);
  ThreadPool pool(2);
  EngineOptions eo;
  eo.memory.n_ctx = 2048;
  eo.n_ubatch = 64;
  eo.checkpoints.every_n = 128;
  eo.checkpoints.copy_bytes_per_token = 0;
  eo.checkpoints.min_cut_gap = 0;
  eo.memory.kv_page_size = 16;  // sealed pages in these short prompts: the page records are exercised
  TempDir dir;
  auto open = [&] {
    std::vector<std::unique_ptr<RecordStore>> stores;
    stores.push_back(std::make_unique<DiskStore>(dir.path.string(), size_t(256) << 20));
    return std::make_unique<CheckpointTiers>(std::move(stores), eo.memory);
  };
  auto msg = [](const char* role, const char* text) { return json{{"role", role}, {"content", text}}; };
  const json first = {msg("system", "You answer questions about a small bakery's opening hours and bread."),
                      msg("user", "Are you open on Sunday mornings, and do you bake rye bread every day?")};
  json second = first;
  second.push_back(msg("assistant", "We open at eight on Sundays; rye is baked on weekdays."));
  second.push_back(msg("user", "Then I will come on Monday for two loaves."));
  int32_t first_prompt = 0;
  {  // the first process
    PrefixCache cache(size_t(256) << 20);
    auto tiers = open();
    cache.attach_tiers(tiers.get());
    Engine engine(*model, *tok, &cache, eo, pool);
    Replay replay(engine, *tok, chatml, false);
    first_prompt = replay.run({{"messages", first}, {"max_tokens", 4}}).prompt_tokens;
  }  // its tiers write what is queued before they close
  PrefixCache cache(size_t(256) << 20);  // the restarted process: RAM is empty
  auto tiers = open();
  cache.attach_tiers(tiers.get());
  Engine engine(*model, *tok, &cache, eo, pool);
  Replay replay(engine, *tok, chatml, /*verify=*/true);
  const ReplayTurn t = replay.run({{"messages", second}, {"max_tokens", 6}});
  EXPECT_GE(t.reused_tokens, first_prompt - 1) << "the first turn's prompt comes back from disk";
  EXPECT_EQ(t.max_abs_logit_diff, 0.0) << "logits differ from cold";
  EXPECT_EQ(t.mean_nll_diff, 0.0);
  EXPECT_EQ(tiers->stats()[0].hits, 1u);
  const SeqState probe = model->make_state(eo.memory);
  bool full_kv = false;
  for (size_t i = 0; i < probe.n_layers(); ++i) full_kv = full_kv || probe.layer(i).kind() == LayerKind::full_kv;
  size_t page_files = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir.path)) page_files += e.path().extension() == ".page";
  if (full_kv) {
    EXPECT_GT(page_files, 0u) << "KV pages are stored as page records";
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TiersAcrossRestart, ::testing::ValuesIn(test::one_f32_model_per_arch()),
                         [](const auto& info) { return test::param_name(info.param); });

}  // namespace
