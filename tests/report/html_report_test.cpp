#include "report/html_report.h"

#include <regex>
#include <set>

#include <gtest/gtest.h>

#include "report/report_fixtures.h"

namespace kvplan::test {
namespace {

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(HtmlReport, OnePageWithFourChartsAndEverySection) {
  const std::string html = report::html_report(tiny_report());
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(count(html, "<svg "), 4u);
  EXPECT_EQ(count(html, "</svg>"), 4u);
  for (const char* id : {"id=\"chart-plan-layers\"", "id=\"chart-heatmap-dkl\"",
                         "id=\"chart-heatmap-eo\"", "id=\"chart-pareto\"", "id=\"pareto\"",
                         "id=\"memory\"", "id=\"validation\"", "id=\"provenance\""}) {
    EXPECT_NE(html.find(id), std::string::npos) << id;
  }
  // Memory, validation and provenance facts from the inputs.
  EXPECT_NE(html.find("2.29x"), std::string::npos) << "256 / 112 B/token vs bf16";
  EXPECT_NE(html.find("held.jsonl"), std::string::npos);
  EXPECT_NE(html.find("cal.jsonl"), std::string::npos);
  EXPECT_NE(html.find("6 equivalent bits"), std::string::npos);
}

TEST(HtmlReport, SelfContainedEscapedAndDeterministic) {
  const std::string html = report::html_report(tiny_report());
  EXPECT_EQ(html.find("<script"), std::string::npos);
  // The only URLs are XML namespace names, which browsers never fetch.
  const std::regex url(R"((https?:)?//[^"' )<]+)");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), url); it != std::sregex_iterator();
       ++it) {
    const std::string u = it->str();
    EXPECT_TRUE(u == "http://www.w3.org/2000/svg" || u == "http://www.w3.org/1999/xlink") << u;
  }
  EXPECT_EQ(html.find("tiny <model>"), std::string::npos) << "model name must be escaped";
  EXPECT_NE(html.find("tiny &lt;model&gt; &amp; co"), std::string::npos);
  // Every id on the page is unique (PLplot reuses its clip-path ids in every chart).
  const std::regex id(R"( id="([^"]+)\")");
  std::set<std::string> seen;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), id); it != std::sregex_iterator();
       ++it) {
    EXPECT_TRUE(seen.insert((*it)[1]).second) << "duplicate id " << (*it)[1];
  }
  EXPECT_TRUE(html == report::html_report(tiny_report())) << "two runs gave different bytes";
}

TEST(HtmlReport, ShowsTheWarningOfAPlanFromAnotherProfile) {
  const Profile profile = tiny_profile();
  Plan plan = tiny_plan(profile);
  plan.results.provenance.profile->hash = "0000000000000000";
  const std::string html =
      report::html_report(report::build_report_data({profile, "p.json"}, {plan, "q.json"}, {}));
  EXPECT_NE(html.find("class=\"warning\""), std::string::npos);
}

}  // namespace
}  // namespace kvplan::test
