#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "cache/record_store.h"
#include "memory/snapshot_file.h"

namespace ws {
namespace fs = std::filesystem;
namespace {

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)v);
  return buf;
}

bool parse_hex(std::string_view s, uint64_t* out) {
  if (s.empty() || s.size() > 16) return false;
  uint64_t v = 0;
  for (char c : s) {
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return false;
    v = v << 4 | uint64_t(d);
  }
  *out = v;
  return true;
}

bool parse_key(std::string_view s, RecordKey* k) {
  return s.size() == 32 && parse_hex(s.substr(0, 16), &k->hi) && parse_hex(s.substr(16), &k->lo);
}

// Reads up to `n` bytes from the start of `path` (fewer if the file is shorter).
std::vector<uint8_t> read_front(const std::string& path, size_t n) {
  std::vector<uint8_t> out(n);  // [n] bytes
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return {};
  out.resize(std::fread(out.data(), 1, n, f));
  std::fclose(f);
  return out;
}

}  // namespace

DiskStore::DiskStore(std::string dir, size_t budget_bytes) : root_(dir + "/v1"), budget_(budget_bytes) {
  std::error_code ec;
  fs::create_directories(root_, ec);
  if (ec) throw std::runtime_error("--cache-dir " + dir + ": cannot create it: " + ec.message());
  const std::string lock = root_ + "/lock";
  lock_fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0) throw std::runtime_error("--cache-dir " + dir + ": cannot open " + lock + ": " + std::strerror(errno));
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    ::close(lock_fd_);
    throw std::runtime_error("--cache-dir " + dir + " is in use by another warmstart process (each needs its own)");
  }
  rebuild_index();
}

DiskStore::~DiskStore() {
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the lock
}

std::string DiskStore::path(RecordKind kind, uint64_t identity, const RecordKey& key) const {
  return root_ + "/" + hex64(identity) + (kind == RecordKind::checkpoint ? "/c/" : "/p/") + key.hex() +
         (kind == RecordKind::checkpoint ? ".rec" : ".page");
}

void DiskStore::rebuild_index() {
  std::error_code ec;
  auto remove = [&](const fs::path& p) {
    fs::remove(p, ec);
    ++recovery_.removed;
  };
  std::vector<std::pair<Id, size_t>> page_files;
  for (const auto& id_dir : fs::directory_iterator(root_, ec)) {
    uint64_t identity = 0;
    if (!id_dir.is_directory() || !parse_hex(id_dir.path().filename().string(), &identity)) continue;
    for (const char* sub : {"c", "p"}) fs::create_directories(id_dir.path() / sub, ec);
    for (const auto& f : fs::directory_iterator(id_dir.path() / "c", ec)) {
      const std::string name = f.path().filename().string();
      Id id{identity, {}};
      if (name.size() != 36 || name.substr(32) != ".rec" || !parse_key(name.substr(0, 32), &id.key)) {
        remove(f.path());  // a temporary file left by a killed process, or not ours
        continue;
      }
      // The front names the pages; reading a few KB per record keeps start-up fast.
      const size_t size = f.file_size(ec);
      std::vector<uint8_t> front = read_front(f.path().string(), 28);
      uint32_t n_pages = 0;
      if (front.size() == 28) std::memcpy(&n_pages, front.data() + 24, 4);
      front = read_front(f.path().string(), std::min<size_t>(size, 28 + size_t(n_pages) * 16));
      try {
        const CheckpointHeader h = read_checkpoint_header(front, f.path().string());
        if (h.identity != identity) throw std::runtime_error("identity");
        index_checkpoint(id, {h.depth, size, h.pages, 0});
      } catch (const std::exception&) {
        remove(f.path());  // unreadable: never loaded, so dropped now
      }
    }
    for (const auto& f : fs::directory_iterator(id_dir.path() / "p", ec)) {
      const std::string name = f.path().filename().string();
      Id id{identity, {}};
      if (name.size() != 37 || name.substr(32) != ".page" || !parse_key(name.substr(0, 32), &id.key)) {
        remove(f.path());
        continue;
      }
      page_files.emplace_back(id, f.file_size(ec));
    }
  }
  for (const auto& [id, size] : page_files) {
    auto it = pages_.find(id);
    if (it == pages_.end()) {  // no checkpoint names it (its checkpoint's write never finished)
      remove(path(RecordKind::page, id.identity, id.key));
      continue;
    }
    it->second.bytes = size;
    bytes_ += size;
    ++recovery_.pages;
  }
  // A checkpoint whose page is missing stays indexed: a lookup of it misses and drops it.
  recovery_.checkpoints = checkpoints_.size();
}

void DiskStore::index_checkpoint(const Id& id, Checkpoint c) {
  for (const auto& k : c.pages) ++pages_[{id.identity, k}].refs;
  bytes_ += c.bytes;
  c.last_used = ++clock_;
  checkpoints_[id] = std::move(c);
}

void DiskStore::remove_checkpoint(const Id& id) {
  auto it = checkpoints_.find(id);
  if (it == checkpoints_.end()) return;
  std::error_code ec;
  fs::remove(path(RecordKind::checkpoint, id.identity, id.key), ec);
  bytes_ -= std::min(bytes_, it->second.bytes);
  for (const auto& k : it->second.pages) {
    auto p = pages_.find({id.identity, k});
    if (p == pages_.end() || --p->second.refs > 0) continue;
    fs::remove(path(RecordKind::page, id.identity, k), ec);
    bytes_ -= std::min(bytes_, p->second.bytes);
    pages_.erase(p);
  }
  checkpoints_.erase(it);
}

void DiskStore::evict_for(size_t incoming) {
  while (bytes_ + incoming > budget_ && !checkpoints_.empty()) {
    auto victim = std::min_element(checkpoints_.begin(), checkpoints_.end(),
                                   [](const auto& a, const auto& b) { return a.second.last_used < b.second.last_used; });
    remove_checkpoint(victim->first);
    ++evictions_;
  }
}

std::vector<int32_t> DiskStore::stored_depths(uint64_t identity, std::span<const RecordKey> keys, int32_t min_depth) {
  std::lock_guard lock(mu_);
  std::vector<int32_t> out;
  for (int32_t d = int32_t(keys.size()); d > min_depth; --d)
    if (auto it = checkpoints_.find({identity, keys[size_t(d - 1)]}); it != checkpoints_.end() && it->second.depth == d)
      out.push_back(d);
  return out;
}

void DiskStore::read(RecordKind kind, uint64_t identity, std::span<const RecordKey> keys, const RecordVisitor& each) {
  std::vector<uint8_t> buffer;  // [largest record so far] bytes, reused: fresh memory costs page faults
  for (size_t i = 0; i < keys.size(); ++i) {
    {
      std::lock_guard lock(mu_);
      if (kind == RecordKind::checkpoint) {
        auto it = checkpoints_.find({identity, keys[i]});
        if (it == checkpoints_.end()) continue;
        it->second.last_used = ++clock_;
      } else if (!pages_.count({identity, keys[i]})) {
        continue;
      }
    }
    const std::string p = path(kind, identity, keys[i]);
    FILE* f = std::fopen(p.c_str(), "rb");
    if (!f) continue;  // evicted meanwhile
    std::fseek(f, 0, SEEK_END);
    const long size = std::ftell(f);
    std::fseek(f, 0, SEEK_SET);
    if (size < 0) {
      std::fclose(f);
      throw StoreUnavailable("disk tier: cannot read " + p);
    }
    if (size_t(size) > budget_) {  // larger than the whole tier: not one this store wrote
      std::fclose(f);
      continue;
    }
    if (buffer.size() < size_t(size)) buffer.resize(size_t(size));
    const size_t got = std::fread(buffer.data(), 1, size_t(size), f);
    std::fclose(f);
    if (got != size_t(size)) throw StoreUnavailable("disk tier: cannot read " + p);
    each(i, std::span<const uint8_t>(buffer.data(), got));
  }
}

std::vector<bool> DiskStore::contains(RecordKind kind, uint64_t identity, std::span<const RecordKey> keys) {
  std::lock_guard lock(mu_);
  std::vector<bool> out(keys.size());
  for (size_t i = 0; i < keys.size(); ++i)
    if (kind == RecordKind::checkpoint) {
      out[i] = checkpoints_.count({identity, keys[i]}) > 0;
    } else {
      auto p = pages_.find({identity, keys[i]});
      out[i] = p != pages_.end() && p->second.bytes > 0;
    }
  return out;
}

void DiskStore::put(uint64_t identity, std::span<const StoredRecord> records) {
  size_t incoming = 0;
  for (const auto& r : records) incoming += r.bytes.size();
  if (incoming > budget_) return;  // larger than the whole tier: not worth evicting everything
  std::error_code ec;
  for (const char* sub : {"/c", "/p"}) fs::create_directories(root_ + "/" + hex64(identity) + sub, ec);
  std::lock_guard lock(mu_);
  // The pages the checkpoints name are held while older checkpoints are evicted to make
  // room: the caller left out those already stored, so evicting them would orphan these.
  std::vector<std::vector<RecordKey>> named(records.size());  // [records] the pages each checkpoint names
  for (size_t i = 0; i < records.size(); ++i)
    if (records[i].kind == RecordKind::checkpoint) named[i] = read_checkpoint_header(records[i].bytes, "checkpoint").pages;
  std::vector<RecordKey> held;
  for (const auto& pages : named)
    for (const auto& k : pages) {
      ++pages_[{identity, k}].refs;
      held.push_back(k);
    }
  auto release = [&] {
    for (const auto& k : held)
      if (auto p = pages_.find({identity, k}); p != pages_.end() && --p->second.refs <= 0 && p->second.bytes == 0)
        pages_.erase(p);
  };
  try {
    evict_for(incoming);
    for (size_t i = 0; i < records.size(); ++i) write_record(identity, records[i], named[i]);
  } catch (...) {
    release();  // pages written for a checkpoint that failed stay unnamed; start-up drops them
    throw;
  }
  release();
}

void DiskStore::write_record(uint64_t identity, const StoredRecord& r, const std::vector<RecordKey>& pages) {
  const Id id{identity, r.key};
  // Written beside the target and renamed: a crash never leaves part of a record under a
  // record's name.
  auto write_atomically = [](const std::string& path, std::span<const uint8_t> bytes) {
    try {
      write_file_atomically(path, bytes);
    } catch (const std::runtime_error& e) {
      throw StoreUnavailable(std::string("disk tier: ") + e.what());  // disk full, read-only, ...
    }
  };
  if (r.kind == RecordKind::page) {
    Page& p = pages_[id];
    if (p.bytes > 0) return;  // stored already (content-addressed: the same bytes)
    write_atomically(path(r.kind, identity, r.key), r.bytes);
    p.bytes = r.bytes.size();
    bytes_ += p.bytes;
    return;
  }
  if (checkpoints_.count(id)) return;
  write_atomically(path(r.kind, identity, r.key), r.bytes);
  index_checkpoint(id, {r.depth, r.bytes.size(), pages, 0});
}

void DiskStore::drop(RecordKind kind, uint64_t identity, const RecordKey& key) {
  std::lock_guard lock(mu_);
  if (kind == RecordKind::checkpoint) {
    remove_checkpoint({identity, key});
    return;
  }
  // A bad page: every checkpoint naming it is useless.
  std::vector<Id> naming;
  for (const auto& [id, c] : checkpoints_)
    if (id.identity == identity && std::find(c.pages.begin(), c.pages.end(), key) != c.pages.end()) naming.push_back(id);
  for (const Id& id : naming) remove_checkpoint(id);
  std::error_code ec;
  if (auto p = pages_.find({identity, key}); p != pages_.end()) {
    bytes_ -= std::min(bytes_, p->second.bytes);
    pages_.erase(p);
  }
  fs::remove(path(RecordKind::page, identity, key), ec);
}

size_t DiskStore::bytes_in_use() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

uint64_t DiskStore::evictions() const {
  std::lock_guard lock(mu_);
  return evictions_;
}

}  // namespace ws
