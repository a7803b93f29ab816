#include "server/completion_text.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace kvplan::server {
namespace {

// Feeds pieces one by one; returns what was sent, piece by piece, then finish()'s part.
std::vector<std::string> feed(CompletionText& t, const std::vector<std::string>& pieces) {
  std::vector<std::string> sent;
  for (const std::string& p : pieces) sent.push_back(t.append(p));
  sent.push_back(t.finish());
  return sent;
}

TEST(CompletionText, SendsEachPieceAsItComesWithoutStops) {
  CompletionText t;
  EXPECT_EQ(feed(t, {"Once", " upon", " a"}),
            (std::vector<std::string>{"Once", " upon", " a", ""}));
  EXPECT_EQ(t.sent(), "Once upon a");
}

TEST(CompletionText, HoldsBackACutUtf8CharacterUntilItIsWhole) {
  // "é" is C3 A9 and "€" is E2 82 AC: tokens with byte fallback can end inside one.
  CompletionText t;
  EXPECT_EQ(t.append("caf\xC3"), "caf");
  EXPECT_EQ(t.append("\xA9 "), "\xC3\xA9 ");
  EXPECT_EQ(t.append("\xE2\x82"), "");
  EXPECT_EQ(t.append("\xAC"), "\xE2\x82\xAC");
  EXPECT_EQ(t.finish(), "");
}

TEST(CompletionText, AnIncompleteCharacterAtTheEndBecomesTheReplacementCharacter) {
  CompletionText t;
  EXPECT_EQ(t.append("ok\xE2\x82"), "ok");
  EXPECT_EQ(t.finish(), "\xEF\xBF\xBD");
  EXPECT_EQ(t.sent(), "ok\xEF\xBF\xBD");
}

TEST(CompletionText, EndsBeforeAStopStringSplitAcrossPieces) {
  CompletionText t({"\n\n", "THE END"});
  EXPECT_EQ(t.append("and they"), "and they");
  EXPECT_EQ(t.append(" lived. TH"), " lived. ");  // "TH" could start "THE END"
  EXPECT_FALSE(t.stopped());
  EXPECT_EQ(t.append("E EN"), "");
  EXPECT_EQ(t.append("D!"), "");
  EXPECT_TRUE(t.stopped());
  EXPECT_EQ(t.append("more"), "");
  EXPECT_EQ(t.finish(), "");
  EXPECT_EQ(t.sent(), "and they lived. ");
}

TEST(CompletionText, ReleasesAHeldPrefixThatDidNotBecomeAStop) {
  CompletionText t({"THE END"});
  EXPECT_EQ(t.append("THE"), "");
  EXPECT_EQ(t.append(" cat"), "THE cat");
  EXPECT_EQ(t.append(" THE E"), " ");
  EXPECT_EQ(t.finish(), "THE E");  // generation ended: the held text was not a stop after all
  EXPECT_FALSE(t.stopped());
}

TEST(CompletionText, TheEarliestOfSeveralStopsWins) {
  CompletionText t({"b", "a"});
  EXPECT_EQ(t.append("xxab"), "xx");
  EXPECT_TRUE(t.stopped());
}

TEST(CompletionText, EmptyStopStringsAreIgnored) {
  CompletionText t({""});
  EXPECT_EQ(t.append("abc"), "abc");
  EXPECT_FALSE(t.stopped());
}

}  // namespace
}  // namespace kvplan::server
