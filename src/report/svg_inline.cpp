#include "report/svg_inline.h"

#include <fmt/format.h>

#include "core/error.h"

namespace kvplan::report {
namespace {

void replace_all(std::string& text, std::string_view from, std::string_view to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
}

}  // namespace

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string inline_svg(std::string_view svg, std::string_view id_prefix, std::string_view title,
                       const SvgPageSize& size) {
  const size_t root = svg.find("<svg");
  const size_t root_end = root == std::string_view::npos ? root : svg.find('>', root);
  if (root_end == std::string_view::npos) {
    fail(ErrorCode::kInternal, "chart '{}': the plotting library wrote no <svg> element", title);
  }
  // The root's own attributes are replaced; namespaces and viewBox are what it needs.
  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" xmlns:xlink=\"http://www.w3.org/1999/xlink\" "
      "version=\"1.1\" class=\"chart\" id=\"{0}\" role=\"img\" aria-label=\"{1}\" width=\"{2}\" "
      "height=\"{3}\" viewBox=\"0 0 {2} {3}\">\n<title>{1}</title>",
      html_escape(id_prefix), html_escape(title), size.width, size.height);
  std::string body(svg.substr(root_end + 1));
  const std::string prefix = std::string(id_prefix) + "-";
  replace_all(body, "id=\"", "id=\"" + prefix);
  replace_all(body, "url(#", "url(#" + prefix);
  replace_all(body, "href=\"#", "href=\"#" + prefix);
  out += body;
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

}  // namespace kvplan::report
