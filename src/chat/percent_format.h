// Python's printf-style string formatting (`str % args`), which Jinja templates reach
// through the `%` operator and the `format` filter.
#pragma once

#include <cstddef>
#include <string>

#include "chat/value.h"

namespace ws::chat {

// fmt % args with Python 3 semantics: a tuple supplies the positional arguments, a dict
// the %(key)s ones, any other value is the single argument. Conversions s r a d i u o x
// X e E f F g G c and %%, flags "-+ #0", width and precision (also "*"). Throws
// ValueError with Python's message on a malformed format or unfitting arguments, and
// when the result would exceed max_bytes (widths make a short format produce a lot).
std::string percent_format(const std::string& fmt, const Value& args, size_t max_bytes);

}  // namespace ws::chat
