#include "search/held_out_texts.h"

#include <string>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/error.h"
#include "profile/text_overlap.h"

namespace kvplan::search {
namespace {

// Each sample's text as bytes (a dialogue's messages joined), the unit the overlap check compares.
std::vector<std::vector<int32_t>> sample_bytes(const std::vector<CalibrationItem>& items) {
  std::vector<std::vector<int32_t>> out;
  for (const CalibrationItem& item : items) {
    std::string text = item.text;
    for (const ChatMessage& m : item.messages) text += m.content + "\n";
    std::vector<int32_t> bytes;
    for (const unsigned char c : text) bytes.push_back(c);
    for (const int32_t t : item.tokens) bytes.push_back(256 + t);  // token-id samples as given
    out.push_back(std::move(bytes));
  }
  return out;
}

struct NamedSamples {
  std::string file;
  std::vector<CalibrationItem> items;
};

void refuse_overlap(const NamedSamples& a, const NamedSamples& b) {
  const TextOverlap o = find_text_overlap(sample_bytes(a.items), sample_bytes(b.items),
                                          {.ngram_tokens = kOverlapBytes});
  if (!o.overlaps) return;
  fail(ErrorCode::kInvalidArgument,
       "{} (line {}) and {} (line {}) overlap: they share {}; the calibration, selection and "
       "report texts must be disjoint (--allow-overlap to accept it)",
       a.file, a.items[o.sample_a].line, b.file, b.items[o.sample_b].line,
       o.reason.find("identical") != std::string::npos
           ? std::string("an identical sample")
           : fmt::format("a run of {} bytes or more", kOverlapBytes));
}

}  // namespace

HeldOutTexts load_held_out_texts(const HeldOutTextsRequest& request, const Tokenizer& tokenizer,
                                 const ModelConfig& config,
                                 const std::filesystem::path* calibration_file) {
  const CalibrationOptions windows{.max_tokens = request.ctx,
                                   .num_prompts = 0,
                                   .chunk = true,
                                   .max_windows = request.windows_per_sample};
  const NamedSamples selection{request.selection.string(),
                               read_calibration_file(request.selection)};
  const NamedSamples report{request.report.string(), read_calibration_file(request.report)};
  if (!request.allow_overlap) {
    refuse_overlap(selection, report);
    if (calibration_file != nullptr) {
      const NamedSamples calibration{calibration_file->string(),
                                     read_calibration_file(*calibration_file)};
      refuse_overlap(calibration, selection);
      refuse_overlap(calibration, report);
    } else {
      spdlog::warn(
          "the calibration text is not at hand: only selection vs report was checked for "
          "overlap");
    }
  }
  std::string joined;
  for (const CalibrationItem& item : report.items) {
    if (!joined.empty()) joined += "\n\n";
    joined += item.text;
    for (const ChatMessage& m : item.messages) joined += m.content + "\n";
  }
  return {tokenize_calibration(selection.items, selection.file, tokenizer, config, windows),
          tokenize_calibration(report.items, report.file, tokenizer, config, windows),
          tokenizer.encode(joined, {.add_bos = true}), tokenizer.bos_id()};
}

}  // namespace kvplan::search
