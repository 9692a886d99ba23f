// Pre-tokenizer table and regex splitting. The regexes are the strings llama.cpp's
// llm_tokenizer_bpe uses for each LLAMA_VOCAB_PRE_TYPE_*, and the name -> type/flags
// table follows llama_vocab::impl::load, so that ids match llama.cpp's exactly.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/pretokenizer.h"

#include <pcre2.h>

#include <array>
#include <cstdint>
#include <stdexcept>

#include "tokenizer/tokenizer_impl.h"

namespace ws::tok_detail {
namespace {

// ---- the regexes of each pre-tokenizer family (llama.cpp's strings) ----

constexpr const char* k_re_gpt2 = R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))re";
constexpr const char* k_re_llama3 =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3})re"
    R"re(| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char* k_re_jais2 =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3})re"
    R"re(| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S))re"
    R"re(|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1})re";
constexpr const char* k_re_qwen2 =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N})re"
    R"re(| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char* k_re_qwen35 =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N})re"
    R"re(| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char* k_re_minicpm5 =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+)re"
    R"re(| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char* k_re_ufakzeka =
    R"re([^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char* k_re_bailingmoe =
    R"re('(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N})re"
    R"re(| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)re";
constexpr const char* k_re_seed_coder =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1})re"
    R"re(| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char* k_re_exaone_moe =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]))re"
    R"re(|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N})re"
    R"re(| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+)re";
// Tekken, GPT-4o and Granite use llama.cpp's lookahead rewrite of \p{Lu}/\p{Ll}: it
// treats every non-ASCII letter as both upper and lower case.
constexpr const char* k_re_tekken =
    R"re([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+)re"
    R"re(|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*)re"
    R"re(|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char* k_re_gpt4o =
    R"re([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+)re"
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?)re"
    R"re(|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*)re"
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?)re"
    R"re(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char* k_re_granite_emb =
    R"re([^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))*((?=[\p{L}\p{M}])([^A-Z]))+)re"
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?)re"
    R"re(|[^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))+((?=[\p{L}\p{M}])([^A-Z]))*)re"
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?)re"
    R"re(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// tokenizer.json's cased-word alternatives, as llama.cpp keeps them; to_pcre2() gives
// \p{Lu} etc. the meaning they have there.
constexpr const char* k_re_cased_words =
    R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+)re"
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?)re"
    R"re(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*)re"
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?)re";
constexpr const char* k_re_ds3_words =
    R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+)re";
constexpr const char* k_re_cjk = "[一-龥ࠀ-一가-퟿]+";
constexpr const char* k_re_cjk_kana = "[一-龥぀-ゟ゠-ヿ]+";
constexpr const char* k_re_poro = R"re( ?[^(\s|.,!?…。，、।۔،)]+)re";
constexpr const char* k_re_lines = R"re([^\n]+|[\n]+)re";
// Written as bytes: the range list holds characters (U+2126, U+212A) that text tools
// normalize to others.
constexpr const char* k_re_deepseek_letters =
    "\\s?[A-Za-z\xC2\xB5\xC3\x80-\xC3\x96\xC3\x98-\xC3\xB6\xC3\xB8-\xC6\xBA\xC6\xBC-\xC6\xBF\xC7\x84-\xCA\x93"
    "\xCA\x95-\xCA\xAF\xCD\xB0-\xCD\xB3\xCD\xB6\xCD\xB7\xCD\xBB-\xCD\xBD\xCD\xBF\xCE\x86\xCE\x88-\xCE\x8A\xCE\x8C"
    "\xCE\x8E-\xCE\xA1\xCE\xA3-\xCF\xB5\xCF\xB7-\xD2\x81\xD2\x8A-\xD4\xAF\xD4\xB1-\xD5\x96\xE1\x82\xA0-\xE1\x83"
    "\x85\xE1\x8E\xA0-\xE1\x8F\xB5\xE1\x8F\xB8-\xE1\x8F\xBD\xE1\xB2\x90-\xE1\xB2\xBA\xE1\xB2\xBD-\xE1\xB2\xBF"
    "\xE1\xB4\x80-\xE1\xB4\xAB\xE1\xB5\xAB-\xE1\xB5\xB7\xE1\xB5\xB9-\xE1\xB6\x9A\xE1\xB8\x80-\xE1\xBC\x95\xE1"
    "\xBC\x98-\xE1\xBC\x9D\xE1\xBC\xA0-\xE1\xBD\x85\xE1\xBD\x88-\xE1\xBD\x8D\xE1\xBD\x90-\xE1\xBD\x97\xE1\xBD"
    "\x99\xE1\xBD\x9B\xE1\xBD\x9D\xE1\xBD\x9F-\xE1\xBD\xBD\xE1\xBE\x80-\xE1\xBE\xB4\xE1\xBE\xB6-\xE1\xBE\xBC"
    "\xE1\xBE\xBE\xE1\xBF\x82-\xE1\xBF\x84\xE1\xBF\x86-\xE1\xBF\x8C\xE1\xBF\x90-\xE1\xBF\x93\xE1\xBF\x96-\xE1"
    "\xBF\x9B\xE1\xBF\xA0-\xE1\xBF\xAC\xE1\xBF\xB2-\xE1\xBF\xB4\xE1\xBF\xB6-\xE1\xBF\xBC\xE2\x84\x82\xE2\x84"
    "\x87\xE2\x84\x8A-\xE2\x84\x93\xE2\x84\x95\xE2\x84\x99-\xE2\x84\x9D\xE2\x84\xA4\xE2\x84\xA6\xE2\x84\xA8"
    "\xE2\x84\xAA-\xE2\x84\xAD\xE2\x84\xAF-\xE2\x84\xB4\xE2\x84\xB9\xE2\x84\xBC-\xE2\x84\xBF\xE2\x85\x85-\xE2"
    "\x85\x89\xE2\x85\x8E\xE2\x86\x83\xE2\x86\x84\xE2\xB0\x80-\xE2\xB1\xBB\xE2\xB1\xBE-\xE2\xB3\xA4\xE2\xB3\xAB-"
    "\xE2\xB3\xAE\xE2\xB3\xB2\xE2\xB3\xB3\xEA\x99\x80-\xEA\x99\xAD\xEA\x9A\x80-\xEA\x9A\x9B\xEA\x9C\xA2-\xEA\x9D"
    "\xAF\xEA\x9D\xB1-\xEA\x9E\x87\xEA\x9E\x8B-\xEA\x9E\x8E\xEA\xAD\xB0-\xEA\xAE\xBF\xEF\xAC\x80-\xEF\xAC\x86"
    "\xEF\xAC\x93-\xEF\xAC\x97\xEF\xBC\xA1-\xEF\xBC\xBA\xEF\xBD\x81-\xEF\xBD\x9A\\x{10400}-\\x{1044f}"
    "\\x{104b0}-\\x{104d3}\\x{104d8}-\\x{104fb}\\x{10c80}-\\x{10cb2}\\x{10cc0}-\\x{10cf2}\\x{118a0}-\\x{118df}"
    "\\x{1e900}-\\x{1e943}]+";

// llama.cpp's LLAMA_VOCAB_PRE_TYPE_* values that this engine implements (several
// types share one regex list; those are merged here).
enum class Family {
  default_, llama3, jais2, deepseek_llm, deepseek3, spark2_5, youtu, deepseek_coder, falcon, starcoder, gpt2,
  qwen2, qwen35, poro, viking, tekken, chameleon, gpt4o, granite_emb_multi, tiny_aya, superbpe, bailingmoe,
  seed_coder, ufakzeka, laguna, exaone_moe, gemma4, sarvam_moe, minicpm5,
};

std::vector<std::string> family_regexes(Family f) {
  switch (f) {
    case Family::llama3: return {k_re_llama3};
    case Family::jais2: return {k_re_jais2};
    case Family::deepseek_llm:
      return {"[\r\n]", k_re_deepseek_letters, R"re(\s?[!-/:-~！-／：-～‘-‟　-。]+)re", R"re(\s+$)re", k_re_cjk,
              R"re(\p{N}+)re"};
    case Family::deepseek3:
      return {R"re(\p{N}{1,3})re", k_re_cjk_kana,
              std::string(k_re_ds3_words) + R"re(| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"};
    case Family::spark2_5:
      return {R"re(\p{N}{1,3})re", k_re_cjk_kana,
              std::string(k_re_ds3_words) + R"re(| ?[\p{P}\p{S}]+|[\r\n]|\s+(?!\S)|\s+)re", R"re(\p{N})re"};
    case Family::youtu:
      return {"[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+",
              std::string(k_re_cased_words) + R"re(|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"};
    case Family::deepseek_coder:
      return {"[\r\n]", R"re(\s?\p{L}+)re", R"re(\s?\p{P}+)re", k_re_cjk, R"re(\p{N})re"};
    case Family::falcon: return {R"re([\p{P}\$\+<=>\^~\|`]+)re", k_re_gpt2, "[0-9][0-9][0-9]"};
    case Family::starcoder: return {R"re(\p{N})re", k_re_gpt2};
    case Family::gpt2: return {k_re_gpt2};
    case Family::qwen2: return {k_re_qwen2};
    case Family::qwen35: return {k_re_qwen35};
    case Family::poro: return {k_re_poro};
    case Family::viking: return {k_re_poro, R"re(\p{N})re"};
    case Family::tekken: return {k_re_tekken};
    case Family::chameleon:
      return {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", R"re(([\t\n]|    |  ))re", R"re(\p{N})re",
              R"re([\p{P}!-/:-@\[-`{-~])re", k_re_gpt2};
    case Family::gpt4o: return {k_re_gpt4o};
    case Family::granite_emb_multi: return {k_re_granite_emb};
    case Family::tiny_aya:
      return {R"re(\d{1,3}(?=(?:\d{3})*\b))re",
              std::string(k_re_cased_words) + R"re(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"};
    case Family::superbpe: return {R"re(\p{N}+)re", R"re((?=(\d{3})+(?!\d)))re"};
    case Family::bailingmoe: return {k_re_bailingmoe};
    case Family::seed_coder: return {k_re_seed_coder};
    case Family::ufakzeka: return {k_re_ufakzeka};
    case Family::laguna: return {k_re_lines, k_re_qwen2};
    case Family::exaone_moe: return {k_re_exaone_moe};
    case Family::gemma4:
    case Family::sarvam_moe: return {k_re_lines};
    case Family::minicpm5: return {R"re(\p{N}{1,3})re", k_re_minicpm5};
    case Family::default_: break;
  }
  return {R"re([\p{P}\$\+<=>\^~\|]+)re", k_re_gpt2, R"re(\p{N}+)re", "[0-9][0-9][0-9]"};
}

// Flags llama.cpp sets per name on top of its BPE defaults (clean_spaces = true).
constexpr uint8_t k_keep_spaces = 1;    // clean_spaces = false
constexpr uint8_t k_ignore_merges = 2;  // ignore_merges = true
constexpr uint8_t k_add_bos = 4;        // add_bos = true
constexpr uint8_t k_no_bos_id = 8;      // special_bos_id = none (ChatGLM)

struct PreName {
  std::string_view name;
  Family family;
  uint8_t flags;
};

// llama_vocab::impl::load's tokenizer_pre -> pre_type mapping, in its order. Not here
// (so an error): 'kimi-k2' and 'afmoe' (custom splitters in llama.cpp's unicode.cpp) and
// 'whitespace' (it belongs to its own tokenizer model).
constexpr std::array k_pre_names = {
    PreName{"default", Family::default_, 0},
    PreName{"minicpm5", Family::minicpm5, k_ignore_merges},
    PreName{"llama3", Family::llama3, k_ignore_merges | k_add_bos},
    PreName{"llama-v3", Family::llama3, k_ignore_merges | k_add_bos},
    PreName{"llama-bpe", Family::llama3, k_ignore_merges | k_add_bos},
    PreName{"falcon3", Family::llama3, k_ignore_merges | k_add_bos},
    PreName{"falcon-h1", Family::llama3, k_ignore_merges | k_add_bos},
    PreName{"pixtral", Family::llama3, k_ignore_merges | k_add_bos},
    PreName{"midm-2.0", Family::llama3, k_ignore_merges | k_add_bos},
    PreName{"lfm2", Family::llama3, k_ignore_merges | k_add_bos},
    PreName{"jina-v5-nano", Family::llama3, k_ignore_merges | k_add_bos},
    PreName{"deepseek-llm", Family::deepseek_llm, k_keep_spaces},
    PreName{"deepseek-coder", Family::deepseek_coder, k_keep_spaces},
    PreName{"deepseek-v3", Family::deepseek3, k_keep_spaces},
    PreName{"spark2_5", Family::spark2_5, k_keep_spaces},
    PreName{"youtu", Family::youtu, k_keep_spaces | k_ignore_merges},
    PreName{"falcon", Family::falcon, 0},
    PreName{"mpt", Family::gpt2, 0},
    PreName{"starcoder", Family::starcoder, 0},
    PreName{"gpt-2", Family::gpt2, 0},
    PreName{"phi-2", Family::gpt2, 0},
    PreName{"jina-es", Family::gpt2, 0},
    PreName{"jina-de", Family::gpt2, 0},
    PreName{"gigachat", Family::gpt2, 0},
    PreName{"jina-v2-es", Family::gpt2, 0},
    PreName{"jina-v2-de", Family::gpt2, 0},
    PreName{"a.x-4.0", Family::gpt2, 0},
    PreName{"mellum", Family::gpt2, 0},
    PreName{"modern-bert", Family::gpt2, 0},
    PreName{"jais-2", Family::jais2, 0},
    PreName{"gemma4", Family::gemma4, 0},
    PreName{"granite-embed-multi-311m", Family::gemma4, 0},
    PreName{"sarvam-moe", Family::sarvam_moe, k_keep_spaces},
    PreName{"jina-v1-en", Family::gpt2, 0},
    PreName{"jina-v2-code", Family::gpt2, 0},
    PreName{"roberta-bpe", Family::gpt2, 0},
    PreName{"refact", Family::starcoder, 0},
    PreName{"command-r", Family::starcoder, k_keep_spaces},
    PreName{"qwen2", Family::qwen2, k_keep_spaces},
    PreName{"deepseek-r1-qwen", Family::qwen2, k_keep_spaces},
    PreName{"kormo", Family::qwen2, k_keep_spaces},
    PreName{"f2llmv2", Family::qwen2, k_keep_spaces},
    PreName{"qwen35", Family::qwen35, k_keep_spaces},
    PreName{"stablelm2", Family::qwen2, 0},
    PreName{"olmo", Family::gpt2, 0},
    PreName{"dbrx", Family::llama3, 0},
    PreName{"smaug-bpe", Family::llama3, 0},
    PreName{"poro-chat", Family::poro, k_keep_spaces},
    PreName{"glm4", Family::llama3, k_no_bos_id},
    PreName{"chatglm-bpe", Family::llama3, k_no_bos_id},
    PreName{"viking", Family::viking, k_keep_spaces},
    PreName{"jais", Family::gpt2, 0},
    PreName{"tekken", Family::tekken, k_keep_spaces | k_ignore_merges | k_add_bos},
    PreName{"smollm", Family::starcoder, k_keep_spaces},
    PreName{"codeshell", Family::starcoder, 0},
    PreName{"bloom", Family::poro, 0},
    PreName{"gpt3-finnish", Family::poro, 0},
    PreName{"exaone", Family::starcoder, 0},
    PreName{"exaone4", Family::gpt2, 0},
    PreName{"exaone-moe", Family::exaone_moe, 0},
    PreName{"chameleon", Family::chameleon, k_keep_spaces | k_add_bos},
    PreName{"minerva-7b", Family::starcoder, 0},
    PreName{"megrez", Family::qwen2, 0},
    PreName{"gpt-4o", Family::gpt4o, k_keep_spaces},
    PreName{"llama4", Family::gpt4o, k_keep_spaces},
    PreName{"kanana2", Family::gpt4o, k_keep_spaces},
    PreName{"talkie", Family::gpt4o, k_keep_spaces},
    PreName{"granite-embed-multi-97m", Family::granite_emb_multi, k_keep_spaces | k_ignore_merges},
    PreName{"tiny_aya", Family::tiny_aya, k_keep_spaces},
    PreName{"cohere2moe", Family::tiny_aya, k_keep_spaces},
    PreName{"superbpe", Family::superbpe, k_keep_spaces},
    PreName{"trillion", Family::gpt2, k_keep_spaces},
    PreName{"granite-docling", Family::gpt2, k_keep_spaces},
    PreName{"bailingmoe", Family::bailingmoe, k_keep_spaces},
    PreName{"bailingmoe2", Family::bailingmoe, k_keep_spaces},
    PreName{"llada-moe", Family::bailingmoe, k_keep_spaces},
    PreName{"seed-coder", Family::seed_coder, k_keep_spaces},
    PreName{"hunyuan", Family::qwen2, k_keep_spaces},
    PreName{"hunyuan-dense", Family::deepseek3, k_keep_spaces},
    PreName{"hy_v4", Family::deepseek3, k_keep_spaces},
    PreName{"joyai-llm", Family::deepseek3, k_keep_spaces},
    PreName{"ufakzeka", Family::ufakzeka, k_keep_spaces},
    PreName{"grok-2", Family::qwen2, k_keep_spaces},
    PreName{"laguna", Family::laguna, k_keep_spaces},
    PreName{"minimax-m2", Family::gpt4o, k_keep_spaces},
    PreName{"solar-open", Family::qwen2, k_keep_spaces},
    PreName{"mellum2", Family::starcoder, 0},
};

}  // namespace

std::optional<PreConfig> pre_config(std::string_view pre) {
  if (pre.empty()) pre = "default";
  const PreName* hit = nullptr;
  for (const PreName& p : k_pre_names)
    if (p.name == pre) hit = &p;
  if (!hit) return std::nullopt;
  PreConfig c;
  c.regexes = family_regexes(hit->family);
  c.clean_spaces = !(hit->flags & k_keep_spaces);
  c.ignore_merges = hit->flags & k_ignore_merges;
  c.add_bos = hit->flags & k_add_bos;
  c.no_default_bos = hit->flags & k_no_bos_id;
  const bool gemma4 = hit->family == Family::gemma4;
  c.spm_style = gemma4 || hit->family == Family::sarvam_moe;
  c.force_add_bos = gemma4;
  c.whole_newline_runs = gemma4;
  return c;
}

// ---- regex translation and splitting ----

namespace {

constexpr std::string_view k_word_class = "A-Za-z0-9_";

// Rewrites a regex so that PCRE2 (UTF + UCP) matches what llama.cpp's std::regex does:
// llama.cpp maps \p{Lu}, \p{Ll}, \p{Lt}, \p{Lm} and \p{Lo} all to "letter", and its
// \d, \w and \b are ASCII-only (std::regex in the C locale).
std::string to_pcre2(std::string_view re) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < re.size(); ++i) {
    const char c = re[i];
    if (c != '\\' || i + 1 == re.size()) {
      if (c == '[' && !in_class) in_class = true;
      else if (c == ']' && in_class) in_class = false;
      out += c;
      continue;
    }
    const char e = re[i + 1];
    const std::string_view rest = re.substr(i);
    if (e == 'p' && rest.size() >= 6 && rest[2] == '{' && rest[3] == 'L' && rest[5] == '}' &&
        std::string_view("ultmo").find(rest[4]) != std::string_view::npos) {
      out += "\\p{L}";
      i += 5;
    } else if (e == 'd' || e == 'w') {
      const std::string set = e == 'd' ? std::string("0-9") : std::string(k_word_class);
      out += in_class ? set : "[" + set + "]";
      ++i;
    } else if (e == 'b' && !in_class) {
      const std::string w = "[" + std::string(k_word_class) + "]";
      out += "(?:(?<=" + w + ")(?!" + w + ")|(?<!" + w + ")(?=" + w + "))";
      ++i;
    } else {
      out += c;
      out += e;
      ++i;
    }
  }
  return out;
}

struct MatchDataDeleter {
  void operator()(pcre2_match_data* m) const { pcre2_match_data_free(m); }
};

}  // namespace

class RegexSplitter::Regex {
 public:
  Regex(const std::string& pattern, const std::string& origin) {
    const std::string pcre = to_pcre2(pattern);
    int err = 0;
    PCRE2_SIZE err_off = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pcre.data()), pcre.size(),
                          PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &err, &err_off, nullptr);
    if (!code_) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      throw std::runtime_error(origin + ": pre-tokenizer regex does not compile at offset " + std::to_string(err_off) +
                               ": " + reinterpret_cast<const char*>(msg));
    }
    pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);  // falls back to the interpreter when JIT is unavailable
  }
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  ~Regex() { pcre2_code_free(code_); }

  // Splits each range of `frags` into matches and the gaps between them, like llama.cpp's
  // unicode_regex_split_stl over std::regex_iterator: an empty match cuts the text there,
  // and after one a non-empty match at the same place is tried before moving on.
  void split(std::string_view text, const std::vector<std::pair<size_t, size_t>>& frags,
             std::vector<std::pair<size_t, size_t>>& out) const {
    std::unique_ptr<pcre2_match_data, MatchDataDeleter> md(pcre2_match_data_create_from_pattern(code_, nullptr));
    if (!md) throw std::bad_alloc();
    out.clear();
    for (const auto& frag : frags) {
      const size_t off = frag.first, len = frag.second;  // not a structured binding: lambdas capture it (clang 14)
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data() + off);
      auto match = [&](size_t at, uint32_t opts, size_t& s, size_t& e) {
        const int rc = pcre2_match(code_, subject, len, at, opts | PCRE2_NO_UTF_CHECK, md.get(), nullptr);
        if (rc == PCRE2_ERROR_NOMATCH) return false;
        if (rc < 0) throw std::runtime_error("pre-tokenizer regex failed (PCRE2 error " + std::to_string(rc) + ")");
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
        s = ov[0], e = ov[1];
        return true;
      };
      size_t start = 0, last = 0, s = 0, e = 0;
      while (start < len && match(start, 0, s, e)) {
        if (e == s) {  // cut here; then a non-empty match at s, or search on from the next character
          if (s >= len) break;  // at the end: nothing left to cut
          if (s > last) out.emplace_back(off + last, s - last);
          last = s;
          if (!match(s, PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED, s, e)) {
            start = s + utf8_len(uint8_t(text[off + s]));
            continue;
          }
        }
        if (s > last) out.emplace_back(off + last, s - last);
        out.emplace_back(off + s, e - s);
        start = last = e;
      }
      if (last < len) out.emplace_back(off + last, len - last);
    }
  }

 private:
  pcre2_code* code_ = nullptr;
};

RegexSplitter::RegexSplitter(const std::vector<std::string>& regexes, const std::string& origin) {
  for (const std::string& re : regexes) regexes_.push_back(std::make_unique<Regex>(re, origin));
}
RegexSplitter::RegexSplitter(RegexSplitter&&) noexcept = default;
RegexSplitter& RegexSplitter::operator=(RegexSplitter&&) noexcept = default;
RegexSplitter::~RegexSplitter() = default;

std::vector<std::pair<size_t, size_t>> RegexSplitter::split(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> frags = {{0, text.size()}}, next;
  if (text.empty()) frags.clear();
  for (const auto& re : regexes_) {
    re->split(text, frags, next);
    frags.swap(next);
  }
  return frags;
}

}  // namespace ws::tok_detail
