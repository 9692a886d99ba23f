#include "chat/template.h"

#include "chat/interpreter.h"
#include "chat/lexer.h"
#include "chat/parser.h"

namespace ws::chat {

struct ChatTemplate::Impl {
  std::string source;
  StmtList body;
};

ChatTemplate ChatTemplate::parse(std::string source) {
  auto impl = std::make_shared<Impl>();
  impl->body = parse_template(tokenize(source));
  impl->source = std::move(source);
  return ChatTemplate(std::move(impl));
}

const std::string& ChatTemplate::source() const { return impl_->source; }

std::string ChatTemplate::render_value(const Value& context, const RenderOptions& options) const {
  if (!context.is_dict())
    throw TemplateError(TemplateErrorKind::runtime, "the render context must be a JSON object");
  Interpreter in(options);
  return in.render(impl_->body, context);
}

namespace {

template <typename J>
Value context_value(const J& context) {
  try {
    return from_json(context);
  } catch (const ValueError& e) {
    throw TemplateError(TemplateErrorKind::runtime, e.message);
  }
}

}  // namespace

std::string ChatTemplate::render(const nlohmann::ordered_json& context, const RenderOptions& options) const {
  return render_value(context_value(context), options);
}

std::string ChatTemplate::render(const nlohmann::json& context, const RenderOptions& options) const {
  return render_value(context_value(context), options);
}

}  // namespace ws::chat
