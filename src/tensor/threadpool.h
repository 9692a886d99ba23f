// A persistent pool of worker threads with a cheap fork/join. The caller's thread takes
// part as worker 0.
#pragma once
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ws {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);  // n_threads >= 1 (1 = run inline)
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  // Runs fn(thread_index, n_threads) on every thread and waits for all of them.
  void run(const std::function<void(int, int)>& fn);
  // Splits [0, n) into chunks of at least `grain` (a few per thread) and calls
  // fn(begin, end) for each, chunks claimed dynamically: a thread that is descheduled
  // (a busy machine) or arrives late simply takes fewer chunks, and the caller never
  // waits for a worker that has not started. fn must not depend on which thread runs it.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);
  // The grain for rows of row_elems elements of cheap element-wise work: ~16K elements a
  // chunk, enough to outweigh the chunk hand-off, small enough to spread short batches.
  static int64_t rows_grain(int64_t row_elems) {
    return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, row_elems));
  }

 private:
  void worker(int index);
  // Runs job on the caller and on the workers; all_threads: every worker must run it
  // once (run()), else workers that come too late skip it (parallel_for()).
  void dispatch(const std::function<void(int, int)>& job, bool all_threads);
  int n_threads_;
  std::vector<std::thread> threads_;
  // Workers spin on generation_ for a short while (decode issues hundreds of small jobs
  // per token and a futex wake-up costs more than one of them), then sleep on cv_start_.
  // ticket_ = generation << 16 | open bit | workers inside the job: a worker enters a job
  // only while it is open, and the caller closes it once nobody is inside, so job_ is
  // never read after the caller returned.
  std::atomic<uint64_t> generation_{0};
  std::atomic<uint64_t> ticket_{0};
  std::atomic<int> done_{0};  // workers that finished the current job
  std::mutex mu_;
  std::condition_variable cv_start_;
  int sleepers_ = 0;  // workers blocked on cv_start_ (under mu_)
  const std::function<void(int, int)>* job_ = nullptr;
  std::atomic<bool> stop_{false};
};

}  // namespace ws
