// Fork/join thread pool. Workers spin briefly on the job generation, then sleep on a
// condition variable. The calling thread always runs index 0, so a pool of size 1 never
// touches a thread.
//
// run() is not re-entrant: a job must not call run() or parallel_for() on the same pool
// (with more than one thread that would deadlock). One caller at a time.
#include "tensor/threadpool.h"

#include <immintrin.h>

#include <algorithm>
#include <exception>

namespace ws {
namespace {

// About 10-100 us of polling (pause latency varies by CPU): bridges the gaps between the
// matmuls of one token without holding a shared core for long once the pool is idle.
constexpr int kSpinIterations = 4000;
constexpr uint64_t kOpen = uint64_t(1) << 15;
constexpr uint64_t kActiveMask = kOpen - 1;

}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  threads_.reserve(size_t(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
    generation_.fetch_add(1);
  }
  cv_start_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;  // generation of the last job this worker looked at
  for (;;) {
    for (int i = 0; i < kSpinIterations && generation_.load(std::memory_order_acquire) == seen; ++i) _mm_pause();
    if (generation_.load(std::memory_order_acquire) == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      ++sleepers_;
      cv_start_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      --sleepers_;
    }
    // Generation first, then the stop flag: the destructor sets stop_ before it bumps the
    // generation, so a worker that takes the destructor's generation as `seen` also sees
    // stop_. The other order let a worker check stop_, lose the CPU, wake up to the
    // destructor's generation as if it were a job, and sleep on it forever (seen once:
    // `warmstart chat` hung at exit on a busy machine).
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load()) return;
    // Enter unless the caller already closed this job (it finished without us).
    uint64_t cur = ticket_.load(std::memory_order_acquire);
    bool entered = false;
    while ((cur >> 16) == (seen & 0xFFFFFFFFFFFFull) && (cur & kOpen))
      if (ticket_.compare_exchange_weak(cur, cur + 1, std::memory_order_acq_rel)) {
        entered = true;
        break;
      }
    if (!entered) continue;
    (*job_)(index, n_threads_);
    done_.fetch_add(1, std::memory_order_acq_rel);
    ticket_.fetch_sub(1, std::memory_order_release);
  }
}

void ThreadPool::dispatch(const std::function<void(int, int)>& job, bool all_threads) {
  job_ = &job;
  done_.store(0, std::memory_order_relaxed);
  const uint64_t gen = generation_.load(std::memory_order_relaxed) + 1;
  ticket_.store(((gen & 0xFFFFFFFFFFFFull) << 16) | kOpen, std::memory_order_release);
  {
    // Publishing under the mutex: a worker about to sleep either sees the new generation
    // in its wait predicate or is already waiting and gets the notification.
    std::lock_guard<std::mutex> lock(mu_);
    generation_.store(gen, std::memory_order_release);
    if (sleepers_ > 0) cv_start_.notify_all();
  }
  job(0, n_threads_);
  // Close the job once nobody is inside (and, for run(), everybody has been).
  for (int spins = 0;; ++spins) {
    uint64_t cur = ticket_.load(std::memory_order_acquire);
    const bool ready = (cur & kActiveMask) == 0 &&
                       (!all_threads || done_.load(std::memory_order_acquire) == n_threads_ - 1);
    if (ready && ticket_.compare_exchange_weak(cur, cur & ~kOpen, std::memory_order_acq_rel)) break;
    if (spins < kSpinIterations) _mm_pause();
    else std::this_thread::yield();  // a worker was descheduled: let it run
  }
  job_ = nullptr;
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
  dispatch(guarded, true);
  if (err) std::rethrow_exception(err);
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  // Up to 4 chunks per thread (balance on a busy machine), none smaller than `grain`.
  const int64_t chunks = std::min<int64_t>(int64_t(n_threads_) * 4, (n + grain - 1) / grain);
  if (chunks <= 1 || n_threads_ == 1) {
    fn(0, n);
    return;
  }
  std::atomic<int64_t> next{0};
  std::mutex err_mu;
  std::exception_ptr err;
  const std::function<void(int, int)> body = [&](int, int) {
    for (int64_t c; (c = next.fetch_add(1, std::memory_order_relaxed)) < chunks;) {
      try {
        fn(n * c / chunks, n * (c + 1) / chunks);
      } catch (...) {
        std::lock_guard<std::mutex> lock(err_mu);
        if (!err) err = std::current_exception();
      }
    }
  };
  dispatch(body, false);
  if (err) std::rethrow_exception(err);
}

}  // namespace ws
