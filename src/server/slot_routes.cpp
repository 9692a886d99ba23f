// llama-server's GET /slots and POST /slots/{id}?action=save|restore|erase.
//
// A warmstart slot holds no state between turns: states live in the shared prefix cache,
// and a slot remembers the tokens of its last turn (Engine::last_sequence). So `save` writes
// every cached checkpoint along those tokens to a file under --slot-save-path
// (memory/snapshot_file.h), `restore` puts them back into the prefix cache (the next
// request sharing a prefix with them, on any slot, continues from the deepest one before
// it diverges) and makes the sequence the slot's, and `erase` forgets the slot's sequence
// (cached checkpoints stay, shared with other conversations, until the budget evicts them).
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <filesystem>

#include "memory/snapshot_file.h"
#include "server/api_error.h"
#include "server/http_server.h"

namespace ws::server {
namespace {

using json = nlohmann::ordered_json;

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// A plain file name inside --slot-save-path: no directories, no hidden or special names.
std::string checked_filename(const json& body) {
  const auto it = body.find("filename");
  if (it == body.end() || !it->is_string())
    throw bad_request("'filename' must be a string naming a file in --slot-save-path", "filename",
                      it == body.end() ? "missing_required_parameter" : "invalid_type");
  const std::string name = it->get<std::string>();
  bool ok = !name.empty() && name.size() <= 255 && name[0] != '.';
  for (char c : name) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-');
  if (!ok)
    throw bad_request("invalid filename '" + name + "': use letters, digits, '.', '_' and '-' only, not starting "
                      "with '.'", "filename", "invalid_value");
  return name;
}

}  // namespace

void Server::handle_slots(const httplib::Request& req, httplib::Response& res) {
  json out = json::array();
  bool any_free = false;
  for (const auto& s : slots_.info()) {
    any_free = any_free || !s.busy;
    std::vector<Token> text_tokens;  // images' placeholder positions (negative ids) left out
    std::copy_if(s.tokens.begin(), s.tokens.end(), std::back_inserter(text_tokens), [](Token t) { return t >= 0; });
    out.push_back({{"id", s.id},
                   {"id_task", -1},
                   {"n_ctx", cfg_.n_ctx},
                   {"speculative", false},
                   {"is_processing", s.busy},
                   {"n_tokens", s.tokens.size()},
                   {"prompt", tok_.decode(text_tokens, true)}});
  }
  // ?fail_on_no_slot=1: a load balancer's probe, 503 when every slot is busy.
  if (req.has_param("fail_on_no_slot") && req.get_param_value("fail_on_no_slot") != "0" && !any_free)
    throw ApiError(503, "no slot available", "unavailable_error", "", "server_busy");
  res.set_content(dump_json(out), "application/json");
}

void Server::handle_slot_action(const httplib::Request& req, httplib::Response& res) {
  const int id = std::stoi(req.matches[1].str().substr(0, 9));  // the route's (\d+)
  const std::string action = req.has_param("action") ? req.get_param_value("action") : "";
  if (action != "save" && action != "restore" && action != "erase")
    throw bad_request("invalid action '" + action + "': use ?action=save, restore or erase", "action",
                      "invalid_value");
  const json body = req.body.empty() ? json::object() : parse_body(req.body);
  SlotPool::Lease lease = slots_.acquire(id);
  Engine& engine = lease.engine();
  if (action == "erase") {
    const size_t n = engine.last_sequence().size();
    engine.set_last_sequence({});
    res.set_content(dump_json({{"id_slot", id}, {"n_erased", n}}), "application/json");
    return;
  }
  if (cfg_.slot_save_path.empty())
    throw ApiError(501, "this server does not save slots: start it with --slot-save-path DIR", "not_supported_error");
  const std::string filename = checked_filename(body);
  const std::string path = (std::filesystem::path(cfg_.slot_save_path) / filename).string();
  const uint64_t model_id = engine.model().config().model_id;
  const auto t0 = std::chrono::steady_clock::now();
  if (action == "save") {
    const std::vector<Token>& tokens = engine.last_sequence();
    const auto snapshots = cache_.checkpoints_along(model_id, tokens);
    if (snapshots.empty())
      throw bad_request("slot " + std::to_string(id) + " holds no cached state to save (it has not run a turn since "
                        "the start, an erase or an eviction, or the prefix cache is off)", "id_slot", "invalid_value");
    size_t written = 0;
    try {
      written = write_snapshot_file(path, tokens, snapshots);
    } catch (const std::runtime_error& e) {
      throw ApiError(500, e.what(), "server_error");
    }
    res.set_content(dump_json({{"id_slot", id}, {"filename", filename}, {"n_saved", snapshots.back()->position},
                               {"n_written", written}, {"timings", {{"save_ms", ms_since(t0)}}}}),
                    "application/json");
    return;
  }
  if (!cache_.enabled())
    throw ApiError(501, "slot restore needs the prefix cache: start the server with --cache-budget-mb > 0",
                   "not_supported_error");
  if (!std::filesystem::is_regular_file(path))
    throw ApiError(404, "no saved slot '" + filename + "' in --slot-save-path", "not_found_error", "filename");
  SavedSequence saved;
  try {
    saved = read_snapshot_file(path, model_id, cache_.stats().budget_bytes);
    // The layers must fit this model and context: refused here, with the reason, rather
    // than by the next turn's restore.
    for (const Snapshot& s : saved.snapshots) engine.model().make_state(engine.options().memory).restore(s);
  } catch (const std::runtime_error& e) {
    throw bad_request(e.what(), "filename", "invalid_value");
  }
  const size_t n_read = std::filesystem::file_size(path);
  const int32_t n = saved.snapshots.back().position;
  for (Snapshot& s : saved.snapshots) {
    const auto prefix = std::span<const Token>(saved.tokens).first(size_t(s.position));
    cache_.put(model_id, prefix, std::move(s), Boundary::frontier);
  }
  engine.set_last_sequence(std::move(saved.tokens));
  res.set_content(dump_json({{"id_slot", id}, {"filename", filename}, {"n_restored", n}, {"n_read", n_read},
                             {"timings", {{"restore_ms", ms_since(t0)}}}}),
                  "application/json");
}

}  // namespace ws::server
