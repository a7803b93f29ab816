// kvplan eval --task passkey: pass-key retrieval at long context (src/model/passkey.h) under exact
// KV and each KV configuration given, the configurations asked only what exact KV answers.
#pragma once

#include <string>
#include <vector>

#include "cli/kv_flags.h"
#include "model/passkey.h"

namespace kvplan::cli {

struct PasskeyRequest {
  std::string model, text_path;  // the text gives the filler sentences
  KvFlags kv;                    // --plan, --kv, --k-format/--v-format: each one a configuration
  PasskeyOptions task;
  int threads = 0;
  bool exact_chunk = false;
  bool json = false;
};

void run_passkey_eval(const PasskeyRequest& request);

}  // namespace kvplan::cli
