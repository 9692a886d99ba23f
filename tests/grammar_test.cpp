// GBNF parsing (valid and malformed grammars), the byte-level matcher, the token mask
// (against a brute-force check of every token) and the sampler hook, plus the mask's cost
// on a synthetic 150k-token vocabulary.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "engine/sampling.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace ws::grammar {
namespace {

std::shared_ptr<const Grammar> make(const std::string& gbnf) { return std::make_shared<const Grammar>(Grammar::parse(gbnf)); }

bool full_match(const std::string& gbnf, const std::string& text) { return Matcher(make(gbnf)).matches(text); }

std::string parse_error(const std::string& gbnf) {
  try {
    Grammar::parse(gbnf);
  } catch (const GrammarError& e) {
    return e.what();
  }
  return "";
}

TEST(GrammarParse, LiteralsAlternativesGroupsAndComments) {
  const std::string g = R"(# a comment
root ::= "yes" | "no" | ( "may" "be" )   # trailing comment
)";
  EXPECT_TRUE(full_match(g, "yes"));
  EXPECT_TRUE(full_match(g, "no"));
  EXPECT_TRUE(full_match(g, "maybe"));
  EXPECT_FALSE(full_match(g, "ye"));
  EXPECT_FALSE(full_match(g, "yesno"));
  EXPECT_FALSE(full_match(g, ""));
}

TEST(GrammarParse, RepetitionOperators) {
  EXPECT_TRUE(full_match(R"(root ::= "a"*)", ""));
  EXPECT_TRUE(full_match(R"(root ::= "a"*)", "aaaa"));
  EXPECT_FALSE(full_match(R"(root ::= "a"+)", ""));
  EXPECT_TRUE(full_match(R"(root ::= "a"+ "b"?)", "aab"));
  EXPECT_FALSE(full_match(R"(root ::= "a"+ "b"?)", "abb"));
  EXPECT_TRUE(full_match(R"(root ::= "ab"{2})", "abab"));
  EXPECT_FALSE(full_match(R"(root ::= "ab"{2})", "ab"));
  const std::string r = R"(root ::= [0-9]{2,4})";
  EXPECT_FALSE(full_match(r, "1"));
  EXPECT_TRUE(full_match(r, "12"));
  EXPECT_TRUE(full_match(r, "1234"));
  EXPECT_FALSE(full_match(r, "12345"));
  EXPECT_TRUE(full_match(R"(root ::= "x"{2,})", "xxxxxx"));
  EXPECT_FALSE(full_match(R"(root ::= "x"{2,})", "x"));
  EXPECT_TRUE(full_match(R"(root ::= "x"{,2})", ""));
  EXPECT_FALSE(full_match(R"(root ::= "x"{,2})", "xxx"));
}

TEST(GrammarParse, CharClassesRangesNegationEscapesAndUtf8) {
  const std::string g = R"(root ::= [a-cX] [^0-9\n] [\x41-\x43] "\u00e9" [\]\\] .)";
  EXPECT_TRUE(full_match(g, "bz" "B" "\xC3\xA9" "]" "\xE2\x82\xAC"));  // ... é ] €
  EXPECT_FALSE(full_match(g, "b5B\xC3\xA9]x"));                         // digit refused by [^0-9]
  EXPECT_FALSE(full_match(g, "dzB\xC3\xA9]x"));                         // d outside [a-cX]
  EXPECT_TRUE(full_match(R"(root ::= [\\] ["] "\t\"")", "\\\"\t\""));
}

TEST(GrammarParse, RulesMultiLineAndRecursion) {
  const std::string g = R"(
root  ::= list
list  ::= "[" (
            item ("," item)*
          )? "]"
item  ::= [0-9]+ | list
)";
  EXPECT_TRUE(full_match(g, "[]"));
  EXPECT_TRUE(full_match(g, "[1,[2,[]],33]"));
  EXPECT_FALSE(full_match(g, "[1,]"));
  EXPECT_FALSE(full_match(g, "[[1]"));
}

TEST(GrammarParse, ErrorsNamePositionAndExpectation) {
  EXPECT_NE(parse_error("root ::= \"abc").find("line 1, column 10: unterminated string literal"), std::string::npos)
      << parse_error("root ::= \"abc");
  EXPECT_NE(parse_error("root ::= [a-z").find("unterminated character class"), std::string::npos);
  EXPECT_NE(parse_error("root ::= (\"a\" | \"b\"").find("unclosed '('"), std::string::npos);
  EXPECT_NE(parse_error("root \"a\"").find("expected '::='"), std::string::npos);
  EXPECT_NE(parse_error("root ::= foo").find("line 1, column 10: undefined rule 'foo'"), std::string::npos);
  EXPECT_NE(parse_error("start ::= \"a\"").find("no rule named 'root'"), std::string::npos);
  EXPECT_NE(parse_error("root ::= \"a\"\nroot ::= \"b\"").find("line 2, column 1: rule 'root' is defined twice"),
            std::string::npos);
  EXPECT_NE(parse_error("root ::= \"\\q\"").find("unknown escape"), std::string::npos);
  EXPECT_NE(parse_error("root ::= [z-a]").find("below its start"), std::string::npos);
  EXPECT_NE(parse_error("root ::= \"a\"{3,1}").find("n < m"), std::string::npos);
  EXPECT_NE(parse_error("root ::= * \"a\"").find("expected the end of rule 'root'"), std::string::npos);
  EXPECT_NE(parse_error("root ::= expr\nexpr ::= expr \"+\" \"1\" | \"1\"").find("left-recursive"), std::string::npos);
  EXPECT_NE(parse_error("root ::= " + std::string(100000, '(') + "\"a\"" + std::string(100000, ')')).find("nested deeper"),
            std::string::npos);
  EXPECT_NE(parse_error("root ::= (\"a\"?){0,1000}").find("can match nothing"), std::string::npos);
  EXPECT_EQ(parse_error("root ::= (\"a\"?){0,3} \"b\"{0,1000}"), "");
  EXPECT_NE(parse_error("root ::= (\"a\"?)*").find("left-recursive"), std::string::npos);
  EXPECT_NE(parse_error("root ::= \"a\" \"b\"\n  \"c\"").find("line 2, column 3: expected a rule name"), std::string::npos)
      << parse_error("root ::= \"a\" \"b\"\n  \"c\"");
}

TEST(GrammarMatcher, PartialUtf8IsCheckedAgainstTheRanges) {
  const Matcher m(make(R"(root ::= [\u00e0-\u00ff]+)"));  // à..ÿ: two-byte sequences C3 A0..C3 BF
  MatchState st = m.initial();
  EXPECT_TRUE(m.accept(st, "\xC3"));       // a lead byte that can still complete in range
  EXPECT_FALSE(m.accept(st, "\x80"));      // C3 80 = À, out of range
  EXPECT_TRUE(m.accept(st, "\xA9"));       // é
  EXPECT_TRUE(Matcher::can_end(st));
  MatchState st2 = m.initial();
  EXPECT_FALSE(m.accept(st2, "\xE2"));     // three-byte characters are all above ÿ
  EXPECT_FALSE(m.accept(st2, "\x80"));     // a stray continuation byte
  // Overlong forms never pass, even where the grammar takes any character.
  const Matcher any(make(R"(root ::= .*)"));
  for (const char* bad : {"\xC0", "\xC1\xBF", "\xE0\x80", "\xF0\x80", "\xF4\x90", "\xF5"}) {
    MatchState s = any.initial();
    EXPECT_FALSE(any.accept(s, bad)) << bad;
  }
  MatchState ok = any.initial();
  EXPECT_TRUE(any.accept(ok, "\xE0\xA0\x80\xF4\x8F\xBF\xBF"));  // U+0800, U+10FFFF
}

// A vocabulary with multi-byte pieces, split UTF-8 and an EOG token; the mask must equal
// the brute-force answer (try every token's bytes) at every step of a walk.
TEST(GrammarMatcher, MaskEqualsBruteForceAlongAWalk) {
  std::vector<std::string> pieces = {"", "{", "}", "\"", "a", "ab", "abc", "\"a", "\":", ":", " ", "1", "12", "-",
                                     "\xC3", "\xA9", "\xC3\xA9", "true", "tr", "ue", ",", "\"}", "}}", "[", "]", "b"};
  std::vector<uint8_t> eog(pieces.size(), 0);
  eog[0] = 1;
  auto vocab = std::make_shared<const TokenVocab>(pieces, eog);
  const auto g = make(json_schema_to_gbnf(nlohmann::ordered_json::parse(
      R"({"type":"object","properties":{"a":{"type":"string","maxLength":3},"b":{"type":"boolean"}},"required":["a"]})")));
  GrammarConstraint c(g, vocab);
  auto f = c.start();
  const std::string text = "{\"a\":\"\xC3\xA9" "ab\",\"b\":true}";
  // Tokens spelling `text`, greedy longest match.
  std::vector<int32_t> walk;
  for (size_t p = 0; p < text.size();) {
    int32_t best = -1;
    for (size_t t = 1; t < pieces.size(); ++t)
      if (text.compare(p, pieces[t].size(), pieces[t]) == 0 && (best < 0 || pieces[t].size() > pieces[size_t(best)].size()))
        best = int32_t(t);
    ASSERT_GE(best, 0) << "at " << p;
    walk.push_back(best);
    p += pieces[size_t(best)].size();
  }
  walk.push_back(0);  // EOG
  std::vector<uint8_t> mask;
  for (const int32_t tok : walk) {
    f->allowed(mask);
    for (size_t t = 0; t < pieces.size(); ++t) { EXPECT_EQ(mask[t] != 0, f->allows(int32_t(t))) << "token " << t; }
    ASSERT_TRUE(mask[size_t(tok)]) << "token " << tok << " (" << pieces[size_t(tok)] << ") refused";
    f->accept(tok);
  }
}

TEST(GrammarMatcher, EogOnlyWhenTheGrammarCanEndAndForcedWhenComplete) {
  auto vocab = std::make_shared<const TokenVocab>(std::vector<std::string>{"", "a", "b"}, std::vector<uint8_t>{1, 0, 0});
  GrammarConstraint c(make(R"(root ::= "a" "b"?)"), vocab);
  auto f = c.start();
  EXPECT_FALSE(f->allows(0));
  EXPECT_TRUE(f->allows(1));
  EXPECT_FALSE(f->allows(2));
  f->accept(1);
  EXPECT_TRUE(f->allows(0));
  EXPECT_TRUE(f->allows(2));
  f->accept(2);
  std::vector<uint8_t> mask;
  f->allowed(mask);
  EXPECT_EQ(mask, (std::vector<uint8_t>{1, 0, 0}));  // complete: only the end is left
}

// The sampler draws only what the grammar allows even when the logits favour other
// tokens, and ends (EOG) when the grammar is complete.
TEST(GrammarSampler, ConstrainedDrawsFollowTheGrammar) {
  std::vector<std::string> pieces = {"", "x", "y", "z", "0", "1"};
  auto vocab = std::make_shared<const TokenVocab>(pieces, std::vector<uint8_t>{1, 0, 0, 0, 0, 0});
  for (uint64_t seed = 0; seed < 20; ++seed) {
    SamplingParams p;
    p.seed = seed;
    p.temperature = 1.5f;
    p.constraint = std::make_shared<GrammarConstraint>(make(R"(root ::= [01]{3} "y")"), vocab);
    Sampler s(p);
    const std::vector<float> logits = {0.0f, 5.0f, 1.0f, 4.0f, -1.0f, -2.0f};  // [n_vocab] favours x and z
    std::string out;
    for (int i = 0; i < 10; ++i) {
      const int32_t t = s.sample(logits);
      if (t == 0) break;
      out += pieces[size_t(t)];
    }
    EXPECT_TRUE(std::regex_match(out, std::regex("[01]{3}y"))) << out;
  }
}

// A real tokenizer's vocabulary (byte-level BPE with multi-byte and partial UTF-8 pieces):
// control tokens never allowed, EOG flagged, and the mask equal to the per-token check at
// every step of a schema-valid text.
TEST(GrammarMatcher, RealVocabularyMaskEqualsPerTokenCheck) {
  const auto f = gguf::File::open(std::string(WS_SHARED_DIR) + "/fixtures/models/lfm2-tiny-f32.gguf");
  const auto tok = Tokenizer::from_gguf(f);
  const auto vocab = TokenVocab::from_tokenizer(*tok);
  ASSERT_EQ(vocab->size(), size_t(tok->n_vocab()));
  for (Token t = 0; t < tok->n_vocab(); ++t) {
    EXPECT_EQ(vocab->is_eog(t), tok->is_eog(t));
    if (tok->is_control(t) || tok->is_eog(t)) { EXPECT_TRUE(vocab->piece(t).empty()) << t; }
    else EXPECT_EQ(vocab->piece(t), tok->token_to_piece(t, false)) << t;
  }
  GrammarConstraint c(make(json_schema_to_gbnf(nlohmann::ordered_json::parse(
                          R"({"type":"object","properties":{"city":{"type":"string"},"n":{"type":"array","items":{"type":"number"}}},
                              "required":["city","n"]})"))),
                      vocab);
  auto filter = c.start();
  std::vector<uint8_t> mask;
  const std::vector<Token> text = tok->encode("{\"city\": \"Zürich — 東京\", \"n\": [1.5, -2e3]}", false, false);
  for (size_t i = 0; i <= text.size(); ++i) {
    filter->allowed(mask);
    size_t n = 0;
    for (Token t = 0; t < tok->n_vocab(); ++t) {
      n += mask[size_t(t)];
      ASSERT_EQ(mask[size_t(t)] != 0, filter->allows(t)) << "step " << i << " token " << t;
    }
    EXPECT_GT(n, 0u);
    if (i == text.size()) break;
    ASSERT_TRUE(mask[size_t(text[i])]) << "step " << i;
    filter->accept(text[i]);
  }
  // The object is complete: the end of generation is allowed.
  if (tok->eos() >= 0 && tok->is_eog(tok->eos())) { EXPECT_TRUE(filter->allows(tok->eos())); }
}

// Cost of a full mask and of the check of one drawn token on a 150k-token vocabulary of
// word-like pieces, at the states a JSON schema reply goes through.
TEST(GrammarMatcher, MaskCostOnA150kVocabulary) {
  std::mt19937 rng(7);
  const std::string alpha = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 \"{}[],:._-'\n";
  std::vector<std::string> pieces(150000);
  std::vector<uint8_t> eog(pieces.size(), 0);
  eog[0] = 1;
  for (size_t i = 1; i < pieces.size(); ++i) {
    const size_t n = 1 + rng() % 8;
    for (size_t k = 0; k < n; ++k) pieces[i] += alpha[rng() % (k == 0 ? alpha.size() : 26)];
  }
  auto vocab = std::make_shared<const TokenVocab>(pieces, eog);
  const auto g = make(json_schema_to_gbnf(nlohmann::ordered_json::parse(
      R"({"type":"object","properties":{"name":{"type":"string"},"n":{"type":"integer"}},"required":["name","n"]})")));
  GrammarConstraint c(g, vocab);
  auto f = c.start();
  std::vector<uint8_t> mask;
  double worst_ms = 0, total_ms = 0;
  int steps = 0;
  size_t allowed_in_string = 0;
  // Positions: start, inside the key, inside the string value (nearly everything allowed), a number.
  for (const char* prefix : {"", "{\"na", "{\"name\":\"abc", "{\"name\":\"abc\",\"n\":1"}) {
    auto st = c.start();
    auto* gf = static_cast<GrammarFilter*>(st.get());
    // Feed the prefix byte by byte through single-byte pieces found in the vocabulary.
    for (const char* p = prefix; *p; ++p) {
      int32_t tok = -1;
      for (size_t t = 1; t < pieces.size() && tok < 0; ++t)
        if (pieces[t] == std::string(1, *p)) tok = int32_t(t);
      ASSERT_GE(tok, 0);
      gf->accept(tok);
    }
    const auto t0 = std::chrono::steady_clock::now();
    gf->allowed(mask);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    worst_ms = std::max(worst_ms, ms), total_ms += ms, ++steps;
    size_t n = 0;
    for (auto m : mask) n += m;
    if (std::string(prefix).find("abc\"") == std::string::npos && std::string(prefix).find("abc") != std::string::npos)
      allowed_in_string = n;
    std::printf("[mask] after '%s': %zu allowed, %.2f ms\n", prefix, n, ms);
  }
  std::printf("[mask] full mask: mean %.2f ms, worst %.2f ms over %d states\n", total_ms / steps, worst_ms, steps);
  EXPECT_GT(allowed_in_string, pieces.size() / 2);
  (void)f;

  // What a request pays per token: sample() with and without the grammar over random
  // logits [150000] (new each step), 300 steps, llama.cpp's default chain.
  std::vector<float> logits(pieces.size());
  std::normal_distribution<float> nd(0.0f, 3.0f);
  for (const bool constrained : {false, true}) {
    SamplingParams p;
    p.seed = 3;
    if (constrained)
      p.constraint = std::make_shared<GrammarConstraint>(make(json_schema_to_gbnf(nlohmann::ordered_json::parse(
          R"({"type":"object","properties":{"name":{"type":"string","maxLength":40},"tags":{"type":"array","items":{"type":"string","maxLength":8},"maxItems":5},"n":{"type":"integer"}},"required":["name","tags","n"]})"))), vocab);
    Sampler s(p);
    double ms = 0;
    int n = 0;
    std::string text;
    for (; n < 300; ++n) {
      for (auto& l : logits) l = nd(rng);
      const auto t0 = std::chrono::steady_clock::now();
      const int32_t t = s.sample(logits);
      ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (t == 0) break;
      text += pieces[size_t(t)];
    }
    std::printf("[mask] sample() %s: %.3f ms/token over %d tokens\n", constrained ? "with the grammar" : "unconstrained",
                ms / std::max(n, 1), n);
    if (constrained) { EXPECT_TRUE(nlohmann::json::accept(text)) << text; }
  }
}

}  // namespace
}  // namespace ws::grammar
