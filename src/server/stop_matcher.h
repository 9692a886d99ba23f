// Stop sequences on generated text. Text arrives in pieces (one token's characters at a
// time); a stop string may straddle pieces, so a tail that could still become a stop
// string is held back until it either completes one (nothing of it is emitted) or
// cannot (it is released).
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace ws::server {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  struct Result {
    std::string emit;      // text that is certainly not part of a stop string
    bool stopped = false;  // a stop string completed: generation must end, nothing more is emitted
  };
  Result push(std::string_view text);
  // Generation ended without a stop string: whatever was held back.
  std::string flush();

 private:
  // Length of the longest suffix of held_ that is a proper prefix of some stop string.
  size_t partial_tail() const;

  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace ws::server
