// Settings for one render: the clock strftime_now() reads and the resource limits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <optional>

namespace ws::chat {

struct RenderOptions {
  // Clock for strftime_now(); the local time at render when empty.
  std::optional<std::tm> now;
  // Limits; exceeding one is a TemplateError, never a hang or a crash.
  size_t max_output_bytes = size_t{64} << 20;
  int64_t max_loop_iterations = 2'000'000;  // all loops of one render together
  int max_macro_depth = 100;
  // Nested statements + expressions + calls; the default needs about 1.5 MB of stack.
  int max_eval_depth = 1000;
};

}  // namespace ws::chat
