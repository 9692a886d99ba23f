// Chat templates: every fixture template x conversation x variant must render byte for
// byte as Python Jinja2 3.1.6 did (shared/fixtures/templates/expected), and raise where it
// raised; plus focused checks of Jinja semantics, limits and message boundaries.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "chat/prompt.h"
#include "chat/template.h"

namespace fs = std::filesystem;
using nlohmann::ordered_json;
using ws::chat::ChatTemplate;
using ws::chat::RenderOptions;
using ws::chat::TemplateError;
using ws::chat::TemplateErrorKind;

namespace {

const fs::path kFixtures = fs::path(WS_SHARED_DIR) / "fixtures" / "templates";

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

ordered_json load_json(const fs::path& p) { return ordered_json::parse(slurp(p)); }

// "2026-03-05T14:07:09" -> struct tm (the clock the fixtures were rendered with).
std::tm parse_iso(const std::string& s) {
  std::tm tm{};
  std::istringstream in(s);
  in >> std::get_time(&tm, "%Y-%m-%dT%H:%M:%S");
  std::mktime(&tm);  // fills in tm_wday / tm_yday
  return tm;
}

std::string render(const std::string& src, const ordered_json& ctx = ordered_json::object()) {
  return ChatTemplate::parse(src).render(ctx);
}

// Where two strings first differ, for readable failure messages.
std::string first_difference(const std::string& want, const std::string& got) {
  size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  auto clip = [&](const std::string& s) { return ordered_json(s.substr(i, 60)).dump(); };
  return "at byte " + std::to_string(i) + ": expected " + clip(want) + ", got " + clip(got);
}

struct CaseName {
  std::string conversation;
  bool agp;
  std::string variant;
};

CaseName split_case(const std::string& name) {
  const size_t a = name.find("/agp=");
  const size_t b = name.find('/', a + 1);
  return {name.substr(0, a), name.substr(a + 5, b - a - 5) == "1", name.substr(b + 1)};
}

}  // namespace

TEST(ChatTemplateFixtures, AllTemplatesMatchJinja2) {
  ASSERT_TRUE(fs::exists(kFixtures / "manifest.json")) << kFixtures;
  const ordered_json manifest = load_json(kFixtures / "manifest.json");
  const ordered_json conversations = load_json(kFixtures / "conversations.json")["conversations"];
  RenderOptions options;
  options.now = parse_iso(manifest["fixed_now"].get<std::string>());

  size_t total = 0, passed = 0, raised = 0;
  std::vector<std::string> failures;
  for (const auto& tinfo : manifest["templates"]) {
    const std::string file = tinfo["file"];
    const std::string stem = file.substr(0, file.size() - 6);
    const ordered_json expected = load_json(kFixtures / "expected" / (stem + ".json"));
    std::optional<ChatTemplate> tmpl;
    try {
      tmpl = ChatTemplate::parse(slurp(kFixtures / file));
    } catch (const TemplateError& e) {
      failures.push_back(stem + ": parse failed: " + e.what());
      total += expected["cases"].size();
      continue;
    }
    for (auto it = expected["cases"].begin(); it != expected["cases"].end(); ++it) {
      ++total;
      const CaseName cn = split_case(it.key());
      const ordered_json* conv = nullptr;
      for (const auto& c : conversations)
        if (c["name"] == cn.conversation) conv = &c;
      ASSERT_NE(conv, nullptr) << it.key();
      // Context exactly as render.py's base_context builds it.
      ordered_json ctx = ordered_json::object();
      ctx["messages"] = (*conv)["messages"];
      ctx["tools"] = conv->contains("tools") ? (*conv)["tools"] : ordered_json(nullptr);
      ctx["documents"] = nullptr;
      ctx["add_generation_prompt"] = cn.agp;
      for (const char* key : {"bos_token", "eos_token"})
        if (tinfo.contains(key) && !tinfo[key].is_null()) ctx[key] = tinfo[key];
      for (auto kv = tinfo["variants"][cn.variant].begin(); kv != tinfo["variants"][cn.variant].end(); ++kv)
        ctx[kv.key()] = kv.value();

      const ordered_json& want = it.value();
      const std::string label = stem + " " + it.key();
      try {
        const std::string got = tmpl->render(ctx, options);
        if (want.is_string() && got == want.get<std::string>()) ++passed;
        else if (want.is_string()) failures.push_back(label + ": " + first_difference(want.get<std::string>(), got));
        else failures.push_back(label + ": expected an error (" + want["error"].get<std::string>() + "), rendered fine");
      } catch (const TemplateError& e) {
        if (want.is_object()) {
          ++passed;
          ++raised;
        } else {
          failures.push_back(label + ": unexpected error: " + e.what());
        }
      }
    }
  }
  std::printf("[chat fixtures] passed %zu/%zu (%zu expected errors raised)\n", passed, total, raised);
  for (size_t i = 0; i < failures.size() && i < 40; ++i) std::printf("  FAIL %s\n", failures[i].c_str());
  EXPECT_EQ(passed, total);
  EXPECT_EQ(total, 900u);
}

TEST(ChatTemplate, WhitespaceControl) {
  // trim_blocks removes the newline after a block tag; lstrip_blocks the indentation before it.
  EXPECT_EQ(render("{% if true %}\n  yes\n{% endif %}\n"), "  yes\n");
  EXPECT_EQ(render("  {% if true %}\nA{% endif %}"), "A");
  // `-` strips all whitespace on that side, including newlines.
  EXPECT_EQ(render("a  \n {{- 'b' -}} \n  c"), "abc");
  EXPECT_EQ(render("x\n{%- if true -%}\n  y  \n{%- endif %}"), "xy");
  // lstrip_blocks does not apply to {{ }}; trim_blocks does not apply after }}.
  EXPECT_EQ(render("  {{ 1 }}\n"), "  1");  // only the final newline is dropped (keep_trailing_newline=False)
  EXPECT_EQ(render("{{ 1 }}\n{{ 2 }}"), "1\n2");
  // `+` disables lstrip.
  EXPECT_EQ(render("  {%+ if true %}x{% endif %}"), "  x");
  // Comments are removed and trimmed like blocks.
  EXPECT_EQ(render("a{# note #}\nb"), "ab");
  EXPECT_EQ(render("a {#- note -#} b"), "ab");
  // A single trailing newline of the template is dropped, a second one stays.
  EXPECT_EQ(render("hi\n\n"), "hi\n");
  // Windows line endings are normalised.
  EXPECT_EQ(render("a\r\nb"), "a\nb");
  EXPECT_EQ(render("{% raw %}{{ x }}{% endraw %}"), "{{ x }}");
}

TEST(ChatTemplate, LoopVariables) {
  EXPECT_EQ(render("{% for x in ['a','b','c'] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}"
                   "{{ loop.first }}{{ loop.last }}{{ loop.length }} {% endfor %}"),
            "103TrueFalse3 212FalseFalse3 321FalseTrue3 ");
  EXPECT_EQ(render("{% for x in [1,2,3] %}{{ loop.previtem }}-{{ loop.nextitem }},{% endfor %}"), "-2,1-3,2-,");
  EXPECT_EQ(render("{% for x in [1,2,3,4] %}{{ loop.cycle('o','e') }}{% endfor %}"), "oeoe");
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  // A filtered loop counts only the kept items.
  EXPECT_EQ(render("{% for x in [1,2,3,4] if x is even %}{{ x }}/{{ loop.length }} {% endfor %}"), "2/2 4/2 ");
  EXPECT_EQ(render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}"), "a=1;b=2;");
  EXPECT_EQ(render("{% for x in range(5) %}{% if x == 3 %}{% break %}{% endif %}{{ x }}{% endfor %}"), "012");
  EXPECT_EQ(render("{% for x in range(4) %}{% if x is odd %}{% continue %}{% endif %}{{ x }}{% endfor %}"), "02");
  // Assignments inside a loop do not leak out of it.
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [5] %}{% set x = i %}{% endfor %}{{ x }}"), "1");
}

TEST(ChatTemplate, NamespaceAndScoping) {
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% endfor %}"
                   "{{ ns.n }}"),
            "6");
  EXPECT_THROW(render("{% set s = 'x' %}{% set s.a = 1 %}"), TemplateError);
}

TEST(ChatTemplate, Macros) {
  EXPECT_EQ(render("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
                   "{{ greet('Ann') }} {{ greet('Bob', punct='?') }}"),
            "Hi Ann! Hi Bob?");
  // Recursion, and macros calling other macros.
  EXPECT_EQ(render("{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n }}*{{ fact(n - 1) }}{% endif %}{% endmacro %}"
                   "{{ fact(4) }}"),
            "4*3*2*1");
  EXPECT_EQ(render("{% macro wrap() %}[{{ caller() }}]{% endmacro %}{% call wrap() %}body{% endcall %}"), "[body]");
  // The generation tag renders its body.
  EXPECT_EQ(render("{% generation %}gen{% endgeneration %}"), "gen");
}

TEST(ChatTemplate, ExpressionsAndPrinting) {
  EXPECT_EQ(render("{{ [1, 'a', none, true, 1.5] }}"), "[1, 'a', None, True, 1.5]");
  EXPECT_EQ(render("{{ {'k': \"it's\"} }}"), "{'k': \"it's\"}");
  EXPECT_EQ(render("{{ (1,) }} {{ 7 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 1e20 }}"),
            "(1,) 3.5 3 -4 2 1024 1e+20");
  EXPECT_EQ(render("{{ 'a' ~ 1 ~ none }} {{ 'ab' * 3 }} {{ 'x' if false }}|{{ 'y' if 0 else 'z' }}"), "a1None ababab |z");
  EXPECT_EQ(render("{{ 'abcdef'[1:4] }} {{ 'abc'[::-1] }} {{ [1,2,3,4][-2:] }} {{ [1,2,3][-1] }}"),
            "bcd cba [3, 4] 3");
  EXPECT_EQ(render("{{ 'b' in 'abc' }} {{ 2 not in [1,2] }} {{ 'k' in {'k': 1} }} {{ 1 < 2 < 3 }}"),
            "True False True True");
  EXPECT_EQ(render("{{ 'a\\tb\\n' }}|{{ \"\\u00e9\" }}"), "a\tb\n|\xC3\xA9");
  EXPECT_EQ(render("{{ missing }}|{{ missing is defined }}|{{ {}.x is defined }}"), "|False|False");
  EXPECT_THROW(render("{{ missing.attr }}"), TemplateError);
  EXPECT_THROW(render("{{ 'a' + none }}"), TemplateError);
  EXPECT_THROW(render("{{ 'x' in none }}"), TemplateError);
  EXPECT_THROW(render("{% for c in none %}{% endfor %}"), TemplateError);
}

TEST(ChatTemplate, Filters) {
  EXPECT_EQ(render("{{ '  hi  ' | trim }}|{{ 'Hello' | upper }}{{ 'Hello' | lower }}|{{ 'hello world' | title }}"),
            "hi|HELLOhello|Hello World");
  EXPECT_EQ(render("{{ 'abc' | length }} {{ [3,1,2] | sort | join(',') }} {{ [1,2,3] | first }}{{ [1,2,3] | last }}"),
            "3 1,2,3 13");
  EXPECT_EQ(render("{{ x | default('d') }} {{ '' | default('e', true) }} {{ 'v' | d('n') }}"), "d e v");
  EXPECT_EQ(render("{{ {'b': 1, 'a': [1, 'x', none, true]} | tojson }}"), "{\"b\": 1, \"a\": [1, \"x\", null, true]}");
  EXPECT_EQ(render("{{ {'a': 1, 'b': [1]} | tojson(indent=2) }}"), "{\n  \"a\": 1,\n  \"b\": [\n    1\n  ]\n}");
  EXPECT_EQ(render("{{ 'é\"\\n' | tojson }}"), "\"é\\\"\\n\"");
  EXPECT_EQ(render("{{ [{'r': 'u', 'c': 1}, {'r': 'a', 'c': 2}, {'r': 'u', 'c': 3}] | selectattr('r', 'equalto', 'u')"
                   " | map(attribute='c') | list }}"),
            "[1, 3]");
  EXPECT_EQ(render("{{ ['a', 'b'] | map('upper') | join }}"), "AB");
  EXPECT_EQ(render("{% for k, v in {'b': 1, 'A': 2} | dictsort %}{{ k }}{{ v }}{% endfor %}"), "A2b1");
  EXPECT_EQ(render("{{ 'a-b-c'.split('-') }} {{ 'xxhixx'.strip('x') }} {{ 'hello'.replace('l', 'L') }}"),
            "['a', 'b', 'c'] hi heLLo");
  EXPECT_EQ(render("{{ '1' | int + 1 }} {{ 2.6 | round }} {{ -3 | abs }} {{ [1,1,2] | unique | list }}"),
            "2 3.0 3 [1, 2]");
  EXPECT_EQ(render("{{ 'a\nb' | indent(2) }}"), "a\n  b");
  EXPECT_EQ(render("{% filter upper %}up{% endfilter %}{% set b %}blk{% endset %}{{ b }}"), "UPblk");
  EXPECT_THROW(render("{{ 'str' | items }}"), TemplateError);
}

TEST(ChatTemplate, RaiseExceptionAndClock) {
  try {
    render("{{ raise_exception('Roles must alternate') }}");
    FAIL() << "no error";
  } catch (const TemplateError& e) {
    EXPECT_EQ(e.kind(), TemplateErrorKind::raised);
    EXPECT_STREQ(e.what(), "Roles must alternate");
  }
  RenderOptions opt;
  opt.now = std::tm{};
  opt.now->tm_year = 126, opt.now->tm_mon = 2, opt.now->tm_mday = 5;
  EXPECT_EQ(ChatTemplate::parse("{{ strftime_now('%Y-%m-%d %b') }}").render(ordered_json::object(), opt),
            "2026-03-05 Mar");
}

TEST(ChatTemplate, SyntaxErrorsHaveLineNumbers) {
  try {
    ChatTemplate::parse("line one\n{% if x %}\n{{ 1 + }}\n{% endif %}");
    FAIL() << "no error";
  } catch (const TemplateError& e) {
    EXPECT_EQ(e.kind(), TemplateErrorKind::syntax);
    EXPECT_EQ(e.line(), 3);
    EXPECT_NE(std::string(e.what()).find("line 3"), std::string::npos) << e.what();
  }
  try {
    ChatTemplate::parse("{% for x in y %}\nno end");
    FAIL() << "no error";
  } catch (const TemplateError& e) {
    EXPECT_EQ(e.line(), 1);
    EXPECT_NE(std::string(e.what()).find("endfor"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ChatTemplate::parse("{{ 'unterminated }}"), TemplateError);
  EXPECT_THROW(ChatTemplate::parse("{% frobnicate %}"), TemplateError);
  // Runtime errors carry the location too.
  try {
    render("ok\n  {{ none.x.y }}");
    FAIL() << "no error";
  } catch (const TemplateError& e) {
    EXPECT_EQ(e.line(), 2);
  }
}

TEST(ChatTemplate, HostileTemplatesAreStopped) {
  // Unbounded recursion.
  EXPECT_THROW(render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"), TemplateError);
  // A loop nest with 10^10 iterations.
  EXPECT_THROW(render("{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}"),
               TemplateError);
  // Exponential string growth.
  EXPECT_THROW(render("{% set ns = namespace(s='xx') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}"
                      "{% endfor %}"),
               TemplateError);
  EXPECT_THROW(render("{{ 'x' * 10000000000 }}"), TemplateError);
  // Deep nesting in the source is a parse error, not a stack overflow.
  EXPECT_THROW(ChatTemplate::parse("{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}"),
               TemplateError);
  EXPECT_THROW(ChatTemplate::parse("{{ " + std::string(5000, '[') + " }}"), TemplateError);
  std::string nested;
  for (int i = 0; i < 5000; ++i) nested += "{% if true %}";
  EXPECT_THROW(ChatTemplate::parse(nested), TemplateError);
  // Mutating methods are refused, as in HF's immutable sandbox.
  EXPECT_THROW(render("{% set l = [] %}{{ l.append(1) }}"), TemplateError);
}

TEST(ChatTemplate, MessageEndsOnFixture) {
  const ChatTemplate tmpl = ChatTemplate::parse(slurp(kFixtures / "Qwen-Qwen2.5-7B-Instruct.jinja"));
  const ordered_json messages = ordered_json::parse(R"([
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello!"},
    {"role": "user", "content": "Bye"}])");
  const auto p = ws::chat::render_chat(tmpl, messages, {{"add_generation_prompt", true}});
  const std::string want =
      "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
      "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n";
  EXPECT_EQ(p.text, want);
  ASSERT_EQ(p.message_ends.size(), 4u);
  // Each boundary is right after the message's end-of-turn line.
  EXPECT_EQ(p.text.substr(0, p.message_ends[0]), "<|im_start|>system\nBe brief.<|im_end|>\n");
  EXPECT_EQ(p.text.substr(p.message_ends[0], p.message_ends[1] - p.message_ends[0]), "<|im_start|>user\nHi<|im_end|>\n");
  EXPECT_EQ(p.text.substr(p.message_ends[1], p.message_ends[2] - p.message_ends[1]),
            "<|im_start|>assistant\nHello!<|im_end|>\n");
  EXPECT_EQ(p.message_ends[3], want.size() - std::string("<|im_start|>assistant\n").size());
}

// The expected strings below were written from the Python / Jinja 3.1 documentation
// (printf-style formatting, str methods, the format/truncate/slice filters), not rendered:
// Jinja2 is not available where these tests were written.
TEST(ChatTemplate, PercentFormatting) {
  EXPECT_EQ(render("{{ '%s-%d' % ('a', 3) }}"), "a-3");
  EXPECT_EQ(render("{{ '%05.1f|%-4d|%x|%r' % (3.14159, 7, 255, 'q') }}"), "003.1|7   |ff|'q'");
  EXPECT_EQ(render("{{ '%(name)s is %(age)d' % {'name': 'Bo', 'age': 7} }}"), "Bo is 7");
  EXPECT_EQ(render("{{ '%+d %+d % d|%05d' % (5, -5, 5, -42) }}"), "+5 -5  5|-0042");
  EXPECT_EQ(render("{{ '%#x %#o %X' % (255, 8, 255) }}"), "0xff 0o10 FF");
  EXPECT_EQ(render("{{ '%.2s|%5s|%-5s|' % ('abc', 'ab', 'ab') }}"), "ab|   ab|ab   |");
  EXPECT_EQ(render("{{ '%c%c' % (65, '\xC3\xA9') }}"), "A\xC3\xA9");
  // A list is one argument (only a tuple spreads); %% is a literal percent sign.
  EXPECT_EQ(render("{{ '%s' % [1, 2] }} {{ '100%%' % () }} {{ '%d' % 3.9 }}"), "[1, 2] 100% 3");
  // Python formats str % Undefined with str(Undefined): the empty string.
  EXPECT_EQ(render("{{ '[%s]' % missing }}"), "[]");
  EXPECT_EQ(render("{{ '%.3e' % 12345.678 }} {{ '%g' % 0.0001 }} {{ '%g' % 1e20 }} {{ '%*d|%.*f' % (5, 42, 2, 3.14159) }}"),
            "1.235e+04 0.0001 1e+20    42|3.14");
  // The format filter: positional arguments become the tuple, keyword ones the mapping.
  EXPECT_EQ(render("{{ '%s and %s' | format('a', 'b') }} {{ '%(a)s' | format(a=1) }} {{ '%s' | format('x') }}"),
            "a and b 1 x");
  EXPECT_THROW(render("{{ '%s %s' % ('a',) }}"), TemplateError);         // not enough arguments
  EXPECT_THROW(render("{{ '%s' % ('a', 'b') }}"), TemplateError);        // not all arguments converted
  EXPECT_THROW(render("{{ '%d' % 'x' }}"), TemplateError);               // a real number is required
  EXPECT_THROW(render("{{ '%q' % 1 }}"), TemplateError);                 // unsupported format character
  EXPECT_THROW(render("{{ '%s' | format('a', b=1) }}"), TemplateError);  // positional and keyword
  // Widths are bounded by the output limit, not by the length of the format.
  RenderOptions small;
  small.max_output_bytes = 1000;
  EXPECT_THROW(ChatTemplate::parse("{{ '%5000s' % 'x' }}").render(ordered_json::object(), small), TemplateError);
}

TEST(ChatTemplate, TruncateSliceAndStrMethods) {
  // truncate: kept when within length + leeway (5); else cut at a word, plus end.
  EXPECT_EQ(render("{{ 'foo bar baz qux' | truncate(9) }}|{{ 'foo bar baz qux' | truncate(9, True) }}"),
            "foo...|foo ba...");
  EXPECT_EQ(render("{{ 'foo bar baz qux' | truncate(11, False, '!', 0) }}|{{ 'hello' | truncate(3) }}"),
            "foo bar!|hello");
  EXPECT_EQ(render("{{ [1,2,3,4,5] | slice(3) | list }} {{ [1,2,3,4,5] | slice(3, 0) | list }}"),
            "[[1, 2], [3, 4], [5]] [[1, 2], [3, 4], [5, 0]]");
  EXPECT_EQ(render("{{ 'ab'.center(6, '*') }}|{{ 'abc'.center(6) }}|{{ 'ab'.ljust(4, '-') }}|{{ 'ab'.rjust(4) }}"),
            "**ab**| abc  |ab--|  ab");
  EXPECT_EQ(render("{{ '-42'.zfill(6) }}|{{ 'abc'.removeprefix('a') }}|{{ 'abc'.removesuffix('c') }}"),
            "-00042|bc|ab");
  EXPECT_EQ(render("{{ 'k=v=w'.partition('=') }} {{ 'k=v=w'.rpartition('=') }} {{ 'kv'.partition('=') }}"),
            "('k', '=', 'v=w') ('k=v', '=', 'w') ('kv', '', '')");
  EXPECT_THROW(render("{{ 'ab'.center(5, '--') }}"), TemplateError);
  EXPECT_THROW(render("{{ 'ab'.partition('') }}"), TemplateError);
}

// A template of llama.cpp's models/templates folder that is not among the shared
// fixtures: microsoft/Phi-3.5-mini-instruct (MIT licence), copied from llama.cpp into
// tests/data/templates. Its string literals hold raw newlines, and the file's last tag is
// not followed by a newline.
TEST(ChatTemplate, LlamaCppPhi35) {
  const fs::path file = fs::path(__FILE__).parent_path() / "data" / "templates" / "microsoft-Phi-3.5-mini-instruct.jinja";
  const ChatTemplate tmpl = ChatTemplate::parse(slurp(file));
  ordered_json ctx = {{"messages", ordered_json::parse(R"([{"role":"system","content":"You are a helpful assistant."},
      {"role":"user","content":"Hello"},{"role":"assistant","content":"Hi there"},{"role":"user","content":"Who are you"}])")},
                      {"add_generation_prompt", true}, {"eos_token", "<|endoftext|>"}};
  EXPECT_EQ(tmpl.render(ctx),
            "<|system|>\nYou are a helpful assistant.<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\nHi there<|end|>\n"
            "<|user|>\nWho are you<|end|>\n<|assistant|>\n");
  ctx["add_generation_prompt"] = false;
  EXPECT_EQ(tmpl.render(ctx),
            "<|system|>\nYou are a helpful assistant.<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\nHi there<|end|>\n"
            "<|user|>\nWho are you<|end|>\n<|endoftext|>");
}

// Expected strings from Jinja 3.1 semantics and Hugging Face's tojson (json.dumps with
// its ensure_ascii / separators / sort_keys / indent), written by hand as above.
TEST(ChatTemplate, SubscriptsAttrgettersTojsonOptionsAndNameTests) {
  // a[] subscripts with the empty tuple and a[x, y] with a tuple: never a key, so Undefined.
  const ordered_json bob = {{"a", {{"name", "Bob"}}}};
  EXPECT_EQ(render("{{ a[] | default('fallback') }}|{{ a[] is undefined }}|{{ [1, 2][1, 2] is defined }}", bob),
            "fallback|True|False");
  // An integer attribute is one subscript (make_attrgetter), negative indices included.
  const ordered_json pairs = {{"arr", ordered_json::parse(R"([[10, "x"], [20, "y"], [30, "z"]])")}};
  EXPECT_EQ(render("{{ arr | map(attribute=-1) | join(' ') }}|{{ arr | join(',', attribute=0) }}", pairs), "x y z|10,20,30");
  EXPECT_EQ(render("{{ arr | selectattr(0, 'gt', 15) | map(attribute=1) | list }}", pairs), "['y', 'z']");
  // tojson(ensure_ascii=True): \uXXXX escapes, astral code points as surrogate pairs.
  const ordered_json data = {{"data", {{"t", "\xE2\x9C\x93"}, {"e", "\xF0\x9F\x98\x80"}, {"n", "a\nb"}}}};
  EXPECT_EQ(render("{{ data | tojson(ensure_ascii=true) }}", data),
            "{\"t\": \"\\u2713\", \"e\": \"\\ud83d\\ude00\", \"n\": \"a\\nb\"}");
  EXPECT_EQ(render("{{ data | tojson }}", data), "{\"t\": \"\xE2\x9C\x93\", \"e\": \"\xF0\x9F\x98\x80\", \"n\": \"a\\nb\"}");
  EXPECT_EQ(render("{{ {'a': 1, 'b': [1, 2]} | tojson(separators=(',', ':')) }}"), "{\"a\":1,\"b\":[1,2]}");
  EXPECT_EQ(render("{{ {'b': 1, 'a': [1]} | tojson(indent=1, separators=(';', '=')) }}"),
            "{\n \"b\"=1;\n \"a\"=[\n  1\n ]\n}");
  EXPECT_THROW(render("{{ 1 | tojson(separators=',') }}"), TemplateError);
  // `is filter` / `is test` name the filters and tests this interpreter has.
  EXPECT_EQ(render("{{ 'trim' is filter }} {{ 'format' is filter }} {{ 'nope' is filter }} {{ 'sequence' is test }} "
                   "{{ 'trim' is test }} {{ 3 is filter }}"),
            "True True False True False False");
}
