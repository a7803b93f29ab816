// The candidate lists of `kvplan profile`'s flags: --candidates (pairs, or "kvtuner" for KVTuner's
// joint int pairs) and --formats (the side catalogue's formats).
//
//   std::vector<kvplan::KvPair> pairs = kvplan::parse_candidates("KV8,K8V4,q8_0/q4_0");
//   std::vector<kvplan::Format> formats = kvplan::parse_format_list("int4,int8");
#pragma once

#include <string>
#include <vector>

#include "formats/kv_pair.h"

namespace kvplan {

// K{8,4,2} x V{8,4,2} of the int formats: KV8, K8V4, K8V2, K4V8, KV4, K4V2, K2V8, K2V4, KV2
// (KVTuner's joint pairs; `--candidates kvtuner`).
std::vector<KvPair> kvtuner_candidates();

// Parses "K8V4,KV4,q8_0/q4_0" (comma-separated KvPair names). Throws Error(kInvalidArgument) for an
// unknown pair, a slot, a duplicate or an empty list.
std::vector<KvPair> parse_candidates(const std::string& text);
// --formats: comma-separated format names, or "all" (every format but f32). Throws
// Error(kInvalidArgument) for an unknown, repeated or non-candidate format.
std::vector<Format> parse_format_list(const std::string& text);

}  // namespace kvplan
