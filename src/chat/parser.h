// Recursive-descent parser for the Jinja subset chat templates use.
#pragma once

#include <vector>

#include "chat/ast.h"
#include "chat/lexer.h"

namespace ws::chat {

// Throws TemplateError(syntax) with the offending line/column.
StmtList parse_template(const std::vector<Token>& tokens);

}  // namespace ws::chat
