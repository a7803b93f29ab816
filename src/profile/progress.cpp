#include "profile/progress.h"

#include <cmath>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

namespace kvplan {

std::string format_duration(double seconds) {
  const long s = std::lround(std::max(seconds, 0.0));
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

ProgressPrinter::ProgressPrinter(std::FILE* out, double log_every_s)
    : out_(out), tty_(isatty(fileno(out)) != 0), log_every_s_(log_every_s) {}

ProgressPrinter::~ProgressPrinter() {
  finish();
}

void ProgressPrinter::update(const ProfileProgress& p) {
  const double frac = p.work_total > 0 ? std::min(p.work_done / p.work_total, 1.0) : 0.0;
  const std::string eta =
      frac > 0.01 ? format_duration(p.elapsed_s * (1.0 - frac) / frac) : std::string("?");
  const std::string where =
      p.layer >= 0 ? fmt::format("layer {:>3}", p.layer) : std::string(p.phase);
  const std::string text =
      fmt::format("profile {:<9} cells {}/{} {:5.1f}%  elapsed {}  ETA {}", where, p.cells_done,
                  p.cells_total, 100.0 * frac, format_duration(p.elapsed_s), eta);
  if (tty_) {
    std::fprintf(out_, "\r%s\x1b[K", text.c_str());
    std::fflush(out_);
    line_open_ = true;
    return;
  }
  if (p.phase != last_phase_ || p.elapsed_s - last_log_s_ >= log_every_s_ ||
      p.cells_done == p.cells_total) {
    spdlog::info("{}", text);
    last_log_s_ = p.elapsed_s;
    last_phase_ = p.phase;
  }
}

void ProgressPrinter::finish() {
  if (tty_ && line_open_) {
    std::fprintf(out_, "\n");
    std::fflush(out_);
    line_open_ = false;
  }
}

}  // namespace kvplan
