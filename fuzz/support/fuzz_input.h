// Reads structured choices from a libFuzzer input: integers from the front, the rest as
// bytes. Running out of input yields zeros, so every input is a valid program.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace ws::fuzz {

class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : data_(data, size) {}

  // An integer in [lo, hi] from the next bytes (0 -> lo when the input is used up).
  int64_t range(int64_t lo, int64_t hi) {
    uint64_t v = 0;
    const uint64_t span = uint64_t(hi - lo);
    for (uint64_t seen = span; seen != 0 && pos_ < data_.size(); seen >>= 8) v = (v << 8) | data_[pos_++];
    return span == UINT64_MAX ? lo + int64_t(v) : lo + int64_t(v % (span + 1));
  }
  bool flag() { return range(0, 1) == 1; }
  // Up to `n` next bytes.
  std::span<const uint8_t> bytes(size_t n) {
    const size_t take = std::min(n, data_.size() - pos_);
    auto out = data_.subspan(pos_, take);
    pos_ += take;
    return out;
  }
  std::span<const uint8_t> rest() { return bytes(data_.size() - pos_); }
  std::string_view rest_text() {
    const auto r = rest();
    return {reinterpret_cast<const char*>(r.data()), r.size()};
  }

 private:
  std::span<const uint8_t> data_;
  size_t pos_ = 0;
};

}  // namespace ws::fuzz
