// Flags shared by `kvplan search` and `kvplan tune`: the memory budget, the search and validation
// settings, and the held-out prompts — parsed once into a pipeline::SearchRequest.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "pipeline/tune.h"

namespace kvplan::cli {

struct SearchFlags {
  double max_bits = 0;  // effective bits per value (scales included)
  double max_nominal_bits = 0;
  double max_bytes_per_token = 0;
  std::string gpu_memory, weights_bytes, context;
  int64_t sequences = 1;
  std::string metric = "dkl";
  std::string memory = "bytes";
  std::string engine = "kvplan";
  std::string cluster = "auto";
  double eps = 0.05;
  int min_samples = 2;
  unsigned population = 64, generations = 200, seed = 42, islands = 2;
  int max_rounds = 4, plans_per_round = 3, max_evaluations = 8;
  int uniform_validations = 2, report_baselines = 4;
  std::string
      selection;       // chooses among validated plans; default configs/calibration/selection.jsonl
  std::string report;  // measures the chosen plan and baselines; default .../report.jsonl
  int ctx = 1024;      // tokens per window of the selection and report texts
  int windows_per_sample = 1;
  // The plan and the best uniform baseline at these contexts on the report text joined.
  std::vector<int> long_contexts = {256, 2048, 8192};
  int64_t long_context_tokens = 8192;  // per context and configuration; 0 = no long-context KL
  bool allow_overlap = false;
  bool per_head = false;                   // each KV head of a layer takes its own pair
  std::vector<std::string> compare_plans;  // measured on the report text beside the plan
  std::string measurements;                // search/measurement_store.h; empty: none
};

void add_search_flags(CLI::App* cmd, SearchFlags& flags);

// Throws Error(kInvalidArgument) naming the flag for malformed or conflicting values, before any
// file is read.
pipeline::SearchRequest search_request_from_flags(const SearchFlags& flags);

// "2026-11-29T08:40:00Z"
std::string utc_timestamp();

}  // namespace kvplan::cli
