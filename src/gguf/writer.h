// GGUF v3 writer. Lays a file out the way ggml's gguf writer does (header, metadata in
// insertion order, tensor infos, zero padding to the alignment, then each tensor's data
// padded to the alignment), so a file written from the same metadata and tensors is
// byte-identical to one written by llama.cpp's tools.
#pragma once
#include <cstdint>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "gguf/gguf.h"

namespace ws::gguf {

struct TensorSpec {
  std::string name;
  std::vector<int64_t> ne;  // ggml order; trailing 1s are dropped when written (as ggml does)
  DType type = DType::f32;
  uint64_t nbytes = 0;      // computed by add_tensor from ne and type
  uint64_t offset = 0;      // relative to the data section; computed by add_tensor
};

class Writer {
 public:
  // Copies every key/value of `src` in file order, keeping each value's stored type.
  void copy_metadata(const File& src);
  // Sets `key`. Like gguf_set_val_*: an existing entry is removed and the key is appended
  // at the end (llama-quantize's output relies on that order).
  void set(const std::string& key, Value v);
  void set_u32(const std::string& key, uint32_t v);
  void set_string(const std::string& key, const std::string& v);
  void remove(const std::string& key);
  const std::vector<std::pair<std::string, Value>>& metadata() const { return kv_; }

  // general.alignment if set (must be a power of two), else 32.
  uint64_t alignment() const;

  // Appends a tensor info; data offsets follow in add order. Throws GgufError if a row
  // length is not a multiple of the type's block size or the name is a duplicate.
  const TensorSpec& add_tensor(const std::string& name, const std::vector<int64_t>& ne, DType type);
  const std::vector<TensorSpec>& tensors() const { return tensors_; }

  // Header + metadata + tensor infos + padding: everything before the data section.
  std::vector<uint8_t> header_bytes() const;

  // Streaming output: open() writes the header; write_tensor() must then be called once per
  // tensor, in add order, with exactly its nbytes; finish() checks and closes the file.
  // Errors (I/O, wrong sizes) throw GgufError naming the path.
  void open(const std::string& path);
  void write_tensor(std::span<const uint8_t> data);
  void finish();

 private:
  std::vector<std::pair<std::string, Value>> kv_;
  std::vector<TensorSpec> tensors_;
  std::ofstream out_;
  std::string path_;
  size_t next_tensor_ = 0;
  bool open_ = false;
};

}  // namespace ws::gguf
