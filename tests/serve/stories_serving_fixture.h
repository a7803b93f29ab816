// The serving tests' model and KV configuration: stories260K with int8 keys and int4 values on
// every layer. A derived SetUp calls this one first and returns when it skipped or failed:
//
//   void SetUp() override {
//     StoriesServingTest::SetUp();
//     if (IsSkipped() || HasFatalFailure()) return;
//     ...
//   }
#pragma once

#include <filesystem>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "formats/kv_pair.h"
#include "formats/quant_settings.h"
#include "model/model_weights.h"
#include "model/transformer.h"
#include "plan/plan.h"
#include "test_paths.h"

namespace kvplan::serve {

class StoriesServingTest : public ::testing::Test {
 protected:
  static std::filesystem::path model_path() { return test::models_dir() / "stories260K.gguf"; }
  void SetUp() override {
    KVPLAN_NEED_FILE(model_path(),
                     "stories260K test model: ../shared/models or $KVPLAN_TEST_MODELS");
    weights_ = std::make_unique<ModelWeights>(load_model_weights(model_path()));
    model_ = std::make_unique<Transformer>(*weights_);
    plan_ = plan_of_pairs(kv_model(*weights_),
                          std::vector<KvPair>(static_cast<size_t>(weights_->config.n_layers),
                                              KvPair::parse("int8/int4")),
                          QuantSettings{});
  }
  std::unique_ptr<ModelWeights> weights_;
  std::unique_ptr<Transformer> model_;
  Plan plan_;
};

}  // namespace kvplan::serve
