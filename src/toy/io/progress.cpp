// io/progress.cpp — the progress reporter (see progress.h).
#include "toy/io/progress.h"

#include <unistd.h>

#include <algorithm>

namespace toy {

namespace {
using Clock = std::chrono::steady_clock;
}

Progress::Progress(std::string label, int64_t total, Unit unit, std::string noun, bool enabled, std::FILE* out)
    : label_(std::move(label)),
      noun_(std::move(noun)),
      total_(total),
      unit_(unit),
      enabled_(enabled),
      terminal_(enabled && ::isatty(::fileno(out))),
      out_(out),
      t0_(Clock::now()) {}

std::string Progress::duration(double s) {
  char b[32];
  if (s < 60)
    std::snprintf(b, sizeof b, "%.0fs", s);
  else if (s < 3600)
    std::snprintf(b, sizeof b, "%dm%02ds", int(s) / 60, int(s) % 60);
  else
    std::snprintf(b, sizeof b, "%dh%02dm", int(s) / 3600, int(s) % 3600 / 60);
  return b;
}

std::string Progress::amount(double v) const {
  char b[32];
  if (unit_ == Unit::Count)
    std::snprintf(b, sizeof b, "%.0f", v);
  else if (v >= double(1ull << 30))
    std::snprintf(b, sizeof b, "%.2f GiB", v / double(1ull << 30));
  else if (v >= double(1 << 20))
    std::snprintf(b, sizeof b, "%.1f MiB", v / double(1 << 20));
  else if (v >= 1024)
    std::snprintf(b, sizeof b, "%.1f KiB", v / 1024);
  else
    std::snprintf(b, sizeof b, "%.0f B", v);
  return b;
}

std::string Progress::line(bool terminal) const {
  const double secs = std::chrono::duration<double>(Clock::now() - t0_).count();
  const double rate = secs > 0 ? double(done_ - start_done_) / secs : 0;
  const std::string per = unit_ == Unit::Bytes ? amount(rate) + "/s" : amount(rate) + " " + noun_ + "/s";
  const std::string of = amount(double(done_)) + (total_ > 0 ? " / " + amount(double(total_)) : "") +
                         (unit_ == Unit::Count && !noun_.empty() ? " " + noun_ : "");
  std::string eta;
  if (total_ > 0 && rate > 0 && done_ < total_) eta = "ETA " + duration(double(total_ - done_) / rate);
  if (total_ > 0 && done_ >= total_) eta = "in " + duration(secs);
  const int percent = total_ > 0 ? int(100.0 * std::min(1.0, double(done_) / double(total_))) : 0;
  if (terminal) {
    char head[16] = "";
    if (total_ > 0) std::snprintf(head, sizeof head, "%3d%%", percent);
    std::string s = label_ + "  " + head;
    if (total_ > 0) {
      constexpr int kWidth = 28;
      const int fill = kWidth * percent / 100;
      s += " [" + std::string(size_t(fill), '=') + (fill < kWidth ? ">" : "") +
           std::string(size_t(std::max(0, kWidth - fill - 1)), ' ') + "]";
    }
    return s + " " + of + "  " + per + (eta.empty() ? "" : "  " + eta) + (extra_.empty() ? "" : "  " + extra_);
  }
  std::string s = label_ + ": " + (total_ > 0 ? std::to_string(percent) + "% (" + of + ")" : of);
  return s + ", " + per + (eta.empty() ? "" : ", " + eta) + (extra_.empty() ? "" : ", " + extra_);
}

void Progress::update(int64_t done, const std::string& extra) {
  if (!enabled_ || finished_) return;
  done_ = done;
  updated_ = true;
  extra_ = extra;
  const auto now = Clock::now();
  if (terminal_) {
    if (visible_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    std::fprintf(out_, "\r\033[K%s", line(true).c_str());
    visible_ = true;
  } else {
    // Plain: a line at each tenth of a known total, else every 10 s.
    const int tenth = total_ > 0 ? int(10 * std::min<int64_t>(done_, total_) / total_) : -1;
    const bool due = total_ > 0 ? tenth > last_tenth_ && tenth < 10 : now - last_draw_ >= std::chrono::seconds(10);
    if (!due) return;
    last_tenth_ = tenth;
    last_draw_ = now;
    std::fprintf(out_, "%s\n", line(false).c_str());
  }
  std::fflush(out_);
}

void Progress::clear() {
  if (terminal_ && visible_) {
    std::fputs("\r\033[K", out_);
    std::fflush(out_);
    visible_ = false;
  }
}

void Progress::finish() {
  if (!enabled_ || finished_ || !updated_) return;
  finished_ = true;
  std::fprintf(out_, terminal_ ? "\r\033[K%s\n" : "%s\n", line(terminal_).c_str());
  std::fflush(out_);
}

}  // namespace toy
