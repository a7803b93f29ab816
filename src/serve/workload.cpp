#include "serve/workload.h"

#include <algorithm>
#include <random>

#include "core/error.h"

namespace kvplan::serve {

void WorkloadOptions::validate() const {
  if (users < 1 || rounds < 1)
    fail(ErrorCode::kInvalidArgument, "--users and --rounds must be >= 1");
  if (system_tokens < 0 || document_tokens < 0 || question_tokens < 1 || answer_tokens < 1) {
    fail(ErrorCode::kInvalidArgument,
         "--system-tokens and --document-tokens must be >= 0, --question-tokens and "
         "--answer-tokens >= 1");
  }
  if (!(user_interval_s >= 0) || !(think_time_s >= 0)) {
    fail(ErrorCode::kInvalidArgument, "--user-interval and --think-time must be >= 0 seconds");
  }
  if (!(document_reuse >= 0 && document_reuse <= 1)) {
    fail(ErrorCode::kInvalidArgument, "--document-reuse {}: expected a fraction in [0, 1]",
         document_reuse);
  }
}

Workload make_workload(const WorkloadOptions& o, std::span<const int32_t> text,
                       std::optional<int32_t> bos) {
  o.validate();
  const int64_t longest =
      std::max({o.system_tokens, o.document_tokens, o.question_tokens, o.answer_tokens});
  if (static_cast<int64_t>(text.size()) < longest + 1) {
    fail(ErrorCode::kInvalidArgument, "the workload text has {} tokens, fewer than one part ({})",
         text.size(), longest);
  }
  std::mt19937_64 rng(o.seed);
  // A slice of n tokens at a seeded offset.
  const auto slice = [&](int64_t n) {
    std::uniform_int_distribution<size_t> at(0, text.size() - static_cast<size_t>(n));
    const size_t start = at(rng);
    return std::vector<int32_t>(text.begin() + static_cast<std::ptrdiff_t>(start),
                                text.begin() + static_cast<std::ptrdiff_t>(start + n));
  };
  Workload w;
  w.options = o;
  const std::vector<int32_t> system(text.begin(), text.begin() + o.system_tokens);
  std::vector<std::vector<int32_t>> documents;
  std::bernoulli_distribution reuse(o.document_reuse);
  std::exponential_distribution<double> gap(o.user_interval_s > 0 ? 1.0 / o.user_interval_s : 1.0);
  double start = 0;
  for (int u = 0; u < o.users; ++u) {
    if (u > 0 && reuse(rng)) {
      std::uniform_int_distribution<int> earlier(0, u - 1);
      documents.push_back(documents[static_cast<size_t>(earlier(rng))]);
    } else {
      documents.push_back(slice(o.document_tokens));
    }
    w.user_start_s.push_back(start);
    start += o.user_interval_s > 0 ? gap(rng) : 0.0;
    std::vector<int32_t> conversation;
    if (bos) conversation.push_back(*bos);
    conversation.insert(conversation.end(), system.begin(), system.end());
    conversation.insert(conversation.end(), documents.back().begin(), documents.back().end());
    for (int r = 0; r < o.rounds; ++r) {
      const std::vector<int32_t> question = slice(o.question_tokens);
      conversation.insert(conversation.end(), question.begin(), question.end());
      w.turns.push_back({u, r, conversation});
      const std::vector<int32_t> answer = slice(o.answer_tokens);
      conversation.insert(conversation.end(), answer.begin(), answer.end());
    }
  }
  return w;
}

size_t longest_prompt_tokens(const Workload& workload) {
  size_t longest = 0;
  for (const Turn& t : workload.turns) longest = std::max(longest, t.prompt.size());
  return longest;
}

}  // namespace kvplan::serve
