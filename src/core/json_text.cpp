#include "core/json_text.h"

#include <algorithm>

#include "core/error.h"

namespace kvplan {

nlohmann::json parse_json_text(std::string_view text, const std::string& source) {
  using nlohmann::json;
  int deepest = 0;
  const json::parser_callback_t limit_depth = [&deepest](int depth, json::parse_event_t event,
                                                         json&) {
    if (event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) {
      deepest = std::max(deepest, depth + 1);
      if (deepest > kMaxJsonDepth) {
        throw Error(ErrorCode::kInvalidArgument, "");  // rethrown below with the source named
      }
    }
    return true;
  };
  try {
    return json::parse(text, limit_depth);
  } catch (const json::exception& e) {
    // A syntax error (parse_error) or a number too large for a double (out_of_range 406). e.what()
    // is "[json.exception.parse_error.101] parse error at line 1, column 2: ...": keep the part
    // after the id, which nlohmann writes on one line (control characters escaped).
    std::string_view reason = e.what();
    if (const size_t id_end = reason.find("] "); id_end != std::string_view::npos) {
      reason.remove_prefix(id_end + 2);
    }
    if (reason.size() > 160) reason = reason.substr(0, 160);
    fail(ErrorCode::kInvalidArgument, "{}: not valid JSON: {}", source, reason);
  } catch (const Error&) {
    fail(ErrorCode::kInvalidArgument, "{}: not valid JSON: nested deeper than {} levels", source,
         kMaxJsonDepth);
  }
}

std::string json_text(const nlohmann::json& v, int indent) {
  return v.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string json_text(const nlohmann::ordered_json& v, int indent) {
  return v.dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string json_excerpt(const nlohmann::json& v, size_t max_chars) {
  std::string s = json_text(v, -1);
  if (s.size() > max_chars) {
    s.resize(max_chars);
    s += "...";
  }
  return s;
}

}  // namespace kvplan
