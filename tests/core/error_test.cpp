#include "core/error.h"

#include <gtest/gtest.h>

namespace kvplan {
namespace {

TEST(Error, CarriesCodeAndFormattedMessage) {
  try {
    fail(ErrorCode::kOutOfRange, "{}: tensor '{}' past the end", "m.gguf", "blk.0");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfRange);
    EXPECT_STREQ(e.what(), "m.gguf: tensor 'blk.0' past the end");
  }
}

TEST(Error, BadInputCodesMapToExitTwo) {
  EXPECT_TRUE(is_bad_input(ErrorCode::kInvalidArgument));
  EXPECT_TRUE(is_bad_input(ErrorCode::kDataLoss));
  EXPECT_TRUE(is_bad_input(ErrorCode::kNotFound));
  EXPECT_FALSE(is_bad_input(ErrorCode::kInternal));
  EXPECT_FALSE(is_bad_input(ErrorCode::kResourceExhausted));
  EXPECT_EQ(error_code_name(ErrorCode::kDataLoss), "data loss");
}

TEST(Error, OneLineEscapesControlCharacters) {
  EXPECT_EQ(one_line("plain: text"), "plain: text");
  EXPECT_EQ(one_line("a\nb.gguf: not found"), "a\\nb.gguf: not found");
  EXPECT_EQ(one_line("x\r\t\x1b[31m\x7f"), "x\\r\\t\\x1b[31m\\x7f");
  EXPECT_EQ(one_line("l\xc3\xa9ma"), "l\xc3\xa9ma");  // UTF-8 passes through
}

}  // namespace
}  // namespace kvplan
