#include "engine/logit_report.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace ws {
namespace {

// The double nearest to the shortest decimal that round-trips the float: nlohmann then
// prints that short decimal, as llama.cpp's goldens write float32 logits.
double short_float(float f) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, f);
  return std::strtod(std::string(buf, r.ptr).c_str(), nullptr);
}

}  // namespace

double log_sum_exp(std::span<const float> row) {
  double mx = -INFINITY;
  for (float v : row) mx = std::max(mx, double(v));
  double s = 0;
  for (float v : row) s += std::exp(double(v) - mx);
  return mx + std::log(s);
}

double token_nll(std::span<const float> row, Token next) { return log_sum_exp(row) - double(row[size_t(next)]); }

std::vector<int32_t> top_k_ids(std::span<const float> row, int32_t k) {
  const int32_t n = int32_t(row.size());
  std::vector<int32_t> idx(row.size());
  for (int32_t i = 0; i < n; ++i) idx[size_t(i)] = i;
  k = std::min(k, n);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int32_t a, int32_t b) {
    return row[size_t(a)] > row[size_t(b)] || (row[size_t(a)] == row[size_t(b)] && a < b);
  });
  idx.resize(size_t(k));
  return idx;
}

double mean_nll(std::span<const float> rows, size_t n_vocab, std::span<const Token> next) {
  double sum = 0;
  size_t count = 0;
  for (size_t i = 0; i < next.size() && (i + 1) * n_vocab <= rows.size(); ++i) {
    if (next[i] < 0) continue;
    sum += token_nll(rows.subspan(i * n_vocab, n_vocab), next[i]);
    ++count;
  }
  return count ? sum / double(count) : 0;
}

double max_abs_diff(std::span<const float> a, std::span<const float> b) {
  double m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, double(std::fabs(a[i] - b[i])));
  return a.size() == b.size() ? m : INFINITY;
}

LogitProbe make_probe(const std::string& name, const std::vector<Token>& tokens, const std::vector<float>& logits,
                      int32_t n_vocab, int32_t n_ubatch) {
  LogitProbe p;
  p.name = name;
  p.tokens = tokens;
  p.n_vocab = n_vocab;
  p.n_ubatch = n_ubatch;
  const int32_t n = int32_t(tokens.size());
  for (int32_t i = 0; i < n; ++i) {
    const std::span<const float> row(logits.data() + size_t(i) * n_vocab, size_t(n_vocab));
    std::vector<std::pair<Token, float>> best;
    for (int32_t id : top_k_ids(row, 8)) best.emplace_back(id, row[size_t(id)]);
    p.argmax.push_back(best[0].first);
    p.top8.push_back(std::move(best));
    if (i + 1 < n) p.nll.push_back(token_nll(row, tokens[size_t(i) + 1]));
  }
  double s = 0;
  for (double v : p.nll) s += v;
  p.mean_nll = p.nll.empty() ? 0 : s / double(p.nll.size());
  for (int32_t pos : {0, 1, 7, 31, 63, 127, n - 1}) {
    if (pos < 0 || pos >= n || std::find(p.full_positions.begin(), p.full_positions.end(), pos) != p.full_positions.end())
      continue;
    p.full_positions.push_back(pos);
    const float* row = logits.data() + size_t(pos) * n_vocab;
    p.full_rows.insert(p.full_rows.end(), row, row + n_vocab);
  }
  return p;
}

void write_golden(const std::string& prefix, const LogitProbe& p, const std::string& model_file) {
  const std::string blob_name = std::filesystem::path(prefix + ".logits.f32").filename().string();
  nlohmann::json top8 = nlohmann::json::array();
  for (const auto& row : p.top8) {
    nlohmann::json r = nlohmann::json::array();
    for (const auto& [id, logit] : row) r.push_back({id, short_float(logit)});
    top8.push_back(std::move(r));
  }
  nlohmann::json probe = {
      {"name", p.name},
      {"settings", {{"n_ubatch", p.n_ubatch}, {"type_k", "f32"}, {"type_v", "f32"}}},
      {"n_tokens", p.tokens.size()},
      {"tokens", p.tokens},
      {"nll", p.nll},
      {"mean_nll", p.mean_nll},
      {"argmax", p.argmax},
      {"top8", std::move(top8)},
      {"full_logits",
       {{"positions", p.full_positions},
        {"offset_bytes", 0},
        {"shape", {p.full_positions.size(), p.n_vocab}},
        {"dtype", "float32-le"},
        {"same_bytes_as_probe", nullptr}}},
  };
  size_t nonfinite = 0;
  for (float v : p.full_rows) nonfinite += !std::isfinite(v);
  probe["n_nonfinite_logits_in_full_rows"] = nonfinite;
  const nlohmann::json doc = {
      {"format", "llama-golden-v1"},
      {"producer", std::string("warmstart ") + WARMSTART_VERSION},
      {"model_file", model_file},
      {"n_vocab", p.n_vocab},
      {"logits_file", blob_name},
      {"logits_file_bytes", p.full_rows.size() * 4},
      {"probes", {probe}},
  };
  std::ofstream blob(prefix + ".logits.f32", std::ios::binary);
  blob.write(reinterpret_cast<const char*>(p.full_rows.data()), std::streamsize(p.full_rows.size() * 4));
  if (!blob) throw std::runtime_error(prefix + ".logits.f32: write failed");
  std::ofstream js(prefix + ".json");
  js << doc.dump(1) << "\n";
  if (!js) throw std::runtime_error(prefix + ".json: write failed");
}

namespace {

// SAX handler keeping the string values of depth-1 keys; stops at the first array or
// object value (the probes), so only the header is read.
struct HeaderReader : nlohmann::json_sax<nlohmann::json> {
  std::map<std::string, std::string>& out;
  std::string current_key;
  int depth = 0;
  explicit HeaderReader(std::map<std::string, std::string>& o) : out(o) {}
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t& v) override {
    if (depth == 1) out[current_key] = v;
    return true;
  }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return ++depth == 1; }
  bool key(string_t& k) override {
    current_key = k;
    return true;
  }
  bool end_object() override { return --depth >= 0; }
  bool start_array(std::size_t) override { return false; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }
};

}  // namespace

std::map<std::string, std::string> read_golden_header(const std::string& json_path) {
  std::ifstream in(json_path);
  std::map<std::string, std::string> out;
  HeaderReader reader(out);
  nlohmann::json::sax_parse(in, &reader);
  return out;
}

std::vector<LogitProbe> read_golden(const std::string& json_path) {
  std::ifstream in(json_path);
  if (!in) throw std::runtime_error(json_path + ": cannot open");
  nlohmann::json g;
  try {
    g = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw std::runtime_error(json_path + ": invalid JSON: " + e.what());
  }
  const auto dir = std::filesystem::path(json_path).parent_path();
  const std::string blob_path = (dir / g.at("logits_file").get<std::string>()).string();
  std::ifstream blob(blob_path, std::ios::binary);
  if (!blob) throw std::runtime_error(blob_path + ": cannot open");
  std::vector<char> bytes((std::istreambuf_iterator<char>(blob)), std::istreambuf_iterator<char>());
  std::vector<LogitProbe> out;
  for (const auto& j : g.at("probes")) {
    LogitProbe p;
    p.name = j.at("name").get<std::string>();
    p.n_vocab = g.at("n_vocab").get<int32_t>();
    p.tokens = j.at("tokens").get<std::vector<Token>>();
    p.nll = j.at("nll").get<std::vector<double>>();
    p.mean_nll = j.at("mean_nll").get<double>();
    p.argmax = j.at("argmax").get<std::vector<Token>>();
    for (const auto& row : j.at("top8")) {
      std::vector<std::pair<Token, float>> r;
      for (const auto& e : row) r.emplace_back(e.at(0).get<Token>(), e.at(1).get<float>());
      p.top8.push_back(std::move(r));
    }
    if (j.contains("settings")) p.n_ubatch = j["settings"].value("n_ubatch", 0);
    const auto& fl = j.at("full_logits");
    p.full_positions = fl.at("positions").get<std::vector<int32_t>>();
    const size_t off = fl.at("offset_bytes").get<size_t>();
    const size_t count = p.full_positions.size() * size_t(p.n_vocab);
    if (off + count * 4 > bytes.size()) throw std::runtime_error(blob_path + ": shorter than the JSON says");
    p.full_rows.resize(count);
    std::memcpy(p.full_rows.data(), bytes.data() + off, count * 4);
    out.push_back(std::move(p));
  }
  return out;
}

ProbeComparison compare_probes(const LogitProbe& ours, const LogitProbe& gold, double gap_tolerance) {
  ProbeComparison c;
  double sum = 0;
  const size_t n = std::min(ours.full_rows.size(), gold.full_rows.size());
  for (size_t i = 0; i < n; ++i) {
    const double d = std::fabs(double(ours.full_rows[i]) - double(gold.full_rows[i]));
    c.n_nonfinite += !std::isfinite(ours.full_rows[i]);
    c.max_abs = std::max(c.max_abs, d);
    sum += d;
  }
  c.mean_abs = n ? sum / double(n) : 0;
  c.mean_nll_diff = std::fabs(ours.mean_nll - gold.mean_nll);
  int agree = 0;
  for (size_t i = 0; i < gold.argmax.size() && i < ours.argmax.size(); ++i) {
    if (gold.top8[i].size() > 1 && gold.top8[i][0].second - gold.top8[i][1].second <= gap_tolerance) continue;
    ++c.argmax_compared;
    agree += ours.argmax[i] == gold.argmax[i];
  }
  c.argmax_agreement = c.argmax_compared ? double(agree) / c.argmax_compared : 1.0;
  return c;
}

}  // namespace ws
