// POST /v1/messages and /v1/messages/count_tokens: Anthropic's Messages API on the same
// engine path as chat completions. The body becomes a chat-completions body
// (anthropic_api.h), which the chat parsers validate, the template renders and a leased
// slot runs, so a conversation sent either way renders to the same tokens and reuses the
// same cached prefix. Errors on these routes use Anthropic's envelope.
#include <httplib.h>

#include <optional>

#include "engine/prompt.h"
#include "server/anthropic_api.h"
#include "server/api_error.h"
#include "server/chat_reply.h"
#include "server/http_guard.h"
#include "server/http_server.h"

namespace ws::server {
namespace {

using Json = nlohmann::ordered_json;

void send_anthropic_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status();
  if (e.status() == 503) res.set_header("Retry-After", "1");  // as send_error does
  res.set_content(dump_json(anthropic_error_json(e)), "application/json");
}

// Runs `f`; its errors become Anthropic's error envelope instead of OpenAI's.
template <class F>
void with_anthropic_errors(httplib::Response& res, F&& f) {
  try {
    f();
  } catch (const ApiError& e) {
    send_anthropic_error(res, e);
  } catch (const std::exception& e) {
    send_anthropic_error(res, ApiError(500, std::string("internal error: ") + e.what(), "server_error"));
  }
}

// The converted chat request, parsed and rendered as /v1/chat/completions does it.
struct PreparedChat {
  ChatRequest cr;
  ChatOptions opts;
  chat::RenderedPrompt text;
};

// Anthropic's prefill: a final assistant message (text only) is the start of the reply,
// which continues it. The conversation is rendered as it stands and cut right after that
// text, which drops the message's end and the generation prompt the template added.
void continue_prefill(const Json& messages, chat::RenderedPrompt& text) {
  const Json& last = messages.back();
  if (last["role"] != "assistant" || last.contains("tool_calls") || !last["content"].is_string()) return;
  const std::string prefill = last["content"].get<std::string>();
  if (prefill.empty()) return;
  const size_t at = text.text.rfind(prefill);
  if (at == std::string::npos)
    throw bad_request("the chat template does not render the final assistant message's text as sent, so the reply "
                      "cannot continue it; leave the prefill out",
                      "messages", "invalid_value");
  text.text.resize(at + prefill.size());
  std::erase_if(text.message_ends, [&](size_t end) { return end > text.text.size(); });
}

PreparedChat prepare_chat(const Json& chat_body, const ServerConfig& cfg, const ChatFormatter& chat) {
  PreparedChat p;
  p.cr = parse_chat_request(chat_body, cfg.allow_local_files);
  p.opts = parse_chat_options(chat_body, p.cr.tools, cfg.reasoning_format);
  p.text = chat.render(p.cr.messages, p.cr.tools, p.opts.template_kwargs);
  continue_prefill(p.cr.messages, p.text);
  return p;
}

// Everything a streamed message needs after its handler has returned; the lease is
// released as soon as generation ends, before the last events are written.
struct MessagesJob {
  ResponseMeta meta;
  TurnRequest turn;
  std::vector<std::string> stop;
  std::optional<SlotPool::Lease> lease;
};

}  // namespace

void Server::handle_messages(const httplib::Request& req, httplib::Response& res) {
  with_anthropic_errors(res, [&] { run_messages(req, res); });
}

void Server::handle_count_tokens(const httplib::Request& req, httplib::Response& res) {
  with_anthropic_errors(res, [&] {
    PreparedChat p = prepare_chat(anthropic_to_chat_body(parse_body(req.body), true), cfg_, chat_);
    prompt_guard_.check(p.text.text, cfg_.n_ctx, "messages");  // far too long: refused before tokenizing
    // The prompt /v1/messages would run: the same tokenization, images' positions included.
    size_t n = 0;
    if (p.cr.images.empty()) {
      n = tokenize_prompt(tok_, p.text.text, p.text.message_ends).tokens.size();
    } else {
      n = make_media_turn_request(tok_, vision_, encode_mu_, p.text, p.cr.images, p.cr.gen, cfg_.n_ctx,
                                  request_image_decoder(decode_gate_, cfg_.max_image_pixels))
              .prompt.size();
    }
    res.set_content(dump_json({{"input_tokens", n}}), "application/json");
  });
}

void Server::run_messages(const httplib::Request& req, httplib::Response& res) {
  PreparedChat p = prepare_chat(anthropic_to_chat_body(parse_body(req.body), false), cfg_, chat_);
  ChatRequest& cr = p.cr;
  ResponseMeta meta = make_meta(ApiKind::chat, cr.gen.model.empty() ? cfg_.model_name : cr.gen.model);
  meta.id = "msg_" + meta.id.substr(meta.id.find('-') + 1);
  // Thinking and tool_use blocks come from the same reply parser as chat's fields.
  ChatTurn t = prepare_chat_turn(req, cr, p.opts, p.text, "messages");
  meta.reply = t.reply;
  TurnRequest& turn = t.turn;
  std::optional<SlotPool::Lease>& lease = t.lease;
  if (cr.gen.stream) {
    stream_messages(res, std::move(*lease), std::move(meta), std::move(turn), cr.gen.stop);
    return;
  }
  turn.cancelled = client_gone(req);
  const ChoiceSink connected = [this, &req](int32_t, const std::string&, std::span<const TokenInfo>) {
    return http_->client_connected(req);
  };
  const bool special = meta.reply.active();  // call and thinking markers may be control tokens
  const std::vector<Completion> cs = run_completions(lease->engine(), tok_, turn, cr.gen.stop, -1, connected, special);
  lease.reset();  // the slot is free before the network write
  const Completion& c = cs[0];
  metrics_.record_turn(c.turn, c.client_gone);
  ParsedReply parsed;
  if (special) parsed = parse_reply(meta.reply, c.text, false);
  else parsed.content = c.text;
  const StopInfo stop = anthropic_stop(c, !parsed.calls.empty(), cr.gen.stop, tok_, special);
  res.set_content(dump_json(anthropic_message_json(meta.id, meta.model, parsed, stop, c.turn)), "application/json");
}

void Server::stream_messages(httplib::Response& res, SlotPool::Lease&& lease, ResponseMeta meta, TurnRequest turn,
                             std::vector<std::string> stop) {
  auto job =
      std::make_shared<MessagesJob>(MessagesJob{std::move(meta), std::move(turn), std::move(stop), std::nullopt});
  job->lease.emplace(std::move(lease));
  res.set_header("Cache-Control", "no-cache");
  // Runs on this connection's thread after the handler returns.
  res.set_chunked_content_provider("text/event-stream", [this, job](size_t, httplib::DataSink& sink) {
    const ResponseMeta& m = job->meta;
    // A failed write means the client went away: generation stops at once.
    auto send = [&sink](const SseEvent& e) {
      const std::string w = e.wire();
      return sink.is_writable() && sink.write(w.data(), w.size());
    };
    auto send_all = [&send](const std::vector<SseEvent>& events) {
      for (const SseEvent& e : events)
        if (!send(e)) return false;
      return true;
    };
    if (!send(message_start_event(m.id, m.model, int32_t(job->turn.prompt.size())))) {
      job->lease.reset();
      return false;
    }
    const bool parsed = m.reply.active();
    ReplyStreamer reply(m.reply);
    AnthropicBlocks blocks;
    auto on_text = [&](int32_t, const std::string& text, std::span<const TokenInfo>) {
      if (!parsed) return send_all(blocks.push(Json{{"content", text}}));
      for (const Json& d : reply.push(text))
        if (!send_all(blocks.push(d))) return false;
      return true;
    };
    std::vector<Completion> cs;
    job->turn.cancelled = [&sink] { return !sink.is_writable(); };
    try {
      cs = run_completions(job->lease->engine(), tok_, job->turn, job->stop, -1, on_text, parsed);
    } catch (const std::exception& e) {
      job->lease.reset();
      const ApiError* api = dynamic_cast<const ApiError*>(&e);
      const ApiError failed(500, std::string("generation failed: ") + e.what(), "server_error");
      send({"error", anthropic_error_json(api ? *api : failed)});
      return false;
    }
    job->lease.reset();
    const Completion& c = cs[0];
    metrics_.record_turn(c.turn, c.client_gone);
    if (c.client_gone) return false;  // nothing more can be delivered
    if (parsed)
      for (const Json& d : reply.finish())
        if (!send_all(blocks.push(d))) return false;
    if (!send_all(blocks.close())) return false;
    const StopInfo stop_info = anthropic_stop(c, blocks.called(), job->stop, tok_, parsed);
    if (!send_all(message_end_events(stop_info, c.turn))) return false;
    sink.done();
    return true;
  });
}

}  // namespace ws::server
