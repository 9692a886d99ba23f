// The CLI end to end: `warmstart logits --restore-at K` must write byte-identical files to
// the same command without it (one fixture per supported architecture); clear errors for
// bad input.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "model_fixtures.h"
#include "not_supported.h"

namespace fs = std::filesystem;

namespace {

const fs::path kShared = WS_SHARED_DIR;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs the binary; returns the exit status and fills `err` with its stderr.
int run(const std::string& args, std::string* err = nullptr) {
  const std::string errfile = fs::temp_directory_path() / ("ws-cli-" + std::to_string(::getpid()) + ".err");
  const int rc = std::system((std::string(WS_BINARY) + " " + args + " 2>" + errfile + " >/dev/null").c_str());
  if (err) *err = slurp(errfile);
  fs::remove(errfile);
  return rc;
}

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/ws-cli-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
};

// One F32 fixture model per supported architecture, with a probe's tokens.
std::map<std::string, std::pair<std::string, std::vector<int>>> models_by_arch() {
  std::map<std::string, std::pair<std::string, std::vector<int>>> out;
  for (const auto& g : ws::test::golden_fixtures())
    if (g.f32 && !out.count(g.arch) && !ws::test::skip_not_supported(ws::gguf::File::open(g.model), g.model))
      out[g.arch] = {g.model, ws::read_golden(g.golden).at(1).tokens};
  return out;
}

TEST(CliRestoreAt, ByteIdenticalToStraightRun) {
  const auto models = models_by_arch();
  ASSERT_GE(models.size(), 2u);
  for (const auto& [arch, m] : models) {
    SCOPED_TRACE(arch);
    TempDir dir;
    std::string ids;
    for (size_t i = 0; i < m.second.size() && i < 120; ++i) ids += (i ? "," : "") + std::to_string(m.second[i]);
    const std::string base = "logits -m " + m.first + " --tokens " + ids + " --ubatch 16 -t 2 --out ";
    ASSERT_EQ(run(base + (dir.path / "straight").string()), 0);
    const std::string straight = slurp(dir.path / "straight.logits.f32");
    const std::string straight_json = slurp(dir.path / "straight.json");
    // K on a micro-batch boundary, inside one, and past a 64-position page.
    for (int k : {16, 5, 77}) {
      const fs::path out = dir.path / ("k" + std::to_string(k));
      ASSERT_EQ(run(base + out.string() + " --restore-at " + std::to_string(k)), 0);
      EXPECT_EQ(slurp(out.string() + ".logits.f32"), straight) << "K=" << k;
      std::string js = slurp(out.string() + ".json");
      const std::string from = "\"k" + std::to_string(k) + ".logits.f32\"";
      js.replace(js.find(from), from.size(), "\"straight.logits.f32\"");
      EXPECT_EQ(js, straight_json) << "K=" << k;
    }
  }
}

TEST(CliErrors, NameTheFileAndTheProblem) {
  std::string err;
  EXPECT_NE(run("logits -m /nonexistent.gguf --tokens 1,2 --out /tmp/x", &err), 0);
  EXPECT_NE(err.find("/nonexistent.gguf"), std::string::npos) << err;
  TempDir dir;
  const fs::path junk = dir.path / "junk.gguf";
  std::ofstream(junk) << "not a gguf file at all";
  EXPECT_NE(run("run -m " + junk.string() + " -p hi", &err), 0);
  EXPECT_NE(err.find("bad magic"), std::string::npos) << err;
  const auto models = models_by_arch();
  ASSERT_FALSE(models.empty());
  const std::string model = models.begin()->second.first;
  EXPECT_NE(run("logits -m " + model + " --tokens 1,x --out " + (dir.path / "o").string(), &err), 0);
  EXPECT_NE(err.find("--tokens"), std::string::npos) << err;
  EXPECT_NE(run("logits -m " + model + " --tokens 999999 --out " + (dir.path / "o").string(), &err), 0);
  EXPECT_NE(err.find("outside the vocabulary"), std::string::npos) << err;
  EXPECT_NE(run("run -m " + model + " -p hello -c 1", &err), 0);
  EXPECT_NE(err.find("context"), std::string::npos) << err;
  EXPECT_EQ(run("--version", &err), 0);
}

}  // namespace
