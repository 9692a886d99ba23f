#include <hiredis/hiredis.h>

#include <cstdio>

#include "cache/record_store.h"

namespace ws {

struct RedisStore::Reply {
  int type = REDIS_REPLY_NIL;
  long long integer = 0;
  std::string str;                    // string, status or error text
  std::vector<std::string> elements;  // an array of strings (ZRANGE)
};

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
  if (ctx_) redisFree(ctx_);
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

void RedisStore::fail(const std::string& why) {
  if (ctx_) redisFree(ctx_);
  ctx_ = nullptr;
  retry_at_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(opt_.retry_after_ms);
  last_failure_ = "redis tier " + opt_.host + ":" + std::to_string(opt_.port) + ": " + why;
  throw StoreUnavailable(last_failure_);
}

redisContext* RedisStore::connection() {
  if (ctx_) return ctx_;
  if (std::chrono::steady_clock::now() < retry_at_)
    throw StoreUnavailable(last_failure_ + " (not retried for " + std::to_string(opt_.retry_after_ms) + " ms)");
  const timeval tv{opt_.timeout_ms / 1000, (opt_.timeout_ms % 1000) * 1000};
  ctx_ = redisConnectWithTimeout(opt_.host.c_str(), opt_.port, tv);
  if (!ctx_) fail("cannot allocate a connection");
  if (ctx_->err) fail(std::string("cannot connect: ") + ctx_->errstr);
  if (redisSetTimeout(ctx_, tv) != REDIS_OK) fail("cannot set the command timeout");
  if (!opt_.password.empty()) {
    std::vector<std::string_view> auth = {"AUTH"};
    if (!opt_.user.empty()) auth.push_back(opt_.user);
    auth.push_back(opt_.password);
    const auto r = run({auth});
    if (r[0].type == REDIS_REPLY_ERROR) fail("AUTH refused: " + r[0].str);
  }
  return ctx_;
}

std::vector<RedisStore::Reply> RedisStore::run(const std::vector<std::vector<std::string_view>>& commands) {
  redisContext* c = ctx_ ? ctx_ : connection();
  for (const auto& cmd : commands) {
    std::vector<const char*> argv;   // [argc]
    std::vector<size_t> argvlen;     // [argc]
    for (auto a : cmd) argv.push_back(a.data()), argvlen.push_back(a.size());
    if (redisAppendCommandArgv(c, int(argv.size()), argv.data(), argvlen.data()) != REDIS_OK)
      fail(std::string("cannot send: ") + c->errstr);
  }
  std::vector<Reply> out(commands.size());
  for (auto& r : out) {
    void* raw = nullptr;
    if (redisGetReply(c, &raw) != REDIS_OK || !raw)
      fail(c->err == REDIS_ERR_IO && errno == EAGAIN ? "timed out after " + std::to_string(opt_.timeout_ms) + " ms"
                                                     : std::string("connection lost: ") + c->errstr);
    auto* rep = static_cast<redisReply*>(raw);
    r.type = rep->type;
    r.integer = rep->integer;
    if (rep->str) r.str.assign(rep->str, rep->len);
    if (rep->type == REDIS_REPLY_ARRAY)
      for (size_t i = 0; i < rep->elements; ++i)
        if (rep->element[i]->str) r.elements.emplace_back(rep->element[i]->str, rep->element[i]->len);
    freeReplyObject(rep);
  }
  for (const auto& r : out)
    if (r.type == REDIS_REPLY_ERROR && r.str.rfind("NOAUTH", 0) == 0) fail("needs AUTH: " + r.str);
  return out;
}

std::vector<int32_t> RedisStore::stored_depths(uint64_t identity, std::span<const RecordKey> keys, int32_t min_depth) {
  std::lock_guard lock(mu_);
  const std::string dk = depths_key(identity), max = std::to_string(keys.size()), min = "(" + std::to_string(min_depth);
  const auto listed = run({{"ZREVRANGEBYSCORE", dk, max, min, "LIMIT", "0", "256"}});
  std::vector<int32_t> depths;
  for (const auto& e : listed[0].elements) {
    const long d = std::strtol(e.c_str(), nullptr, 10);
    if (d > min_depth && size_t(d) <= keys.size()) depths.push_back(int32_t(d));
  }
  // The set lists depths of every conversation: which of these are this prompt's?
  std::vector<std::string> names;
  for (int32_t d : depths) names.push_back(record_key(RecordKind::checkpoint, identity, keys[size_t(d - 1)]));
  std::vector<std::vector<std::string_view>> cmds;
  for (const auto& n : names) cmds.push_back({"EXISTS", n});
  const auto exists = cmds.empty() ? std::vector<Reply>{} : run(cmds);
  std::vector<int32_t> out;
  for (size_t i = 0; i < depths.size(); ++i)
    if (exists[i].type == REDIS_REPLY_INTEGER && exists[i].integer == 1) out.push_back(depths[i]);
  return out;
}

std::vector<std::optional<std::vector<uint8_t>>> RedisStore::get(RecordKind kind, uint64_t identity,
                                                                 std::span<const RecordKey> keys) {
  std::lock_guard lock(mu_);
  std::vector<std::string> names;
  for (const auto& k : keys) names.push_back(record_key(kind, identity, k));
  std::vector<std::vector<std::string_view>> cmds;
  for (const auto& n : names) cmds.push_back({"GET", n});
  std::vector<std::optional<std::vector<uint8_t>>> out(keys.size());
  if (cmds.empty()) return out;
  const auto replies = run(cmds);
  for (size_t i = 0; i < keys.size(); ++i)
    if (replies[i].type == REDIS_REPLY_STRING) out[i].emplace(replies[i].str.begin(), replies[i].str.end());
  return out;
}

std::vector<bool> RedisStore::contains(RecordKind kind, uint64_t identity, std::span<const RecordKey> keys) {
  std::lock_guard lock(mu_);
  std::vector<std::string> names;
  for (const auto& k : keys) names.push_back(record_key(kind, identity, k));
  std::vector<std::vector<std::string_view>> cmds;
  for (const auto& n : names) cmds.push_back({"EXISTS", n});
  std::vector<bool> out(keys.size());
  if (cmds.empty()) return out;
  const auto replies = run(cmds);
  for (size_t i = 0; i < keys.size(); ++i) out[i] = replies[i].type == REDIS_REPLY_INTEGER && replies[i].integer == 1;
  return out;
}

void RedisStore::put(uint64_t identity, std::span<const StoredRecord> records) {
  std::lock_guard lock(mu_);
  std::vector<std::string> names, depths;
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
  if (cmds.empty()) return;
  for (const auto& r : run(cmds))
    if (r.type == REDIS_REPLY_ERROR) throw StoreUnavailable("redis tier: a write was refused: " + r.str);
}

void RedisStore::drop(RecordKind kind, uint64_t identity, const RecordKey& key) {
  std::lock_guard lock(mu_);
  const std::string name = record_key(kind, identity, key);
  run({{"DEL", name}});
}

}  // namespace ws
