// The self-contained HTML report: one page, inline CSS and SVG charts, no scripts, no fonts or
// images fetched from anywhere, so it opens offline and is byte-identical for the same inputs.
//
//   std::string html = kvplan::report::html_report(build_report_data(profile, plan, memory));
//   kvplan::write_file_atomic("report.html", html);
#pragma once

#include <string>

#include "report/report_data.h"

namespace kvplan::report {

std::string html_report(const ReportData& data);

}  // namespace kvplan::report
