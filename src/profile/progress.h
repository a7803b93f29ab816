// Progress of a long profile run for people: on a terminal one line redrawn in place with cells
// done and an ETA; otherwise (logs, CI, batch jobs) a plain log line every `log_every_s` seconds
// and at each phase change.
//
//   kvplan::ProgressPrinter printer(stderr);
//   options.progress = [&](const kvplan::ProfileProgress& p) { printer.update(p); };
#pragma once

#include <cstdio>
#include <string>

#include "profile/profiler.h"

namespace kvplan {

// "1h02m", "4m05s", "12s".
std::string format_duration(double seconds);

class ProgressPrinter {
 public:
  explicit ProgressPrinter(std::FILE* out, double log_every_s = 15.0);
  ~ProgressPrinter();
  ProgressPrinter(const ProgressPrinter&) = delete;
  ProgressPrinter& operator=(const ProgressPrinter&) = delete;

  void update(const ProfileProgress& p);
  // Ends the redrawn line (terminal) so later output starts on a fresh line.
  void finish();

 private:
  std::FILE* out_;
  bool tty_;
  double log_every_s_;
  double last_log_s_ = -1e9;
  std::string last_phase_;
  bool line_open_ = false;
};

}  // namespace kvplan
