// Continuous batching: one loop owns the compute threads and evaluates, each step, the
// micro-batches that many sequences (the server's slots) asked for, in one forward pass.
//
// StepLoop is a Model: an Engine given it instead of the real model runs unchanged on its
// own thread, and each of its forward calls blocks until the step that evaluated it. A
// step takes every waiting single-token batch (the decoding streams) and then prompt
// rows, oldest request first, up to `step_tokens` rows in all; a longer prompt batch is
// split across steps (chunked prefill), so a 4,000-token prompt never holds the streams
// for more than one step's worth of rows. Each sequence keeps its own state, checkpoints
// and cache lookups (those run on its own thread between its steps); only the pass over
// the weights is shared, and every kernel is batch-invariant, so a sequence's logits are
// bit-identical whichever others share its steps and however its prompt is split.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <array>
#include <deque>
#include <mutex>
#include <thread>

#include "models/model.h"

namespace ws {

struct StepLoopOptions {
  // Rows per step (decode tokens and prompt chunks together), llama-server's --batch-size.
  // Prompt rows keep a quarter of it however many streams decode, and a prompt batch that
  // cannot be split (a non-causal image chunk) goes whole: those steps may exceed it.
  int32_t step_tokens = 256;
  // After a step, how long the loop waits for the sequences it just served to send their
  // next token (they sample in between), so that the streams stay in one step.
  std::chrono::microseconds gather{2000};
};

// What the loop has done (GET /metrics).
struct StepStats {
  static constexpr std::array<int, 10> kRowBuckets = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512};
  uint64_t steps = 0;
  std::array<uint64_t, kRowBuckets.size() + 1> rows_histogram{};  // steps by rows, non-cumulative; last: more
  uint64_t rows_sum = 0;
  uint64_t decode_rows = 0;   // single-row batches evaluated (generated tokens fed back)
  uint64_t prompt_rows = 0;   // rows of longer batches (prompts, images)
  int32_t last_rows = 0, last_sequences = 0;  // the latest step
  double busy_seconds = 0;    // time spent in forward passes
  int32_t waiting = 0;        // batches waiting for a step now
  double decode_tokens_per_second = 0;  // single-row batches over the last 10 s of steps
};

class StepLoop final : public Model {
 public:
  // `pool` is the loop's alone from now on; the loop thread starts here.
  StepLoop(const Model& model, ThreadPool& pool, StepLoopOptions options);
  ~StepLoop() override;  // fails the batches still waiting, then joins the loop thread
  StepLoop(const StepLoop&) = delete;
  StepLoop& operator=(const StepLoop&) = delete;

  const ModelConfig& config() const override { return model_.config(); }
  SeqState make_state(const MemoryOptions& opts) const override { return model_.make_state(opts); }
  // Hands each step to the loop and waits until all are evaluated (from any thread; the
  // pool argument is ignored: the loop's pool runs every pass). A step refused by the model
  // (or cut short by the loop stopping) gets its error, with its state unchanged.
  void forward_many(std::span<SeqStep> steps, ThreadPool& pool) const override;

  StepStats stats() const;
  const StepLoopOptions& options() const { return opt_; }

 private:
  // A caller's batch on its way through one or more steps.
  struct Job {
    SeqStep* step;
    int64_t done = 0;  // rows evaluated so far
    bool finished = false;
  };
  void run();
  // Picks this step's pieces from queue_ (under mu_): every single-row job, then rows of
  // the others in arrival order while the budget lasts.
  void plan_step(std::vector<Job*>& jobs, std::vector<SeqStep>& pieces) const;
  // Piece [job.done, job.done + rows) of a job's batch, with the logits that part owes.
  SeqStep piece(const Job& job, int64_t rows) const;
  void record(const std::vector<SeqStep>& pieces, double seconds);

  const Model& model_;
  ThreadPool& pool_;
  const StepLoopOptions opt_;
  mutable std::mutex mu_;
  mutable std::condition_variable wake_loop_, wake_callers_;
  mutable std::deque<Job*> queue_;  // arrival order
  bool stop_ = false;
  StepStats stats_;
  std::deque<std::pair<std::chrono::steady_clock::time_point, int64_t>> recent_;  // (step end, decode rows)
  std::thread thread_;
};

}  // namespace ws
