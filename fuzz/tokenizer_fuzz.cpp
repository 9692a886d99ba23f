// libFuzzer target for the tokenizers (tokenizer/): arbitrary bytes, valid UTF-8 or not,
// are encoded with every fixture vocabulary the tokenizer loads (BPE with its
// pre-tokenizer regexes, SPM, ...), with and without special-token parsing, and decoded
// back, whole and token by token. Every id must lie inside the vocabulary.
// Built and run by tests/fuzz.sh with ASan + UBSan; WS_FUZZ_VOCAB_DIR overrides the
// vocabulary folder (default: shared/fixtures/vocab next to the repository).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/fuzz_input.h"
#include "tokenizer/tokenizer.h"

namespace {

namespace fs = std::filesystem;

std::vector<std::unique_ptr<ws::Tokenizer>> load_vocabularies() {
  const char* env = std::getenv("WS_FUZZ_VOCAB_DIR");
  const fs::path dir = env ? fs::path(env) : fs::path(WS_SHARED_DIR) / "fixtures" / "vocab";
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".gguf") files.push_back(e.path());
  std::sort(files.begin(), files.end());  // the input's first byte picks one: keep the order stable
  std::vector<std::unique_ptr<ws::Tokenizer>> out;
  for (const auto& p : files) {
    try {
      out.push_back(ws::Tokenizer::from_gguf(ws::gguf::File::open(p.string())));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tokenizer_fuzz: skipping %s: %s\n", p.c_str(), e.what());
    }
  }
  if (out.empty()) {
    std::fprintf(stderr, "tokenizer_fuzz: no usable vocabulary in %s\n", dir.c_str());
    std::exit(1);
  }
  return out;
}

// Loaded once: reading the vocabularies for every input would dominate the run time.
const std::vector<std::unique_ptr<ws::Tokenizer>>& vocabularies() {
  static const auto v = load_vocabularies();
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  std::fprintf(stderr, "tokenizer_fuzz: %zu vocabularies\n", vocabularies().size());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ws::fuzz::FuzzInput in(data, size);
  const auto& vocabs = vocabularies();
  const ws::Tokenizer& tok = *vocabs[size_t(in.range(0, int64_t(vocabs.size()) - 1))];
  const bool add_special = in.flag(), parse_special = in.flag();
  const std::string_view text = in.rest_text();
  const std::vector<ws::Token> ids = tok.encode(text, add_special, parse_special);
  for (ws::Token t : ids)
    if (t < 0 || t >= tok.n_vocab()) std::abort();  // an id outside the vocabulary
  const std::string whole = tok.decode(ids, parse_special);
  ws::StreamDecoder stream(tok, parse_special);
  std::string pieces;
  for (ws::Token t : ids) pieces += stream.push(t);
  pieces += stream.flush();
  volatile size_t sink = whole.size() + pieces.size();
  (void)sink;
  return 0;
}
