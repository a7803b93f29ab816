// parse_json_text: the one way kvplan turns file text (config.json, tokenizer.json, plan.json,
// profile.json, safetensors headers) into nlohmann::json.
//
// nlohmann's parser is iterative, but copying, comparing and dumping a value recurse once per
// nesting level, so a document nested a million levels deep would overflow the stack long after it
// was parsed. No file kvplan reads nests deeper than a handful of levels: anything past
// kMaxJsonDepth is refused while parsing. Syntax errors become one line that names the source and
// the byte offset.
//
//   nlohmann::json j = kvplan::parse_json_text(text, "plan.json");
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kvplan {

inline constexpr int kMaxJsonDepth = 64;

// Throws Error(kInvalidArgument) "<source>: not valid JSON: ..." for a syntax error or a document
// nested deeper than kMaxJsonDepth.
nlohmann::json parse_json_text(std::string_view text, const std::string& source);

// The text of v as kvplan writes every JSON file and --json output. Strings from model files are
// meant to be UTF-8 but are not checked when read (a GGUF name, a tokenizer's tokens); a byte that
// is not valid UTF-8 becomes U+FFFD instead of making the whole output fail.
std::string json_text(const nlohmann::json& v, int indent);
std::string json_text(const nlohmann::ordered_json& v, int indent);  // keys in insertion order

// v.dump() cut to at most `max_chars` (with "..." appended), for quoting a bad value in a one-line
// error without copying a whole file into it.
std::string json_excerpt(const nlohmann::json& v, size_t max_chars = 80);

}  // namespace kvplan
