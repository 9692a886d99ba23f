// One chat turn on one sequence: restore the deepest usable cached state, compute only
// the rest of the prompt (laying checkpoints where the policy says), then generate.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "cache/prefix_cache.h"
#include "engine/sampling.h"
#include "memory/prepared_memory.h"
#include "models/model.h"
#include "tokenizer/tokenizer.h"

namespace ws {

struct EngineOptions {
  MemoryOptions memory;
  int32_t n_ubatch = 512;
  CheckpointPolicy checkpoints;
};

// Input embeddings at positions [pos0, pos0 + n_rows) of a prompt (one image chunk). The
// prompt holds placeholder ids there (negative, derived from the image's hash), so the
// prefix tree tells images apart; they are never fed to the model.
struct MediaChunk {
  int32_t pos0 = 0, n_rows = 0;
  bool non_causal = false;  // rows attend to each other (evaluated as one batch, never split)
  // [n_rows][n_embd] f32. Called only when some of these positions must be computed, so an
  // image covered by a cached state is never encoded.
  std::function<std::shared_ptr<const std::vector<float>>()> embeddings;
  // The rows' grid (mtmd's nx x ny, row-major); 0 = one row of n_rows. Only M-RoPE models use
  // it: row i of the chunk gets the position components (q, q + i / grid_w, q + i % grid_w, 0),
  // q the chunk's first position, and the chunk advances positions by max(grid_w, grid_h).
  int32_t grid_w = 0, grid_h = 0;
};

// The rope position components ([end - begin][4]: t, h, w, e) of rows [begin, end) of a prompt
// with these media chunks (sorted), rows past the prompt included (generated text), for an
// M-RoPE model: text at position p is (p, p, p, 0), p = row minus the rows the images before it
// hold beyond their positions. Empty when the model is not M-RoPE or every row precedes the
// first image: those rows rotate by their state positions, exactly as text alone does.
std::vector<int32_t> mrope_positions(const ModelConfig& cfg, std::span<const MediaChunk> media, int32_t begin,
                                     int32_t end);

struct TurnRequest {
  std::vector<Token> prompt;
  std::vector<MediaChunk> media;      // sorted by pos0, non-overlapping, inside the prompt
  std::vector<int32_t> message_ends;  // token positions where a message's rendering ends
  std::vector<int32_t> media_ends;    // token positions right after an image
  // A message end checkpointed however close it lies to the frontier (-1: none). Chat
  // templates that write thinking blocks re-render the generation prompt and the reply
  // differently once the conversation goes on (the block is dropped from the history), so
  // the next turn diverges right after the last message: without a checkpoint there, a
  // model with recurrent layers would recompute the whole last turn.
  int32_t keep_message_end = -1;
  int32_t max_tokens = 128;
  SamplingParams sampling;
  // > 1: that many replies to one prompt computation. Reply i continues from an exact fork
  // of the state the prompt left, with its own sampler seeded sampling.seed + i; the replies
  // advance one token each in turn.
  int32_t n_samples = 1;
  bool record_logits = false;  // keep the logits of the computed prompt tail and of each generated token
  // Polled before each micro-batch of the prompt: true ends the turn there (the client
  // left), with stop_reason "cancelled" and nothing generated. Generation stops through the sink.
  std::function<bool()> cancelled;
};

struct TurnResult {
  std::vector<Token> generated;       // sampled tokens (an end-of-generation token is not included)
  int32_t prompt_tokens = 0, reused = 0, computed = 0, common_prefix = 0;
  std::string miss_reason;
  // The reused checkpoint came from a storage tier ("disk", "redis"; "" = RAM or none):
  // the bytes it moved and the time it took (part of ttft_ms).
  std::string reuse_tier;
  size_t tier_bytes = 0;
  double tier_ms = 0;
  double ttft_ms = 0, restore_ms = 0, total_ms = 0;
  double checkpoint_ms = 0;           // snapshots inside the prompt (part of ttft_ms)
  double frontier_ms = 0;             // the snapshot of the whole prompt, after the first token (not in ttft_ms)
  int32_t checkpoints = 0;            // how many the prompt took, the frontier included
  std::vector<int32_t> chunk_ends;    // micro-batch boundaries used for the prompt tail
  std::vector<float> logits;          // record_logits: [(prompt - reused) + fed generated][n_vocab]
  std::string stop_reason;            // "eog", "length", "client" (the sink), "context", "cancelled"
  // One per reply (n_samples); generated and stop_reason above are samples[0]'s.
  struct Sample {
    std::vector<Token> generated;
    std::string stop_reason;
  };
  std::vector<Sample> samples;
};

// Reuse traits of a model's layer kinds (full KV only -> deeper checkpoints can be cut;
// recurrent layers -> bytes every snapshot copies, which space the checkpoints).
ReuseTraits reuse_traits(const Model& model, const MemoryOptions& mem);

// Returns false to stop generating (e.g. the client went away).
using TokenSink = std::function<bool(Token)>;
// A sampled token of reply `sample` with the raw logits it was drawn from (for logprobs).
// Returns false to stop that reply.
using SampleSink = std::function<bool(int32_t sample, Token, std::span<const float> logits)>;

class Engine {
 public:
  Engine(const Model& model, const Tokenizer& tokenizer, PrefixCache* cache, EngineOptions options, ThreadPool& pool)
      : model_(model), tok_(tokenizer), cache_(cache), opt_(std::move(options)), pool_(pool),
        traits_(reuse_traits(model, opt_.memory)),
        spare_core_(pool.size() < int(std::thread::hardware_concurrency())) {}
  TurnResult run_turn(const TurnRequest& req, const TokenSink& sink = {});
  // run_turn with req.n_samples replies and the logits behind each token.
  TurnResult run_samples(const TurnRequest& req, const SampleSink& sink);
  const Model& model() const { return model_; }
  const EngineOptions& options() const { return opt_; }
  ThreadPool& pool() const { return pool_; }
  // The tokens the last turn's first reply left in its state (prompt and reply tokens fed):
  // what llama-server calls a slot's cache (GET /slots, slot save). The states themselves
  // live in the shared prefix cache.
  const std::vector<Token>& last_sequence() const { return last_sequence_; }
  void set_last_sequence(std::vector<Token> tokens) { last_sequence_ = std::move(tokens); }  // slot restore, erase

 private:
  // Restores the cache hit into `state` (or leaves it fresh); returns tokens reused.
  int32_t restore_hit(Hit& hit, SeqState& state, TurnResult& res);
  // Computes prompt positions [from, n), snapshotting where the policy says; returns the
  // kind of the checkpoint due at n (the frontier), which run_turn takes once the first
  // token is out.
  // `memory` is started for the checkpoints inside the prompt and, given spare_core_, for
  // the frontier and the reply's end; it gives one set to each.
  Boundary ingest(const TurnRequest& req, int32_t from, SeqState& state, std::vector<float>& last_logits,
                  PreparedSnapshotMemory& memory, TurnResult& res);
  // Evaluates prompt positions [pos, end) (text, or rows of one media chunk).
  void eval_range(const TurnRequest& req, int32_t pos, int32_t end, LogitsMode mode, SeqState& state,
                  std::vector<float>& logits);
  struct DecodedReplies {
    std::vector<Token> first_sequence;  // prompt and reply tokens reply 0's state consumed
    int32_t computed_elsewhere = 0;     // reply tokens the other replies' forks fed
  };
  // Samples req.n_samples replies of up to req.max_tokens tokens: reply 0 continues in
  // `state`, the others in forks of it taken before any reply moves it. first_token_out runs
  // when reply 0's first token has reached the sink (state and logits still the prompt's).
  // Sets res.samples, res.ttft_ms and, with req.record_logits, res.logits.
  DecodedReplies decode_replies(const TurnRequest& req, const SampleSink& sink, SeqState& state,
                                const std::vector<float>& logits, const std::function<void()>& first_token_out,
                                std::chrono::steady_clock::time_point t0, TurnResult& res);
  // Moves a hit that lands inside a non-causal chunk back to the chunk's start (or drops it).
  void align_hit_to_media(const TurnRequest& req, Hit& hit, TurnResult& res);
  void put(const std::vector<Token>& tokens, size_t n, const SeqState& state, Boundary kind,
           PreparedSnapshotMemory::Set memory, std::span<const float> logits = {});

  const Model& model_;
  const Tokenizer& tok_;
  PrefixCache* cache_;
  EngineOptions opt_;
  ThreadPool& pool_;
  const ReuseTraits traits_;  // fixed by the model's layer kinds: probed once, not per turn
  // The pool leaves a core free for the helper that prepares snapshot memory. Beside a pool
  // on every core its page faults slowed mamba2's warm turns 1.2-1.9x (2 vCPUs), so there it
  // prepares only the checkpoints inside the prompt, which would fault on the TTFT path.
  const bool spare_core_;
  std::vector<Token> last_sequence_;
};

}  // namespace ws
