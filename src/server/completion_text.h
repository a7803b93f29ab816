// The text a client receives for generated tokens, given as it grows: bytes are sent only up to
// the last complete UTF-8 character (a token can end inside one), a suffix that could be the
// start of a stop string is held back until it is known not to be, and at a stop string the text
// ends (the stop string itself is not sent, as OpenAI's API does).
//
//   CompletionText t({"\n\n"});
//   std::string send = t.append(tokenizer.token_text(id));   // possibly empty
//   if (t.stopped()) ...;                                     // cancel the generation
//   send += t.finish();                                       // the rest, at the end
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kvplan::server {

class CompletionText {
 public:
  explicit CompletionText(std::vector<std::string> stops = {});

  // Adds one token's bytes; returns the text that became safe to send. Nothing once stopped().
  std::string append(std::string_view piece);
  // A stop string appeared: the text ends before it.
  [[nodiscard]] bool stopped() const { return stopped_; }
  // At the end of generation: what was held back (an incomplete UTF-8 tail becomes U+FFFD).
  std::string finish();
  // Everything sent so far (append's and finish's results, concatenated).
  [[nodiscard]] const std::string& sent() const { return sent_; }

 private:
  std::string take(size_t end);
  std::vector<std::string> stops_;
  std::string text_;  // every byte generated, cut at a stop string
  std::string sent_;
  bool stopped_ = false;
};

}  // namespace kvplan::server
