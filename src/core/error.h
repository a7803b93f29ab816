// kvplan::Error — the one exception type library code throws for bad input or failed operations.
//
// Library code never aborts or exits on input: it throws Error with a canonical code and a message
// that names the file, field or byte offset, the value seen and what was allowed. The CLI maps
// codes to exit statuses (bad input -> 2, runtime failure -> 1); the C API maps them to status
// codes and never lets an exception cross the boundary.
//
//   throw kvplan::Error(kvplan::ErrorCode::kInvalidArgument,
//                       fmt::format("{}: field 'num_key_value_heads': expected > 0, got {}", path,
//                       n));
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace kvplan {

enum class ErrorCode {
  kInvalidArgument,    // malformed or inconsistent input (bad file, bad option value)
  kNotFound,           // a named file, key, tensor or format does not exist
  kOutOfRange,         // a count or offset points past what the data holds
  kDataLoss,           // bytes are corrupt: checksum, magic or version mismatch
  kResourceExhausted,  // memory, capacity or a budget ran out
  kUnimplemented,      // valid input kvplan deliberately does not support (e.g. MLA)
  kInternal,           // a bug or an unexpected system failure
  kIo,                 // the operating system refused a read or write
};

std::string_view error_code_name(ErrorCode code);

// True for codes that mean "the user's input is wrong" (CLI exit code 2).
bool is_bad_input(ErrorCode code);

// `message` on one printable line: control characters (a newline in a file name, an escape
// sequence from a model file) are written as \n, \r, \t or \xHH, so an error stays one line and
// cannot drive the terminal.
std::string one_line(std::string_view message);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  [[nodiscard]] ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

template <typename... Args>
[[noreturn]] void fail(ErrorCode code, fmt::format_string<Args...> format, Args&&... args) {
  throw Error(code, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace kvplan
