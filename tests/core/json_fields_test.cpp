// JsonFields: every accessor's accepted values and the exact one-line error for each refusal.
#include "core/json_fields.h"

#include <cstdint>
#include <limits>
#include <string>

#include <gtest/gtest.h>

#include "core/error.h"

namespace kvplan {
namespace {

using nlohmann::json;

// The message of the Error `f` throws (kInvalidArgument), or a failure when it throws none.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

const json kDoc = json::parse(R"({
  "name": "m", "count": 7, "big": 18446744073709551615, "neg": -3, "ratio": 0.25, "flag": true,
  "none": null, "model": {"layers": [{"key": "q4_0", "heads": [2, 0]}]}, "text": "x"
})");

TEST(JsonFields, ReadsValuesOfTheRightType) {
  const JsonFields f(kDoc, "f.json");
  EXPECT_EQ(f.string("name"), "m");
  EXPECT_EQ(f.integer("count", 1, 7), 7);
  EXPECT_EQ(f.integer("neg", -3, 0), -3);
  EXPECT_EQ(f.number("ratio", 0.0), 0.25);
  EXPECT_EQ(f.number("count"), 7.0);  // integers are numbers
  EXPECT_TRUE(f.boolean("flag"));
  EXPECT_TRUE(f.has("name"));
  EXPECT_FALSE(f.has("none"));
  EXPECT_FALSE(f.has("absent"));
  EXPECT_TRUE(f.at("none").is_null());
  const JsonFields layers = f.object("model").array("layers");
  EXPECT_EQ(layers.path(), "model.layers");
  ASSERT_EQ(layers.size(), 1u);
  const JsonFields layer = layers.element(0);
  EXPECT_EQ(layer.path(), "model.layers[0]");
  EXPECT_EQ(layer.string("key"), "q4_0");
  EXPECT_EQ(layer.array("heads").integer_at(1, 0, 4), 0);
  EXPECT_EQ(layer.array("heads").number_at(0), 2.0);
}

TEST(JsonFields, OptionalFieldsAreAbsentWhenMissingOrNull) {
  const JsonFields f(kDoc, "f.json");
  EXPECT_EQ(f.optional_string("absent"), std::nullopt);
  EXPECT_EQ(f.optional_number("none"), std::nullopt);
  EXPECT_EQ(f.optional_integer("none", 0, 1), std::nullopt);
  EXPECT_EQ(f.optional_boolean("absent"), std::nullopt);
  EXPECT_FALSE(f.optional_object("none").has_value());
  EXPECT_FALSE(f.optional_array("absent").has_value());
  EXPECT_EQ(f.optional_string("name"), "m");
  EXPECT_EQ(f.optional_integer("count", 0, 10), 7);
  EXPECT_EQ(f.optional_boolean("flag"), true);
  // Members of something that is not an object are absent.
  const JsonFields text(kDoc.at("text"), "f.json", "text");
  EXPECT_EQ(text.optional_number("x"), std::nullopt);
  EXPECT_EQ(error_of([&] { (void)text.string("x"); }), "f.json: field 'text.x' is missing");
  // ... but a present value of the wrong type is refused, not ignored.
  EXPECT_EQ(error_of([&] { (void)f.optional_number("name"); }),
            "f.json: field 'name': expected a finite number, got \"m\"");
}

TEST(JsonFields, ErrorsNameTheFileAndTheJsonPath) {
  const JsonFields f(kDoc, "dir/f.json");
  EXPECT_EQ(error_of([&] { (void)f.string("absent"); }), "dir/f.json: field 'absent' is missing");
  EXPECT_EQ(error_of([&] { (void)f.string("none"); }),
            "dir/f.json: field 'none': expected a string, got null");
  EXPECT_EQ(error_of([&] { (void)f.integer("count", 8, 10); }),
            "dir/f.json: field 'count': expected an integer in 8..10, got 7");
  EXPECT_EQ(error_of([&] { (void)f.integer("ratio", 0, 10); }),
            "dir/f.json: field 'ratio': expected an integer in 0..10, got 0.25");
  EXPECT_EQ(error_of([&] { (void)f.integer("name", 0, std::numeric_limits<int64_t>::max()); }),
            "dir/f.json: field 'name': expected a non-negative integer, got \"m\"");
  EXPECT_EQ(error_of([&] { (void)f.number("neg", 0.0); }),
            "dir/f.json: field 'neg': expected a finite number >= 0, got -3");
  EXPECT_EQ(error_of([&] { (void)f.boolean("count"); }),
            "dir/f.json: field 'count': expected true or false, got 7");
  EXPECT_EQ(error_of([&] { (void)f.object("name"); }),
            "dir/f.json: field 'name': expected an object, got \"m\"");
  EXPECT_EQ(
      error_of([&] { (void)f.array("model"); }),
      "dir/f.json: field 'model': expected an array, got {\"layers\":[{\"heads\":[2,0],\"key\":"
      "\"q4_0\"}]}");
  const JsonFields layer = f.object("model").array("layers").element(0);
  EXPECT_EQ(error_of([&] { (void)layer.integer("value", 0, 1); }),
            "dir/f.json: field 'model.layers[0].value' is missing");
  EXPECT_EQ(error_of([&] { (void)layer.array("heads").integer_at(1, 1, 8); }),
            "dir/f.json: field 'model.layers[0].heads[1]': expected an integer in 1..8, got 0");
  EXPECT_EQ(error_of([&] { (void)layer.array("heads").string_at(0); }),
            "dir/f.json: field 'model.layers[0].heads[0]': expected a string, got 2");
  EXPECT_EQ(error_of([&] { layer.invalid("key", "not a format"); }),
            "dir/f.json: field 'model.layers[0].key': not a format");
  EXPECT_EQ(error_of([&] { f.invalid("expected a JSON object"); }),
            "dir/f.json: expected a JSON object");
}

// A value past INT64_MAX must not wrap into range through get<int64_t>().
TEST(JsonFields, HugeUnsignedIntegersAreOutOfRange) {
  const JsonFields f(kDoc, "f.json");
  EXPECT_EQ(error_of([&] { (void)f.integer("big", -1, 100); }),
            "f.json: field 'big': expected an integer in -1..100, got 18446744073709551615");
  EXPECT_EQ(error_of([&] { (void)f.integer("big", 0, std::numeric_limits<int64_t>::max()); }),
            "f.json: field 'big': expected a non-negative integer, got 18446744073709551615");
}

TEST(JsonFields, NonFiniteNumbersAreRefused) {
  json j = {{"x", std::numeric_limits<double>::infinity()}};
  const JsonFields f(j, "f.json");
  EXPECT_NE(error_of([&] { (void)f.number("x"); }).find("expected a finite number"),
            std::string::npos);
}

}  // namespace
}  // namespace kvplan
