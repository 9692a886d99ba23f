#include "cache/prefix_cache.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>

#include "cache/tiers.h"

namespace ws {

const char* boundary_name(Boundary b) {
  switch (b) {
    case Boundary::message: return "message";
    case Boundary::media: return "media";
    case Boundary::periodic: return "periodic";
    case Boundary::frontier: return "frontier";
    case Boundary::reply: return "reply";
  }
  return "?";
}

int32_t CheckpointPolicy::min_gap(const ReuseTraits& traits) const {
  const size_t copy_gap = copy_bytes_per_token == 0 ? 0 : traits.fixed_snapshot_bytes / copy_bytes_per_token;
  return int32_t(std::min<size_t>(std::max(copy_gap, size_t(std::max(0, min_cut_gap))), size_t(INT32_MAX)));
}

std::vector<std::pair<int32_t, Boundary>> CheckpointPolicy::plan(int32_t from, int32_t to,
                                                                 std::span<const int32_t> message_ends,
                                                                 std::span<const int32_t> media_ends,
                                                                 int32_t min_gap, int32_t keep) const {
  std::vector<std::pair<int32_t, Boundary>> out;
  auto add = [&](int32_t p, Boundary b) {
    if (p > from && p <= to) out.emplace_back(p, b);
  };
  for (int32_t p : media_ends) add(p, Boundary::media);
  for (int32_t p : message_ends) add(p, Boundary::message);
  add(to, Boundary::frontier);
  if (every_n > 0) {
    // Periodic checkpoints bound the recompute where boundaries are sparse (a long
    // message, a raw completion): one closer than every_n / 2 to a boundary or to the
    // restored point adds a copy and a batch cut for little.
    std::vector<int32_t> anchors = {from};  // sorted
    for (const auto& [p, kind] : out) anchors.push_back(p);
    std::sort(anchors.begin(), anchors.end());
    for (int32_t p = (from / every_n + 1) * every_n; p <= to; p += every_n) {
      const auto next = std::lower_bound(anchors.begin(), anchors.end(), p);
      const int64_t gap = std::min<int64_t>(next == anchors.end() ? INT64_MAX : *next - p, p - *std::prev(next));
      if (2 * gap >= every_n) add(p, Boundary::periodic);
    }
  }
  // One checkpoint per position; the first kind listed wins (media > message > frontier).
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  out.erase(std::unique(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first == b.first; }),
            out.end());
  if (min_gap <= 0) return out;
  std::vector<std::pair<int32_t, Boundary>> spaced;  // built from the frontier backwards
  int64_t next = INT64_MAX;
  for (auto it = out.rbegin(); it != out.rend(); ++it) {
    const bool near_from = it->first - from < min_gap && it->first != to;
    const bool kept = it->second == Boundary::media || (it->first == keep && it->first != to);
    if ((next - it->first >= min_gap && !near_from) || kept) {
      spaced.push_back(*it);
      next = it->first;
    }
  }
  std::reverse(spaced.begin(), spaced.end());
  return spaced;
}

PrefixCache::Node& PrefixCache::root_for(uint64_t model_id) {
  auto& r = roots_[model_id];
  if (!r) {
    r = std::make_unique<Node>();
    r->id = next_id_++;
  }
  return *r;
}

PrefixCache::Walk PrefixCache::walk(Node& root, std::span<const Token> prompt) const {
  Walk w{&root, 0};
  Node* node = &root;
  size_t i = 0;
  while (i < prompt.size()) {
    auto it = node->children.find(prompt[i]);
    if (it == node->children.end()) break;
    Node* child = it->second.get();
    size_t k = 0;
    while (k < child->edge.size() && i + k < prompt.size() && child->edge[k] == prompt[i + k]) ++k;
    w.deepest = child;
    w.matched = int32_t(i + k);
    if (k < child->edge.size()) return w;  // diverged (or the prompt ended) inside this edge
    node = child;
    i += k;
  }
  if (w.matched < int32_t(i)) w.matched = int32_t(i);
  if (node != w.deepest && w.matched == node->depth) w.deepest = node;
  return w;
}

Hit PrefixCache::acquire(uint64_t model_id, std::span<const Token> prompt, const ReuseTraits& traits) {
  Hit hit = acquire_in_ram(model_id, prompt, traits);
  // Nothing deeper than RAM's can be used unless a tier holds the whole prompt with its
  // logits, which only a regeneration on another replica needs: not worth a round trip.
  if (!tiers_ || !enabled() || hit.reuse >= int32_t(prompt.size()) - 1) return hit;
  // Asked without the lock: a tier may be a network away.
  if (auto found = tiers_->find(model_id, prompt, hit.reuse)) adopt(model_id, prompt, std::move(*found), hit);
  return hit;
}

void PrefixCache::adopt(uint64_t model_id, std::span<const Token> prompt, TierHit found, Hit& hit) {
  std::lock_guard lock(mu_);
  if (Node* old = hit.node_id ? find_node(hit.node_id) : nullptr; old && old->pins > 0) --old->pins;
  if (hit.node_id) --stats_.hits;  // counted again by pin()
  else --stats_.misses;
  Node* n = insert(root_for(model_id), prompt.first(size_t(found.depth)));
  if (!n->checkpoint) {  // (another turn may have stored it meanwhile)
    n->checkpoint = std::move(found.snapshot);
    n->kind = Boundary::message;
    n->evicted = false;
    account(*n->checkpoint, +1);
    ++stats_.n_checkpoints;
  }
  const int32_t common = std::max(hit.common_prefix, found.depth);
  hit = Hit{};
  hit.common_prefix = common;
  pin(*n, hit, found.depth);
  hit.tier = found.tier;
  hit.tier_bytes = found.bytes;
  hit.tier_ms = found.ms;
  evict_to_budget();  // (the pinned checkpoint stays)
}

Hit PrefixCache::acquire_in_ram(uint64_t model_id, std::span<const Token> prompt, const ReuseTraits& traits) {
  std::lock_guard lock(mu_);
  ++stats_.lookups;
  Hit hit;
  auto miss = [&](std::string why) {
    ++stats_.misses;
    hit.miss_reason = std::move(why);
    return hit;
  };
  if (!enabled()) return miss("cache disabled");
  auto rit = roots_.find(model_id);
  if (rit == roots_.end()) return miss(roots_.empty() ? "cache empty" : "different model");
  const Walk w = walk(*rit->second, prompt);
  hit.common_prefix = w.matched;
  const int32_t n = int32_t(prompt.size());
  if (w.matched == n && w.deepest->depth == n && w.deepest->checkpoint && !w.deepest->checkpoint->logits.empty()) {
    // The same prompt again (a regeneration): its frontier holds the state and the logits.
    pin(*w.deepest, hit, n);
    return hit;
  }
  const int32_t limit = std::min<int32_t>(w.matched, n - 1);
  if (limit <= 0) return miss("no cached prefix");

  // A: the deepest checkpoint on the matched path at or before the limit.
  Node* a = w.deepest;
  while (a && (a->depth > limit || !a->checkpoint)) a = a->parent;
  // B: any checkpoint at or past the divergence, restored then cut back (full KV only).
  Node* b = nullptr;
  if (traits.can_truncate && (!a || a->depth < limit)) {
    std::function<void(Node*)> find = [&](Node* n) {
      if (n->checkpoint && n->depth >= limit && (!b || n->depth < b->depth)) b = n;
      for (auto& [t, c] : n->children) find(c.get());
    };
    find(w.deepest);
  }
  Node* chosen = b ? b : a;
  if (!chosen) return miss("no checkpoint at or before the divergence at " + std::to_string(w.matched));
  pin(*chosen, hit, b ? limit : a->depth);
  if (hit.reuse < limit) {
    bool evicted = false;
    for (Node* n = w.deepest; n && n != a; n = n->parent) evicted = evicted || n->evicted;
    hit.miss_reason = evicted ? "a checkpoint after " + std::to_string(hit.reuse) + " was evicted"
                              : "diverged at " + std::to_string(w.matched) + "; nearest checkpoint at " +
                                    std::to_string(hit.reuse) + (traits.can_truncate ? "" : " (state cannot be cut back)");
  }
  return hit;
}

std::vector<std::shared_ptr<const Snapshot>> PrefixCache::checkpoints_along(uint64_t model_id,
                                                                          std::span<const Token> tokens) {
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<const Snapshot>> out;
  auto rit = roots_.find(model_id);
  if (rit == roots_.end()) return out;
  const Walk w = walk(*rit->second, tokens);
  for (Node* n = w.deepest; n; n = n->parent)
    if (n->checkpoint && n->depth <= w.matched) out.push_back(n->checkpoint);
  std::reverse(out.begin(), out.end());
  return out;
}

void PrefixCache::pin(Node& node, Hit& hit, int32_t reuse) {
  hit.reuse = reuse;
  hit.snapshot = node.checkpoint;
  hit.node_id = node.id;
  ++node.pins;
  node.last_used = ++clock_;
  ++stats_.hits;
}

PrefixCache::Node* PrefixCache::find_node(uint64_t id) {
  Node* found = nullptr;
  std::function<void(Node*)> dfs = [&](Node* n) {
    if (n->id == id) found = n;
    for (auto& [t, c] : n->children)
      if (!found) dfs(c.get());
  };
  for (auto& [m, r] : roots_)
    if (!found) dfs(r.get());
  return found;
}

void PrefixCache::release(const Hit& hit) {
  if (!hit.node_id) return;
  std::lock_guard lock(mu_);
  if (Node* n = find_node(hit.node_id); n && n->pins > 0) --n->pins;
  evict_to_budget();
}

void PrefixCache::reject(const Hit& hit) {
  if (!hit.node_id) return;
  std::lock_guard lock(mu_);
  ++stats_.corrupt_rejected;
  if (Node* n = find_node(hit.node_id)) {
    if (n->pins > 0) --n->pins;
    if (n->checkpoint) {
      account(*n->checkpoint, -1);
      n->checkpoint.reset();
      --stats_.n_checkpoints;
    }
  }
}

PrefixCache::Node* PrefixCache::insert(Node& root, std::span<const Token> prefix) {
  Node* node = &root;
  size_t i = 0;
  while (i < prefix.size()) {
    auto it = node->children.find(prefix[i]);
    if (it == node->children.end()) {
      auto leaf = std::make_unique<Node>();
      leaf->id = next_id_++;
      leaf->edge.assign(prefix.begin() + long(i), prefix.end());
      leaf->depth = int32_t(prefix.size());
      leaf->parent = node;
      stats_.bytes_in_use += leaf->edge.size() * sizeof(Token);
      Node* raw = leaf.get();
      node->children[prefix[i]] = std::move(leaf);
      return raw;
    }
    Node* child = it->second.get();
    size_t k = 0;
    while (k < child->edge.size() && i + k < prefix.size() && child->edge[k] == prefix[i + k]) ++k;
    if (k < child->edge.size()) {  // split the edge at k: node -> mid -> child
      auto mid = std::make_unique<Node>();
      mid->id = next_id_++;
      mid->edge.assign(child->edge.begin(), child->edge.begin() + long(k));
      mid->depth = node->depth + int32_t(k);
      mid->parent = node;
      std::unique_ptr<Node> old = std::move(it->second);
      old->edge.erase(old->edge.begin(), old->edge.begin() + long(k));
      old->parent = mid.get();
      mid->children[old->edge[0]] = std::move(old);
      Node* raw = mid.get();
      it->second = std::move(mid);
      child = raw;
    }
    node = child;
    i += k;
  }
  return node;
}

void PrefixCache::account(const Snapshot& s, int sign) {
  const auto add = [&](size_t b) {
    if (sign > 0) stats_.bytes_in_use += b;
    else stats_.bytes_in_use -= std::min(b, stats_.bytes_in_use);
  };
  add(s.copied_bytes());
  for (const auto& l : s.layers)
    for (const auto& p : l.pages) {
      int& refs = page_refs_[p.get()];
      if ((sign > 0 && refs == 0) || (sign < 0 && refs == 1)) add(p->k.size() + p->v.size());
      refs += sign;
      if (refs <= 0) page_refs_.erase(p.get());
    }
}

size_t PrefixCache::unique_bytes(const Snapshot& s) const {
  size_t b = s.copied_bytes();
  for (const auto& l : s.layers)
    for (const auto& p : l.pages) {
      auto it = page_refs_.find(p.get());
      if (it != page_refs_.end() && it->second == 1) b += p->k.size() + p->v.size();
    }
  return b;
}

void PrefixCache::put(uint64_t model_id, std::span<const Token> prefix, Snapshot snapshot, Boundary kind) {
  if (prefix.empty()) return;
  std::lock_guard lock(mu_);
  if (!enabled()) return;
  Node* n = insert(root_for(model_id), prefix);
  n->last_used = ++clock_;
  // The same tokens give the same state: keep the one we have, unless only the new one
  // carries the logits after them.
  if (n->checkpoint && (snapshot.logits.empty() || !n->checkpoint->logits.empty())) return;
  if (n->checkpoint) {
    account(*n->checkpoint, -1);
    --stats_.n_checkpoints;
  }
  n->checkpoint = std::make_shared<Snapshot>(std::move(snapshot));
  n->kind = kind;
  n->evicted = false;
  account(*n->checkpoint, +1);
  if (tiers_) tiers_->offer(model_id, prefix, n->checkpoint);
  ++stats_.checkpoints_stored;
  ++stats_.n_checkpoints;
  evict_to_budget();
}

void PrefixCache::evict_to_budget() {
  while (stats_.bytes_in_use > stats_.budget_bytes) {
    // Victim: least compute saved per byte (log2 buckets), least recently used within a
    // bucket. Pinned checkpoints (a running request restores them) are never evicted.
    Node* victim = nullptr;
    int victim_bucket = 0;
    std::function<void(Node*)> scan = [&](Node* n) {
      if (n->checkpoint && n->pins == 0) {
        const double per_byte = double(n->depth) / double(std::max<size_t>(1, unique_bytes(*n->checkpoint)));
        const int bucket = int(std::floor(std::log2(per_byte)));
        if (!victim || bucket < victim_bucket || (bucket == victim_bucket && n->last_used < victim->last_used)) {
          victim = n;
          victim_bucket = bucket;
        }
      }
      for (auto& [t, c] : n->children) scan(c.get());
    };
    for (auto& [m, r] : roots_) scan(r.get());
    if (!victim) return;
    account(*victim->checkpoint, -1);
    victim->checkpoint.reset();
    victim->evicted = true;
    ++stats_.evictions;
    --stats_.n_checkpoints;
    // Prune token-only leaves so the tree does not grow without bound.
    Node* n = victim;
    while (n->parent && n->children.empty() && !n->checkpoint && n->pins == 0) {
      Node* parent = n->parent;
      parent->evicted = true;
      stats_.bytes_in_use -= std::min(stats_.bytes_in_use, n->edge.size() * sizeof(Token));
      parent->children.erase(n->edge[0]);
      n = parent;
    }
  }
}

void PrefixCache::record_turn(int32_t reused, int32_t computed, double restore_ms, double checkpoint_ms) {
  std::lock_guard lock(mu_);
  stats_.reused_tokens += uint64_t(std::max(0, reused));
  stats_.computed_tokens += uint64_t(std::max(0, computed));
  stats_.restore_ms_total += restore_ms;
  stats_.checkpoint_ms_total += checkpoint_ms;
}

CacheStats PrefixCache::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

std::shared_ptr<Snapshot> PrefixCache::find_for_test(uint64_t model_id, std::span<const Token> prefix) {
  std::lock_guard lock(mu_);
  auto rit = roots_.find(model_id);
  if (rit == roots_.end()) return nullptr;
  const Walk w = walk(*rit->second, prefix);
  return w.deepest && w.deepest->depth == int32_t(prefix.size()) ? w.deepest->checkpoint : nullptr;
}

}  // namespace ws
