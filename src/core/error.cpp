#include "core/error.h"

namespace kvplan {

std::string_view error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "invalid argument";
    case ErrorCode::kNotFound:
      return "not found";
    case ErrorCode::kOutOfRange:
      return "out of range";
    case ErrorCode::kDataLoss:
      return "data loss";
    case ErrorCode::kResourceExhausted:
      return "resource exhausted";
    case ErrorCode::kUnimplemented:
      return "unimplemented";
    case ErrorCode::kInternal:
      return "internal";
    case ErrorCode::kIo:
      return "i/o error";
  }
  return "unknown";
}

bool is_bad_input(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kNotFound:
    case ErrorCode::kOutOfRange:
    case ErrorCode::kDataLoss:
    case ErrorCode::kUnimplemented:
      return true;
    default:
      return false;
  }
}

}  // namespace kvplan
