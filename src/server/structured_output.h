// response_format (json_object / json_schema), llama-server's `grammar` and `json_schema`
// fields -> a compiled grammar the sampler enforces. Errors are 400s naming the field and,
// for schemas, the unsupported keyword.
#pragma once
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>

#include "grammar/grammar.h"
#include "grammar/matcher.h"

namespace ws {
class Tokenizer;
}

namespace ws::server {

// Null when the request asks for no constraint (or response_format {"type": "text"}).
std::shared_ptr<const grammar::Grammar> parse_structured_output(const nlohmann::ordered_json& body);

// The model's vocabulary as grammars see it, built on the first constrained request (a
// pass over every token) so that a server that never constrains never pays for it.
class GrammarVocabCache {
 public:
  explicit GrammarVocabCache(const Tokenizer& tok) : tok_(tok) {}
  std::shared_ptr<const grammar::TokenVocab> get();

 private:
  const Tokenizer& tok_;
  std::mutex mu_;
  std::shared_ptr<const grammar::TokenVocab> vocab_;
};

}  // namespace ws::server
