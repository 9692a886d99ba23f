// Scripted multi-turn sessions, as a client would send them (`warmstart replay`): each
// line is one request {"messages": [...], "max_tokens": N, "conversation": "name"}; an
// assistant message {"role": "assistant", "from_turn": K} stands for the text generated
// at turn K (1-based).
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "engine/prompt.h"
#include "engine/turn.h"

namespace ws {

struct ReplayTurn {
  int turn = 0;
  std::string conversation;
  int32_t prompt_tokens = 0, reused_tokens = 0, computed_tokens = 0, common_prefix = 0;
  double ttft_ms = 0, rss_mb = 0;
  double restore_ms = 0, checkpoint_ms = 0;  // parts of ttft_ms
  double frontier_ms = 0;                    // the frontier's snapshot, after the first token
  int32_t checkpoints = 0;                   // of the prompt, the frontier included
  std::string miss_reason;  // set when less was reused than the common prefix allows
  std::string text;         // the generated reply
  std::vector<Token> generated;
  bool verified = false;
  double max_abs_logit_diff = 0, mean_nll_diff = 0;  // vs cold with the same micro-batch boundaries
  double max_abs_logit_diff_plain = 0;               // vs a plain cold run
  double ideal_ms = 0;  // measure_ideal: time to compute only this turn's new prompt tokens
  nlohmann::json to_json() const;
};

// messages -> the prompt text and the byte offset where each message ends in it. A pair,
// not chat::RenderedPrompt: the engine does not use the chat layer (src/layers.txt).
using ChatRenderer = std::function<std::pair<std::string, std::vector<size_t>>(const nlohmann::json& messages)>;

class Replay {
 public:
  Replay(Engine& engine, const Tokenizer& tok, ChatRenderer render, bool verify, bool measure_ideal = false)
      : engine_(engine), tok_(tok), render_(std::move(render)), verify_(verify), measure_ideal_(measure_ideal) {}
  // Runs one script line; throws std::invalid_argument naming the problem for a bad line.
  ReplayTurn run(const nlohmann::json& line);

 private:
  nlohmann::json resolve_messages(const nlohmann::json& messages) const;
  void verify(const TurnRequest& req, const TurnResult& res, ReplayTurn& out) const;
  double ideal_ms(const TurnRequest& req, int32_t reused) const;

  Engine& engine_;
  const Tokenizer& tok_;
  ChatRenderer render_;
  bool verify_;
  bool measure_ideal_;
  std::vector<std::string> generated_text_;  // [turn-1] text generated at each turn
};

double current_rss_mb();

}  // namespace ws
