// What warmstart does not support yet: the one list every fixture-walking test consults.
// Each entry names a capability a fixture may need (an architecture, a weight type, a
// vision projector) and the issue that adds it. A test that meets a fixture needing a
// listed capability prints the entry and skips that fixture; a fixture failing for any
// other reason fails the test; a fixture that passes although listed passes. The list
// cannot go stale: NotSupportedList.EveryListedCapabilityStillFailsAGolden (golden_test.cpp)
// fails with "remove it from the list" once every golden needing an entry is within
// tolerance. Issues 20, 27 and 29 end with it empty.
#pragma once
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf.h"

namespace ws::test {

struct Unsupported {
  std::string_view kind;  // "architecture" (general.architecture), "weights" (a tensor type), "projector"
  std::string_view name;  // the architecture, dtype name or clip.projector_type
  std::string_view why;
};

// A vector, not an array, so that the list can be empty.
inline const std::vector<Unsupported> kNotSupportedYet = {};

// The listed capability that a model or mmproj file needs, or null.
inline const Unsupported* needs_unsupported(const gguf::File& f) {
  const std::string arch = f.get_string("general.architecture");
  std::string projector = f.get_string("clip.projector_type");
  if (projector.empty()) projector = f.get_string("clip.vision.projector_type");
  for (const auto& u : kNotSupportedYet) {
    if (u.kind == "architecture" && u.name == arch) return &u;
    if (u.kind == "projector" && u.name == projector) return &u;
    if (u.kind == "weights")
      for (const auto& t : f.tensors())
        if (u.name == dtype_name(t.type)) return &u;
  }
  return nullptr;
}

inline std::string not_supported_message(const Unsupported& u, const std::string& fixture) {
  return "not supported yet: " + std::string(u.kind) + " " + std::string(u.name) + " (" + std::string(u.why) +
         "), skipping " + fixture;
}

// For loops over fixtures inside one test: prints the entry and returns true when the
// file needs something listed.
inline bool skip_not_supported(const gguf::File& f, const std::string& fixture) {
  const Unsupported* u = needs_unsupported(f);
  if (u) std::printf("[ SKIPPED  ] %s\n", not_supported_message(*u, fixture).c_str());
  return u != nullptr;
}

// The same for a vision pair: the language model or the projector may need it.
inline bool skip_not_supported_pair(const std::string& lm, const std::string& mmproj, const std::string& fixture) {
  return skip_not_supported(gguf::File::open(lm), fixture) || skip_not_supported(gguf::File::open(mmproj), fixture);
}

}  // namespace ws::test
