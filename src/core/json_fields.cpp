#include "core/json_fields.h"

#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "core/json_text.h"

namespace kvplan {
namespace {

using nlohmann::json;

bool integer_in(const json& v, int64_t min, int64_t max) {
  if (!v.is_number_integer()) return false;
  // Unsigned values above INT64_MAX would wrap to negative in get<int64_t>(): compare unsigned.
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    return max >= 0 && u <= static_cast<uint64_t>(max) &&
           (min <= 0 || u >= static_cast<uint64_t>(min));
  }
  const int64_t i = v.get<int64_t>();
  return i >= min && i <= max;
}

bool number_at_least(const json& v, std::optional<double> min) {
  return v.is_number() && std::isfinite(v.get<double>()) && (!min || v.get<double>() >= *min);
}

}  // namespace

JsonFields::JsonFields(const json& value, std::string source, std::string path)
    : value_(&value), source_(std::move(source)), path_(std::move(path)) {}

std::string JsonFields::path_of(std::string_view key) const {
  return path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key);
}

std::string JsonFields::path_of(size_t index) const {
  return fmt::format("{}[{}]", path_, index);
}

const json* JsonFields::find(std::string_view key) const {
  if (!value_->is_object()) return nullptr;
  const auto it = value_->find(std::string(key));
  return it == value_->end() ? nullptr : &*it;
}

bool JsonFields::has(std::string_view key) const {
  const json* v = find(key);
  return v != nullptr && !v->is_null();
}

size_t JsonFields::size() const {
  return value_->is_array() ? value_->size() : 0;
}

const json& JsonFields::at(std::string_view key) const {
  const json* v = find(key);
  if (v == nullptr) missing(key);
  return *v;
}

JsonFields JsonFields::object(std::string_view key) const {
  const json& v = at(key);
  if (!v.is_object()) expected(key, "an object", v);
  return {v, source_, path_of(key)};
}

JsonFields JsonFields::array(std::string_view key) const {
  const json& v = at(key);
  if (!v.is_array()) expected(key, "an array", v);
  return {v, source_, path_of(key)};
}

std::string JsonFields::string(std::string_view key) const {
  const json& v = at(key);
  if (!v.is_string()) expected(key, "a string", v);
  return v.get<std::string>();
}

int64_t JsonFields::integer(std::string_view key, int64_t min, int64_t max) const {
  const json& v = at(key);
  if (!integer_in(v, min, max)) expected(key, describe_integer(min, max), v);
  return v.get<int64_t>();
}

double JsonFields::number(std::string_view key, std::optional<double> min) const {
  const json& v = at(key);
  if (!number_at_least(v, min)) expected(key, describe_number(min), v);
  return v.get<double>();
}

bool JsonFields::boolean(std::string_view key) const {
  const json& v = at(key);
  if (!v.is_boolean()) expected(key, "true or false", v);
  return v.get<bool>();
}

std::optional<JsonFields> JsonFields::optional_object(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return object(key);
}

std::optional<JsonFields> JsonFields::optional_array(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return array(key);
}

std::optional<std::string> JsonFields::optional_string(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return string(key);
}

std::optional<int64_t> JsonFields::optional_integer(std::string_view key, int64_t min,
                                                    int64_t max) const {
  if (!has(key)) return std::nullopt;
  return integer(key, min, max);
}

std::optional<double> JsonFields::optional_number(std::string_view key,
                                                  std::optional<double> min) const {
  if (!has(key)) return std::nullopt;
  return number(key, min);
}

std::optional<bool> JsonFields::optional_boolean(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return boolean(key);
}

JsonFields JsonFields::element(size_t index) const {
  return {value_->at(index), source_, path_of(index)};
}

int64_t JsonFields::integer_at(size_t index, int64_t min, int64_t max) const {
  const json& v = value_->at(index);
  if (!integer_in(v, min, max)) {
    fail_at(path_of(index),
            fmt::format("expected {}, got {}", describe_integer(min, max), json_excerpt(v)));
  }
  return v.get<int64_t>();
}

double JsonFields::number_at(size_t index, std::optional<double> min) const {
  const json& v = value_->at(index);
  if (!number_at_least(v, min)) {
    fail_at(path_of(index),
            fmt::format("expected {}, got {}", describe_number(min), json_excerpt(v)));
  }
  return v.get<double>();
}

std::string JsonFields::string_at(size_t index) const {
  const json& v = value_->at(index);
  if (!v.is_string()) fail_at(path_of(index), "expected a string, got " + json_excerpt(v));
  return v.get<std::string>();
}

void JsonFields::missing(std::string_view key) const {
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("{}: field '{}' is missing", source_, path_of(key)));
}

void JsonFields::expected(std::string_view key, std::string_view what, const json& got) const {
  fail_at(path_of(key), fmt::format("expected {}, got {}", what, json_excerpt(got)));
}

void JsonFields::expected(std::string_view what) const {
  fail_at(path_, fmt::format("expected {}, got {}", what, json_excerpt(*value_)));
}

void JsonFields::invalid(std::string_view key, std::string_view message) const {
  fail_at(path_of(key), message);
}

void JsonFields::invalid(std::string_view message) const {
  fail_at(path_, message);
}

void JsonFields::fail_at(const std::string& path, std::string_view message) const {
  // The root has no field name: "<source>: <message>".
  if (path.empty())
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: {}", source_, message));
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("{}: field '{}': {}", source_, path, message));
}

std::string JsonFields::describe_integer(int64_t min, int64_t max) {
  if (min == 0 && max == std::numeric_limits<int64_t>::max()) return "a non-negative integer";
  return fmt::format("an integer in {}..{}", min, max);
}

std::string JsonFields::describe_number(std::optional<double> min) {
  return min ? fmt::format("a finite number >= {}", *min) : "a finite number";
}

}  // namespace kvplan
