// libFuzzer target for the GGUF reader: any input must either parse or throw GgufError,
// and a parsed file must only hand out memory inside the buffer. Built and run by
// tests/fuzz.sh with ASan + UBSan.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "gguf/gguf.h"

namespace {

using ws::gguf::GgufError;
using ws::gguf::Value;
using ws::gguf::ValueType;

// Exercises every accessor that applies to the value's type; the ones that may
// legitimately refuse (range checks) are guarded.
uint64_t walk_value(const Value& v) {
  uint64_t h = uint64_t(v.type);
  switch (v.type) {
    case ValueType::array:
      for (const auto& it : v.as_array().items) h += walk_value(it);
      break;
    case ValueType::string: h += v.as_string().size(); break;
    case ValueType::boolean: h += v.as_bool(); break;
    case ValueType::f32:
    case ValueType::f64: h += uint64_t(v.as_float() != 0); break;
    default:
      if (!v.is_integer()) std::abort();  // an integer tag holding a non-integer is a reader bug
      try {
        h += uint64_t(v.as_int());
      } catch (const GgufError&) {
        // u64 above INT64_MAX: as_int refuses by contract, as_float must not.
      }
      h += uint64_t(v.as_float() != 0);
  }
  return h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  try {
    const auto f = ws::gguf::File::from_bytes(std::move(bytes), "fuzz");
    uint64_t h = 0;
    for (const auto& [key, value] : f.metadata()) h += key.size() + walk_value(value);
    // Typed accessors on well-known keys: they may throw GgufError on a type mismatch.
    try {
      h += f.get_string("general.architecture").size();
      h += f.get_strings("tokenizer.ggml.tokens").size();
      h += f.get_ints("tokenizer.ggml.token_type").size();
      h += uint64_t(f.get_int("general.alignment", 32));
    } catch (const GgufError&) {
    }
    const uint8_t* lo = f.bytes().data() + f.data_offset();
    const uint8_t* hi = f.bytes().data() + f.file_size();
    for (const auto& t : f.tensors()) {
      if (t.data < lo || t.nbytes > size_t(hi - t.data)) std::abort();  // out-of-bounds tensor
      if (f.find_tensor(t.name) != &t) std::abort();
      if (t.nbytes) h += t.data[0] + t.data[t.nbytes - 1];  // ASan checks both ends
      h += uint64_t(t.n_elements()) + uint64_t(t.rows());
    }
    volatile uint64_t sink = h;
    (void)sink;
  } catch (const GgufError&) {
    // Rejected input: the expected outcome for most of the corpus.
  }
  // Any other exception escapes and libFuzzer reports it as a crash.
  return 0;
}
