#include "model/gguf_file.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"

namespace kvplan {
namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" little-endian
constexpr uint32_t kMaxDims = 4;
constexpr uint64_t kMaxStringBytes = 1ull << 30;

// A bounds-checked little-endian reader over the mapped bytes.
class Cursor {
 public:
  Cursor(std::span<const std::byte> bytes, const std::filesystem::path& path)
      : bytes_(bytes), path_(path) {}

  [[nodiscard]] uint64_t offset() const { return pos_; }
  [[nodiscard]] uint64_t remaining() const { return bytes_.size() - pos_; }

  void need(uint64_t n, std::string_view what) const {
    if (n > remaining()) {
      fail(ErrorCode::kDataLoss, "{}: truncated at byte {}: {} needs {} bytes, {} left",
           path_.string(), pos_, what, n, remaining());
    }
  }

  template <typename T>
  T read(std::string_view what) {
    need(sizeof(T), what);
    T value;
    std::memcpy(&value, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }

  std::string read_string(std::string_view what) {
    const uint64_t len = read<uint64_t>(what);
    if (len > kMaxStringBytes) {
      fail(ErrorCode::kDataLoss, "{}: byte {}: {} claims a string of {} bytes", path_.string(),
           pos_ - 8, what, len);
    }
    need(len, what);
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), len);
    pos_ += len;
    return s;
  }

  void skip(uint64_t n, std::string_view what) {
    need(n, what);
    pos_ += n;
  }

 private:
  std::span<const std::byte> bytes_;
  const std::filesystem::path& path_;
  uint64_t pos_ = 0;
};

uint64_t scalar_size(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
      return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32:
      return 4;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64:
      return 8;
    default:
      return 0;
  }
}

double read_number(Cursor& in, GgufValueType t, std::string_view what) {
  switch (t) {
    case GgufValueType::kUint8:
      return in.read<uint8_t>(what);
    case GgufValueType::kInt8:
      return in.read<int8_t>(what);
    case GgufValueType::kBool:
      return in.read<uint8_t>(what) != 0 ? 1.0 : 0.0;
    case GgufValueType::kUint16:
      return in.read<uint16_t>(what);
    case GgufValueType::kInt16:
      return in.read<int16_t>(what);
    case GgufValueType::kUint32:
      return in.read<uint32_t>(what);
    case GgufValueType::kInt32:
      return in.read<int32_t>(what);
    case GgufValueType::kFloat32:
      return in.read<float>(what);
    case GgufValueType::kUint64:
      return static_cast<double>(in.read<uint64_t>(what));
    case GgufValueType::kInt64:
      return static_cast<double>(in.read<int64_t>(what));
    case GgufValueType::kFloat64:
      return in.read<double>(what);
    default:
      return 0;
  }
}

bool known_value_type(uint32_t t) {
  return t <= static_cast<uint32_t>(GgufValueType::kFloat64);
}

GgufValue read_value(Cursor& in, uint32_t type, const std::string& key,
                     const std::filesystem::path& path) {
  GgufValue v;
  if (!known_value_type(type)) {
    fail(ErrorCode::kDataLoss, "{}: byte {}: metadata '{}' has unknown value type {}",
         path.string(), in.offset() - 4, key, type);
  }
  v.type = static_cast<GgufValueType>(type);
  if (v.type == GgufValueType::kString) {
    v.text = in.read_string(key);
    return v;
  }
  if (v.type != GgufValueType::kArray) {
    v.number = read_number(in, v.type, key);
    return v;
  }
  const uint32_t element = in.read<uint32_t>(key);
  const uint64_t count = in.read<uint64_t>(key);
  if (!known_value_type(element) || element == static_cast<uint32_t>(GgufValueType::kArray)) {
    fail(ErrorCode::kDataLoss, "{}: metadata '{}' is an array of unsupported element type {}",
         path.string(), key, element);
  }
  v.element_type = static_cast<GgufValueType>(element);
  if (v.element_type == GgufValueType::kString) {
    // Each string needs at least its 8-byte length: refuse counts the file cannot hold.
    if (count > in.remaining() / 8) {
      fail(ErrorCode::kDataLoss, "{}: metadata '{}' claims {} strings but only {} bytes remain",
           path.string(), key, count, in.remaining());
    }
    v.strings.reserve(count);
    for (uint64_t i = 0; i < count; ++i) v.strings.push_back(in.read_string(key));
  } else {
    const uint64_t size = scalar_size(v.element_type);
    if (count > in.remaining() / size) {
      fail(ErrorCode::kDataLoss, "{}: metadata '{}' claims {} elements but only {} bytes remain",
           path.string(), key, count, in.remaining());
    }
    v.numbers.reserve(count);
    for (uint64_t i = 0; i < count; ++i) v.numbers.push_back(read_number(in, v.element_type, key));
  }
  return v;
}

}  // namespace

bool GgufValue::is_numeric() const {
  return type != GgufValueType::kString && type != GgufValueType::kArray;
}

GgufFile::GgufFile(const std::filesystem::path& path, const GgufReadOptions& options)
    : GgufFile(MappedFile(path), options) {}

GgufFile::GgufFile(std::span<const std::byte> bytes, const std::filesystem::path& name,
                   const GgufReadOptions& options)
    : GgufFile(MappedFile(bytes, name), options) {}

GgufFile::GgufFile(MappedFile file, const GgufReadOptions& options) : file_(std::move(file)) {
  const std::string& name = file_.path().string();
  Cursor in(file_.bytes(), file_.path());
  if (file_.size() < 4) {
    fail(ErrorCode::kDataLoss, "{}: not a GGUF file: {} bytes is too short for the header", name,
         file_.size());
  }
  const uint32_t magic = in.read<uint32_t>("magic");
  if (magic != kGgufMagic) {
    fail(ErrorCode::kDataLoss,
         "{}: not a GGUF file: magic is 0x{:08x}, expected 0x{:08x} (\"GGUF\")", name, magic,
         kGgufMagic);
  }
  version_ = in.read<uint32_t>("version");
  if (version_ != 2 && version_ != 3) {
    fail(ErrorCode::kDataLoss, "{}: GGUF version {} is not supported (expected 2 or 3)", name,
         version_);
  }
  const uint64_t n_tensors = in.read<uint64_t>("tensor_count");
  const uint64_t n_metadata = in.read<uint64_t>("metadata_kv_count");
  // A key/value pair takes at least 8 (key length) + 4 (type) + 1 bytes.
  if (n_metadata > in.remaining() / 13) {
    fail(ErrorCode::kDataLoss, "{}: header claims {} metadata entries but only {} bytes remain",
         name, n_metadata, in.remaining());
  }
  for (uint64_t i = 0; i < n_metadata; ++i) {
    std::string key = in.read_string("metadata key");
    const uint32_t type = in.read<uint32_t>("metadata value type");
    GgufValue value = read_value(in, type, key, file_.path());
    if (!metadata_.emplace(key, std::move(value)).second) {
      fail(ErrorCode::kDataLoss, "{}: metadata key '{}' appears twice", name, key);
    }
  }
  if (const auto align = find_number("general.alignment")) {
    const uint64_t a = static_cast<uint64_t>(*align);
    if (a == 0 || (a & (a - 1)) != 0 || a > 65536) {
      fail(ErrorCode::kDataLoss, "{}: general.alignment = {}: expected a power of two <= 65536",
           name, *align);
    }
    alignment_ = a;
  }
  if (options.metadata_only) return;

  // name length 8 + n_dims 4 + type 4 + offset 8
  if (n_tensors > in.remaining() / 24) {
    fail(ErrorCode::kDataLoss, "{}: header claims {} tensors but only {} bytes remain", name,
         n_tensors, in.remaining());
  }
  tensors_.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo t;
    t.name = in.read_string("tensor name");
    const uint32_t n_dims = in.read<uint32_t>("tensor n_dims");
    if (n_dims == 0 || n_dims > kMaxDims) {
      fail(ErrorCode::kDataLoss, "{}: tensor '{}': {} dimensions (expected 1..{})", name, t.name,
           n_dims, kMaxDims);
    }
    t.n_elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t dim = in.read<uint64_t>("tensor dimension");
      if (dim == 0 || t.n_elements > std::numeric_limits<uint64_t>::max() / dim) {
        fail(ErrorCode::kDataLoss, "{}: tensor '{}': dimension {} = {} is invalid", name, t.name, d,
             dim);
      }
      t.n_elements *= dim;
      t.dims.push_back(dim);
    }
    t.type_id = in.read<uint32_t>("tensor type");
    t.type = ggml_type_info(t.type_id);
    if (t.type == nullptr) {
      fail(ErrorCode::kUnimplemented, "{}: tensor '{}': unknown or unsupported ggml type {}", name,
           t.name, t.type_id);
    }
    t.offset = in.read<uint64_t>("tensor offset");
    if (t.dims[0] % t.type->block_values != 0) {
      fail(ErrorCode::kDataLoss,
           "{}: tensor '{}': row of {} values is not a multiple of the {} "
           "block size {}",
           name, t.name, t.dims[0], t.type->name, t.type->block_values);
    }
    // The byte count must not wrap: a wrapped (small) n_bytes would pass the range check below
    // while n_elements still promises far more values than the file holds.
    const uint64_t n_blocks = t.n_elements / t.type->block_values;
    if (n_blocks > std::numeric_limits<uint64_t>::max() / t.type->block_bytes) {
      fail(ErrorCode::kDataLoss, "{}: tensor '{}': {} values of {} overflow a 64-bit byte count",
           name, t.name, t.n_elements, t.type->name);
    }
    t.n_bytes = n_blocks * t.type->block_bytes;
    if (t.offset % alignment_ != 0) {
      fail(ErrorCode::kDataLoss, "{}: tensor '{}': data offset {} is not aligned to {}", name,
           t.name, t.offset, alignment_);
    }
    if (!tensor_index_.emplace(t.name, tensors_.size()).second) {
      fail(ErrorCode::kDataLoss, "{}: tensor '{}' appears twice", name, t.name);
    }
    tensors_.push_back(std::move(t));
  }
  data_offset_ = (in.offset() + alignment_ - 1) / alignment_ * alignment_;
  for (const GgufTensorInfo& t : tensors_) {
    if (data_offset_ > file_.size() || t.offset > file_.size() - data_offset_ ||
        t.n_bytes > file_.size() - data_offset_ - t.offset) {
      fail(ErrorCode::kOutOfRange,
           "{}: tensor '{}': data [{}, +{}) lies past the end of the file ({} bytes)", name, t.name,
           data_offset_ + t.offset, t.n_bytes, file_.size());
    }
  }
}

const GgufValue* GgufFile::find(const std::string& key) const {
  const auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

std::string GgufFile::get_string(const std::string& key) const {
  if (auto s = find_string(key)) return *s;
  if (!has(key)) fail(ErrorCode::kNotFound, "{}: metadata '{}' is missing", path().string(), key);
  fail(ErrorCode::kInvalidArgument, "{}: metadata '{}' is not a string", path().string(), key);
}

double GgufFile::get_number(const std::string& key) const {
  if (auto n = find_number(key)) return *n;
  if (!has(key)) fail(ErrorCode::kNotFound, "{}: metadata '{}' is missing", path().string(), key);
  fail(ErrorCode::kInvalidArgument, "{}: metadata '{}' is not a number", path().string(), key);
}

uint64_t GgufFile::get_uint(const std::string& key) const {
  const double n = get_number(key);
  // 2^64 and above (or NaN) must be refused before the cast, which is undefined for them.
  if (!(n >= 0 && n < 18446744073709551616.0) || n != std::floor(n)) {
    fail(ErrorCode::kInvalidArgument, "{}: metadata '{}' = {}: expected a non-negative integer",
         path().string(), key, n);
  }
  return static_cast<uint64_t>(n);
}

std::optional<double> GgufFile::find_number(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr || !v->is_numeric()) return std::nullopt;
  return v->number;
}

std::optional<std::string> GgufFile::find_string(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr || v->type != GgufValueType::kString) return std::nullopt;
  return v->text;
}

const GgufValue& GgufFile::get_array(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr)
    fail(ErrorCode::kNotFound, "{}: metadata '{}' is missing", path().string(), key);
  if (!v->is_array()) {
    fail(ErrorCode::kInvalidArgument, "{}: metadata '{}' is not an array", path().string(), key);
  }
  return *v;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GgufTensorInfo& GgufFile::tensor(const std::string& name) const {
  if (const GgufTensorInfo* t = find_tensor(name)) return *t;
  fail(ErrorCode::kNotFound, "{}: tensor '{}' is missing", path().string(), name);
}

std::span<const std::byte> GgufFile::tensor_bytes(const GgufTensorInfo& info) const {
  return file_.bytes().subspan(data_offset_ + info.offset, info.n_bytes);
}

}  // namespace kvplan
