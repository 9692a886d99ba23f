#include "chat/parser.h"

#include <set>

#include "chat/error.h"

namespace ws::chat {
namespace {

// Nesting limit for statements and expressions: keeps a hostile template from
// overflowing the stack of the parser (and later of the evaluator).
constexpr int kMaxDepth = 200;

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : toks_(tokens) {}

  StmtList parse_all() {
    StmtList body = subparse({});
    if (cur().type != TokenType::eof) fail("unexpected '" + cur().text + "'");
    return body;
  }

 private:
  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxDepth) p.fail("template nested too deeply (limit " + std::to_string(kMaxDepth) + ")");
    }
    ~DepthGuard() { --p.depth_; }
  };

  const Token& cur() const { return toks_[pos_]; }
  const Token& peek(size_t k = 1) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  const Token& advance() {
    const Token& t = toks_[pos_];
    if (pos_ + 1 < toks_.size()) ++pos_;
    return t;
  }

  [[noreturn]] void fail(const std::string& msg) const { fail_at(cur(), msg); }
  [[noreturn]] void fail_at(const Token& t, const std::string& msg) const {
    throw TemplateError(TemplateErrorKind::syntax, msg, t.line, t.column);
  }

  static std::string describe(const Token& t) {
    switch (t.type) {
      case TokenType::eof: return "end of template";
      case TokenType::var_end: return "'}}'";
      case TokenType::block_end: return "'%}'";
      case TokenType::string: return "string literal";
      case TokenType::text: return "template text";
      default: return "'" + t.text + "'";
    }
  }

  bool is_op(const char* op) const { return cur().type == TokenType::op && cur().text == op; }
  bool is_name(const char* name) const { return cur().type == TokenType::name && cur().text == name; }
  bool accept_op(const char* op) {
    if (!is_op(op)) return false;
    advance();
    return true;
  }
  bool accept_name(const char* name) {
    if (!is_name(name)) return false;
    advance();
    return true;
  }
  void expect_op(const char* op) {
    if (!accept_op(op)) fail(std::string("expected '") + op + "', got " + describe(cur()));
  }
  std::string expect_name() {
    if (cur().type != TokenType::name) fail("expected a name, got " + describe(cur()));
    return advance().text;
  }
  void expect_block_end() {
    if (cur().type != TokenType::block_end) fail("expected '%}', got " + describe(cur()));
    advance();
  }

  template <typename Node, typename Kind>
  std::unique_ptr<Node> make(Kind kind, const Token& at) {
    auto n = std::make_unique<Node>();
    n->kind = kind;
    n->line = at.line;
    n->column = at.column;
    return n;
  }

  // ---- statements ------------------------------------------------------------------

  // Parses until a block tag whose name is in `ends` (left unconsumed) or end of input.
  StmtList subparse(const std::set<std::string>& ends) {
    DepthGuard guard(*this);
    StmtList body;
    for (;;) {
      const Token& t = cur();
      if (t.type == TokenType::eof) return body;
      if (t.type == TokenType::text) {
        auto s = make<Stmt>(StmtKind::text, t);
        s->text = t.text;
        body.push_back(std::move(s));
        advance();
      } else if (t.type == TokenType::var_begin) {
        auto s = make<Stmt>(StmtKind::output, t);
        advance();
        s->expr = parse_tuple();
        if (cur().type != TokenType::var_end) fail("expected '}}', got " + describe(cur()));
        advance();
        body.push_back(std::move(s));
      } else if (t.type == TokenType::block_begin) {
        if (peek().type == TokenType::name && ends.count(peek().text)) {
          advance();
          return body;
        }
        advance();
        body.push_back(parse_statement());
      } else {
        fail("unexpected " + describe(t));
      }
    }
  }

  // Parses a body up to one of `ends`; returns which one ended it (consumed).
  std::string parse_body(StmtList& body, const std::set<std::string>& ends, const Token& opener,
                         const std::string& what) {
    body = subparse(ends);
    if (cur().type == TokenType::eof) {
      std::string expected;
      for (const auto& e : ends) expected += (expected.empty() ? "'" : " or '") + e + "'";
      fail_at(opener, "'" + what + "' block was never closed (expected " + expected + ")");
    }
    return advance().text;
  }

  StmtPtr parse_statement() {
    const Token& t = cur();
    if (t.type != TokenType::name) fail("expected a tag name after '{%', got " + describe(t));
    const std::string tag = t.text;
    advance();
    if (tag == "for") return parse_for(t);
    if (tag == "if") return parse_if(t);
    if (tag == "set") return parse_set(t);
    if (tag == "macro") return parse_macro(t);
    if (tag == "call") return parse_call_block(t);
    if (tag == "filter") return parse_filter_block(t);
    if (tag == "with") return parse_with(t);
    if (tag == "generation") {
      auto s = make<Stmt>(StmtKind::generation, t);
      expect_block_end();
      parse_body(s->body, {"endgeneration"}, t, "generation");
      expect_block_end();
      return s;
    }
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) fail_at(t, "'" + tag + "' outside of a loop");
      auto s = make<Stmt>(tag == "break" ? StmtKind::break_ : StmtKind::continue_, t);
      expect_block_end();
      return s;
    }
    static const std::set<std::string> unsupported = {"extends", "block", "include", "import", "from", "do",
                                                      "autoescape", "trans"};
    if (unsupported.count(tag)) fail_at(t, "the '" + tag + "' tag is not supported in chat templates");
    fail_at(t, "unknown or unexpected tag '" + tag + "'");
  }

  // for a, b in expr [if cond] [recursive] ... [else] ... endfor
  StmtPtr parse_for(const Token& at) {
    auto s = make<Stmt>(StmtKind::for_, at);
    s->targets = parse_target_names();
    if (!accept_name("in")) fail("expected 'in' in for loop, got " + describe(cur()));
    s->expr = parse_tuple(false, {"if", "recursive"});
    if (accept_name("if")) s->cond = parse_expression();
    if (accept_name("recursive")) s->recursive = true;
    expect_block_end();
    ++loop_depth_;
    const std::string end = parse_body(s->body, {"endfor", "else"}, at, "for");
    --loop_depth_;
    if (end == "else") {
      expect_block_end();
      parse_body(s->else_body, {"endfor"}, at, "for");
    }
    expect_block_end();
    return s;
  }

  std::vector<std::string> parse_target_names() {
    std::vector<std::string> names;
    const bool paren = accept_op("(");
    do {
      if (paren && is_op(")")) break;
      names.push_back(expect_name());
    } while (accept_op(","));
    if (paren) expect_op(")");
    return names;
  }

  StmtPtr parse_if(const Token& at) {
    auto s = make<Stmt>(StmtKind::if_, at);
    for (;;) {
      ExprPtr cond = parse_tuple(false);
      expect_block_end();
      StmtList body;
      const std::string end = parse_body(body, {"elif", "else", "endif"}, at, "if");
      s->branches.emplace_back(std::move(cond), std::move(body));
      if (end == "elif") continue;
      if (end == "else") {
        expect_block_end();
        parse_body(s->else_body, {"endif"}, at, "if");
      }
      expect_block_end();
      return s;
    }
  }

  StmtPtr parse_set(const Token& at) {
    auto s = make<Stmt>(StmtKind::set, at);
    if (cur().type == TokenType::name && peek().type == TokenType::op && peek().text == ".") {
      s->ns_attr = true;
      s->targets.push_back(advance().text);
      advance();
      s->targets.push_back(expect_name());
    } else {
      s->targets = parse_target_names();
    }
    if (accept_op("=")) {
      s->expr = parse_tuple();
      expect_block_end();
      return s;
    }
    if (s->ns_attr) fail("expected '=' after a namespace attribute");
    s->kind = StmtKind::set_block;
    while (accept_op("|")) s->filters.push_back(parse_filter(nullptr));
    expect_block_end();
    parse_body(s->body, {"endset"}, at, "set");
    expect_block_end();
    return s;
  }

  void parse_params(std::vector<std::pair<std::string, ExprPtr>>& params) {
    expect_op("(");
    while (!is_op(")")) {
      if (!params.empty()) expect_op(",");
      if (is_op(")")) break;
      std::string name = expect_name();
      ExprPtr def;
      if (accept_op("=")) def = parse_expression();
      params.emplace_back(std::move(name), std::move(def));
    }
    expect_op(")");
  }

  StmtPtr parse_macro(const Token& at) {
    auto s = make<Stmt>(StmtKind::macro, at);
    s->text = expect_name();
    parse_params(s->params);
    expect_block_end();
    const int saved = loop_depth_;
    loop_depth_ = 0;  // break/continue cannot cross a macro boundary
    parse_body(s->body, {"endmacro"}, at, "macro");
    loop_depth_ = saved;
    expect_block_end();
    return s;
  }

  StmtPtr parse_call_block(const Token& at) {
    auto s = make<Stmt>(StmtKind::call_block, at);
    if (is_op("(")) parse_params(s->params);
    s->expr = parse_expression();
    if (s->expr->kind != ExprKind::call) fail_at(at, "expected a macro call after 'call'");
    expect_block_end();
    const int saved = loop_depth_;
    loop_depth_ = 0;
    parse_body(s->body, {"endcall"}, at, "call");
    loop_depth_ = saved;
    expect_block_end();
    return s;
  }

  StmtPtr parse_filter_block(const Token& at) {
    auto s = make<Stmt>(StmtKind::filter_block, at);
    do {
      s->filters.push_back(parse_filter(nullptr));
    } while (accept_op("|"));
    expect_block_end();
    parse_body(s->body, {"endfilter"}, at, "filter");
    expect_block_end();
    return s;
  }

  StmtPtr parse_with(const Token& at) {
    auto s = make<Stmt>(StmtKind::with, at);
    while (cur().type != TokenType::block_end) {
      if (!s->params.empty()) expect_op(",");
      std::string name = expect_name();
      expect_op("=");
      s->params.emplace_back(std::move(name), parse_expression());
    }
    expect_block_end();
    parse_body(s->body, {"endwith"}, at, "with");
    expect_block_end();
    return s;
  }

  // ---- expressions -------------------------------------------------------------------

  // Comma-separated expressions; more than one (or a trailing comma) makes a tuple.
  ExprPtr parse_tuple(bool with_condexpr = true, const std::set<std::string>& end_names = {},
                      bool explicit_parens = false) {
    const Token& at = cur();
    std::vector<ExprPtr> items;
    bool saw_comma = false;
    for (;;) {
      if (!items.empty()) {
        if (!accept_op(",")) break;
        saw_comma = true;
      }
      if (cur().type == TokenType::var_end || cur().type == TokenType::block_end || is_op(")") ||
          (cur().type == TokenType::name && end_names.count(cur().text)))
        break;
      items.push_back(with_condexpr ? parse_expression() : parse_or());
    }
    if (!saw_comma && items.size() == 1) return std::move(items[0]);
    if (items.empty() && !explicit_parens) fail("expected an expression, got " + describe(cur()));
    auto t = make<Expr>(ExprKind::tuple, at);
    t->args = std::move(items);
    return t;
  }

  ExprPtr parse_expression() {
    DepthGuard guard(*this);
    ExprPtr expr = parse_or();
    while (is_name("if")) {
      const Token& at = advance();
      auto c = make<Expr>(ExprKind::cond, at);
      c->args.push_back(std::move(expr));
      c->args.push_back(parse_or());
      c->args.push_back(accept_name("else") ? parse_expression() : nullptr);
      expr = std::move(c);
    }
    return expr;
  }

  ExprPtr binary(const Token& at, const std::string& op, ExprPtr l, ExprPtr r) {
    auto b = make<Expr>(ExprKind::binary, at);
    b->name = op;
    b->args.push_back(std::move(l));
    b->args.push_back(std::move(r));
    return b;
  }

  ExprPtr parse_or() {
    ExprPtr l = parse_and();
    while (is_name("or")) {
      const Token& at = advance();
      l = binary(at, "or", std::move(l), parse_and());
    }
    return l;
  }

  ExprPtr parse_and() {
    ExprPtr l = parse_not();
    while (is_name("and")) {
      const Token& at = advance();
      l = binary(at, "and", std::move(l), parse_not());
    }
    return l;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard guard(*this);
      const Token& at = advance();
      auto u = make<Expr>(ExprKind::unary, at);
      u->name = "not";
      u->args.push_back(parse_not());
      return u;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const Token& at = cur();
    ExprPtr first = parse_math1();
    std::unique_ptr<Expr> cmp;
    for (;;) {
      std::string op;
      if (cur().type == TokenType::op &&
          (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" ||
           cur().text == ">" || cur().text == ">=")) {
        op = advance().text;
      } else if (is_name("in")) {
        advance();
        op = "in";
      } else if (is_name("not") && peek().type == TokenType::name && peek().text == "in") {
        advance();
        advance();
        op = "not in";
      } else {
        break;
      }
      if (!cmp) {
        cmp = make<Expr>(ExprKind::compare, at);
        cmp->args.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->args.push_back(parse_math1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }

  ExprPtr parse_math1() {
    ExprPtr l = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Token& at = advance();
      l = binary(at, at.text, std::move(l), parse_concat());
    }
    return l;
  }

  ExprPtr parse_concat() {
    ExprPtr l = parse_math2();
    while (is_op("~")) {
      const Token& at = advance();
      l = binary(at, "~", std::move(l), parse_math2());
    }
    return l;
  }

  ExprPtr parse_math2() {
    ExprPtr l = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& at = advance();
      l = binary(at, at.text, std::move(l), parse_pow());
    }
    return l;
  }

  ExprPtr parse_pow() {
    ExprPtr l = parse_unary(true);
    while (is_op("**")) {
      const Token& at = advance();
      l = binary(at, "**", std::move(l), parse_unary(true));
    }
    return l;
  }

  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(*this);
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      const Token& at = advance();
      node = make<Expr>(ExprKind::unary, at);
      node->name = at.text;
      node->args.push_back(parse_unary(false));
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr literal(const Token& at, Value v) {
    auto e = make<Expr>(ExprKind::literal, at);
    e->value = std::move(v);
    return e;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    switch (t.type) {
      case TokenType::name: {
        advance();
        if (t.text == "true" || t.text == "True") return literal(t, Value(true));
        if (t.text == "false" || t.text == "False") return literal(t, Value(false));
        if (t.text == "none" || t.text == "None") return literal(t, Value(nullptr));
        auto e = make<Expr>(ExprKind::name, t);
        e->name = t.text;
        return e;
      }
      case TokenType::string: {
        std::string s;
        while (cur().type == TokenType::string) s += advance().text;  // adjacent literals concatenate
        return literal(t, Value(std::move(s)));
      }
      case TokenType::integer: advance(); return literal(t, Value(t.int_value));
      case TokenType::floating: advance(); return literal(t, Value(t.float_value));
      case TokenType::op:
        if (t.text == "(") {
          advance();
          ExprPtr e = parse_tuple(true, {}, true);
          expect_op(")");
          return e;
        }
        if (t.text == "[") return parse_list(t);
        if (t.text == "{") return parse_dict(t);
        break;
      default: break;
    }
    fail("unexpected " + describe(t) + " in expression");
  }

  ExprPtr parse_list(const Token& at) {
    advance();
    auto e = make<Expr>(ExprKind::list, at);
    while (!is_op("]")) {
      if (!e->args.empty()) expect_op(",");
      if (is_op("]")) break;
      e->args.push_back(parse_expression());
    }
    expect_op("]");
    return e;
  }

  ExprPtr parse_dict(const Token& at) {
    advance();
    auto e = make<Expr>(ExprKind::dict, at);
    while (!is_op("}")) {
      if (!e->args.empty()) expect_op(",");
      if (is_op("}")) break;
      e->args.push_back(parse_expression());
      expect_op(":");
      e->args.push_back(parse_expression());
    }
    expect_op("}");
    return e;
  }

  ExprPtr parse_postfix(ExprPtr node) {
    for (;;) {
      if (is_op(".") || is_op("[")) {
        node = parse_subscript(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    for (;;) {
      if (accept_op("|")) {
        node = parse_filter(std::move(node));
      } else if (is_name("is")) {
        node = parse_test(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    const Token& at = advance();
    if (at.text == ".") {
      const Token& t = cur();
      if (t.type == TokenType::name) {
        advance();
        auto e = make<Expr>(ExprKind::get_attr, at);
        e->name = t.text;
        e->args.push_back(std::move(node));
        return e;
      }
      if (t.type == TokenType::integer) {
        advance();
        auto e = make<Expr>(ExprKind::get_item, at);
        e->args.push_back(std::move(node));
        e->args.push_back(literal(t, Value(t.int_value)));
        return e;
      }
      fail("expected an attribute name after '.', got " + describe(t));
    }
    std::vector<ExprPtr> idx;
    do {
      if (is_op("]")) break;
      idx.push_back(parse_subscribed());
    } while (accept_op(","));
    expect_op("]");
    auto e = make<Expr>(ExprKind::get_item, at);
    e->args.push_back(std::move(node));
    if (idx.size() == 1) {
      e->args.push_back(std::move(idx[0]));
    } else {  // a[x, y] and a[] subscript with a tuple (the empty one for a[]), as Jinja does
      auto t = make<Expr>(ExprKind::tuple, at);
      t->args = std::move(idx);
      e->args.push_back(std::move(t));
    }
    return e;
  }

  // a, a:b, a:b:c, :b, ::c ...
  ExprPtr parse_subscribed() {
    const Token& at = cur();
    ExprPtr start;
    if (!is_op(":")) {
      start = parse_expression();
      if (!is_op(":")) return start;
    }
    advance();  // ':'
    auto s = make<Expr>(ExprKind::slice, at);
    s->args.push_back(std::move(start));
    s->args.push_back(is_op("]") || is_op(",") || is_op(":") ? nullptr : parse_expression());
    ExprPtr step;
    if (accept_op(":") && !is_op("]") && !is_op(",")) step = parse_expression();
    s->args.push_back(std::move(step));
    return s;
  }

  // (args, name=value, ...) into e->args (after any existing entries) and e->kwargs.
  void parse_call_args(Expr& e) {
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (is_op(")")) break;
      if (is_op("*") || is_op("**")) fail("*args / **kwargs in calls are not supported");
      if (cur().type == TokenType::name && peek().type == TokenType::op && peek().text == "=") {
        std::string name = advance().text;
        advance();
        e.kwargs.emplace_back(std::move(name), parse_expression());
      } else {
        if (!e.kwargs.empty()) fail("positional argument follows keyword argument");
        e.args.push_back(parse_expression());
      }
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr node) {
    auto e = make<Expr>(ExprKind::call, cur());
    e->args.push_back(std::move(node));
    parse_call_args(*e);
    return e;
  }

  std::string parse_dotted_name() {
    std::string name = expect_name();
    while (is_op(".") && peek().type == TokenType::name) {
      advance();
      name += "." + advance().text;
    }
    return name;
  }

  ExprPtr parse_filter(ExprPtr node) {
    auto e = make<Expr>(ExprKind::filter, cur());
    e->name = parse_dotted_name();
    e->args.push_back(std::move(node));
    if (is_op("(")) parse_call_args(*e);
    return e;
  }

  ExprPtr parse_test(ExprPtr node) {
    auto e = make<Expr>(ExprKind::test, advance());  // 'is'
    e->negated = accept_name("not");
    e->name = parse_dotted_name();
    e->args.push_back(std::move(node));
    const Token& t = cur();
    if (is_op("(")) {
      parse_call_args(*e);
    } else if ((t.type == TokenType::name || t.type == TokenType::string || t.type == TokenType::integer ||
                t.type == TokenType::floating || is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      // `x is divisibleby 3`: a single argument without parentheses, as Jinja allows.
      if (is_name("is")) fail("you cannot chain multiple tests with 'is'");
      e->args.push_back(parse_postfix(parse_primary()));
    }
    return e;
  }

  const std::vector<Token>& toks_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

StmtList parse_template(const std::vector<Token>& tokens) { return Parser(tokens).parse_all(); }

}  // namespace ws::chat
