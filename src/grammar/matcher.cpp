#include "grammar/matcher.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "tokenizer/tokenizer.h"

namespace ws::grammar {

using Kind = Element::Kind;

// Replaces a rule reference on top by each alternative of the rule (followed by what came
// after the reference) until every stack has a character set on top or is empty.
void Matcher::expand(Stack s, std::vector<Stack>& out) const {
  if (s.empty() || s.back()->kind == Kind::chars) {
    out.push_back(std::move(s));
    return;
  }
  const Element* ref = s.back();
  s.pop_back();
  if (ref[1].kind != Kind::end) s.push_back(ref + 1);
  for (const auto& alt : g_->rules()[ref->rule].alts) {
    Stack t = s;
    if (alt[0].kind != Kind::end) t.push_back(alt.data());
    expand(std::move(t), out);
  }
}

MatchState Matcher::initial() const {
  auto stacks = std::make_shared<std::vector<Stack>>();
  for (const auto& alt : g_->rules()[g_->root()].alts) expand(alt[0].kind == Kind::end ? Stack{} : Stack{alt.data()}, *stacks);
  std::sort(stacks->begin(), stacks->end());
  stacks->erase(std::unique(stacks->begin(), stacks->end()), stacks->end());
  MatchState st;
  st.stacks = std::move(stacks);
  return st;
}

size_t StepMemo::SetHash::operator()(const std::vector<Stack>& v) const {
  size_t h = v.size();
  for (const Stack& s : v) {
    h = h * 31 + s.size();
    for (const Element* e : s) h = h * 0x100000001B3ull ^ reinterpret_cast<uintptr_t>(e);
  }
  return h;
}

StepMemo::Set StepMemo::intern(Set s) {
  if (sets_.size() >= kMaxSets) sets_.clear(), steps_.clear();
  const auto [it, fresh] = sets_.emplace(*s, s);
  return it->second;
}

const StepMemo::Set* StepMemo::find(const void* from, uint32_t cp) const {
  const auto it = steps_.find({from, cp});
  return it == steps_.end() ? nullptr : &it->second;
}

void StepMemo::store(const void* from, uint32_t cp, Set to) { steps_[{from, cp}] = std::move(to); }

bool Matcher::advance_code_point(const MatchState& in, uint32_t cp, MatchState& out, StepMemo* memo) const {
  if (memo) {
    if (const StepMemo::Set* hit = memo->find(in.stacks.get(), cp)) {
      if (!*hit) return false;
      out.stacks = *hit;
      out.partial = 0, out.left = 0, out.length = 0;
      return true;
    }
  }
  auto next = std::make_shared<std::vector<Stack>>();
  for (const Stack& s : *in.stacks) {
    if (s.empty() || !s.back()->matches(cp)) continue;
    Stack t(s.begin(), s.end() - 1);
    const Element* after = s.back() + 1;
    if (after->kind != Kind::end) t.push_back(after);
    expand(std::move(t), *next);
  }
  if (next->empty()) {
    if (memo) memo->store(in.stacks.get(), cp, nullptr);
    return false;
  }
  if (next->size() > 1) {
    // Ambiguous grammars (e.g. optional whitespace twice) reach the same stack twice.
    std::sort(next->begin(), next->end());
    next->erase(std::unique(next->begin(), next->end()), next->end());
  }
  if (memo) {
    // Interning may clear the memo; `in.stacks` stays alive (the caller holds it) but is
    // then no longer interned, so it is re-interned before it keys a step.
    StepMemo::Set canon = memo->intern(std::move(next));
    memo->store(memo->intern(in.stacks).get(), cp, canon);
    out.stacks = std::move(canon);
  } else {
    out.stacks = std::move(next);
  }
  out.partial = 0;
  out.left = 0;
  out.length = 0;
  return true;
}

bool Matcher::advance(const MatchState& in, uint8_t b, MatchState& out, StepMemo* memo) const {
  // The smallest code point each length may encode: shorter forms (overlong) are invalid UTF-8.
  static constexpr uint32_t kMinOfLength[5] = {0, 0, 0x80, 0x800, 0x10000};
  uint32_t value;
  uint8_t left, length;
  if (in.left == 0) {
    if (b < 0x80) return advance_code_point(in, b, out, memo);
    // A lead byte: 110xxxxx, 1110xxxx or 11110xxx.
    if ((b >> 5) == 6) value = b & 0x1F, left = 1;
    else if ((b >> 4) == 14) value = b & 0x0F, left = 2;
    else if ((b >> 3) == 30) value = b & 0x07, left = 3;
    else return false;  // a stray continuation byte or an invalid lead
    length = uint8_t(left + 1);
  } else {
    if ((b >> 6) != 2) return false;  // a continuation byte was expected
    value = (in.partial << 6) | (b & 0x3F);
    left = uint8_t(in.left - 1);
    length = in.length;
    if (left == 0) {
      if (value < kMinOfLength[length] || value > 0x10FFFF) return false;
      return advance_code_point(in, value, out, memo);
    }
  }
  // A character in progress: some parse must accept some completion of it, or a token
  // ending here would leave the generation with no way forward.
  const uint32_t lo = std::max(value << (6 * left), kMinOfLength[length]);
  const uint32_t hi = std::min<uint32_t>((value << (6 * left)) | ((1u << (6 * left)) - 1), 0x10FFFF);
  if (lo > hi) return false;
  bool any = false;
  for (const Stack& s : *in.stacks)
    if (!s.empty() && s.back()->matches_any(lo, hi)) {
      any = true;
      break;
    }
  if (!any) return false;
  out.stacks = in.stacks;
  out.partial = value;
  out.left = left;
  out.length = length;
  return true;
}

bool Matcher::accept(MatchState& st, std::string_view bytes, StepMemo* memo) const {
  MatchState cur = st, next;
  for (const char c : bytes) {
    if (!advance(cur, uint8_t(c), next, memo)) return false;
    cur = std::move(next);
  }
  st = std::move(cur);
  return true;
}

bool Matcher::can_end(const MatchState& st) {
  if (st.left != 0) return false;
  for (const Stack& s : *st.stacks)
    if (s.empty()) return true;
  return false;
}

bool Matcher::matches(std::string_view text) const {
  MatchState st = initial();
  return accept(st, text) && can_end(st);
}

TokenVocab::TokenVocab(std::vector<std::string> pieces, std::vector<uint8_t> eog)
    : pieces_(std::move(pieces)), eog_(std::move(eog)) {
  if (eog_.size() != pieces_.size()) throw std::invalid_argument("TokenVocab: pieces and eog flags differ in length");
  for (size_t i = 0; i < pieces_.size(); ++i)
    if (!eog_[i] && !pieces_[i].empty()) sorted_.push_back(int32_t(i));
  std::sort(sorted_.begin(), sorted_.end(), [&](int32_t a, int32_t b) { return pieces_[size_t(a)] < pieces_[size_t(b)]; });
  lcp_.resize(sorted_.size(), 0);
  for (size_t i = 1; i < sorted_.size(); ++i) {
    const std::string& a = pieces_[size_t(sorted_[i - 1])];
    const std::string& b = pieces_[size_t(sorted_[i])];
    uint32_t n = 0;
    while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
    lcp_[i] = n;
  }
}

std::shared_ptr<const TokenVocab> TokenVocab::from_tokenizer(const Tokenizer& tok) {
  const size_t n = size_t(tok.n_vocab());
  std::vector<std::string> pieces(n);
  std::vector<uint8_t> eog(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const Token t = Token(i);
    eog[i] = tok.is_eog(t) ? 1 : 0;
    // Control tokens (chat markers) are never grammar text.
    if (!eog[i] && !tok.is_control(t)) pieces[i] = tok.token_to_piece(t, false);
  }
  return std::make_shared<TokenVocab>(std::move(pieces), std::move(eog));
}

std::unique_ptr<TokenFilter> GrammarConstraint::start() const {
  return std::make_unique<GrammarFilter>(matcher_, vocab_);
}

bool GrammarFilter::allows(int32_t token) {
  if (token < 0 || size_t(token) >= vocab_->size()) return false;
  if (vocab_->is_eog(token)) return Matcher::can_end(state_);
  const std::string& piece = vocab_->piece(token);
  if (piece.empty()) return false;  // would not advance: allowing it could loop forever
  MatchState probe = state_;
  return m_.accept(probe, piece);
}

// Walks the tokens in byte order keeping the state after each byte of the current
// prefix: tokens sharing a prefix share its work, and once a prefix is refused every
// token that starts with it is skipped without looking at its bytes.
void GrammarFilter::allowed(std::vector<uint8_t>& mask) {
  const TokenVocab& v = *vocab_;
  mask.assign(v.size(), 0);
  const bool end = Matcher::can_end(state_);
  for (size_t i = 0; i < v.size(); ++i)
    if (v.eog_[i]) mask[i] = end ? 1 : 0;
  if (levels_.empty()) levels_.resize(1);
  state_.stacks = memo_.intern(state_.stacks);
  levels_[0] = state_;
  size_t depth = 0;  // levels_[0..depth] are valid for the current prefix
  for (size_t i = 0; i < v.sorted_.size();) {
    const std::string& p = v.pieces_[size_t(v.sorted_[i])];
    depth = std::min<size_t>(depth, v.lcp_[i]);
    bool ok = true;
    while (depth < p.size()) {
      if (levels_.size() < depth + 2) levels_.resize(depth + 2);
      if (!m_.advance(levels_[depth], uint8_t(p[depth]), levels_[depth + 1], &memo_)) {
        ok = false;
        break;
      }
      ++depth;
    }
    if (ok) {
      mask[size_t(v.sorted_[i])] = 1;
      ++i;
      continue;
    }
    // p[0..depth] is refused: skip every following token that starts with it.
    const size_t dead = depth;
    ++i;
    while (i < v.sorted_.size() && v.lcp_[i] > dead) ++i;
  }
}

void GrammarFilter::accept(int32_t token) {
  if (vocab_->is_eog(token)) return;  // the generation ends here
  if (!m_.accept(state_, vocab_->piece(token)))
    throw std::logic_error("grammar: accepted a token the grammar refuses (id " + std::to_string(token) + ")");
}

}  // namespace ws::grammar
