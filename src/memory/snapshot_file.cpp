#include "memory/snapshot_file.h"

#include "memory/snapshot_codec.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <fcntl.h>
#include <unistd.h>

namespace ws {
namespace {

constexpr char kMagic[8] = {'W', 'S', 'S', 'N', 'A', 'P', '0', '1'};
constexpr uint32_t kVersion = 1;

std::vector<uint8_t> read_all(const std::string& path, size_t max_bytes) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw std::runtime_error(path + ": cannot read: " + ec.message());
  if (size > max_bytes)
    throw std::runtime_error(path + ": " + std::to_string(size) + " bytes, more than a slot of this server can hold (" +
                             std::to_string(max_bytes) + ")");
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> data(size);  // [file size] bytes
  if (!in.read(reinterpret_cast<char*>(data.data()), std::streamsize(size)))
    throw std::runtime_error(path + ": cannot read");
  return data;
}

}  // namespace

std::vector<uint8_t> encode_snapshot_file(const std::vector<int32_t>& tokens,
                                          const std::vector<std::shared_ptr<const Snapshot>>& snapshots) {
  if (snapshots.empty()) throw std::invalid_argument("encode_snapshot_file: no snapshots");
  ByteWriter w;
  w.put_bytes(kMagic, sizeof kMagic);
  w.put(kVersion);
  w.put(snapshots[0]->model_id);
  w.put(uint32_t(tokens.size()));
  w.put_bytes(tokens.data(), tokens.size() * sizeof(int32_t));
  PageIndex index;
  std::vector<const KvPage*> table;  // pages in file order, each once
  for (const auto& s : snapshots)
    for (const auto& l : s->layers)
      for (const auto& p : l.pages)
        if (index.emplace(p.get(), uint32_t(table.size())).second) table.push_back(p.get());
  w.put(uint32_t(table.size()));
  for (const KvPage* p : table)
    for (const auto* half : {&p->k, &p->v}) {
      w.put(uint64_t(half->size()));
      w.put_bytes(half->data(), half->size());
    }
  w.put(uint32_t(snapshots.size()));
  for (const auto& s : snapshots) {
    if (s->model_id != snapshots[0]->model_id || s->position < 0 || size_t(s->position) > tokens.size())
      throw std::invalid_argument("encode_snapshot_file: a snapshot of another model or past the tokens");
    write_snapshot(w, *s, index);
  }
  w.put(hash_bytes(w.bytes().data(), w.bytes().size()));
  return std::move(w.bytes());
}

void write_file_atomically(const std::string& path, std::span<const uint8_t> bytes) {
  const std::string tmp = path + ".tmp" + std::to_string(getpid());
  auto fail = [&](int err) {
    ::unlink(tmp.c_str());
    throw std::runtime_error(path + ": cannot write: " + std::strerror(err));
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(errno);
  for (size_t done = 0; done < bytes.size();) {
    const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const int err = w < 0 ? errno : ENOSPC;
      ::close(fd);
      fail(err);
    }
    done += size_t(w);
  }
  if (::close(fd) != 0) fail(errno);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail(errno);
}

size_t write_snapshot_file(const std::string& path, const std::vector<int32_t>& tokens,
                           const std::vector<std::shared_ptr<const Snapshot>>& snapshots) {
  const std::vector<uint8_t> bytes = encode_snapshot_file(tokens, snapshots);  // [file size]
  write_file_atomically(path, bytes);
  return bytes.size();
}

SavedSequence read_snapshot_file(const std::string& path, uint64_t expected_model_id, size_t max_bytes) {
  return decode_snapshot_file(read_all(path, max_bytes), path, expected_model_id);
}

SavedSequence decode_snapshot_file(const std::vector<uint8_t>& data, const std::string& path,
                                   uint64_t expected_model_id) {
  ByteReader r(path, data, "slot file");
  if (data.size() < sizeof kMagic + 8 || std::memcmp(data.data(), kMagic, sizeof kMagic) != 0)
    r.fail("no WSSNAP01 header");
  if (!trailing_hash_matches(data)) r.fail("its contents do not match its hash (corrupted or cut short)");
  for (size_t i = 0; i < sizeof kMagic; ++i) r.get<char>("magic");
  if (const uint32_t v = r.get<uint32_t>("version"); v != kVersion)
    r.fail("version " + std::to_string(v) + " (this build reads version " + std::to_string(kVersion) + ")");
  const uint64_t model_id = r.get<uint64_t>("model id");
  if (model_id != expected_model_id)
    throw std::runtime_error(path + ": saved from another model's weights; restore it with the model that saved it");
  SavedSequence s;
  s.tokens.resize(r.get_count(sizeof(int32_t), "token count"));
  for (auto& t : s.tokens) t = r.get<int32_t>("tokens");
  std::vector<std::shared_ptr<const KvPage>> pages(r.get_count(16, "page count"));
  for (auto& page : pages) {
    auto p = std::make_shared<KvPage>();
    p->k = r.get_blob("page keys");
    p->v = r.get_blob("page values");
    p->checksum = page_checksum(*p);  // recomputed from the bytes: the layer checksums cover it
    page = std::move(p);
  }
  const uint32_t n_snapshots = r.get_count(4 + 4 + 4 + 8, "snapshot count");
  if (n_snapshots == 0) r.fail("no snapshots");
  for (uint32_t i = 0; i < n_snapshots; ++i) {
    s.snapshots.push_back(read_snapshot(r, model_id, pages));
    const int32_t pos = s.snapshots.back().position;
    if (pos < 0 || size_t(pos) > s.tokens.size()) r.fail("a snapshot lies past the saved tokens");
    if (i > 0 && pos <= s.snapshots[i - 1].position) r.fail("snapshots out of order");
  }
  if (r.pos() + 8 != data.size()) r.fail("bytes after the last snapshot");
  return s;
}

}  // namespace ws
