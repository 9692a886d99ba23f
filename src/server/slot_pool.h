// --parallel N: N slots, each an Engine, all sharing one PrefixCache and one StepLoop
// (engine/step_loop.h) that owns the compute threads: the forward passes of every slot
// are batched into one pass per step. An HTTP request leases a slot for the duration of its
// turn and runs the turn on its own connection thread (restores, checkpoints, sampling);
// requests beyond N wait in line, and beyond the queue limit they are refused (503) at once.
#pragma once
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/step_loop.h"
#include "engine/turn.h"

namespace ws::server {

class SlotPool {
  struct Slot {
    int id = 0;
    std::unique_ptr<Engine> engine;
    bool busy = false;
  };

 public:
  // `threads` compute threads for the step loop.
  SlotPool(const Model& model, const Tokenizer& tok, PrefixCache* cache, const EngineOptions& options, int n_slots,
           int threads, StepLoopOptions steps, int queue_limit);
  SlotPool(const SlotPool&) = delete;
  SlotPool& operator=(const SlotPool&) = delete;

  // Exclusive use of one slot until destroyed.
  class Lease {
   public:
    Lease(SlotPool* pool, Slot* slot) : pool_(pool), slot_(slot) {}
    Lease(Lease&& o) noexcept : pool_(o.pool_), slot_(o.slot_) { o.slot_ = nullptr; }
    Lease& operator=(Lease&&) = delete;
    ~Lease();
    Engine& engine() const { return *slot_->engine; }
    int slot_id() const { return slot_->id; }

   private:
    SlotPool* pool_;
    Slot* slot_;
  };

  // Waits for a free slot (`slot_id` >= 0: that one; a 400 when it does not exist). Throws
  // ApiError(503) at once when queue_limit requests are already waiting, and ApiError(499)
  // when `client_gone` (polled while waiting) says the client left the line.
  Lease acquire(int slot_id = -1, const std::function<bool()>& client_gone = {});

  struct SlotInfo {
    int id = 0;
    bool busy = false;
    std::vector<Token> tokens;  // idle: the sequence its last turn left (Engine::last_sequence)
  };
  std::vector<SlotInfo> info() const;

  int size() const { return int(slots_.size()); }
  StepStats step_stats() const { return loop_->stats(); }
  int busy() const;
  int waiting() const;

 private:
  void release(Slot* slot);

  // The engines hand their forward passes to loop_, which runs them on threads_. Engines
  // see threads_ as their pool (its size tells them no core is left spare) but never run
  // work on it themselves: every pass goes through the loop.
  std::unique_ptr<ThreadPool> threads_;
  std::unique_ptr<StepLoop> loop_;
  std::vector<std::unique_ptr<Slot>> slots_;
  int queue_limit_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int n_busy_ = 0, n_waiting_ = 0;
};

}  // namespace ws::server
