// The model API: weights are immutable after load, state is passed in.
// One file per architecture family implements it; load_model() picks by
// general.architecture.
#pragma once
#include <cstdint>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "memory/state.h"
#include "tensor/threadpool.h"

namespace ws {

using Token = int32_t;

enum class RopeType { none, norm, neox };

struct ModelConfig {
  std::string arch;
  uint64_t model_id = 0;     // identity of the weights (snapshots of another model are refused)
  int32_t n_vocab = 0;
  int32_t n_embd = 0;
  int32_t n_layer = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;     // the largest of n_head_kv_per_layer
  int32_t head_dim = 0;      // key/value length per head
  int32_t n_ff = 0;          // the largest of n_ff_per_layer
  // Hybrids give head_count_kv / feed_forward_length per layer; a scalar key fills every
  // layer. 0 = the layer has no attention / no FFN.
  std::vector<int32_t> n_head_kv_per_layer;  // [n_layer]
  std::vector<int32_t> n_ff_per_layer;       // [n_layer]
  int32_t n_ctx_train = 0;
  float rms_eps = 1e-5f;
  float rope_base = 10000.f;
  int32_t n_rot = 0;         // rotated dimensions per head
  RopeType rope_type = RopeType::norm;
  // M-RoPE (Qwen-VL): positions have (t, h, w, e) components; image rows take a grid of them
  // (Batch::positions). Text alone is unaffected: all components equal the position there.
  bool mrope = false;
};

// Which rows of the batch need logits. `hidden`: instead of logits, every row's final
// hidden state after the output norm, before the LM head ([n][n_embd]; /v1/embeddings).
enum class LogitsMode { all, last, none, hidden };

// One micro-batch of input: token ids, or rows of input embeddings (an image's) that
// replace the token lookup. Positions are state.position() .. +size()-1 either way (the
// rotary angles of an M-RoPE model may differ: `positions`).
struct Batch {
  std::span<const Token> tokens;      // [n] ids; ignored when `embeddings` is set
  const float* embeddings = nullptr;  // [n_rows][n_embd] f32, fed as they are (no arch scales them)
  int64_t n_rows = 0;                 // rows of `embeddings`
  // Attention layers let every query see all keys of this batch (on top of the earlier
  // positions its window allows): Gemma 3 image chunks. Needs the whole chunk in one batch.
  bool non_causal = false;
  // M-RoPE models (ModelConfig::mrope): the rope position components (t, h, w, e) of each row,
  // [n][4] int32; null: every component of row i is state.position() + i. Rows stay in
  // state order for the causal mask and the cache either way; only rotations use these.
  const int32_t* positions = nullptr;
  int64_t size() const { return embeddings ? n_rows : int64_t(tokens.size()); }
};

// One sequence's part of a pass over several (continuous batching): its micro-batch, its
// state and the logits it wants ([n][n_vocab] all, [n_vocab] last, [n][n_embd] hidden).
struct SeqStep {
  Batch batch;
  SeqState* state = nullptr;
  LogitsMode mode = LogitsMode::last;
  float* logits = nullptr;
  // Set by forward_many when this sequence's input was refused (full context, a bad token
  // id, a non-causal batch the model cannot do): its state is unchanged, the others ran.
  std::exception_ptr error;
};

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelConfig& config() const = 0;
  virtual SeqState make_state(const MemoryOptions& opts) const = 0;
  // Evaluates each step's micro-batch at positions state.position() .. +n-1 of its own
  // state, appends it there and writes its logits. All rows go through the weights
  // together; each row's result is bit-identical to the same step evaluated alone (every
  // kernel is batch-invariant). The states must be distinct.
  virtual void forward_many(std::span<SeqStep> steps, ThreadPool& pool) const = 0;
  // One sequence: throws on a full context (or a non-causal batch the architecture cannot
  // do), leaving `state` unchanged.
  void forward(const Batch& batch, SeqState& state, LogitsMode mode, float* logits, ThreadPool& pool) const {
    SeqStep step{batch, &state, mode, logits, nullptr};
    forward_many(std::span(&step, 1), pool);
    if (step.error) std::rethrow_exception(step.error);
  }
  void forward(std::span<const Token> tokens, SeqState& state, LogitsMode mode, float* logits,
               ThreadPool& pool) const {
    forward(Batch{tokens}, state, mode, logits, pool);
  }
};

// Loads the architecture named by the file's general.architecture. The File must
// outlive the model (weights point into its mapping). Throws with a clear message for
// an unsupported architecture or missing/misshapen tensors.
std::unique_ptr<Model> load_model(const gguf::File& file);

// A 64-bit identity of a model file: its metadata, tensor index and a sample of every
// tensor's data. Cheap (does not read the whole file).
uint64_t model_identity(const gguf::File& file);

}  // namespace ws
