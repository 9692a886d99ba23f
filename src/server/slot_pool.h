// --parallel N: N slots, each an Engine with its own ThreadPool (a ThreadPool serves one
// caller at a time), all sharing one PrefixCache. An HTTP request leases a slot for the
// duration of its turn and runs the turn on its own connection thread; requests beyond
// N wait in line, and beyond the queue limit they are refused (503) at once.
//
// Decode steps of different slots are not batched together yet: each slot runs its own
// forward passes (cross-slot batching is a later performance step).
#pragma once
#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/turn.h"

namespace ws::server {

class SlotPool {
  struct Slot {
    int id = 0;
    std::unique_ptr<ThreadPool> threads;
    std::unique_ptr<Engine> engine;
    bool busy = false;
  };

 public:
  SlotPool(const Model& model, const Tokenizer& tok, PrefixCache* cache, const EngineOptions& options, int n_slots,
           int threads_per_slot, int queue_limit);
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
  // ApiError(503) at once when queue_limit requests are already waiting.
  Lease acquire(int slot_id = -1);

  struct SlotInfo {
    int id = 0;
    bool busy = false;
    std::vector<Token> tokens;  // idle: the sequence its last turn left (Engine::last_sequence)
  };
  std::vector<SlotInfo> info() const;

  int size() const { return int(slots_.size()); }
  int busy() const;
  int waiting() const;

 private:
  void release(Slot* slot);

  std::vector<std::unique_ptr<Slot>> slots_;
  int queue_limit_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int n_busy_ = 0, n_waiting_ = 0;
};

}  // namespace ws::server
