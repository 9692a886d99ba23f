#include "engine/vision_report.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "engine/eval.h"
#include "engine/logit_report.h"

namespace ws {
namespace {

using nlohmann::json;

// The README's default rows: around the image(s) and the last position.
std::vector<int32_t> default_positions(const MediaPrompt& mp) {
  std::set<int32_t> s;
  const int32_t n = int32_t(mp.tokens.size());
  int32_t first_img = -1, boundary = -1;
  for (const auto& c : mp.chunks)
    if (c.image) {
      if (first_img < 0) first_img = c.pos0;
      s.insert(c.pos0 + c.n - 1);
      boundary = c.pos0 + c.n;
    }
  if (first_img > 0) s.insert(first_img - 1);
  if (first_img >= 0) s.insert(first_img);
  for (int32_t p = boundary; p >= 0 && p < std::min(n, boundary + 4); ++p) s.insert(p);
  s.insert(n - 1);
  return {s.begin(), s.end()};
}

class Blob {
 public:
  json add(const float* data, size_t count, std::vector<int64_t> shape) {
    json j = {{"offset_bytes", bytes_.size() * 4}, {"shape", shape}, {"dtype", "float32-le"}, {"same_bytes_as", nullptr}};
    bytes_.insert(bytes_.end(), data, data + count);
    return j;
  }
  void write(const std::string& path) const {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes_.data()), std::streamsize(bytes_.size() * 4));
    if (!out) throw std::runtime_error("cannot write '" + path + "'");
  }
  size_t size_bytes() const { return bytes_.size() * 4; }

 private:
  std::vector<float> bytes_;
};

// M-RoPE models: the golden format's extra fields (README 8.7). Per-row arrays stay indexed
// by row; chunks get their first position, positions used and first row, the layout its row
// count and the boundary as a row and as a position. rp: [n + 1][4] rope positions (the row
// after the prompt included: where the next token would go).
void add_mrope_fields(json& j, const std::vector<int32_t>& rp, const MediaPrompt& mp) {
  const size_t n = mp.tokens.size();
  json pos = json::array();
  for (size_t r = 0; r < n; ++r) pos.push_back({rp[4 * r], rp[4 * r + 1], rp[4 * r + 2], rp[4 * r + 3]});
  j["positions"] = pos;
  auto next_pos = [&](size_t row) { return rp[4 * row]; };  // t of a row (row n: after the prompt)
  for (auto& c : j["chunks"]) {
    const size_t tok0 = c["pos0"].get<size_t>(), end = tok0 + c["n_tokens"].get<size_t>();
    c["tok0"] = tok0;
    c["pos0"] = next_pos(tok0);
    c["n_pos"] = next_pos(end) - next_pos(tok0);
  }
  for (auto& e : j["image_entries"]) {
    e["tok0"] = e["pos0"];
    e["pos0"] = next_pos(e["pos0"].get<size_t>());
  }
  auto& l = j["layout"];
  l["n_tokens"] = n;
  l["n_positions"] = next_pos(n);
  const int32_t boundary = l["media_boundary_pos"].get<int32_t>();
  if (boundary >= 0) {
    l["media_boundary_token"] = boundary;
    l["media_boundary_pos"] = next_pos(size_t(boundary));
  }
  if (l["first_image_pos"].get<int32_t>() >= 0) l["first_image_pos"] = next_pos(l["first_image_pos"].get<size_t>());
}

}  // namespace

VisionEval evaluate_multimodal(const Model& model, const Tokenizer& tok, vision::VisionContext& vis,
                               const std::string& text, std::span<const std::vector<uint8_t>> images,
                               int32_t n_ubatch, ThreadPool& pool) {
  VisionEval ev;
  ev.prompt = build_media_prompt(tok, model.config().n_embd, text, images, vis, pool);
  const MediaPrompt& mp = ev.prompt;
  const size_t n = mp.tokens.size(), n_vocab = size_t(model.config().n_vocab);
  MemoryOptions mem;
  mem.n_ctx = int32_t(n);
  SeqState state = model.make_state(mem);
  std::vector<float> rows;  // [chunk][n_vocab]
  for (const auto& c : mp.chunks) {
    // M-RoPE models: the image rows' (t, h, w) components and the shifted text after them.
    const auto rope_pos = mrope_positions(model.config(), mp.media, c.pos0, c.pos0 + c.n);  // [c.n][4] or empty
    const int32_t* rp = rope_pos.empty() ? nullptr : rope_pos.data();
    if (!c.image) {
      eval_tokens(model, state, std::span(mp.tokens).subspan(size_t(c.pos0), size_t(c.n)), n_ubatch, LogitsMode::all,
                  rows, pool, rp);
    } else {
      vision::EncodeTrace trace;
      ev.embeddings.push_back(vis.model().encode(mp.images[size_t(c.image_index)]->entries[size_t(c.entry)], pool, &trace));
      ev.traces.push_back(std::move(trace));
      eval_embeddings(model, state, ev.embeddings.back().data(), c.n, c.non_causal, n_ubatch, LogitsMode::all, rows,
                      pool, rp);
    }
    ev.logits.insert(ev.logits.end(), rows.begin(), rows.begin() + long(size_t(c.n) * n_vocab));
  }
  return ev;
}

void write_vision_report(const std::string& prefix, const VisionEval& ev, const vision::VisionContext& vis,
                         const ModelConfig& cfg, const ReportFiles& files, std::vector<int32_t> positions) {
  const MediaPrompt& mp = ev.prompt;
  const int32_t n = int32_t(mp.tokens.size()), V = cfg.n_vocab;
  const vision::VisionHParams& hp = vis.model().hparams();
  if (positions.empty()) positions = default_positions(mp);
  for (int32_t p : positions)
    if (p < 0 || p >= n) throw std::invalid_argument("--positions: " + std::to_string(p) + " is outside 0.." + std::to_string(n - 1));
  Blob blob;
  json j;
  j["format"] = "llama-golden-vision-v1";
  j["name"] = prefix.substr(prefix.find_last_of('/') + 1);
  j["producer"] = "warmstart";
  j["model_file"] = files.model_file;
  j["mmproj_file"] = files.mmproj_file;
  j["image_file"] = files.image_file;
  j["image_size"] = {files.image_width, files.image_height};
  j["n_vocab"] = V;
  j["n_embd"] = cfg.n_embd;
  j["projector"] = {{"type", vision::projector_name(hp.projector)}, {"image_size", hp.image_size},
                    {"patch_size", hp.patch_size}, {"scale_factor", hp.scale_factor},
                    {"vision_n_embd", hp.n_embd}, {"n_embd_text", hp.projection_dim}};
  json chunks = json::array(), entries = json::array();
  int32_t first_img = -1, boundary = -1, n_img_tokens = 0, n_img_chunks = 0;
  size_t img = 0;
  for (size_t i = 0; i < mp.chunks.size(); ++i) {
    const auto& c = mp.chunks[i];
    json cj = {{"index", i}, {"type", c.image ? "image" : "text"}, {"pos0", c.pos0}, {"n_pos", c.n}, {"n_tokens", c.n}};
    if (!c.image) {
      cj["tokens"] = std::vector<Token>(mp.tokens.begin() + c.pos0, mp.tokens.begin() + c.pos0 + c.n);
    } else {
      if (first_img < 0) first_img = c.pos0;
      boundary = c.pos0 + c.n;
      n_img_tokens += c.n;
      ++n_img_chunks;
      const vision::PixelEntry& e = mp.images[size_t(c.image_index)]->entries[size_t(c.entry)];
      const vision::EncodeTrace& t = ev.traces[img];
      const int64_t np = int64_t(t.vit_out.size()) / hp.n_embd;
      cj["image_entry"] = img;
      cj["non_causal"] = c.non_causal;
      entries.push_back({{"chunk_index", i}, {"pos0", c.pos0}, {"n_tokens", c.n},
                         {"pixels", blob.add(e.pixels.data(), e.pixels.size(), {3, e.height, e.width})},
                         {"patch_embd_plus_pos", blob.add(t.patch_embd_plus_pos.data(), t.patch_embd_plus_pos.size(), {np, hp.n_embd})},
                         {"vit_out", blob.add(t.vit_out.data(), t.vit_out.size(), {np, hp.n_embd})},
                         {"embeddings", blob.add(ev.embeddings[img].data(), ev.embeddings[img].size(), {c.n, cfg.n_embd})}});
      ++img;
    }
    chunks.push_back(cj);
  }
  j["layout"] = {{"n_positions", n}, {"n_chunks", mp.chunks.size()}, {"n_image_chunks", n_img_chunks},
                 {"n_image_tokens", n_img_tokens}, {"first_image_pos", first_img}, {"media_boundary_pos", boundary},
                 {"text_tokens_before_first_image", first_img}, {"text_tokens_after_last_image", boundary < 0 ? 0 : n - boundary}};
  j["chunks"] = chunks;
  j["image_entries"] = entries;
  json tokens = json::array(), nll = json::array(), argmax = json::array(), top8 = json::array();
  double after_sum = 0;
  int after_n = 0, nonfinite = 0;
  for (int32_t p = 0; p < n; ++p) {
    const std::span<const float> row(ev.logits.data() + size_t(p) * size_t(V), size_t(V));
    tokens.push_back(mp.tokens[size_t(p)] >= 0 ? json(mp.tokens[size_t(p)]) : json(nullptr));
    for (float v : row) nonfinite += !std::isfinite(v);
    const std::vector<int32_t> best = top_k_ids(row, 8);
    argmax.push_back(best[0]);
    json t8 = json::array();
    for (int32_t id : best) t8.push_back({id, row[size_t(id)]});
    top8.push_back(t8);
    if (p + 1 < n) {
      const Token next = mp.tokens[size_t(p) + 1];
      if (next < 0) {
        nll.push_back(nullptr);
        continue;
      }
      const double val = token_nll(row, next);
      nll.push_back(val);
      if (boundary >= 0 && p + 1 >= boundary) after_sum += val, ++after_n;
    }
  }
  j["tokens"] = tokens;
  j["nll"] = nll;
  j["mean_nll_text_after_image"] = after_n ? after_sum / after_n : 0.0;
  j["argmax"] = argmax;
  j["top8"] = top8;
  std::vector<float> full;  // [positions][n_vocab]
  for (int32_t p : positions)
    full.insert(full.end(), ev.logits.begin() + long(size_t(p) * size_t(V)), ev.logits.begin() + long(size_t(p + 1) * size_t(V)));
  json fl = blob.add(full.data(), full.size(), {int64_t(positions.size()), V});
  fl.erase("same_bytes_as");
  fl["positions"] = positions;
  j["full_logits"] = fl;
  j["n_nonfinite_logits"] = nonfinite;
  if (const auto rp = mrope_positions(cfg, mp.media, 0, n + 1); !rp.empty()) add_mrope_fields(j, rp, mp);
  const std::string blob_name = j["name"].get<std::string>() + ".f32";
  j["blob_file"] = blob_name;
  j["blob_file_bytes"] = blob.size_bytes();
  blob.write(prefix + ".f32");
  std::ofstream out(prefix + ".json");
  out << j.dump(1) << "\n";
  if (!out) throw std::runtime_error("cannot write '" + prefix + ".json'");
}

}  // namespace ws
