// POST /v1/responses: OpenAI's Responses API on the same engine path as chat completions.
// The body becomes a chat-completions body (responses_api.h), rendered by the same
// template into the same tokens, so a conversation reuses its prefix whichever API each
// turn came through; the reply is split into reasoning, text and calls by the chat
// parsers and written as Responses output items, or streamed as typed events.
#include <httplib.h>

#include <optional>

#include "server/api_error.h"
#include "server/chat_reply.h"
#include "server/http_guard.h"
#include "server/http_server.h"
#include "server/responses_api.h"
#include "server/responses_output.h"

namespace ws::server {
namespace {

// Everything a streaming response needs after its handler has returned (shared by the
// copies httplib makes of the provider; releasing the lease frees the slot at once).
struct ResponsesJob {
  ResponseEvents events;
  ReplySyntax reply;
  TurnRequest turn;
  std::vector<std::string> stop;
  std::optional<SlotPool::Lease> lease;
};

std::string sse(const Json& event) {
  return "event: " + event["type"].get<std::string>() + "\ndata: " + dump_json(event) + "\n\n";
}

ParsedReply parse_whole(const ReplySyntax& syn, const std::string& text) {
  if (syn.active()) return parse_reply(syn, text, false);
  ParsedReply r;
  r.content = text;
  return r;
}

// Writes the events as the reply is generated, on the connection's thread after the
// handler has returned.
void stream_responses(httplib::Response& res, std::shared_ptr<ResponsesJob> job, const Tokenizer& tok,
                      Metrics& metrics) {
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider("text/event-stream", [job, &tok, &metrics](size_t, httplib::DataSink& sink) {
    // A failed write means the client went away: generation stops at the next piece.
    auto send = [&sink](const std::vector<Json>& events) {
      for (const Json& e : events) {
        const std::string s = sse(e);
        if (!sink.is_writable() || !sink.write(s.data(), s.size())) return false;
      }
      return true;
    };
    if (!send(job->events.start())) return job->lease.reset(), false;
    const bool parsed = job->reply.active();
    ReplyStreamer streamer(job->reply);
    auto send_deltas = [&](const std::vector<Json>& deltas) {
      for (const Json& d : deltas)
        if (!send(job->events.push(d))) return false;
      return true;
    };
    std::vector<Completion> cs;
    job->turn.cancelled = [&sink] { return !sink.is_writable(); };
    try {
      cs = run_completions(job->lease->engine(), tok, job->turn, job->stop, -1,
                           [&](int32_t, const std::string& piece, std::span<const TokenInfo>) {
                             return send_deltas(parsed ? streamer.push(piece) : std::vector<Json>{Json{{"content", piece}}});
                           }, parsed);
    } catch (const std::exception& e) {
      job->lease.reset();
      send({job->events.error(std::string("generation failed: ") + e.what())});
      return false;
    }
    job->lease.reset();
    metrics.record_turn(cs[0].turn, cs[0].client_gone);
    if (cs[0].client_gone) return false;  // nothing more can be delivered
    if (parsed && !send_deltas(streamer.finish())) return false;
    if (!send(job->events.finish(cs[0]))) return false;
    sink.done();
    return true;
  });
}

}  // namespace

void Server::handle_responses(const httplib::Request& req, httplib::Response& res) {
  const ResponsesRequest rr = parse_responses_request(parse_body(req.body));
  ChatRequest cr = parse_chat_request(rr.chat, cfg_.allow_local_files);
  if (rr.format_grammar) cr.gen.grammar = rr.format_grammar;
  const ChatOptions opts = parse_chat_options(rr.chat, cr.tools, cfg_.reasoning_format);
  const chat::RenderedPrompt text = chat_.render(cr.messages, cr.tools, opts.template_kwargs);
  // The reply syntax, forced-call grammar, turn and slot exactly as a chat request gets them.
  ChatTurn t = prepare_chat_turn(req, cr, opts, text, "input");
  const ReplySyntax& reply = t.reply;
  TurnRequest& turn = t.turn;
  std::optional<SlotPool::Lease>& lease = t.lease;
  Json echo = rr.echo;
  echo["parallel_tool_calls"] = opts.parallel;
  ResponseHead head = make_response_head(cr.gen.model.empty() ? cfg_.model_name : cr.gen.model, std::move(echo));

  if (cr.gen.stream) {
    auto job = std::make_shared<ResponsesJob>(
        ResponsesJob{ResponseEvents(std::move(head)), reply, std::move(turn), cr.gen.stop, std::nullopt});
    job->lease.emplace(std::move(*lease));
    stream_responses(res, std::move(job), tok_, metrics_);
    return;
  }
  // A client that leaves stops the computation at the next prompt micro-batch or piece of text.
  turn.cancelled = client_gone(req);
  const ChoiceSink connected = [this, &req](int32_t, const std::string&, std::span<const TokenInfo>) {
    return http_->client_connected(req);
  };
  const std::vector<Completion> cs = run_completions(lease->engine(), tok_, turn, cr.gen.stop, -1, connected,
                                                     reply.active());
  lease.reset();  // the slot is free before the network write
  const Completion& c = cs[0];
  metrics_.record_turn(c.turn, c.client_gone);
  const bool truncated = c.finish_reason == "length";
  const Json output = output_items(parse_whole(reply, c.text), truncated);
  res.set_content(dump_json(response_object(head, truncated ? "incomplete" : "completed", output, &c.turn)),
                  "application/json");
}

}  // namespace ws::server
