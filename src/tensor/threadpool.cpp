// Fork/join thread pool: workers sleep on a condition variable and wake when the job
// generation changes. The calling thread always runs index 0, so a pool of size 1
// never touches a thread or a lock.
//
// run() is not re-entrant: a job must not call run() or parallel_for() on the same pool
// (with more than one thread that would deadlock). One caller at a time.
#include "tensor/threadpool.h"

#include <algorithm>
#include <exception>

namespace ws {

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  threads_.reserve(size_t(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_start_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;  // generation of the last job this worker ran
  for (;;) {
    const std::function<void(int, int)>* job = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_start_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
    }
    (*job)(index, n_threads_);
    bool last = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      last = --pending_ == 0;
    }
    if (last) cv_done_.notify_one();
  }
}

void ThreadPool::run(const std::function<void(int, int)>& fn) {
  if (n_threads_ == 1) {
    fn(0, 1);
    return;
  }
  // Workers must never let an exception escape (that would terminate the process), so
  // the job is wrapped: the first exception from any thread is rethrown here after all
  // threads have finished.
  std::mutex err_mu;
  std::exception_ptr err;
  const std::function<void(int, int)> guarded = [&](int i, int n) {
    try {
      fn(i, n);
    } catch (...) {
      std::lock_guard<std::mutex> lock(err_mu);
      if (!err) err = std::current_exception();
    }
  };
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &guarded;
    pending_ = n_threads_ - 1;
    ++generation_;
  }
  cv_start_.notify_all();
  guarded(0, n_threads_);
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_done_.wait(lock, [&] { return pending_ == 0; });
    job_ = nullptr;
  }
  if (err) std::rethrow_exception(err);
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  // As many chunks as threads, but none smaller than `grain`.
  const int64_t chunks = std::min<int64_t>(n_threads_, (n + grain - 1) / grain);
  if (chunks <= 1) {
    fn(0, n);
    return;
  }
  run([&](int i, int) {
    if (i >= chunks) return;
    const int64_t begin = n * i / chunks;
    const int64_t end = n * (i + 1) / chunks;
    if (begin < end) fn(begin, end);
  });
}

}  // namespace ws
