#include "report/svg_inline.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace kvplan::report {
namespace {

TEST(InlineSvg, DropsThePrologAndPrefixesEveryIdAndReference) {
  const std::string doc =
      "<?xml version=\"1.0\"?>\n<!DOCTYPE svg PUBLIC \"x\" \"y\">\n<svg width=\"600pt\" "
      "height=\"400pt\" viewBox=\"0 0 600 400\">\n<clipPath id=\"clip0\"><rect/></clipPath>"
      "<g clip-path=\"url(#clip0)\"><use xlink:href=\"#dot\"/><use href=\"#dot\"/></g>\n</svg>\n";
  const std::string out = inline_svg(doc, "c1", "A <title>", {600, 400});
  EXPECT_EQ(out.rfind("<svg ", 0), 0u) << out;
  EXPECT_EQ(out.find("<?xml"), std::string::npos);
  EXPECT_EQ(out.find("DOCTYPE"), std::string::npos);
  EXPECT_EQ(out.find("600pt"), std::string::npos);
  EXPECT_NE(out.find("width=\"600\" height=\"400\""), std::string::npos);
  EXPECT_NE(out.find("id=\"c1-clip0\""), std::string::npos);
  EXPECT_NE(out.find("url(#c1-clip0)"), std::string::npos);
  EXPECT_NE(out.find("xlink:href=\"#c1-dot\""), std::string::npos);
  EXPECT_NE(out.find(" href=\"#c1-dot\""), std::string::npos);
  EXPECT_NE(out.find("<title>A &lt;title&gt;</title>"), std::string::npos);
  EXPECT_EQ(out.substr(out.size() - 6), "</svg>");
}

TEST(InlineSvg, RefusesTextWithoutAnSvgElement) {
  EXPECT_THROW((void)inline_svg("<html></html>", "x", "t", {}), Error);
  EXPECT_THROW((void)inline_svg("<svg", "x", "t", {}), Error);
}

TEST(HtmlEscape, EscapesMarkupAndQuotes) {
  EXPECT_EQ(html_escape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
  EXPECT_EQ(html_escape("plain"), "plain");
}

}  // namespace
}  // namespace kvplan::report
