#include "gguf/writer.h"

#include <algorithm>
#include <cstring>

namespace ws::gguf {
namespace {

constexpr uint32_t kVersion = 3;
constexpr uint64_t kDefaultAlignment = 32;

uint64_t pad_to(uint64_t n, uint64_t align) { return (n + align - 1) / align * align; }

// Little-endian append helpers (the host is little-endian x86-64, as GGUF is).
class Buf {
 public:
  explicit Buf(std::vector<uint8_t>& b) : b_(b) {}
  template <typename T>
  void put(T v) {
    const size_t at = b_.size();
    b_.resize(at + sizeof(T));
    std::memcpy(b_.data() + at, &v, sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    b_.insert(b_.end(), s.begin(), s.end());
  }

 private:
  std::vector<uint8_t>& b_;
};

void put_value(Buf& b, ValueType t, const Value& v);

void put_scalar(Buf& b, ValueType t, const Value& v) {
  switch (t) {
    case ValueType::u8: return b.put<uint8_t>(uint8_t(v.as_uint()));
    case ValueType::i8: return b.put<int8_t>(int8_t(v.as_int()));
    case ValueType::u16: return b.put<uint16_t>(uint16_t(v.as_uint()));
    case ValueType::i16: return b.put<int16_t>(int16_t(v.as_int()));
    case ValueType::u32: return b.put<uint32_t>(uint32_t(v.as_uint()));
    case ValueType::i32: return b.put<int32_t>(int32_t(v.as_int()));
    case ValueType::u64: return b.put<uint64_t>(v.as_uint());
    case ValueType::i64: return b.put<int64_t>(v.as_int());
    case ValueType::f32: return b.put<float>(float(v.as_float()));
    case ValueType::f64: return b.put<double>(v.as_float());
    case ValueType::boolean: return b.put<uint8_t>(v.as_bool() ? 1 : 0);
    case ValueType::string: return b.put_string(v.as_string());
    case ValueType::array: return put_value(b, t, v);
  }
  throw GgufError("cannot write metadata value of unknown type " + std::to_string(uint32_t(t)));
}

// Writes the payload of a value whose type tag has already been written.
void put_value(Buf& b, ValueType t, const Value& v) {
  if (t != ValueType::array) return put_scalar(b, t, v);
  const Array& a = v.as_array();
  b.put<uint32_t>(uint32_t(a.elem_type));
  b.put<uint64_t>(a.items.size());
  for (const Value& item : a.items) {
    if (a.elem_type == ValueType::array) {
      b.put<uint32_t>(uint32_t(item.as_array().elem_type));  // nested: inner type + count + items
      const Array& inner = item.as_array();
      b.put<uint64_t>(inner.items.size());
      for (const Value& x : inner.items) put_value(b, inner.elem_type, x);
    } else {
      put_scalar(b, a.elem_type, item);
    }
  }
}

// ggml_n_dims: number of dimensions up to the last one that is not 1 (at least 1).
uint32_t n_dims(const std::vector<int64_t>& ne) {
  uint32_t n = 1;
  for (size_t i = 0; i < ne.size(); ++i)
    if (ne[i] != 1) n = uint32_t(i + 1);
  return n;
}

}  // namespace

void Writer::copy_metadata(const File& src) {
  for (const auto& [k, v] : src.metadata()) set(k, v);
}

void Writer::set(const std::string& key, Value v) {
  remove(key);
  kv_.emplace_back(key, std::move(v));
}

void Writer::set_u32(const std::string& key, uint32_t v) {
  Value val;
  val.type = ValueType::u32;
  val.v = uint64_t(v);
  set(key, std::move(val));
}

void Writer::set_string(const std::string& key, const std::string& v) {
  Value val;
  val.type = ValueType::string;
  val.v = v;
  set(key, std::move(val));
}

void Writer::remove(const std::string& key) {
  std::erase_if(kv_, [&](const auto& kv) { return kv.first == key; });
}

uint64_t Writer::alignment() const {
  for (const auto& [k, v] : kv_) {
    if (k != "general.alignment") continue;
    const uint64_t a = v.as_uint();
    if (a == 0 || (a & (a - 1)) != 0)
      throw GgufError("general.alignment must be a power of two, got " + std::to_string(a));
    return a;
  }
  return kDefaultAlignment;
}

const TensorSpec& Writer::add_tensor(const std::string& name, const std::vector<int64_t>& ne,
                                     DType type) {
  if (std::any_of(tensors_.begin(), tensors_.end(), [&](const TensorSpec& t) { return t.name == name; }))
    throw GgufError("duplicate tensor name '" + name + "'");
  const auto& tr = traits(type);
  if (tr.block_bytes == 0) throw GgufError("tensor '" + name + "': unknown tensor type");
  if (ne.empty() || ne[0] % tr.block_elems != 0)
    throw GgufError("tensor '" + name + "': row length " + (ne.empty() ? "?" : std::to_string(ne[0])) +
                    " is not a multiple of " + std::to_string(tr.block_elems) + " (block size of " +
                    tr.name + ")");
  TensorSpec t;
  t.name = name;
  t.ne = ne;
  t.type = type;
  int64_t rows = 1;
  for (size_t i = 1; i < ne.size(); ++i) rows *= ne[i];
  t.nbytes = uint64_t(rows) * row_bytes(type, ne[0]);
  const uint64_t align = alignment();
  t.offset = tensors_.empty() ? 0 : pad_to(tensors_.back().offset + tensors_.back().nbytes, align);
  tensors_.push_back(std::move(t));
  return tensors_.back();
}

std::vector<uint8_t> Writer::header_bytes() const {
  const uint64_t align = alignment();
  std::vector<uint8_t> bytes;  // [header size] u8: the serialized header
  Buf b(bytes);
  b.put<uint32_t>(0x46554747);  // "GGUF"
  b.put<uint32_t>(kVersion);
  b.put<int64_t>(int64_t(tensors_.size()));
  b.put<int64_t>(int64_t(kv_.size()));
  for (const auto& [k, v] : kv_) {
    b.put_string(k);
    b.put<uint32_t>(uint32_t(v.type));
    put_value(b, v.type, v);
  }
  uint64_t offset = 0;  // recomputed here in case general.alignment changed after add_tensor
  for (const auto& t : tensors_) {
    b.put_string(t.name);
    const uint32_t nd = n_dims(t.ne);
    b.put<uint32_t>(nd);
    for (uint32_t i = 0; i < nd; ++i) b.put<int64_t>(i < t.ne.size() ? t.ne[i] : 1);
    b.put<uint32_t>(uint32_t(t.type));
    b.put<uint64_t>(offset);
    offset = pad_to(offset + t.nbytes, align);
  }
  bytes.resize(pad_to(bytes.size(), align), 0);
  return bytes;
}

void Writer::open(const std::string& path) {
  path_ = path;
  out_.open(path, std::ios::binary | std::ios::trunc);
  if (!out_) throw GgufError(path + ": cannot open for writing");
  const auto header = header_bytes();
  out_.write(reinterpret_cast<const char*>(header.data()), std::streamsize(header.size()));
  if (!out_) throw GgufError(path + ": write failed (disk full?)");
  next_tensor_ = 0;
  open_ = true;
}

void Writer::write_tensor(std::span<const uint8_t> data) {
  if (!open_) throw GgufError("write_tensor called before open()");
  if (next_tensor_ >= tensors_.size())
    throw GgufError(path_ + ": more tensor data written than tensors declared");
  const TensorSpec& t = tensors_[next_tensor_];
  if (data.size() != t.nbytes)
    throw GgufError(path_ + ": tensor '" + t.name + "' has " + std::to_string(data.size()) +
                    " bytes of data, expected " + std::to_string(t.nbytes));
  out_.write(reinterpret_cast<const char*>(data.data()), std::streamsize(data.size()));
  const uint64_t padded = pad_to(data.size(), alignment());
  static constexpr char kZeros[256] = {};
  for (uint64_t left = padded - data.size(); left > 0;) {
    const uint64_t n = std::min<uint64_t>(left, sizeof(kZeros));
    out_.write(kZeros, std::streamsize(n));
    left -= n;
  }
  if (!out_) throw GgufError(path_ + ": write failed (disk full?)");
  ++next_tensor_;
}

void Writer::finish() {
  if (!open_) throw GgufError("finish called before open()");
  if (next_tensor_ != tensors_.size())
    throw GgufError(path_ + ": only " + std::to_string(next_tensor_) + " of " +
                    std::to_string(tensors_.size()) + " tensors were written");
  out_.close();
  open_ = false;
  if (!out_) throw GgufError(path_ + ": closing failed");
}

}  // namespace ws::gguf
