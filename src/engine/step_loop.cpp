#include "engine/step_loop.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace ws {

namespace {

// The checks the model would make on the whole batch, done before its first piece runs: a
// batch split across steps must not fail halfway with part of it in the state.
void check_batch(const ModelConfig& cfg, const SeqStep& s) {
  s.state->check_room(s.batch.size());
  if (s.batch.embeddings) return;
  for (Token t : s.batch.tokens)
    if (t < 0 || t >= cfg.n_vocab)
      throw std::runtime_error("token id " + std::to_string(t) + " is outside the vocabulary (0.." +
                               std::to_string(cfg.n_vocab - 1) + ")");
}

}  // namespace

StepLoop::StepLoop(const Model& model, ThreadPool& pool, StepLoopOptions options)
    : model_(model), pool_(pool), opt_(options) {
  if (opt_.step_tokens < 1) throw std::invalid_argument("the step size (--batch-size) must be at least 1");
  thread_ = std::thread([this] { run(); });
}

StepLoop::~StepLoop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_loop_.notify_all();
  thread_.join();
}

void StepLoop::forward_many(std::span<SeqStep> steps, ThreadPool&) const {
  std::vector<Job> jobs;  // [steps] (those with rows)
  jobs.reserve(steps.size());
  for (SeqStep& s : steps) {
    s.error = nullptr;
    if (s.batch.size() == 0) continue;
    try {
      check_batch(model_.config(), s);
    } catch (...) {
      s.error = std::current_exception();
      continue;
    }
    jobs.push_back(Job{&s});
  }
  if (jobs.empty()) return;
  std::unique_lock<std::mutex> lock(mu_);
  if (stop_) throw std::runtime_error("the server is stopping");
  for (Job& j : jobs) queue_.push_back(&j);
  wake_loop_.notify_one();
  wake_callers_.wait(lock, [&] {
    return std::all_of(jobs.begin(), jobs.end(), [](const Job& j) { return j.finished; });
  });
}

SeqStep StepLoop::piece(const Job& job, int64_t rows) const {
  const SeqStep& s = *job.step;
  const int64_t total = s.batch.size(), at = job.done;
  SeqStep p{s.batch, s.state, s.mode, s.logits, nullptr};
  if (s.batch.embeddings) {
    p.batch.embeddings = s.batch.embeddings + at * model_.config().n_embd;
    p.batch.n_rows = rows;
  } else {
    p.batch.tokens = s.batch.tokens.subspan(size_t(at), size_t(rows));
  }
  if (s.batch.positions) p.batch.positions = s.batch.positions + 4 * at;
  // all / hidden: this piece's rows of the output; last: only the final piece has it.
  if (s.mode == LogitsMode::all) p.logits = s.logits + at * model_.config().n_vocab;
  if (s.mode == LogitsMode::hidden) p.logits = s.logits + at * model_.config().n_embd;
  if (s.mode == LogitsMode::last && at + rows < total) p.mode = LogitsMode::none;
  return p;
}

void StepLoop::plan_step(std::vector<Job*>& jobs, std::vector<SeqStep>& pieces) const {
  int64_t decode = 0;
  for (Job* j : queue_)  // the decoding streams first: one row each
    if (j->step->batch.size() - j->done == 1) {
      jobs.push_back(j);
      pieces.push_back(piece(*j, 1));
      ++decode;
    }
  // Prompts keep a quarter of the step however many streams decode, so they always advance.
  int64_t budget = std::max<int64_t>(opt_.step_tokens - decode, (opt_.step_tokens + 3) / 4);
  bool prompt_taken = false;
  for (Job* j : queue_) {
    const int64_t left = j->step->batch.size() - j->done;
    if (left == 1) continue;
    if (budget <= 0) break;
    // A non-causal batch attends within itself: whole, beside the decode rows, over the
    // budget if need be, but not beside another prompt piece it would push further over.
    const bool whole = j->step->batch.non_causal;
    if (whole && left > budget && prompt_taken) continue;
    const int64_t rows = whole ? left : std::min(left, budget);
    jobs.push_back(j);
    pieces.push_back(piece(*j, rows));
    budget -= rows;
    prompt_taken = true;
  }
}

void StepLoop::run() {
  std::unique_lock<std::mutex> lock(mu_);
  size_t expected = 0;  // sequences served by the last step, likely to come back with a token
  for (;;) {
    wake_loop_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (!stop_ && expected > 1)
      wake_loop_.wait_for(lock, opt_.gather, [&] { return stop_ || queue_.size() >= expected; });
    if (stop_) break;
    std::vector<Job*> jobs;
    std::vector<SeqStep> pieces;  // [jobs]
    plan_step(jobs, pieces);
    lock.unlock();
    const auto t0 = std::chrono::steady_clock::now();
    std::exception_ptr failure;
    try {
      model_.forward_many(pieces, pool_);
    } catch (...) {
      failure = std::current_exception();  // the pass itself failed (e.g. out of memory): fails every piece
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    lock.lock();
    record(pieces, seconds);
    expected = 0;
    for (size_t i = 0; i < jobs.size(); ++i) {
      Job& j = *jobs[i];
      const std::exception_ptr err = failure ? failure : pieces[i].error;
      j.done += pieces[i].batch.size();
      if (err) j.step->error = err;
      if (err || j.done == j.step->batch.size()) {
        j.finished = true;
        queue_.erase(std::find(queue_.begin(), queue_.end(), &j));
        ++expected;
      }
    }
    wake_callers_.notify_all();
  }
  const auto stopping = std::make_exception_ptr(std::runtime_error("the server is stopping"));
  for (Job* j : queue_) {
    j->step->error = stopping;
    j->finished = true;
  }
  queue_.clear();
  wake_callers_.notify_all();
}

constexpr auto kRateWindow = std::chrono::seconds(10);

void StepLoop::record(const std::vector<SeqStep>& pieces, double seconds) {
  int64_t rows = 0, decode = 0;
  for (const SeqStep& p : pieces) {
    const int64_t k = p.batch.size();
    rows += k;
    decode += k == 1;
  }
  stats_.decode_rows += uint64_t(decode);
  stats_.prompt_rows += uint64_t(rows - decode);
  ++stats_.steps;
  const auto& b = StepStats::kRowBuckets;
  ++stats_.rows_histogram[size_t(std::lower_bound(b.begin(), b.end(), rows) - b.begin())];
  stats_.rows_sum += uint64_t(rows);
  stats_.last_rows = int32_t(rows);
  stats_.last_sequences = int32_t(pieces.size());
  stats_.busy_seconds += seconds;
  const auto now = std::chrono::steady_clock::now();
  recent_.emplace_back(now, decode);
  while (recent_.front().first < now - kRateWindow) recent_.pop_front();
}

StepStats StepLoop::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  StepStats s = stats_;
  s.waiting = int32_t(queue_.size());
  const auto now = std::chrono::steady_clock::now();
  int64_t decode = 0;
  for (const auto& [t, k] : recent_)
    if (t >= now - kRateWindow) decode += k;
  s.decode_tokens_per_second = double(decode) / std::chrono::duration<double>(kRateWindow).count();
  return s;
}

}  // namespace ws
