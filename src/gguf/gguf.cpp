#include "gguf/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "tensor/kernels.h"

namespace ws::gguf {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
// Limits that reject absurd files before they allocate: no real model comes near them.
constexpr uint64_t kMaxStringLen = uint64_t(1) << 30;
constexpr uint64_t kMaxDims = 4;
constexpr int64_t kMaxDimSize = int64_t(1) << 40;
constexpr int kMaxArrayDepth = 4;
// Each element costs sizeof(Value) (~48 bytes) in memory however small it is on disk, so a
// crafted file could ask for 48x its size; real arrays (vocabularies, merges) stay far below.
constexpr uint64_t kMaxArrayLen = uint64_t(1) << 24;

// Bounds-checked cursor over the file bytes.
class Reader {
 public:
  Reader(const File& f, const uint8_t* p, size_t n) : file_(f), p_(p), n_(n) {}
  size_t pos() const { return pos_; }
  size_t remaining() const { return n_ - pos_; }

  template <class T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string read_string(const char* what) {
    const uint64_t len = read<uint64_t>(what);
    if (len > kMaxStringLen) fail_at(std::string(what) + ": string length " + std::to_string(len) + " is absurd");
    need(len, what);
    std::string s(reinterpret_cast<const char*>(p_ + pos_), size_t(len));
    pos_ += len;
    return s;
  }
  void need(uint64_t k, const char* what) {
    if (k > remaining())
      fail_at(std::string("truncated file: ") + what + " needs " + std::to_string(k) + " bytes, " +
              std::to_string(remaining()) + " left");
  }
  [[noreturn]] void fail_at(const std::string& msg) {
    file_.fail(msg + " (at byte offset " + std::to_string(pos_) + ")");
  }

 private:
  const File& file_;
  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
};

Value read_value(Reader& r, ValueType t, int depth);

Value read_scalar(Reader& r, ValueType t) {
  Value v;
  v.type = t;
  switch (t) {
    case ValueType::u8: v.v = uint64_t(r.read<uint8_t>("u8 value")); break;
    case ValueType::i8: v.v = int64_t(r.read<int8_t>("i8 value")); break;
    case ValueType::u16: v.v = uint64_t(r.read<uint16_t>("u16 value")); break;
    case ValueType::i16: v.v = int64_t(r.read<int16_t>("i16 value")); break;
    case ValueType::u32: v.v = uint64_t(r.read<uint32_t>("u32 value")); break;
    case ValueType::i32: v.v = int64_t(r.read<int32_t>("i32 value")); break;
    case ValueType::u64: v.v = r.read<uint64_t>("u64 value"); break;
    case ValueType::i64: v.v = r.read<int64_t>("i64 value"); break;
    case ValueType::f32: v.v = double(r.read<float>("f32 value")); break;
    case ValueType::f64: v.v = r.read<double>("f64 value"); break;
    case ValueType::boolean: {
      const uint8_t b = r.read<uint8_t>("bool value");
      if (b > 1) r.fail_at("bool value " + std::to_string(b) + " is neither 0 nor 1");
      v.v = b != 0;
      break;
    }
    case ValueType::string: v.v = r.read_string("string value"); break;
    default: r.fail_at("unknown metadata value type " + std::to_string(uint32_t(t)));
  }
  return v;
}

size_t min_encoded_size(ValueType t) {
  switch (t) {
    case ValueType::u8: case ValueType::i8: case ValueType::boolean: return 1;
    case ValueType::u16: case ValueType::i16: return 2;
    case ValueType::u32: case ValueType::i32: case ValueType::f32: return 4;
    case ValueType::array: return 12;
    default: return 8;  // 64-bit scalars and strings (length prefix)
  }
}

Value read_value(Reader& r, ValueType t, int depth) {
  if (t != ValueType::array) return read_scalar(r, t);
  if (depth >= kMaxArrayDepth) r.fail_at("arrays nested deeper than " + std::to_string(kMaxArrayDepth));
  auto arr = std::make_shared<Array>();
  const uint32_t et = r.read<uint32_t>("array element type");
  if (et > uint32_t(ValueType::f64)) r.fail_at("unknown array element type " + std::to_string(et));
  arr->elem_type = ValueType(et);
  const uint64_t n = r.read<uint64_t>("array length");
  if (n > kMaxArrayLen)
    r.fail_at("array length " + std::to_string(n) + " is absurd (limit " + std::to_string(kMaxArrayLen) + ")");
  // Each element occupies at least min_encoded_size bytes: reject lengths the file cannot hold.
  if (n > r.remaining() / min_encoded_size(arr->elem_type))
    r.fail_at("array length " + std::to_string(n) + " exceeds the file size");
  // n comes from the file: reserve a bounded amount and let the vector grow as elements
  // are actually read, so a lying length cannot trigger one huge allocation.
  arr->items.reserve(size_t(std::min<uint64_t>(n, 4096)));
  for (uint64_t i = 0; i < n; ++i) arr->items.push_back(read_value(r, arr->elem_type, depth + 1));
  Value v;
  v.type = ValueType::array;
  v.v = std::move(arr);
  return v;
}

}  // namespace

const char* value_type_name(ValueType t) {
  static const char* names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32",
                                "bool", "string", "array", "u64", "i64", "f64"};
  const auto i = uint32_t(t);
  return i < 13 ? names[i] : "?";
}

bool Value::is_integer() const {
  return std::holds_alternative<uint64_t>(v) || std::holds_alternative<int64_t>(v);
}
int64_t Value::as_int() const {
  if (auto* u = std::get_if<uint64_t>(&v)) {
    if (*u > uint64_t(std::numeric_limits<int64_t>::max())) throw GgufError("integer value out of range");
    return int64_t(*u);
  }
  if (auto* i = std::get_if<int64_t>(&v)) return *i;
  if (auto* b = std::get_if<bool>(&v)) return *b;
  throw GgufError(std::string("expected an integer, found ") + value_type_name(type));
}
uint64_t Value::as_uint() const {
  const int64_t i = as_int();
  if (i < 0) throw GgufError("expected a non-negative integer, found " + std::to_string(i));
  return uint64_t(i);
}
double Value::as_float() const {
  if (auto* d = std::get_if<double>(&v)) return *d;
  // u64 above INT64_MAX is still a number; only as_int() has a range problem with it.
  if (auto* u = std::get_if<uint64_t>(&v)) return double(*u);
  if (is_integer()) return double(as_int());
  throw GgufError(std::string("expected a number, found ") + value_type_name(type));
}
bool Value::as_bool() const {
  if (auto* b = std::get_if<bool>(&v)) return *b;
  return as_int() != 0;
}
const std::string& Value::as_string() const {
  if (auto* s = std::get_if<std::string>(&v)) return *s;
  throw GgufError(std::string("expected a string, found ") + value_type_name(type));
}
const Array& Value::as_array() const {
  if (auto* a = std::get_if<std::shared_ptr<Array>>(&v)) return **a;
  throw GgufError(std::string("expected an array, found ") + value_type_name(type));
}

int64_t TensorInfo::n_elements() const {
  int64_t n = 1;
  for (auto d : ne) n *= d;
  return n;
}

File::File() : packed_arena_(std::make_unique<PackedArena>()) {}
File::File(File&& o) noexcept { *this = std::move(o); }
File& File::operator=(File&& o) noexcept {
  if (this == &o) return *this;
  release();
  path_ = std::move(o.path_);
  base_ = o.base_;
  size_ = o.size_;
  mapped_ = o.mapped_;
  owned_ = std::move(o.owned_);
  if (!mapped_) base_ = owned_.data();
  version_ = o.version_;
  alignment_ = o.alignment_;
  data_offset_ = o.data_offset_;
  kv_ = std::move(o.kv_);
  kv_index_ = std::move(o.kv_index_);
  tensors_ = std::move(o.tensors_);
  tensor_index_ = std::move(o.tensor_index_);
  packed_arena_ = std::move(o.packed_arena_);
  for (auto& t : tensors_) t.data = base_ + data_offset_ + t.offset;
  o.base_ = nullptr;
  o.size_ = 0;
  o.mapped_ = false;
  return *this;
}
File::~File() { release(); }

void File::release() {
  if (mapped_ && base_) munmap(const_cast<uint8_t*>(base_), size_);
  base_ = nullptr;
  mapped_ = false;
}

void File::release_pages(const uint8_t* p, size_t n) const {
  if (!mapped_ || p < base_ || p + n > base_ + size_) return;
  const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  const uintptr_t first = (uintptr_t(p) + page - 1) / page * page;  // whole pages inside
  const uintptr_t last = (uintptr_t(p) + n) / page * page;
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

void File::fail(const std::string& what) const { throw GgufError(path_ + ": " + what); }

File File::open(const std::string& path) {
  File f;
  f.path_ = path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) f.fail(std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    f.fail("not a regular file");
  }
  f.size_ = size_t(st.st_size);
  if (f.size_ == 0) {
    ::close(fd);
    f.fail("empty file, not a GGUF model");
  }
  void* p = mmap(nullptr, f.size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) f.fail(std::string("mmap failed: ") + std::strerror(errno));
  f.base_ = static_cast<const uint8_t*>(p);
  f.mapped_ = true;
  f.parse();
  return f;
}

File File::from_bytes(std::vector<uint8_t> bytes, const std::string& label) {
  File f;
  f.path_ = label;
  f.owned_ = std::move(bytes);
  f.base_ = f.owned_.data();
  f.size_ = f.owned_.size();
  f.parse();
  return f;
}

void File::parse() {
  Reader r(*this, base_, size_);
  if (size_ < 4 || r.read<uint32_t>("magic") != kMagic) fail("bad magic: not a GGUF file");
  version_ = r.read<uint32_t>("version");
  if (version_ != 2 && version_ != 3)
    fail("unsupported GGUF version " + std::to_string(version_) + " (2 and 3 are supported)");
  const uint64_t n_tensors = r.read<uint64_t>("tensor count");
  const uint64_t n_kv = r.read<uint64_t>("metadata count");
  // A tensor info needs >= 8+4+8+4+8 bytes, a key/value >= 8+4+1.
  if (n_tensors > r.remaining() / 32) r.fail_at("tensor count " + std::to_string(n_tensors) + " exceeds the file size");
  if (n_kv > r.remaining() / 13) r.fail_at("metadata count " + std::to_string(n_kv) + " exceeds the file size");

  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = r.read_string("metadata key");
    const uint32_t t = r.read<uint32_t>("metadata value type");
    if (t > uint32_t(ValueType::f64)) r.fail_at("key '" + key + "': unknown value type " + std::to_string(t));
    Value v = read_value(r, ValueType(t), 0);
    if (kv_index_.count(key)) r.fail_at("duplicate metadata key '" + key + "'");
    kv_index_[key] = kv_.size();
    kv_.emplace_back(std::move(key), std::move(v));
  }
  if (const Value* a = find("general.alignment")) {
    uint64_t al = 0;
    try { al = a->as_uint(); } catch (const GgufError& e) { fail(std::string("general.alignment: ") + e.what()); }
    if (al == 0 || (al & (al - 1)) || al > 65536) fail("general.alignment " + std::to_string(al) + " is not a power of two <= 65536");
    alignment_ = al;
  }

  tensors_.reserve(size_t(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    TensorInfo ti;
    ti.name = r.read_string("tensor name");
    const uint32_t nd = r.read<uint32_t>("tensor dimension count");
    if (nd == 0 || nd > kMaxDims) r.fail_at("tensor '" + ti.name + "': " + std::to_string(nd) + " dimensions (1..4 allowed)");
    for (uint32_t d = 0; d < nd; ++d) {
      const int64_t v = r.read<int64_t>("tensor dimension");
      if (v <= 0 || v > kMaxDimSize) r.fail_at("tensor '" + ti.name + "': absurd dimension " + std::to_string(v));
      ti.ne.push_back(v);
    }
    int64_t n = 1;
    for (auto d : ti.ne) {
      if (n > kMaxDimSize / d) r.fail_at("tensor '" + ti.name + "': element count overflows");
      n *= d;
    }
    const uint32_t type = r.read<uint32_t>("tensor type");
    const auto tr = dtype_traits(type);
    if (!tr) r.fail_at("tensor '" + ti.name + "': unknown dtype id " + std::to_string(type));
    ti.type = DType(type);
    if (ti.ne[0] % tr->block_elems != 0)
      r.fail_at("tensor '" + ti.name + "': row of " + std::to_string(ti.ne[0]) + " elements is not a multiple of the " +
                tr->name + " block size " + std::to_string(tr->block_elems));
    ti.nbytes = uint64_t(n / tr->block_elems) * tr->block_bytes;
    ti.offset = r.read<uint64_t>("tensor offset");
    if (ti.offset % alignment_) r.fail_at("tensor '" + ti.name + "': offset " + std::to_string(ti.offset) + " is not aligned");
    if (tensor_index_.count(ti.name)) r.fail_at("duplicate tensor name '" + ti.name + "'");
    tensor_index_[ti.name] = tensors_.size();
    tensors_.push_back(std::move(ti));
  }
  data_offset_ = (r.pos() + alignment_ - 1) / alignment_ * alignment_;
  if (data_offset_ > size_ && !tensors_.empty()) fail("truncated file: tensor data section starts past the end");
  const uint64_t data_size = size_ >= data_offset_ ? size_ - data_offset_ : 0;
  for (auto& t : tensors_) {
    if (t.offset > data_size || t.nbytes > data_size - t.offset)
      fail("truncated file: tensor '" + t.name + "' (" + std::to_string(t.nbytes) + " bytes at data offset " +
           std::to_string(t.offset) + ") extends past the end of the file (" + std::to_string(data_size) +
           " data bytes)");
    t.data = base_ + data_offset_ + t.offset;
  }
}

const Value* File::find(const std::string& key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const Value& File::require(const std::string& key) const {
  const Value* v = find(key);
  if (!v) fail("missing required key '" + key + "'");
  return *v;
}

namespace {
template <class F>
auto typed(const File& f, const std::string& key, F&& get) {
  try {
    return get();
  } catch (const GgufError& e) {
    f.fail("key '" + key + "': " + e.what());
  }
}
}  // namespace

std::string File::get_string(const std::string& key, const std::string& def) const {
  const Value* v = find(key);
  return v ? typed(*this, key, [&] { return v->as_string(); }) : def;
}
int64_t File::get_int(const std::string& key, int64_t def) const {
  const Value* v = find(key);
  return v ? typed(*this, key, [&] { return v->as_int(); }) : def;
}
double File::get_float(const std::string& key, double def) const {
  const Value* v = find(key);
  return v ? typed(*this, key, [&] { return v->as_float(); }) : def;
}
bool File::get_bool(const std::string& key, bool def) const {
  const Value* v = find(key);
  return v ? typed(*this, key, [&] { return v->as_bool(); }) : def;
}
std::vector<std::string> File::get_strings(const std::string& key) const {
  std::vector<std::string> out;
  if (const Value* v = find(key))
    typed(*this, key, [&] {
      for (const auto& it : v->as_array().items) out.push_back(it.as_string());
      return 0;
    });
  return out;
}
std::vector<int64_t> File::get_ints(const std::string& key) const {
  std::vector<int64_t> out;
  if (const Value* v = find(key)) typed(*this, key, [&] {
      if (v->type != ValueType::array) {
        out.push_back(v->as_int());
      } else {
        for (const auto& it : v->as_array().items) out.push_back(it.as_int());
      }
      return 0;
    });
  return out;
}
std::vector<double> File::get_floats(const std::string& key) const {
  std::vector<double> out;
  if (const Value* v = find(key)) typed(*this, key, [&] {
      if (v->type != ValueType::array) {
        out.push_back(v->as_float());
      } else {
        for (const auto& it : v->as_array().items) out.push_back(it.as_float());
      }
      return 0;
    });
  return out;
}

const TensorInfo* File::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}
const TensorInfo& File::require_tensor(const std::string& name) const {
  const TensorInfo* t = find_tensor(name);
  if (!t) fail("missing required tensor '" + name + "'");
  return *t;
}

}  // namespace ws::gguf
