// JsonFields: checked access to the fields of a JSON file kvplan reads (plan.json, profile.json,
// config.json, a plan's recorded sections), so every reader refuses bad input the same way and
// every error names the file and the field's JSON path:
//
//   <source>: field '<path>' is missing
//   <source>: field '<path>': expected <what>, got <the value, cut to 80 characters>
//   <source>: field '<path>': <message>                    (invalid(): a reader's own check)
//
//   const JsonFields root(j, "profile.json");
//   const JsonFields model = root.object("model");              // path "model"
//   int64_t n = model.integer("num_layers", 1, 100000);         // "... 'model.num_layers' ..."
//   std::optional<double> kl = root.object("quality").optional_number("mean_kl");
//   const JsonFields layers = root.array("layers");
//   for (size_t i = 0; i < layers.size(); ++i) layers.element(i).string("key");  // 'layers[3].key'
//
// Required accessors throw Error(kInvalidArgument) for an absent field; optional ones return
// nullopt for an absent or null field (config.json writes "head_dim": null for "not set") and
// check the type of any other value. Members of a value that is not an object are absent. A view
// holds a pointer into the document, which must outlive it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kvplan {

class JsonFields {
 public:
  // `value` at JSON path `path` ("" for the document's root) of the file named `source`.
  JsonFields(const nlohmann::json& value, std::string source, std::string path = "");

  [[nodiscard]] const nlohmann::json& value() const { return *value_; }
  [[nodiscard]] const std::string& source() const { return source_; }
  [[nodiscard]] const std::string& path() const { return path_; }
  // The path of member `key` ("model.num_layers"; "num_layers" at the root) or element `index`
  // ("layers[3]").
  [[nodiscard]] std::string path_of(std::string_view key) const;
  [[nodiscard]] std::string path_of(size_t index) const;

  // Present and not null.
  [[nodiscard]] bool has(std::string_view key) const;
  // The number of elements of an array (0 for anything else).
  [[nodiscard]] size_t size() const;

  // Required fields.
  [[nodiscard]] const nlohmann::json& at(std::string_view key) const;  // any value, null included
  [[nodiscard]] JsonFields object(std::string_view key) const;
  [[nodiscard]] JsonFields array(std::string_view key) const;
  [[nodiscard]] std::string string(std::string_view key) const;
  // An integer in min..max. Described as "a non-negative integer" for 0..INT64_MAX.
  [[nodiscard]] int64_t integer(std::string_view key, int64_t min, int64_t max) const;
  // A finite number, and >= `min` when given.
  [[nodiscard]] double number(std::string_view key, std::optional<double> min = {}) const;
  [[nodiscard]] bool boolean(std::string_view key) const;

  // Optional fields: nullopt when absent or null.
  [[nodiscard]] std::optional<JsonFields> optional_object(std::string_view key) const;
  [[nodiscard]] std::optional<JsonFields> optional_array(std::string_view key) const;
  [[nodiscard]] std::optional<std::string> optional_string(std::string_view key) const;
  [[nodiscard]] std::optional<int64_t> optional_integer(std::string_view key, int64_t min,
                                                        int64_t max) const;
  [[nodiscard]] std::optional<double> optional_number(std::string_view key,
                                                      std::optional<double> min = {}) const;
  [[nodiscard]] std::optional<bool> optional_boolean(std::string_view key) const;

  // Elements of an array view (index < size()), with the same checks.
  [[nodiscard]] JsonFields element(size_t index) const;
  [[nodiscard]] int64_t integer_at(size_t index, int64_t min, int64_t max) const;
  [[nodiscard]] double number_at(size_t index, std::optional<double> min = {}) const;
  [[nodiscard]] std::string string_at(size_t index) const;

  // Errors naming member `key` of this value, or (without a key) this value itself.
  [[noreturn]] void missing(std::string_view key) const;
  [[noreturn]] void expected(std::string_view key, std::string_view what,
                             const nlohmann::json& got) const;
  [[noreturn]] void expected(std::string_view what) const;
  [[noreturn]] void invalid(std::string_view key, std::string_view message) const;
  [[noreturn]] void invalid(std::string_view message) const;

  // What integer(min, max) and number(min) say they expected: "an integer in 1..4096",
  // "a non-negative integer", "a finite number", "a finite number >= 0".
  static std::string describe_integer(int64_t min, int64_t max);
  static std::string describe_number(std::optional<double> min);

 private:
  [[nodiscard]] const nlohmann::json* find(std::string_view key) const;  // null when absent
  [[noreturn]] void fail_at(const std::string& path, std::string_view message) const;

  const nlohmann::json* value_;
  std::string source_;
  std::string path_;
};

}  // namespace kvplan
