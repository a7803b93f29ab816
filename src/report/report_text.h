// Sentences and table cells both report writers share, so HTML and Markdown say the same thing.
#pragma once

#include <optional>
#include <string>

#include "report/report_data.h"

namespace kvplan::report {

// "SmolLM2 (llama), 30 layers, 9 attention heads, 3 KV heads, head_dim 64"
std::string model_line(const ReportData& d);

// "3.93 equivalent bits, 7,104 B/token (3.24x less than bf16); mean KL 0.09874 ..."
std::string summary_line(const ReportData& d);

// "n/a" for a missing value.
std::string optional_significant(const std::optional<double>& v, int digits = 4);

// "T=4,096" column heading.
std::string context_heading(int64_t tokens);

// "2 (8,192 tokens)" for sequences that fit.
std::string fit_cell(int64_t sequences, int64_t context);

}  // namespace kvplan::report
