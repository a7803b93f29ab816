// A deterministic multi-user, multi-turn workload in the spirit of LMCache's multi-round QA and
// long-document QA benchmarks: every user's prompt is a shared system prompt, the user's own
// document, the conversation so far (questions and reference answers) and a new question; users
// arrive at a steady seeded rate and come back after a think time. The same options and text give
// the same requests, token for token, whatever KV configuration serves them.
//
//   Workload w = make_workload({.users = 8, .rounds = 4}, text_tokens, bos);
//   w.turns[0].prompt;  w.user_start_s[3];
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace kvplan::serve {

struct WorkloadOptions {
  int users = 8;
  int rounds = 4;                  // questions per user
  int64_t system_tokens = 256;     // shared by every user's prompt
  int64_t document_tokens = 1024;  // each user's own context before the first question
  int64_t question_tokens = 32;
  int64_t answer_tokens = 32;  // generated per request; the next round carries a reference answer
  double user_interval_s = 2;  // mean time between two users' first questions (seeded jitter)
  double think_time_s = 5;     // between a user's answer and their next question
  // Fraction of users whose document is an earlier user's (long-document QA's hit pattern).
  double document_reuse = 0;
  uint64_t seed = 1;

  // Error(kInvalidArgument) naming the option for values out of range.
  void validate() const;
};

struct Turn {
  int user = 0;
  int round = 0;
  std::vector<int32_t> prompt;  // the whole prompt of this request
};

struct Workload {
  WorkloadOptions options;
  std::vector<Turn> turns;           // user-major: user u's rounds at [u * rounds, (u+1) * rounds)
  std::vector<double> user_start_s;  // when each user's first question arrives
  [[nodiscard]] const Turn& turn(int user, int round) const {
    return turns[static_cast<size_t>(user * options.rounds + round)];
  }
};

// `text` is tokenized text (without BOS) the prompts are cut from: the system prompt from its
// start, documents, questions and answers from seeded offsets. Error(kInvalidArgument) when the
// text is shorter than one document.
Workload make_workload(const WorkloadOptions& options, std::span<const int32_t> text,
                       std::optional<int32_t> bos);

// The longest prompt of any turn, in tokens.
size_t longest_prompt_tokens(const Workload& workload);

}  // namespace kvplan::serve
