#include "server/stop_matcher.h"

#include <algorithm>

namespace ws::server {

StopMatcher::Result StopMatcher::push(std::string_view text) {
  Result r;
  if (stopped_) {
    r.stopped = true;
    return r;
  }
  held_.append(text);
  // The earliest complete stop string wins (two may end in the same piece).
  size_t first = std::string::npos;
  for (const auto& s : stops_) first = std::min(first, held_.find(s));
  if (first != std::string::npos) {
    r.emit = held_.substr(0, first);
    r.stopped = stopped_ = true;
    held_.clear();
    return r;
  }
  const size_t keep = partial_tail();
  r.emit = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return r;
}

std::string StopMatcher::flush() {
  std::string out;
  if (!stopped_) out.swap(held_);
  return out;
}

size_t StopMatcher::partial_tail() const {
  size_t best = 0;
  for (const auto& s : stops_) {
    for (size_t len = std::min(s.size() - 1, held_.size()); len > best; --len) {
      if (held_.compare(held_.size() - len, len, s, 0, len) == 0) {
        best = len;
        break;
      }
    }
  }
  return best;
}

}  // namespace ws::server
