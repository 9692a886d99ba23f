// llama-server's native POST /completion and POST /infill: its request fields and response
// shapes, on the same engine turn as /v1/completions (so the prefix cache serves both).
// Streaming answers are `data: {...}` events, one per piece of text, then the final result
// with stop: true; there is no `data: [DONE]` (llama-server sends it on its OpenAI routes only).
#include <httplib.h>

#include <optional>

#include "server/api_error.h"
#include "server/http_guard.h"
#include "server/http_server.h"
#include "server/native_response.h"

namespace ws::server {

namespace {

// llama-server's default --batch-size: format_infill sizes the prefix and suffix by it.
constexpr int32_t kInfillBatch = 2048;

// What a native request needs from the server, after its handler has returned too.
struct NativeDeps {
  const Tokenizer& tok;
  SlotPool& slots;
  Metrics& metrics;
  GrammarVocabCache& grammar_vocab;
  const GuardedHttpServer& http;
  int32_t n_ctx;
  std::string model;
};

// The prompts of one request with their turns, for the handler or the stream after it.
struct NativeJob {
  NativeRequest nr;
  std::vector<TurnRequest> turns;
  std::vector<std::string> prompt_texts;  // each prompt as text (special tokens shown)
  NativeMeta meta;
  std::optional<SlotPool::Lease> lease;
};

// Every string of a prompt, checked against the context before it is tokenized.
void check_prompt_strings(const PromptLengthGuard& guard, const Json& v, int32_t n_ctx) {
  if (v.is_string()) guard.check(v.get_ref<const std::string&>(), n_ctx, "prompt");
  else if (v.is_array())
    for (const Json& e : v) check_prompt_strings(guard, e, n_ctx);
}

std::shared_ptr<NativeJob> make_job(const NativeDeps& d, NativeRequest nr) {
  auto job = std::make_shared<NativeJob>();
  for (size_t i = 0; i < nr.prompts.size(); ++i) {
    const std::string param = nr.multiple ? "prompt[" + std::to_string(i) + "]" : "prompt";
    TurnRequest turn = make_native_turn(d.tok, std::move(nr.prompts[i]), nr, d.n_ctx, param);
    // grammar / json_schema: the sampler keeps the text inside the grammar.
    if (nr.gen.grammar)
      turn.sampling.constraint = std::make_shared<grammar::GrammarConstraint>(nr.gen.grammar, d.grammar_vocab.get());
    job->prompt_texts.push_back(d.tok.decode(turn.prompt, true));
    job->turns.push_back(std::move(turn));
  }
  nr.prompts.clear();
  if (nr.id_slot >= d.slots.size())
    throw bad_request("'id_slot' is " + std::to_string(nr.id_slot) + ", but the server has " +
                          std::to_string(d.slots.size()) + " slots (--parallel)",
                      "id_slot", "invalid_value");
  job->meta.model = d.model;
  job->meta.return_tokens = nr.return_tokens;
  job->meta.stream = nr.gen.stream;
  job->meta.n_predict = nr.gen.max_tokens;
  job->meta.n_probs = nr.n_probs;
  job->meta.generation_settings = generation_settings_json(nr, job->turns.at(0));
  job->nr = std::move(nr);
  return job;
}

// One prompt's completion on the job's slot, with every token reported (llama-server
// counts and streams them all) and n_probs alternatives when asked.
Completion run_native(const Tokenizer& tok, NativeJob& job, const TurnRequest& turn, const ChoiceSink& on_text) {
  const int32_t top = job.nr.n_probs > 0 ? job.nr.n_probs : -1;
  return std::move(run_completions(job.lease->engine(), tok, turn, job.nr.gen.stop, top, on_text,
                                   /*special_text=*/false, /*every_token=*/true)[0]);
}

// Streams every prompt's pieces, then its final result, on the connection's thread.
void stream_job(const NativeDeps& d, httplib::Response& res, std::shared_ptr<NativeJob> job) {
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider("text/event-stream", [d, job](size_t, httplib::DataSink& sink) {
    // A failed write means the client went away: stop generating at once.
    auto send = [&sink](const Json& payload) {
      const std::string event = "data: " + dump_json(payload) + "\n\n";
      return sink.is_writable() && sink.write(event.data(), event.size());
    };
    for (TurnRequest& t : job->turns) t.cancelled = [&sink] { return !sink.is_writable(); };
    for (size_t i = 0; i < job->turns.size(); ++i) {
      const TurnRequest& turn = job->turns[i];
      const int32_t index = int32_t(i), evaluated = int32_t(turn.prompt.size());
      int32_t predicted = 0;
      Completion c;
      try {
        c = run_native(d.tok, *job, turn, [&](int32_t, const std::string& text, std::span<const TokenInfo> tokens) {
          predicted += int32_t(tokens.size());
          return send(native_chunk_json(job->meta, index, text, tokens, predicted, evaluated));
        });
      } catch (const std::exception& e) {
        job->lease.reset();
        send(ApiError(500, std::string("generation failed: ") + e.what(), "server_error").to_json());
        return false;
      }
      d.metrics.record_turn(c.turn, c.client_gone);
      const Json result = native_final_json(job->meta, c, index, job->prompt_texts[i]);
      if (c.client_gone || !send(select_response_fields(result, job->nr.response_fields))) {
        job->lease.reset();
        return false;  // nothing more can be delivered; httplib drops the connection
      }
    }
    job->lease.reset();
    sink.done();
    return true;
  });
}

void serve_native(const NativeDeps& d, const httplib::Request& req, httplib::Response& res, NativeRequest nr) {
  std::shared_ptr<NativeJob> job = make_job(d, std::move(nr));
  // Waits in line for a slot (503 at once when the line is full) before any byte is sent:
  // the one id_slot names, else whichever frees first. Every slot shares the prefix cache,
  // so the slot decides only whose sequence /slots reports and saves.
  // A client that leaves gives its place back (in line) or stops at the next prompt micro-batch.
  const std::function<bool()> gone = [&d, &req] { return !d.http.client_connected(req); };
  job->lease.emplace(d.slots.acquire(job->nr.id_slot, gone));
  job->meta.id_slot = job->lease->slot_id();
  if (job->nr.gen.stream) return stream_job(d, res, std::move(job));
  Json results = Json::array();
  for (size_t i = 0; i < job->turns.size(); ++i) {
    job->turns[i].cancelled = gone;
    const Completion c = run_native(d.tok, *job, job->turns[i],
                                    [&](int32_t, const std::string&, std::span<const TokenInfo>) {
                                      return d.http.client_connected(req);
                                    });
    d.metrics.record_turn(c.turn, c.client_gone);
    if (c.client_gone) break;
    results.push_back(
        select_response_fields(native_final_json(job->meta, c, int32_t(i), job->prompt_texts[i]), job->nr.response_fields));
  }
  job->lease.reset();  // the slot is free before the (possibly slow) network write
  const Json body = job->nr.multiple ? std::move(results) : results.empty() ? Json::object() : std::move(results[0]);
  res.set_content(dump_json(body), "application/json");
}

}  // namespace

void Server::handle_completion(const httplib::Request& req, httplib::Response& res) {
  const Json body = parse_body(req.body);
  const Json* prompt = fields::field(body, "prompt");
  if (!prompt) throw bad_request("'prompt' is required", "prompt", "missing_required_parameter");
  check_prompt_strings(prompt_guard_, *prompt, cfg_.n_ctx);  // far too long: refused before tokenizing
  NativeRequest nr = parse_native_options(body, cfg_.n_predict);
  nr.prompts = parse_prompts(tok_, *prompt, "prompt", &nr.multiple);
  serve_native({tok_, slots_, metrics_, grammar_vocab_, *http_, cfg_.n_ctx, cfg_.model_name}, req, res, std::move(nr));
}

void Server::handle_infill(const httplib::Request& req, httplib::Response& res) {
  // llama-server checks the model before the body, with this status and message.
  if (const std::string missing = infill_unsupported(tok_.fim()); !missing.empty())
    throw ApiError(501, missing, "not_supported_error");
  const Json body = parse_body(req.body);
  const InfillInput in = parse_infill_input(body);
  NativeRequest nr = parse_native_options(body, cfg_.n_predict);
  nr.prompts = {format_infill(tok_, tok_.fim(), in, kInfillBatch, cfg_.n_predict, cfg_.n_ctx)};
  serve_native({tok_, slots_, metrics_, grammar_vocab_, *http_, cfg_.n_ctx, cfg_.model_name}, req, res, std::move(nr));
}

}  // namespace ws::server
