#include <hiredis/hiredis.h>

#include <cstdio>

#include "cache/record_store.h"

namespace ws {

RedisOptions parse_redis_address(const std::string& s) {
  RedisOptions o;
  const size_t colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == s.size())
    throw std::invalid_argument("--cache-redis '" + s + "': expected HOST:PORT");
  o.host = s.substr(0, colon);
  if (o.host.size() > 2 && o.host.front() == '[' && o.host.back() == ']') o.host = o.host.substr(1, o.host.size() - 2);
  int port = 0;
  for (char c : s.substr(colon + 1)) {
    if (c < '0' || c > '9' || port > 65535) throw std::invalid_argument("--cache-redis '" + s + "': bad port");
    port = port * 10 + (c - '0');
  }
  if (port < 1 || port > 65535) throw std::invalid_argument("--cache-redis '" + s + "': bad port");
  o.port = port;
  return o;
}

RedisStore::RedisStore(RedisOptions options) : opt_(std::move(options)) {}

RedisStore::~RedisStore() {
  for (Connection* c : {&lookups_, &writes_})
    if (c->ctx) redisFree(c->ctx);
}

std::string RedisStore::record_key(RecordKind kind, uint64_t identity, const RecordKey& key) const {
  char id[17];
  std::snprintf(id, sizeof id, "%016llx", (unsigned long long)identity);
  return opt_.key_prefix + (kind == RecordKind::checkpoint ? "c:" : "p:") + id + ":" + key.hex();
}

std::string RedisStore::depths_key(uint64_t identity) const {
  char id[17];
  std::snprintf(id, sizeof id, "%016llx", (unsigned long long)identity);
  return opt_.key_prefix + "d:" + id;
}

void RedisStore::fail(Connection& c, const std::string& why) {
  if (c.ctx) redisFree(c.ctx);
  c.ctx = nullptr;
  c.retry_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(opt_.retry_after_ms);
  c.last_failure = "redis tier " + opt_.host + ":" + std::to_string(opt_.port) + ": " + why;
  throw StoreUnavailable(c.last_failure);
}

redisContext* RedisStore::connect(Connection& c) {
  if (c.ctx) return c.ctx;
  if (std::chrono::steady_clock::now() < c.retry_at)
    throw StoreUnavailable(c.last_failure + " (not retried for " + std::to_string(opt_.retry_after_ms) + " ms)");
  const timeval tv{opt_.timeout_ms / 1000, (opt_.timeout_ms % 1000) * 1000};
  c.ctx = redisConnectWithTimeout(opt_.host.c_str(), opt_.port, tv);
  if (!c.ctx) fail(c, "cannot allocate a connection");
  if (c.ctx->err) fail(c, std::string("cannot connect: ") + c.ctx->errstr);
  if (redisSetTimeout(c.ctx, tv) != REDIS_OK) fail(c, "cannot set the command timeout");
  if (!opt_.password.empty()) {
    std::vector<std::string_view> auth = {"AUTH"};
    if (!opt_.user.empty()) auth.push_back(opt_.user);
    auth.push_back(opt_.password);
    std::string refused;
    run_each(c, {auth}, [&](size_t, const redisReply& r) {
      if (r.type == REDIS_REPLY_ERROR) refused.assign(r.str, r.len);
    });
    if (!refused.empty()) fail(c, "AUTH refused: " + refused);
  }
  return c.ctx;
}

void RedisStore::run_each(Connection& conn, const std::vector<std::vector<std::string_view>>& commands,
                          const std::function<void(size_t, const redisReply&)>& each) {
  redisContext* c = conn.ctx ? conn.ctx : connect(conn);
  for (const auto& cmd : commands) {
    std::vector<const char*> argv;   // [argc]
    std::vector<size_t> argvlen;     // [argc]
    for (auto a : cmd) argv.push_back(a.data()), argvlen.push_back(a.size());
    if (redisAppendCommandArgv(c, int(argv.size()), argv.data(), argvlen.data()) != REDIS_OK)
      fail(conn, std::string("cannot send: ") + c->errstr);
  }
  // Each reply is handled and freed as it arrives: its memory serves the next one (fresh
  // memory costs page faults; a lookup moves tens of MiB).
  for (size_t i = 0; i < commands.size(); ++i) {
    void* raw = nullptr;
    if (redisGetReply(c, &raw) != REDIS_OK || !raw)
      fail(conn, c->err == REDIS_ERR_IO && errno == EAGAIN
                     ? "timed out after " + std::to_string(opt_.timeout_ms) + " ms"
                     : std::string("connection lost: ") + c->errstr);
    const std::unique_ptr<redisReply, void (*)(void*)> r(static_cast<redisReply*>(raw), freeReplyObject);
    if (r->type == REDIS_REPLY_ERROR && std::string_view(r->str, r->len).substr(0, 6) == "NOAUTH")
      fail(conn, "needs AUTH: " + std::string(r->str, r->len));
    each(i, *r);
  }
}

namespace {

bool is_one(const redisReply& r) { return r.type == REDIS_REPLY_INTEGER && r.integer == 1; }

}  // namespace

std::vector<int32_t> RedisStore::stored_depths(uint64_t identity, std::span<const RecordKey> keys, int32_t min_depth) {
  std::lock_guard lock(lookups_.mu);
  const std::string dk = depths_key(identity), max = std::to_string(keys.size()), min = "(" + std::to_string(min_depth);
  std::vector<int32_t> depths;
  run_each(lookups_, {{"ZREVRANGEBYSCORE", dk, max, min, "LIMIT", "0", "1024"}}, [&](size_t, const redisReply& r) {
    for (size_t i = 0; r.type == REDIS_REPLY_ARRAY && i < r.elements; ++i) {
      const redisReply* e = r.element[i];
      if (e->type != REDIS_REPLY_STRING) continue;
      const long d = std::strtol(std::string(e->str, e->len).c_str(), nullptr, 10);
      if (d > min_depth && size_t(d) <= keys.size()) depths.push_back(int32_t(d));
    }
  });
  // The set lists the depths of every conversation: which of these are this prompt's?
  std::vector<std::string> names;
  for (int32_t d : depths) names.push_back(record_key(RecordKind::checkpoint, identity, keys[size_t(d - 1)]));
  std::vector<std::vector<std::string_view>> cmds;
  for (const auto& n : names) cmds.push_back({"EXISTS", n});
  std::vector<int32_t> out;
  run_each(lookups_, cmds, [&](size_t i, const redisReply& r) {
    if (is_one(r)) out.push_back(depths[i]);
  });
  return out;
}

void RedisStore::read(RecordKind kind, uint64_t identity, std::span<const RecordKey> keys, const RecordVisitor& each) {
  std::lock_guard lock(lookups_.mu);
  std::vector<std::string> names;
  for (const auto& k : keys) names.push_back(record_key(kind, identity, k));
  std::vector<std::vector<std::string_view>> cmds;
  for (const auto& n : names) cmds.push_back({"GET", n});
  run_each(lookups_, cmds, [&](size_t i, const redisReply& r) {
    if (r.type == REDIS_REPLY_STRING) each(i, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(r.str), r.len));
  });
}

std::vector<bool> RedisStore::contains(RecordKind kind, uint64_t identity, std::span<const RecordKey> keys) {
  std::lock_guard lock(writes_.mu);
  std::vector<std::string> names;
  for (const auto& k : keys) names.push_back(record_key(kind, identity, k));
  std::vector<std::vector<std::string_view>> cmds;
  for (const auto& n : names) cmds.push_back({"EXISTS", n});
  std::vector<bool> out(keys.size());
  run_each(writes_, cmds, [&](size_t i, const redisReply& r) { out[i] = is_one(r); });
  return out;
}

void RedisStore::put(uint64_t identity, std::span<const StoredRecord> records) {
  std::lock_guard lock(writes_.mu);
  std::vector<std::string> names, depths;  // reserved: the commands hold views of them
  names.reserve(records.size());
  depths.reserve(records.size());
  const std::string dk = depths_key(identity), ttl = std::to_string(opt_.ttl_s);
  std::vector<std::vector<std::string_view>> cmds;
  for (const auto& r : records) {
    names.push_back(record_key(r.kind, identity, r.key));
    const std::string_view value(reinterpret_cast<const char*>(r.bytes.data()), r.bytes.size());
    if (opt_.ttl_s > 0) cmds.push_back({"SET", names.back(), value, "EX", ttl});
    else cmds.push_back({"SET", names.back(), value});
    if (r.kind == RecordKind::checkpoint) {
      depths.push_back(std::to_string(r.depth));
      cmds.push_back({"ZADD", dk, depths.back(), depths.back()});
    }
  }
  std::string refused;
  run_each(writes_, cmds, [&](size_t, const redisReply& r) {
    if (r.type == REDIS_REPLY_ERROR && refused.empty()) refused.assign(r.str, r.len);
  });
  if (!refused.empty()) throw StoreUnavailable("redis tier: a write was refused: " + refused);
}

void RedisStore::drop(RecordKind kind, uint64_t identity, const RecordKey& key) {
  std::lock_guard lock(lookups_.mu);
  const std::string name = record_key(kind, identity, key);
  run_each(lookups_, {{"DEL", name}}, [](size_t, const redisReply&) {});
}

}  // namespace ws
