// Tree-walking evaluator for parsed templates. One Interpreter renders one template
// once; it owns the limits that stop hostile templates (output size, loop iterations,
// call depth) and the clock used by strftime_now.
#pragma once

#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chat/ast.h"
#include "chat/options.h"
#include "chat/value.h"

namespace ws::chat {


// Variables, chained to the enclosing scope. Macros keep a weak reference to the scope
// they were defined in (closure semantics without reference cycles).
struct Scope {
  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> vars;

  const Value* lookup(const std::string& name) const;
  void set(const std::string& name, Value v);
};
using ScopePtr = std::shared_ptr<Scope>;

class Interpreter {
 public:
  explicit Interpreter(const RenderOptions& options) : opt_(options) {}

  // Renders `body` with the entries of `context` (a dict) as variables.
  std::string render(const StmtList& body, const Value& context);

  // Services for builtins (filters, tests, methods, globals).
  Value call(const Value& callee, CallArgs& args);
  Value filter(const std::string& name, const Value& base, CallArgs& args);
  bool test(const std::string& name, const Value& v, CallArgs& args);
  Value get_attr(const Value& obj, const std::string& name);
  Value get_item(const Value& obj, const Value& key);
  const RenderOptions& options() const { return opt_; }
  // Charges loop iterations / checks a produced size against the limits (ValueError).
  void charge_iterations(int64_t n);
  void check_size(size_t bytes) const;

 private:
  enum class Flow { normal, break_, continue_ };
  friend struct DepthGuard;

  Flow exec_list(const StmtList& body, const ScopePtr& scope, std::string& out);
  Flow exec(const Stmt& s, const ScopePtr& scope, std::string& out);
  Flow exec_if(const Stmt& s, const ScopePtr& scope, std::string& out);
  Flow exec_for(const Stmt& s, const ScopePtr& scope, std::string& out);
  void exec_set(const Stmt& s, const ScopePtr& scope);
  void exec_set_block(const Stmt& s, const ScopePtr& scope);
  void exec_macro(const Stmt& s, const ScopePtr& scope);
  void exec_call_block(const Stmt& s, const ScopePtr& scope, std::string& out);
  std::string render_body(const StmtList& body, const ScopePtr& scope);
  Value apply_filters(const std::vector<ExprPtr>& filters, Value v, const ScopePtr& scope);
  void assign_targets(const std::vector<std::string>& targets, const Value& v, Scope& scope);
  void emit(std::string& out, const std::string& s);

  Value call_macro(const Stmt& macro, const ScopePtr& defined_in, CallArgs& args, const Value& caller);

  Value eval(const Expr& e, const ScopePtr& scope);
  Value eval_inner(const Expr& e, const ScopePtr& scope);
  Value eval_binary(const Expr& e, const ScopePtr& scope);
  Value eval_compare(const Expr& e, const ScopePtr& scope);
  Value eval_call(const Expr& e, const ScopePtr& scope);
  Value eval_filter(const Expr& e, const Value& base, const ScopePtr& scope);
  Value eval_test(const Expr& e, const ScopePtr& scope);
  Value eval_item(const Expr& e, const ScopePtr& scope);
  CallArgs eval_args(const Expr& e, size_t first, const ScopePtr& scope);

  RenderOptions opt_;
  size_t emitted_ = 0;
  int64_t iterations_ = 0;
  int macro_depth_ = 0;
  int eval_depth_ = 0;
};

// Bounds the nesting of statements, expressions and calls so that no template can
// exhaust the native stack.
struct DepthGuard {
  Interpreter& in;
  explicit DepthGuard(Interpreter& i) : in(i) {
    if (++in.eval_depth_ > in.opt_.max_eval_depth) {
      --in.eval_depth_;
      throw ValueError{"template evaluation nested too deeply (limit " + std::to_string(in.opt_.max_eval_depth) + ")"};
    }
  }
  ~DepthGuard() { --in.eval_depth_; }
};

// Binary operators with Python semantics ("+", "-", "*", "/", "//", "%", "**", "~").
Value binary_op(const std::string& op, const Value& a, const Value& b, const Interpreter& in);
// `a in b`.
bool contains(const Value& container, const Value& item);

}  // namespace ws::chat
