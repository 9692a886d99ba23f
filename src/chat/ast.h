// Syntax tree of a parsed template. Nodes are plain generic records (kind + children);
// the field conventions per kind are listed next to each enum value.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/value.h"

namespace ws::chat {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using StmtList = std::vector<StmtPtr>;
using KeywordArgs = std::vector<std::pair<std::string, ExprPtr>>;

enum class ExprKind {
  literal,    // value
  name,       // name
  list,       // args = items
  tuple,      // args = items
  dict,       // args = key0, value0, key1, value1, ...
  get_attr,   // args[0] . name
  get_item,   // args[0] [ args[1] ]
  slice,      // args[0..2] = start, stop, step (each may be null)
  call,       // args[0] ( args[1..], kwargs )
  filter,     // args[0] | name ( args[1..], kwargs ); args[0] null in filter blocks
  test,       // args[0] is [not] name ( args[1..] ); negated
  unary,      // name = "not" | "-" | "+"; args[0]
  binary,     // name = operator ("+", "and", "~", ...); args[0], args[1]
  compare,    // args[0] ops[0] args[1] ops[1] args[2] ...
  cond,       // args[0] if args[1] else args[2] (args[2] may be null)
};

struct Expr {
  ExprKind kind;
  int line = 0;
  int column = 0;
  std::string name;
  Value value;
  std::vector<ExprPtr> args;
  KeywordArgs kwargs;
  std::vector<std::string> ops;
  bool negated = false;
};

enum class StmtKind {
  text,        // text
  output,      // {{ expr }}
  if_,         // branches (cond, body); else_body
  for_,        // targets in expr [if cond] body; else_body; recursive
  set,         // targets = expr; or ns_attr: targets = {namespace, attribute}
  set_block,   // targets; filters applied to the rendered body
  macro,       // text = name; params; body
  call_block,  // expr = the call; params = caller's parameters; body = caller's body
  filter_block,// filters; body
  generation,  // body (HF's {% generation %}: renders its body in its own scope)
  with,        // params = assignments; body
  break_,
  continue_,
};

struct Stmt {
  StmtKind kind;
  int line = 0;
  int column = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr cond;
  std::vector<std::string> targets;
  bool ns_attr = false;
  bool recursive = false;
  std::vector<std::pair<ExprPtr, StmtList>> branches;
  StmtList body;
  StmtList else_body;
  std::vector<std::pair<std::string, ExprPtr>> params;  // default/value expression may be null
  std::vector<ExprPtr> filters;
};

}  // namespace ws::chat
