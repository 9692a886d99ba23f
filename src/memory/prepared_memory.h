// Memory for the snapshots a turn will take, prepared on a helper thread while the prompt
// is computed. A snapshot of recurrent layers copies MiBs; into fresh memory that copy pays
// its page faults (1-5 ms per MiB on a VM, most of the snapshot's time), and a checkpoint
// inside the prompt is on the path to the first token. Prepared ahead, it is a plain copy.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace ws {

class PreparedSnapshotMemory {
 public:
  using Set = std::vector<std::vector<uint8_t>>;  // [n_layers] bytes, as SeqState::snapshot takes

  // sizes: SeqState::fixed_copy_bytes(); nothing is prepared when they are all 0.
  explicit PreparedSnapshotMemory(std::vector<size_t> sizes);
  PreparedSnapshotMemory(const PreparedSnapshotMemory&) = delete;
  PreparedSnapshotMemory& operator=(const PreparedSnapshotMemory&) = delete;
  ~PreparedSnapshotMemory();  // stops the helper and joins it

  // Starts preparing `count` sets, one after another and at most kAhead before they are
  // taken (memory not yet in the cache's budget), once per object.
  void start(size_t count);
  // The next set, waiting for the helper (which is then part-way through it); empty when
  // none is left or none was started.
  Set take();

 private:
  void prepare(size_t count);  // the helper thread's loop

  static constexpr size_t kAhead = 2;
  const std::vector<size_t> sizes_;
  std::mutex mu_;
  std::condition_variable ready_cv_, space_cv_;  // a set is ready; there is room for one
  std::deque<Set> ready_;  // prepared, not yet taken
  size_t untaken_ = 0;     // sets started and not yet taken
  bool stop_ = false;
  std::thread helper_;
};

}  // namespace ws
