// POST /v1/chat/completions and POST /v1/completions: parse, render, tokenize, lease a
// slot, run the turn; streaming answers are Server-Sent Events in OpenAI's chunk format.
#include <httplib.h>

#include <optional>

#include "server/api_error.h"
#include "server/http_guard.h"
#include "server/http_server.h"

namespace ws::server {

void Server::handle_chat(const httplib::Request& req, httplib::Response& res) {
  const Json body = parse_body(req.body);
  ChatRequest cr = parse_chat_request(body, cfg_.allow_local_files);
  const ChatOptions opts = parse_chat_options(body, cr.tools, cfg_.reasoning_format);
  const chat::RenderedPrompt text = chat_.render(cr.messages, cr.tools, opts.template_kwargs);
  ChatTurn t = prepare_chat_turn(req, cr, opts, text, "messages");
  ResponseMeta meta = make_meta(ApiKind::chat, cr.gen.model.empty() ? cfg_.model_name : cr.gen.model);
  meta.reply = t.reply;
  respond(req, res, std::move(meta), std::move(t.turn), cr.gen, std::move(t.lease));
}

std::function<bool()> Server::client_gone(const httplib::Request& req) const {
  return [this, &req] { return !http_->client_connected(req); };
}

Server::ChatTurn Server::prepare_chat_turn(const httplib::Request& req, ChatRequest& cr, const ChatOptions& opts,
                                           const chat::RenderedPrompt& text, const char* param) {
  ChatTurn t;
  // Tools and reasoning: how the reply is split up, and (tool_choice required / named)
  // the grammar that makes it a call.
  t.reply = reply_syntax(chat_.dialect(), opts, cr.tools, text.text);
  // A response_format / grammar decides the whole reply: none of it is thinking.
  if (cr.gen.grammar) t.reply.reasoning = {}, t.reply.starts_in_reasoning = false;
  if (auto forced = forced_call_grammar(t.reply, opts, cr.tools, cr.gen.grammar != nullptr)) cr.gen.grammar = forced;
  prompt_guard_.check(text.text, cfg_.n_ctx, param);  // far too long: refused before tokenizing
  // Images are decoded only once the request holds a slot (the waiting line holds bytes,
  // never pixels), under the per-request pixel budget and the bound on concurrent decodes;
  // they are encoded only if the turn must compute their positions.
  if (!cr.images.empty()) t.lease.emplace(slots_.acquire(-1, client_gone(req)));
  t.turn = cr.images.empty() ? make_turn_request(tok_, text, cr.gen, cfg_.n_ctx, param)
                             : make_media_turn_request(tok_, vision_, encode_mu_, text, cr.images, cr.gen, cfg_.n_ctx,
                                                       request_image_decoder(decode_gate_, cfg_.max_image_pixels));
  keep_last_message_end(chat_.dialect(), t.turn);
  if (cr.gen.grammar)
    t.turn.sampling.constraint = std::make_shared<grammar::GrammarConstraint>(cr.gen.grammar, grammar_vocab_.get());
  if (!t.lease) t.lease.emplace(slots_.acquire(-1, client_gone(req)));
  return t;
}

void Server::handle_text(const httplib::Request& req, httplib::Response& res) {
  const CompletionRequest cr = parse_completion_request(parse_body(req.body));
  prompt_guard_.check(cr.prompt, cfg_.n_ctx, "prompt");  // far too long: refused before tokenizing
  TurnRequest turn = make_turn_request(tok_, chat::RenderedPrompt{cr.prompt, {}}, cr.gen, cfg_.n_ctx, "prompt");
  respond(req, res, make_meta(ApiKind::text, cr.gen.model.empty() ? cfg_.model_name : cr.gen.model), std::move(turn), cr.gen);
}

void Server::respond(const httplib::Request& req, httplib::Response& res, ResponseMeta meta, TurnRequest turn,
                     const GenerationOptions& gen, std::optional<SlotPool::Lease> lease) {
  // response_format / grammar: the sampler keeps every reply inside the grammar.
  if (gen.grammar && !turn.sampling.constraint) turn.sampling.constraint = std::make_shared<grammar::GrammarConstraint>(gen.grammar, grammar_vocab_.get());
  // Waits in line for a slot (503 at once when the line is full) before any byte is sent,
  // so a refused request still gets a proper status.
  if (!lease) lease.emplace(slots_.acquire(-1, client_gone(req)));
  // --n-predict: the reply length of a request that sets none.
  if (gen.max_tokens <= 0 && cfg_.n_predict >= 0) turn.max_tokens = std::min(turn.max_tokens, std::max(1, cfg_.n_predict));
  meta.logprobs = gen.logprobs >= 0;
  if (gen.stream) {
    meta.include_usage = gen.include_usage;
    stream(res, std::move(*lease), std::move(meta), std::move(turn), gen.stop, gen.logprobs);
    return;
  }
  // A client that leaves stops the computation at the next prompt micro-batch or piece of text.
  turn.cancelled = client_gone(req);
  const ChoiceSink connected = [this, &req](int32_t, const std::string&, std::span<const TokenInfo>) {
    return http_->client_connected(req);
  };
  // Markers of calls and thinking blocks may be special tokens: the parser needs their text.
  const std::vector<Completion> cs =
      run_completions(lease->engine(), tok_, turn, gen.stop, gen.logprobs, connected, meta.reply.active());
  lease.reset();  // the slot is free before the (possibly slow) network write
  metrics_.record_turn(cs[0].turn, cs[0].client_gone);
  res.set_content(dump_json(completion_json(meta, cs)), "application/json");
}

namespace {

// Everything a streaming response needs after its handler has returned. Shared by every
// copy httplib makes of the provider, so releasing the lease here frees the slot at once.
struct StreamJob {
  ResponseMeta meta;
  TurnRequest turn;
  std::vector<std::string> stop;
  std::optional<SlotPool::Lease> lease;
  int32_t top_logprobs = -1;  // < 0: no logprobs
};

}  // namespace

void Server::stream(httplib::Response& res, SlotPool::Lease&& lease, ResponseMeta meta,
                    TurnRequest turn, std::vector<std::string> stop, int32_t top_logprobs) {
  auto job = std::make_shared<StreamJob>(
      StreamJob{std::move(meta), std::move(turn), std::move(stop), std::nullopt, top_logprobs});
  job->lease.emplace(std::move(lease));
  res.set_header("Cache-Control", "no-cache");
  // Runs on this connection's thread after the handler returns.
  res.set_chunked_content_provider("text/event-stream", [this, job](size_t, httplib::DataSink& sink) {
    const ResponseMeta& m = job->meta;
    // A failed write means the client went away: stop generating at once.
    auto send = [&sink](const std::string& payload) {
      const std::string event = "data: " + payload + "\n\n";
      return sink.is_writable() && sink.write(event.data(), event.size());
    };
    // n > 1: every choice opens with its role chunk, then the choices' text chunks
    // interleave (one token of each in turn), each carrying its index.
    const int32_t n = std::max(1, job->turn.n_samples);
    for (int32_t i = 0; i < n && m.kind == ApiKind::chat; ++i) {
      if (!send(dump_json(role_chunk(m, i)))) {
        job->lease.reset();
        return false;
      }
    }
    std::vector<size_t> offsets(size_t(n), 0);  // text_offset of each choice's next token
    // Tools / reasoning: each choice's text becomes reasoning_content, content and
    // tool_calls deltas; logprobs ride on the next delta that goes out.
    const bool parsed = m.kind == ApiKind::chat && m.reply.active();
    std::vector<ReplyStreamer> replies(static_cast<size_t>(n), ReplyStreamer(m.reply));
    std::vector<std::vector<TokenInfo>> held(static_cast<size_t>(n));
    auto send_deltas = [&](int32_t i, const std::vector<Json>& deltas, std::span<const TokenInfo> tokens) {
      auto& h = held[size_t(i)];
      h.insert(h.end(), tokens.begin(), tokens.end());
      for (const Json& d : deltas) {
        if (!send(dump_json(delta_chunk(m, d, i, h)))) return false;
        h.clear();
      }
      return true;
    };
    std::vector<Completion> cs;
    job->turn.cancelled = [&sink] { return !sink.is_writable(); };
    try {
      cs = run_completions(job->lease->engine(), tok_, job->turn, job->stop, job->top_logprobs,
                           [&](int32_t i, const std::string& text, std::span<const TokenInfo> tokens) {
                             if (parsed) return send_deltas(i, replies[size_t(i)].push(text), tokens);
                             const size_t at = offsets[size_t(i)];
                             offsets[size_t(i)] += text.size();
                             return send(dump_json(text_chunk(m, text, i, tokens, at)));
                           }, parsed);
    } catch (const std::exception& e) {
      job->lease.reset();
      send(dump_json(ApiError(500, std::string("generation failed: ") + e.what(), "server_error").to_json()));
      return false;
    }
    job->lease.reset();
    const Completion& c = cs[0];
    metrics_.record_turn(c.turn, c.client_gone);
    if (c.client_gone) return false;  // nothing more can be delivered; httplib drops the connection
    for (const Completion& ci : cs) {
      ReplyStreamer& r = replies[size_t(ci.index)];
      if (parsed && !send_deltas(ci.index, r.finish(), {})) return false;
      if (!send(dump_json(finish_chunk(m, ci, parsed && r.called())))) return false;
    }
    if (m.include_usage && !send(dump_json(usage_chunk(m, c)))) return false;
    if (!send("[DONE]")) return false;
    sink.done();
    return true;
  });
}

}  // namespace ws::server
