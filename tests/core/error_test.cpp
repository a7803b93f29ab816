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

}  // namespace
}  // namespace kvplan
