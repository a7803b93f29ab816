#include "formats/quant_settings.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace kvplan {
namespace {

TEST(QuantSettings, ModesParseAndValidate) {
  EXPECT_EQ(parse_quant_mode("kivi"), QuantMode::kKivi);
  EXPECT_EQ(parse_quant_mode("per-token"), QuantMode::kPerToken);
  EXPECT_EQ(quant_mode_name(QuantMode::kKivi), "kivi");
  EXPECT_THROW(parse_quant_mode("per-channel"), Error);
  QuantSettings s;
  EXPECT_NO_THROW(s.validate());
  s.group_size = 0;
  EXPECT_THROW(s.validate(), Error);
  s = {};
  s.block_size = 0;
  EXPECT_THROW(s.validate(), Error);
  s = {};
  s.mode = QuantMode::kKivi;
  s.residual_length = 48;  // not a multiple of 32
  EXPECT_THROW(s.validate(), Error);
}

}  // namespace
}  // namespace kvplan
