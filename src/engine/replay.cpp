#include "engine/replay.h"

#include <chrono>
#include <cmath>
#include <fstream>
#include <stdexcept>

#include "engine/eval.h"
#include "engine/logit_report.h"

namespace ws {

double current_rss_mb() {
  std::ifstream in("/proc/self/status");
  std::string key;
  while (in >> key) {
    if (key == "VmRSS:") {
      double kb = 0;
      in >> kb;
      return kb / 1024.0;
    }
    std::getline(in, key);
  }
  return 0;
}

nlohmann::json ReplayTurn::to_json() const {
  nlohmann::json j = {{"turn", turn},
                      {"conversation", conversation},
                      {"prompt_tokens", prompt_tokens},
                      {"reused_tokens", reused_tokens},
                      {"computed_tokens", computed_tokens},
                      {"ttft_ms", ttft_ms},
                      {"restore_ms", restore_ms},
                      {"checkpoint_ms", checkpoint_ms},
                      {"frontier_ms", frontier_ms},
                      {"checkpoints", checkpoints},
                      {"rss_mb", rss_mb}};
  if (verified) {
    j["max_abs_logit_diff"] = max_abs_logit_diff;
    j["mean_nll_diff"] = mean_nll_diff;
    j["max_abs_logit_diff_plain"] = max_abs_logit_diff_plain;
  }
  if (ideal_ms > 0) {
    j["ideal_ms"] = ideal_ms;
    j["ttft_ratio"] = ttft_ms / ideal_ms;
  }
  if (!miss_reason.empty()) j["miss_reason"] = miss_reason;
  return j;
}

nlohmann::json Replay::resolve_messages(const nlohmann::json& messages) const {
  if (!messages.is_array() || messages.empty()) throw std::invalid_argument("'messages' must be a non-empty array");
  nlohmann::json out = nlohmann::json::array();
  for (const auto& m : messages) {
    if (!m.is_object()) throw std::invalid_argument("each message must be an object");
    nlohmann::json msg = m;
    if (m.contains("from_turn")) {
      if (!m["from_turn"].is_number_integer()) throw std::invalid_argument("'from_turn' must be an integer");
      const int64_t k = m["from_turn"].get<int64_t>();
      if (k < 1 || k > int64_t(generated_text_.size()))
        throw std::invalid_argument("'from_turn' " + std::to_string(k) + " names a turn that has not run yet");
      msg["content"] = generated_text_[size_t(k - 1)];
      msg.erase("from_turn");
    }
    out.push_back(std::move(msg));
  }
  return out;
}

ReplayTurn Replay::run(const nlohmann::json& line) {
  if (!line.is_object()) throw std::invalid_argument("a script line must be a JSON object");
  ReplayTurn out;
  out.turn = int(generated_text_.size()) + 1;
  out.conversation = line.value("conversation", std::string("default"));
  const auto [text, byte_ends] = render_(resolve_messages(line.value("messages", nlohmann::json())));
  PromptTokens prompt = tokenize_prompt(tok_, text, byte_ends);
  TurnRequest req;
  req.prompt = std::move(prompt.tokens);
  req.message_ends = std::move(prompt.message_ends);
  req.max_tokens = line.value("max_tokens", 32);
  req.sampling.temperature = 0;  // greedy: the answer is a function of the prompt
  req.record_logits = verify_;
  const TurnResult res = engine_.run_turn(req);
  out.prompt_tokens = res.prompt_tokens;
  out.reused_tokens = res.reused;
  out.computed_tokens = res.computed;
  out.common_prefix = res.common_prefix;
  out.ttft_ms = res.ttft_ms;
  out.restore_ms = res.restore_ms;
  out.checkpoint_ms = res.checkpoint_ms;
  out.frontier_ms = res.frontier_ms;
  out.checkpoints = res.checkpoints;
  out.rss_mb = current_rss_mb();
  out.generated = res.generated;
  out.text = tok_.decode(res.generated);
  const int32_t limit = std::min(res.common_prefix, res.prompt_tokens - 1);
  if (res.reused < limit || !res.miss_reason.empty()) out.miss_reason = res.miss_reason;
  if (verify_) verify(req, res, out);
  if (measure_ideal_) out.ideal_ms = ideal_ms(req, res.reused);
  generated_text_.push_back(out.text);
  return out;
}

// The physical limit of a warm turn: a state that already holds the reused tokens
// (prepared untimed) computes only the new ones, with no lookup, restore or checkpoints.
double Replay::ideal_ms(const TurnRequest& req, int32_t reused) const {
  const Model& model = engine_.model();
  SeqState s = model.make_state(engine_.options().memory);
  std::vector<float> logits;  // [n_vocab] of the last token
  const int32_t ub = engine_.options().n_ubatch;
  eval_tokens(model, s, std::span(req.prompt).first(size_t(reused)), ub, LogitsMode::none, logits, engine_.pool());
  const auto t0 = std::chrono::steady_clock::now();
  eval_tokens(model, s, std::span(req.prompt).subspan(size_t(reused)), ub, LogitsMode::last, logits, engine_.pool());
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Recomputes the turn cold: once with the warm path's micro-batch boundaries (isolates
// the cache) and once plainly (n_ubatch chunks from position 0).
void Replay::verify(const TurnRequest& req, const TurnResult& res, ReplayTurn& out) const {
  const Model& model = engine_.model();
  const size_t n_vocab = size_t(model.config().n_vocab);
  const size_t n = req.prompt.size();
  const size_t rows = res.logits.size() / n_vocab;          // tail + fed generated tokens
  std::vector<Token> seq = req.prompt;                      // every token evaluated
  seq.insert(seq.end(), res.generated.begin(), res.generated.begin() + long(rows - (n - size_t(res.reused))));
  std::vector<Token> next(rows, -1);                        // [rows] the token each row predicts
  for (size_t i = 0; i < rows; ++i) {
    const size_t p = size_t(res.reused) + i + 1;
    if (p < seq.size()) next[i] = seq[p];
    else if (p - n < res.generated.size()) next[i] = res.generated[p - n];
  }
  ThreadPool pool(1);
  const int32_t ub = engine_.options().n_ubatch;
  auto run_cold = [&](bool same_boundaries) {
    SeqState s = model.make_state(engine_.options().memory);
    std::vector<float> all, chunk;  // [rows][n_vocab], scratch
    if (same_boundaries) {
      eval_tokens(model, s, std::span(req.prompt).first(size_t(res.reused)), ub, LogitsMode::none, chunk, pool);
      int32_t pos = res.reused;
      for (int32_t end : res.chunk_ends) {
        eval_tokens(model, s, std::span(req.prompt).subspan(size_t(pos), size_t(end - pos)), ub, LogitsMode::all, chunk, pool);
        all.insert(all.end(), chunk.begin(), chunk.end());
        pos = end;
      }
    } else {
      eval_tokens(model, s, req.prompt, ub, LogitsMode::all, chunk, pool);
      all.assign(chunk.begin() + long(size_t(res.reused) * n_vocab), chunk.end());
    }
    for (size_t p = n; p < seq.size(); ++p) {
      const Token one[1] = {seq[p]};
      eval_tokens(model, s, one, 1, LogitsMode::all, chunk, pool);
      all.insert(all.end(), chunk.begin(), chunk.end());
    }
    return all;
  };
  const auto same = run_cold(true);
  const auto plain = run_cold(false);
  out.verified = true;
  out.max_abs_logit_diff = max_abs_diff(res.logits, same);
  out.mean_nll_diff = std::fabs(mean_nll(res.logits, n_vocab, next) - mean_nll(same, n_vocab, next));
  out.max_abs_logit_diff_plain = max_abs_diff(res.logits, plain);
}

}  // namespace ws
