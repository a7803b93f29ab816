#include "core/json_text.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace kvplan {
namespace {

std::string error_of(std::string_view text) {
  try {
    (void)parse_json_text(text, "x.json");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    return e.what();
  }
  ADD_FAILURE() << "accepted: " << text;
  return {};
}

TEST(JsonText, ParsesDocumentsUpToTheDepthLimit) {
  const std::string deep = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_TRUE(parse_json_text(deep, "x.json").is_array());
  EXPECT_EQ(parse_json_text(R"({"a": [1, 2.5, "s"]})", "x.json")["a"][1].get<double>(), 2.5);
}

// Fuzz finding: nlohmann throws out_of_range (not parse_error) for a number past DBL_MAX, which
// escaped every parser as a foreign exception.
TEST(JsonText, NumberOverflowIsAnError) {
  const std::string e = error_of(R"({"num_layers": 1e3082})");
  EXPECT_NE(e.find("x.json: not valid JSON: "), std::string::npos) << e;
  EXPECT_NE(e.find("number overflow"), std::string::npos) << e;
}

// Copying, comparing and dumping a json value recurse per nesting level: a deep document must be
// refused while parsing, before it can overflow the stack.
TEST(JsonText, RefusesNestingPastTheLimit) {
  const std::string deep =
      std::string(kMaxJsonDepth + 1, '[') + std::string(kMaxJsonDepth + 1, ']');
  EXPECT_NE(error_of(deep).find("nested deeper than 64 levels"), std::string::npos);
  const std::string million(1000000, '[');
  EXPECT_NE(error_of(million).find("nested deeper"), std::string::npos);
}

TEST(JsonText, SyntaxErrorsAreOneShortLine) {
  const std::string e = error_of("{\"a\": \"" + std::string(5000, 'x') + "\n");
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  EXPECT_LT(e.size(), 300u) << e;
  // The raw newline ends the string literal on line 2; nlohmann quotes it escaped.
  EXPECT_NE(e.find("x.json: not valid JSON: parse error at line 2"), std::string::npos) << e;
}

TEST(JsonText, ExcerptCutsLongValues) {
  EXPECT_EQ(json_excerpt(nlohmann::json(12)), "12");
  const std::string cut = json_excerpt(nlohmann::json(std::string(500, 'a')), 10);
  EXPECT_EQ(cut, "\"aaaaaaaaa...");
}

// A GGUF name with bytes that are not UTF-8 still makes a JSON file (U+FFFD in their place), and
// that file parses back.
TEST(JsonText, InvalidUtf8BecomesReplacementCharacters) {
  const nlohmann::json v = {{"name", std::string("l\xff\xfema")}};
  const std::string text = json_text(v, 2);
  EXPECT_NE(text.find("l\xef\xbf\xbd\xef\xbf\xbdma"), std::string::npos) << text;
  EXPECT_EQ(parse_json_text(text, "x.json").at("name"), "l\xef\xbf\xbd\xef\xbf\xbdma");
  EXPECT_EQ(json_text(nlohmann::json{{"a", 1}}, -1), "{\"a\":1}");
  nlohmann::ordered_json ordered;
  ordered["z"] = 1;
  ordered["a"] = 2;
  EXPECT_EQ(json_text(ordered, -1), "{\"z\":1,\"a\":2}");  // the order the writer chose
}

}  // namespace
}  // namespace kvplan
