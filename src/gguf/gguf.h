// GGUF reader: mmap'd file (or an owned byte buffer), metadata, tensor index, validation.
// Every structural problem becomes a GgufError naming the file and the offset; nothing
// in here aborts on input.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "tensor/dtype.h"

namespace ws {
class PackedArena;  // tensor/kernels.h
}

namespace ws::gguf {

class GgufError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class ValueType : uint32_t {
  u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7,
  string = 8, array = 9, u64 = 10, i64 = 11, f64 = 12,
};
const char* value_type_name(ValueType t);

struct Value;
struct Array {
  ValueType elem_type = ValueType::u8;
  std::vector<Value> items;
};

// One metadata value. Integers of every width are held widened; `type` keeps the file's.
struct Value {
  ValueType type = ValueType::u8;
  std::variant<uint64_t, int64_t, double, bool, std::string, std::shared_ptr<Array>> v;

  bool is_integer() const;
  bool is_float() const { return type == ValueType::f32 || type == ValueType::f64; }
  int64_t as_int() const;         // throws GgufError unless integer/bool
  uint64_t as_uint() const;       // throws unless a non-negative integer
  double as_float() const;        // integers and floats
  bool as_bool() const;           // bool or integer
  const std::string& as_string() const;
  const Array& as_array() const;
};

struct TensorInfo {
  std::string name;
  std::vector<int64_t> ne;      // ggml order: ne[0] is the contiguous dimension
  DType type = DType::f32;
  uint64_t offset = 0;          // relative to the data section
  uint64_t nbytes = 0;
  const uint8_t* data = nullptr;  // points into the mapping (nbytes bytes)

  int64_t n_elements() const;
  int64_t rows() const { return ne.empty() ? 1 : n_elements() / ne[0]; }
};

class File {
 public:
  // Maps `path` read-only and parses it. Throws GgufError("<path>: <problem>").
  static File open(const std::string& path);
  // Parses an in-memory copy (fuzzing, tests). `label` names it in errors.
  static File from_bytes(std::vector<uint8_t> bytes, const std::string& label = "<memory>");

  File(File&&) noexcept;
  File& operator=(File&&) noexcept;
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  ~File();

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  size_t file_size() const { return size_; }
  uint64_t data_offset() const { return data_offset_; }
  std::span<const uint8_t> bytes() const { return {base_, size_}; }

  const std::vector<std::pair<std::string, Value>>& metadata() const { return kv_; }
  const Value* find(const std::string& key) const;
  // Typed accessors: the `require_*` forms throw "missing required key K" when absent.
  const Value& require(const std::string& key) const;
  std::string get_string(const std::string& key, const std::string& def = "") const;
  int64_t get_int(const std::string& key, int64_t def) const;
  double get_float(const std::string& key, double def) const;
  bool get_bool(const std::string& key, bool def) const;
  std::vector<std::string> get_strings(const std::string& key) const;  // empty if absent
  std::vector<int64_t> get_ints(const std::string& key) const;        // empty if absent
  std::vector<double> get_floats(const std::string& key) const;       // empty if absent

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(const std::string& name) const;
  const TensorInfo& require_tensor(const std::string& name) const;

  [[noreturn]] void fail(const std::string& what) const;

  // Tells the kernel that [p, p + n) of the mapping will not be read soon (the model keeps
  // a repacked copy), so those pages leave this process's resident set; a later read
  // faults them back in from the page cache. No-op for in-memory files.
  void release_pages(const uint8_t* p, size_t n) const;
  // Where the repacked copies of this file's matrices go (ops::matrix), so that they share
  // huge pages; the copies keep their memory alive past the File.
  PackedArena& packed_arena() const { return *packed_arena_; }

 private:
  File();
  void parse();
  void release();

  std::string path_;
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;
  std::vector<uint8_t> owned_;  // from_bytes
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, Value>> kv_;
  std::map<std::string, size_t> kv_index_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
  std::unique_ptr<PackedArena> packed_arena_;  // never null but in a moved-from File
};

}  // namespace ws::gguf
