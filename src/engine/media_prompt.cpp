#include "engine/media_prompt.h"

#include <algorithm>
#include <stdexcept>
#include <tuple>

#include "engine/prompt.h"

namespace ws {
namespace {

// The id of the token whose piece is exactly `piece` (first match, as mtmd looks it up).
Token lookup_piece(const Tokenizer& tok, const std::string& piece) {
  for (Token t = 0; t < tok.n_vocab(); ++t)
    if (tok.token_to_piece(t, true) == piece) return t;
  throw std::invalid_argument("the language model's vocabulary has no token '" + piece +
                              "', which this vision projector's image layout needs (wrong model for --mmproj?)");
}

struct TextPiece {
  size_t begin, end;  // byte range in the text (between markers)
};

}  // namespace

Token media_placeholder(uint64_t image_hash, int32_t entry, int32_t row) {
  return -1 - Token(vision::entry_row_key(image_hash, entry, row) & 0x3fffffffu);
}

MediaPrompt build_media_prompt(const Tokenizer& tok, int32_t lm_n_embd, const std::string& text,
                               std::span<const std::vector<uint8_t>> images, vision::VisionContext& vis,
                               ThreadPool& pool, const vision::ImageDecoder& decode) {
  const vision::VisionHParams& hp = vis.model().hparams();
  if (hp.projection_dim != lm_n_embd)
    throw std::invalid_argument("the vision projector outputs " + std::to_string(hp.projection_dim) +
                                "-wide embeddings but the language model's n_embd is " + std::to_string(lm_n_embd) +
                                " (mismatched --mmproj?)");
  const std::string marker = kMediaMarker;
  std::vector<TextPiece> pieces;  // text between markers: images.size() + 1 of them
  for (size_t start = 0;;) {
    const size_t at = text.find(marker, start);
    pieces.push_back(TextPiece{start, at == std::string::npos ? text.size() : at});
    if (at == std::string::npos) break;
    start = at + marker.size();
  }
  if (pieces.size() - 1 != images.size())
    throw std::invalid_argument("the prompt has " + std::to_string(pieces.size() - 1) + " media markers (" +
                                marker + ") but " + std::to_string(images.size()) + " images were given");
  MediaPrompt mp;
  // Appends tokens to the current text chunk (or opens one); `at`: their text_ends.
  auto push_text_tokens = [&](const std::vector<Token>& ids, const std::vector<size_t>& at) {
    if (ids.empty()) return;
    if (!mp.chunks.empty() && !mp.chunks.back().image) mp.chunks.back().n += int32_t(ids.size());
    else mp.chunks.push_back(PromptChunk{false, int32_t(mp.tokens.size()), int32_t(ids.size()), -1, -1, false});
    mp.tokens.insert(mp.tokens.end(), ids.begin(), ids.end());
    mp.text_ends.insert(mp.text_ends.end(), at.begin(), at.end());
  };
  // A piece of the caller's text: each token ends where its piece's bytes take it (a BOS
  // the tokenizer added covers none, as in tokenize_prompt), never past the piece.
  auto add_piece = [&](const TextPiece& p, bool first) {
    const std::string s = text.substr(p.begin, p.end - p.begin);
    if (s.empty() && !first) return;
    const auto ids = tok.encode(s, /*add_special=*/first, /*parse_special=*/true);
    const std::string bos = tok.bos() >= 0 ? tok.token_to_piece(tok.bos(), true) : "";
    std::vector<size_t> at;
    size_t off = p.begin;
    for (size_t i = 0; i < ids.size(); ++i) {
      const bool added_bos = first && i == 0 && tok.add_bos() && ids[0] == tok.bos() && !s.starts_with(bos);
      if (!added_bos) off += tok.token_to_piece(ids[i], true).size();
      at.push_back(std::min(off, p.end));
    }
    push_text_tokens(ids, at);
  };
  add_piece(pieces[0], true);
  for (size_t i = 0; i < images.size(); ++i) {
    const size_t inside_marker = pieces[i].end + 1;  // text_ends of this image's layout tokens
    const uint64_t hash = vision::hash_bytes(images[i]);
    auto prepared = std::make_shared<const vision::PreparedImage>(
        vis.model().prepare(decode ? decode(images[i]) : vision::decode_image(images[i])));
    mp.image_hashes.push_back(hash);
    mp.images.push_back(prepared);
    for (const vision::LayoutItem& item : prepared->layout) {
      if (item.kind == vision::LayoutItem::kText) {
        if (item.text.empty()) continue;
        const auto ids = tok.encode(item.text, /*add_special=*/false, /*parse_special=*/true);
        push_text_tokens(ids, std::vector<size_t>(ids.size(), inside_marker));
      } else if (item.kind == vision::LayoutItem::kPiece) {
        push_text_tokens({lookup_piece(tok, item.text)}, {inside_marker});
      } else {
        const vision::PixelEntry& e = prepared->entries[size_t(item.entry)];
        const int32_t pos0 = int32_t(mp.tokens.size()), n = int32_t(vis.model().tokens_for(e));
        for (int32_t r = 0; r < n; ++r) mp.tokens.push_back(media_placeholder(hash, item.entry, r));
        mp.text_ends.insert(mp.text_ends.end(), size_t(n), inside_marker);
        mp.chunks.push_back(PromptChunk{true, pos0, n, int32_t(i), item.entry, item.non_causal});
        // Lazily encoded (and memoised for this request): a cached state past the image needs none.
        auto memo = std::make_shared<vision::EncoderCache::Rows>();
        vision::VisionContext* vc = &vis;
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
    add_piece(pieces[i + 1], false);
  }
  return mp;
}

std::vector<int32_t> media_message_ends(const MediaPrompt& mp, std::span<const size_t> byte_ends) {
  return token_positions(mp.text_ends, byte_ends);
}

}  // namespace ws
