// The embedded chat model (models/warmstart-chat.gguf, trained by tools/train/build_model.sh):
// * its tokenizer and logits equal the PyTorch reference stored next to it
//   (models/warmstart-chat.ref.{json,f32}, written by tools/train/make_reference.py), so
//   warmstart runs the trained model exactly as it was trained;
// * on held-out conversations (tests/data/chat_heldout.jsonl, written by gen_data.py from
//   phrasings, names, cities and numbers the training data never used), the greedy replies
//   are identical turn by turn with the prefix cache on and off, every turn after the first
//   reuses tokens, and each skill (recall, arithmetic, greeting, unknown) stays at or above
//   90% (kSkillFloor);
// * `warmstart chat` with stdin not a terminal prints one reply line per input line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "cache/prefix_cache.h"
#include "chat/chat_prompt.h"
#include "engine/eval.h"
#include "engine/prompt.h"
#include "engine/turn.h"
#include "gguf/gguf.h"

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace ws;

namespace {

const fs::path kRepo = fs::path(__FILE__).parent_path().parent_path();
const fs::path kModel = kRepo / "models" / "warmstart-chat.gguf";
const fs::path kRef = kRepo / "models" / "warmstart-chat.ref";
const fs::path kHeldout = kRepo / "tests" / "data" / "chat_heldout.jsonl";

// What the model must get right on the held-out conversations, per skill: issue 25's bar. The
// committed model measured recall 358/369 = 0.970, arithmetic 0.996, greeting 1.0, unknown
// 0.963 through the CLI when it was built (eval_skills.py; tools/train/README.md).
constexpr double kSkillFloor = 0.90;

struct Loaded {
  gguf::File file;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tok;
};

Loaded load_embedded() {
  Loaded l{gguf::File::open(kModel.string()), nullptr, nullptr};
  l.model = load_model(l.file);
  l.tok = Tokenizer::from_gguf(l.file);
  return l;
}

json read_json(const fs::path& p) {
  std::ifstream in(p);
  if (!in) throw std::runtime_error(p.string() + ": cannot open");
  return json::parse(in);
}

class ChatModel : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kModel)) << kModel << " is missing (tools/train/build_model.sh makes it)";
    m_ = std::make_unique<Loaded>(load_embedded());
  }
  std::unique_ptr<Loaded> m_;
};

TEST_F(ChatModel, IsSmallLfm2WithChatTemplate) {
  EXPECT_EQ(m_->file.get_string("general.architecture"), "lfm2");
  EXPECT_LT(fs::file_size(kModel), 20u * 1024 * 1024);
  const std::string tmpl = m_->file.get_string("tokenizer.chat_template");
  EXPECT_NE(tmpl.find("<|im_start|>"), std::string::npos);
  EXPECT_NE(tmpl.find("add_generation_prompt"), std::string::npos);
  const Token im_end = m_->tok->encode("<|im_end|>", false, true).at(0);
  EXPECT_TRUE(m_->tok->is_eog(im_end));
  EXPECT_TRUE(m_->tok->is_control(im_end));
}

// The model's Jinja template renders exactly the ChatML the model was trained on (what
// `warmstart chat` and the tests below send it).
TEST_F(ChatModel, TemplateRendersTrainingChatML) {
  const auto tmpl = chat::ChatTemplate::parse(m_->file.get_string("tokenizer.chat_template"));
  const json msgs = json::array({{{"role", "user"}, {"content", "My name is Anna."}},
                                 {{"role", "assistant"}, {"content", "Nice to meet you, Anna."}},
                                 {{"role", "user"}, {"content", "What is my name?\nTell me."}}});
  EXPECT_EQ(chat::render_chat(tmpl, msgs, json{{"add_generation_prompt", true}}).text,
            chat::render_chatml(msgs, true).text);
}

TEST_F(ChatModel, TokenizerMatchesTrainingTokenizer) {
  const json ref = read_json(kRef.string() + ".json");
  ASSERT_FALSE(ref.at("tokenizer").empty());
  for (const auto& c : ref.at("tokenizer")) {
    const std::string text = c.at("text");
    const auto want = c.at("ids").get<std::vector<Token>>();
    EXPECT_EQ(m_->tok->encode(text, /*add_special=*/true, /*parse_special=*/true), want) << text;
    EXPECT_EQ(m_->tok->decode(want, /*special=*/true), text);
  }
}

TEST_F(ChatModel, LogitsMatchPyTorch) {
  const json ref = read_json(kRef.string() + ".json");
  const size_t n_vocab = ref.at("n_vocab");
  ASSERT_EQ(size_t(m_->tok->n_vocab()), n_vocab);
  const fs::path rows_file = kRef.string() + ".f32";
  std::ifstream in(rows_file, std::ios::binary);
  ASSERT_TRUE(in) << rows_file;
  std::vector<float> rows(fs::file_size(rows_file) / sizeof(float));  // little-endian f32, like this CPU
  in.read(reinterpret_cast<char*>(rows.data()), std::streamsize(rows.size() * sizeof(float)));
  ThreadPool pool(2);
  double worst = 0, scale = 0;  // largest |difference|, largest |reference logit|
  for (const auto& seq : ref.at("logits")) {
    const auto ids = seq.at("ids").get<std::vector<Token>>();
    EXPECT_EQ(m_->tok->encode(seq.at("text").get<std::string>(), true, true), ids);
    SeqState state = m_->model->make_state(MemoryOptions{});
    std::vector<float> logits;
    eval_tokens(*m_->model, state, ids, 512, LogitsMode::all, logits, pool);
    ASSERT_EQ(logits.size(), ids.size() * n_vocab);
    size_t row = seq.at("row_offset");
    for (int pos : seq.at("positions").get<std::vector<int>>()) {
      const float* want = rows.data() + row++ * n_vocab;
      const float* got = logits.data() + size_t(pos) * n_vocab;
      size_t want_arg = 0, got_arg = 0;
      for (size_t v = 0; v < n_vocab; ++v) {
        worst = std::max(worst, double(std::fabs(want[v] - got[v])));
        scale = std::max(scale, double(std::fabs(want[v])));
        if (want[v] > want[want_arg]) want_arg = v;
        if (got[v] > got[got_arg]) got_arg = v;
      }
      float runner_up = -INFINITY;  // the argmax is only meaningful when it is not a near-tie
      for (size_t v = 0; v < n_vocab; ++v)
        if (v != want_arg) runner_up = std::max(runner_up, want[v]);
      if (want[want_arg] - runner_up > 1e-2f) {
        EXPECT_EQ(got_arg, want_arg) << "position " << pos;
      }
    }
  }
  // F16 weights with F16-rounded activations on both sides: what remains is f32 summation
  // order and the odd activation rounding to the other side of an F16 boundary.
  std::printf("max |logit - torch| = %.3g (largest |logit| %.3g)\n", worst, scale);
  EXPECT_LT(worst, 5e-4 * std::max(scale, 4.0));
}

// One held-out conversation run turn by turn: user messages from the file, the model's
// own replies fed back as the assistant messages (as `warmstart chat` does).
struct ConversationRun {
  std::vector<std::vector<Token>> replies;
  std::vector<int32_t> reused;
  std::map<std::string, std::pair<int, int>> skills;  // skill -> (correct, checks)
};

ConversationRun run_conversation(const Loaded& m, Engine& engine, const json& conv) {
  ConversationRun out;
  json history = json::array();
  std::map<int, json> checks;  // user-message index -> {kind, expect: strings the reply must contain}
  for (const auto& c : conv.at("checks")) checks[c.at("turn").get<int>()] = c;
  const auto& msgs = conv.at("messages");
  for (size_t i = 0; i < msgs.size(); ++i) {
    if (msgs[i].at("role") != "user") continue;
    history.push_back(msgs[i]);
    const chat::RenderedPrompt r = chat::render_chatml(history, true);
    PromptTokens p = tokenize_prompt(*m.tok, r.text, r.message_ends);
    TurnRequest req;
    req.prompt = std::move(p.tokens);
    req.message_ends = std::move(p.message_ends);
    req.max_tokens = 32;
    req.sampling.temperature = 0;
    const TurnResult res = engine.run_turn(req);
    const std::string reply = m.tok->decode(res.generated);
    out.replies.push_back(res.generated);
    out.reused.push_back(res.reused);
    if (auto it = checks.find(int(i)); it != checks.end()) {
      bool ok = true;
      for (const auto& e : it->second.at("expect")) ok = ok && reply.find(e.get<std::string>()) != std::string::npos;
      auto& [correct, total] = out.skills[it->second.at("kind").get<std::string>()];
      correct += ok;
      ++total;
      if (!ok && std::getenv("WS_CHAT_TEST_VERBOSE"))
        std::printf("miss: %s -> %s (expected %s)\n", msgs[i].at("content").get<std::string>().c_str(), reply.c_str(),
                    it->second.at("expect").dump().c_str());
    }
    history.push_back({{"role", "assistant"}, {"content", reply}});
  }
  return out;
}

TEST_F(ChatModel, SkillsOnHeldOutConversationsSameWithCacheOnAndOff) {
  std::ifstream in(kHeldout);
  ASSERT_TRUE(in) << kHeldout;
  std::vector<json> convs;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) convs.push_back(json::parse(line));
  ASSERT_GE(convs.size(), 30u);
  ThreadPool pool(1);
  EngineOptions eo;
  eo.memory.n_ctx = 2048;
  std::map<std::string, std::pair<int, int>> skills;  // skill -> (correct, checks), cache on
  for (size_t k = 0; k < convs.size(); ++k) {
    PrefixCache on(size_t(256) << 20), off(0);
    Engine warm(*m_->model, *m_->tok, &on, eo, pool), cold(*m_->model, *m_->tok, &off, eo, pool);
    const ConversationRun a = run_conversation(*m_, warm, convs[k]);
    const ConversationRun b = run_conversation(*m_, cold, convs[k]);
    ASSERT_EQ(a.replies.size(), b.replies.size());
    for (size_t t = 0; t < a.replies.size(); ++t) {
      EXPECT_EQ(a.replies[t], b.replies[t]) << "conversation " << k << " turn " << t;
      EXPECT_EQ(b.reused[t], 0) << "cache off must not reuse";
      if (t > 0) {
        EXPECT_GT(a.reused[t], 0) << "conversation " << k << " turn " << t << " reused nothing";
      }
    }
    for (const auto& [skill, counts] : a.skills) {
      skills[skill].first += counts.first;
      skills[skill].second += counts.second;
    }
  }
  ASSERT_FALSE(skills.empty());
  for (const auto& [skill, counts] : skills) {
    const double acc = double(counts.first) / counts.second;
    std::printf("%-10s %d/%d = %.3f on held-out conversations\n", skill.c_str(), counts.first, counts.second, acc);
    EXPECT_GE(acc, kSkillFloor) << skill;
  }
}

// `warmstart chat` with piped stdin: one reply line per non-empty input line, nothing else on
// stdout, the embedded model found without -m, and the first conversation a newcomer types
// answered right.
TEST_F(ChatModel, ChatCliScriptedOneLinePerMessage) {
  ASSERT_TRUE(fs::exists(WS_BINARY)) << WS_BINARY;
  const fs::path input = fs::temp_directory_path() / ("ws_chat_input_" + std::to_string(::getpid()) + ".txt");
  {
    std::ofstream f(input);
    // The conversation README.md and issue 25 show a newcomer, with blank lines (skipped).
    f << "Hi, my name is Dana and I live in Lisbon.\n\nWhat is 3 plus 4?\n   \nWhere do I live?\n"
         "What is my name?\n";
  }
  const std::string cmd = std::string("\"") + WS_BINARY + "\" chat -t 2 < \"" + input.string() + "\" 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int rc = pclose(p);
  fs::remove(input);
  EXPECT_EQ(rc, 0) << out;
  std::vector<std::string> lines;
  for (size_t s = 0, e; s < out.size(); s = e + 1) {
    e = out.find('\n', s);
    ASSERT_NE(e, std::string::npos) << "the output must end with a newline: " << out;
    lines.push_back(out.substr(s, e - s));
  }
  ASSERT_EQ(lines.size(), 4u) << out;
  // What the user said is the truth each reply is checked against.
  EXPECT_NE(lines[0].find("Dana"), std::string::npos) << out;
  EXPECT_NE(lines[1].find("7"), std::string::npos) << out;
  EXPECT_NE(lines[2].find("Lisbon"), std::string::npos) << out;
  EXPECT_NE(lines[3].find("Dana"), std::string::npos) << out;
}

}  // namespace
