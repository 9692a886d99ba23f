#include "vision/media.h"

#include <stdexcept>
#include <tuple>

namespace ws::vision {
namespace {

uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t entry_key(uint64_t image_hash, int32_t entry) { return mix64(image_hash ^ (uint64_t(uint32_t(entry)) << 40)); }

// The id of the token whose piece is exactly `piece` (first match, as mtmd looks it up).
Token lookup_piece(const Tokenizer& tok, const std::string& piece) {
  for (Token t = 0; t < tok.n_vocab(); ++t)
    if (tok.token_to_piece(t, true) == piece) return t;
  throw std::invalid_argument("the language model's vocabulary has no token '" + piece +
                              "', which this vision projector's image layout needs (wrong model for --mmproj?)");
}

void append(std::vector<Token>& dst, const std::vector<Token>& src) { dst.insert(dst.end(), src.begin(), src.end()); }

}  // namespace

Token media_placeholder(uint64_t image_hash, int32_t entry, int32_t row) {
  const uint64_t h = mix64(entry_key(image_hash, entry) + uint64_t(uint32_t(row)) * 0x9e3779b97f4a7c15ull);
  return -1 - Token(h & 0x3fffffffu);
}

EncoderCache::Rows EncoderCache::find(uint64_t key) {
  std::lock_guard lock(mu_);
  auto it = slots_.find(key);
  if (it == slots_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return it->second.rows;
}

void EncoderCache::put(uint64_t key, Rows rows) {
  std::lock_guard lock(mu_);
  const size_t sz = rows->size() * sizeof(float);
  if (sz > budget_ || slots_.count(key)) return;
  while (bytes_ + sz > budget_ && !lru_.empty()) {
    const uint64_t victim = lru_.back();
    bytes_ -= slots_[victim].rows->size() * sizeof(float);
    slots_.erase(victim);
    lru_.pop_back();
  }
  lru_.push_front(key);
  slots_[key] = Slot{std::move(rows), lru_.begin()};
  bytes_ += sz;
}

size_t EncoderCache::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

size_t EncoderCache::entries() const {
  std::lock_guard lock(mu_);
  return slots_.size();
}

EncoderCache::Rows VisionContext::embeddings(uint64_t image_hash, int32_t entry, const PixelEntry& e,
                                             ThreadPool& pool) {
  const uint64_t key = entry_key(image_hash, entry);
  if (auto rows = cache_.find(key)) return rows;
  auto rows = std::make_shared<const std::vector<float>>(model_.encode(e, pool));
  {
    std::lock_guard lock(mu_);
    ++encode_calls_;
  }
  cache_.put(key, rows);
  return rows;
}

uint64_t VisionContext::encode_calls() const {
  std::lock_guard lock(mu_);
  return encode_calls_;
}

MediaPrompt build_media_prompt(const Tokenizer& tok, int32_t lm_n_embd, const std::string& text,
                               std::span<const std::vector<uint8_t>> images, VisionContext& vis, ThreadPool& pool,
                               const ImageDecoder& decode) {
  const VisionHParams& hp = vis.model().hparams();
  if (hp.projection_dim != lm_n_embd)
    throw std::invalid_argument("the vision projector outputs " + std::to_string(hp.projection_dim) +
                                "-wide embeddings but the language model's n_embd is " + std::to_string(lm_n_embd) +
                                " (mismatched --mmproj?)");
  std::vector<std::string> pieces;  // text between markers: images.size() + 1 of them
  for (size_t start = 0;;) {
    const size_t at = text.find(kMediaMarker, start);
    pieces.push_back(text.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) break;
    start = at + std::string(kMediaMarker).size();
  }
  if (pieces.size() - 1 != images.size())
    throw std::invalid_argument("the prompt has " + std::to_string(pieces.size() - 1) + " media markers (" +
                                kMediaMarker + ") but " + std::to_string(images.size()) + " images were given");
  MediaPrompt mp;
  auto add_text = [&](const std::string& t, bool first) {
    if (t.empty() && !first) return;
    const auto ids = tok.encode(t, /*add_special=*/first, /*parse_special=*/true);
    if (ids.empty()) return;
    if (!mp.chunks.empty() && !mp.chunks.back().image) mp.chunks.back().n += int32_t(ids.size());
    else mp.chunks.push_back(PromptChunk{false, int32_t(mp.tokens.size()), int32_t(ids.size()), -1, -1, false});
    append(mp.tokens, ids);
  };
  add_text(pieces[0], true);
  for (size_t i = 0; i < images.size(); ++i) {
    const uint64_t hash = hash_bytes(images[i]);
    auto prepared = std::make_shared<const PreparedImage>(vis.model().prepare(decode ? decode(images[i]) : decode_image(images[i])));
    mp.image_hashes.push_back(hash);
    mp.images.push_back(prepared);
    for (const LayoutItem& item : prepared->layout) {
      if (item.kind == LayoutItem::kText) {
        add_text(item.text, false);
      } else if (item.kind == LayoutItem::kPiece) {
        append(mp.tokens, {lookup_piece(tok, item.text)});
        if (!mp.chunks.empty() && !mp.chunks.back().image) mp.chunks.back().n += 1;
        else mp.chunks.push_back(PromptChunk{false, int32_t(mp.tokens.size()) - 1, 1, -1, -1, false});
      } else {
        const PixelEntry& e = prepared->entries[size_t(item.entry)];
        const int32_t pos0 = int32_t(mp.tokens.size()), n = int32_t(vis.model().tokens_for(e));
        for (int32_t r = 0; r < n; ++r) mp.tokens.push_back(media_placeholder(hash, item.entry, r));
        mp.chunks.push_back(PromptChunk{true, pos0, n, int32_t(i), item.entry, item.non_causal});
        // Lazily encoded (and memoised for this request): a cached state past the image needs none.
        auto memo = std::make_shared<EncoderCache::Rows>();
        VisionContext* vc = &vis;
        ThreadPool* tp = &pool;
        const int32_t entry = item.entry;
        MediaChunk mc{pos0, n, item.non_causal, [=]() {
                        if (!*memo) *memo = vc->embeddings(hash, entry, prepared->entries[size_t(entry)], *tp);
                        return *memo;
                      }};
        std::tie(mc.grid_w, mc.grid_h) = vis.model().token_grid(e);  // M-RoPE models place the rows on it
        mp.media.push_back(std::move(mc));
      }
    }
    // Checkpoints at both media boundaries: before the image (a different image in its
    // place still reuses the text before it) and right after its last embedding chunk.
    int32_t begin = -1, end = 0;
    for (const auto& c : mp.chunks)
      if (c.image && c.image_index == int32_t(i)) {
        if (begin < 0) begin = c.pos0;
        end = c.pos0 + c.n;
      }
    if (begin > 0) mp.media_ends.push_back(begin);
    mp.media_ends.push_back(end);
    add_text(pieces[i + 1], false);
  }
  return mp;
}

}  // namespace ws::vision
