#include "server/media_turn.h"

#include "server/generation.h"

#include <stdexcept>
#include <string>

#include "server/api_error.h"

namespace ws::server {
namespace {

// Tokens an image's layout occupies, counted the way build_media_prompt emits them.
int64_t layout_tokens(const Tokenizer& tok, const vision::VisionContext& vis, const vision::PreparedImage& img) {
  int64_t n = 0;
  for (const vision::LayoutItem& item : img.layout) {
    if (item.kind == vision::LayoutItem::kText) {
      if (!item.text.empty()) n += int64_t(tok.encode(item.text, false, true).size());
    } else if (item.kind == vision::LayoutItem::kPiece) {
      n += 1;
    } else {
      n += vis.model().tokens_for(img.entries[size_t(item.entry)]);
    }
  }
  return n;
}

}  // namespace

std::vector<int32_t> media_message_ends(const Tokenizer& tok, const vision::VisionContext& vis, const std::string& text,
                                        std::span<const size_t> byte_ends, const vision::MediaPrompt& mp) {
  // build_media_prompt tokenizes the text between markers piece by piece (BOS/EOS on the
  // first only) with each image's layout in between; follow the same split here.
  const std::string marker = vision::kMediaMarker;
  struct Piece {
    size_t begin, end;              // byte range in `text`
    int64_t base = 0;               // first token position in the prompt
    std::vector<size_t> token_ends;  // byte offset (within the piece) where each token ends
  };
  std::vector<Piece> pieces;
  for (size_t start = 0;;) {
    const size_t at = text.find(marker, start);
    pieces.push_back(Piece{start, at == std::string::npos ? text.size() : at, 0, {}});
    if (at == std::string::npos) break;
    start = at + marker.size();
  }
  if (pieces.size() != mp.images.size() + 1) return {};
  int64_t pos = 0;
  for (size_t k = 0; k < pieces.size(); ++k) {
    Piece& p = pieces[k];
    const std::string s = text.substr(p.begin, p.end - p.begin);
    p.base = pos;
    if (!s.empty() || k == 0) {
      const auto ids = tok.encode(s, /*add_special=*/k == 0, /*parse_special=*/true);
      const std::string bos = tok.bos() >= 0 ? tok.token_to_piece(tok.bos(), true) : "";
      size_t off = 0;
      for (size_t i = 0; i < ids.size(); ++i) {
        // A BOS the tokenizer added covers no text (as in tokenize_prompt).
        const bool added_bos = k == 0 && i == 0 && tok.add_bos() && ids[0] == tok.bos() && !s.starts_with(bos);
        if (!added_bos) off += tok.token_to_piece(ids[i], true).size();
        p.token_ends.push_back(off);
      }
    }
    pos += int64_t(p.token_ends.size());
    if (k < mp.images.size()) pos += layout_tokens(tok, vis, *mp.images[k]);
  }
  if (pos != int64_t(mp.tokens.size())) return {};  // the builder changed its layout: place none
  std::vector<int32_t> out;
  for (size_t b : byte_ends) {
    int64_t at = pos;
    for (const Piece& p : pieces) {
      if (b > p.end) continue;
      if (b < p.begin) {
        at = p.base;  // inside a marker: after that image's layout
      } else {
        at = p.base;
        for (size_t e : p.token_ends) at += e <= b - p.begin ? 1 : 0;
      }
      break;
    }
    if (out.empty() || out.back() != int32_t(at)) out.push_back(int32_t(at));
  }
  return out;
}

TurnRequest make_media_turn_request(const Tokenizer& tok, const VisionSupport& vision, std::mutex& encode_mu,
                                    const chat::RenderedPrompt& prompt, std::span<const std::vector<uint8_t>> images,
                                    const GenerationOptions& gen, int32_t n_ctx, const vision::ImageDecoder& decode) {
  if (!vision.context)
    throw bad_request("this server has no vision projector: start it with --mmproj FILE to send images", "messages",
                      "images_not_supported");
  vision::MediaPrompt mp;
  try {
    mp = vision::build_media_prompt(tok, vision.lm_n_embd, prompt.text, images, *vision.context, *vision.pool, decode);
  } catch (const vision::ImageTooLargeError& e) {
    throw ApiError(413, std::string("image too large: ") + e.what() + "; send smaller images or start the server with a "
                   "larger --max-image-pixels", "invalid_request_error", "messages", "image_too_large");
  } catch (const vision::ImageError& e) {
    throw bad_request(std::string("invalid image: ") + e.what(), "messages", "invalid_image");
  } catch (const std::invalid_argument& e) {
    throw bad_request(e.what(), "messages", "invalid_value");
  }
  const int32_t n = int32_t(mp.tokens.size());
  if (n >= n_ctx)
    throw bad_request("this model's context holds " + std::to_string(n_ctx) + " tokens, but the prompt has " +
                          std::to_string(n) + " tokens (images included); shorten it, send fewer or smaller images, "
                          "or start the server with a larger -c",
                      "messages", "context_length_exceeded");
  TurnRequest r;
  r.message_ends = media_message_ends(tok, *vision.context, prompt.text, prompt.message_ends, mp);
  r.prompt = std::move(mp.tokens);
  r.media = std::move(mp.media);
  for (MediaChunk& c : r.media)
    c.embeddings = [inner = std::move(c.embeddings), &encode_mu] {
      std::lock_guard lock(encode_mu);
      return inner();
    };
  r.media_ends = std::move(mp.media_ends);
  r.max_tokens = gen.max_tokens > 0 ? gen.max_tokens : n_ctx - n;
  apply_generation(tok, gen, r);
  return r;
}

}  // namespace ws::server
