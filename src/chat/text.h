// Unicode helpers that reproduce Python str semantics on UTF-8 strings
// (templates are rendered by Python in the reference implementation).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace ws::chat::text {

// UTF-8 <-> code points. Invalid bytes decode to U+DC80+byte (Python's surrogateescape)
// and encode back to the same byte, so any byte string round-trips.
std::u32string decode(std::string_view s);
std::string encode(std::u32string_view s);
void append_utf8(std::string& out, char32_t cp);

// Number of code points (Python len()).
size_t length(std::string_view s);

// str.isspace() for one code point (Unicode whitespace, not just ASCII).
bool is_space(char32_t cp);
// Whether repr() prints the code point as is (str.isprintable()).
bool is_printable(char32_t cp);

// str.strip/lstrip/rstrip: whitespace when chars is empty optional, else any of chars.
std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);

std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string title(std::string_view s);       // str.title()
std::string capitalize(std::string_view s);  // str.capitalize()

// Python repr() of a str: single quotes unless the text has ' and no ".
std::string repr(std::string_view s);

}  // namespace ws::chat::text
