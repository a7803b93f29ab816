// The Markdown report: the same sections as the HTML one, as tables (the heatmaps as numbers), so
// it reads in a terminal, a code review or a repository browser without any image.
//
//   std::string md = kvplan::report::markdown_report(build_report_data(profile, plan, memory));
#pragma once

#include <string>

#include "report/report_data.h"

namespace kvplan::report {

std::string markdown_report(const ReportData& data);

}  // namespace kvplan::report
