// Overlap between two sets of token sequences, so that calibration, selection and report prompts
// can be refused when they share text: a score measured on prompts the plan was tuned on is not a
// held-out score.
//
// Two sets overlap when a sample of A is identical to a sample of B (same token ids), or when a
// sample of A and a sample of B share a run of `ngram_tokens` consecutive token ids (13 by
// default, the contamination n-gram of GPT-3's data-overlap study, Brown et al. 2020, App. C).
// Samples shorter than the n-gram only count when identical; empty samples never count.
//
//   kvplan::TextOverlap o = kvplan::find_text_overlap(calibration.prompts, report_prompts);
//   if (o.overlaps) fail(ErrorCode::kInvalidArgument, "calibration and report overlap: {}",
//   o.reason);
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kvplan {

struct TextOverlapOptions {
  size_t ngram_tokens = 13;  // a shared run of this many tokens counts as overlap; must be > 0
};

struct TextOverlap {
  bool overlaps = false;
  size_t sample_a = 0;  // index into A of the first overlapping sample
  size_t sample_b = 0;  // index into B of the lowest sample it overlaps
  std::string reason;   // e.g. "sample 3 and sample 7 share a run of 13 tokens (...)"
};

// Returns the first overlap: the lowest index of A that overlaps anything, paired with the lowest
// index of B it overlaps (an identical sample is reported as such). Expected time
// O(total tokens * ngram_tokens): every window is hashed once and every hash hit is verified
// token by token, so a hash collision never reports a false overlap.
// Throws Error(kInvalidArgument) for ngram_tokens == 0.
[[nodiscard]] TextOverlap find_text_overlap(const std::vector<std::vector<int32_t>>& a,
                                            const std::vector<std::vector<int32_t>>& b,
                                            const TextOverlapOptions& options = {});

}  // namespace kvplan
