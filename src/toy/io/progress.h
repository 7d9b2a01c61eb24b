// io/progress.h — the one progress reporter of every long operation: downloads, training, perplexity
// over a file, `toy init`, `toy bench`.
//
// On a terminal it is one line, redrawn at most ten times a second:
//   model.gguf   42% [============>                 ] 12.3 MiB / 29.2 MiB  4.1 MiB/s  ETA 4s
// Anywhere else (a log file, CI) it writes a plain line at every tenth of the work and at the end,
// so that logs show it without carriage returns:
//   model.gguf: 40% (11.7 MiB / 29.2 MiB), 4.1 MiB/s, ETA 4s
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace toy {

class Progress {
 public:
  enum class Unit { Count, Bytes };
  // `noun` names a Count's items ("windows", "steps"); `total` 0 is unknown (no bar, no ETA).
  // Disabled, it draws nothing. On a terminal or not: isatty(fileno(out)).
  Progress(std::string label, int64_t total, Unit unit = Unit::Count, std::string noun = "", bool enabled = true,
           std::FILE* out = stderr);
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  ~Progress() { finish(); }

  void set_total(int64_t total) { total_ = total; }
  // The work done before this run (a resumed download or training run): the rate counts the rest.
  void starting_at(int64_t done) { start_done_ = done_ = done; }
  // `done` items so far (absolute). `extra` follows the numbers: "loss 2.3141".
  void update(int64_t done, const std::string& extra = "");
  // Erases the terminal line, before other output to the same terminal (the next update redraws).
  void clear();
  // The last state, drawn once more and ended with a newline. Idempotent.
  void finish();

  static std::string duration(double seconds);  // "4s", "2m05s", "1h02m"

 private:
  std::string line(bool terminal) const;  // the text for the current state
  std::string amount(double v) const;     // "12.3 MiB" or "1234"

  std::string label_, noun_, extra_;
  int64_t total_, done_ = 0, start_done_ = 0;
  Unit unit_;
  bool enabled_, terminal_, visible_ = false, updated_ = false, finished_ = false;
  std::FILE* out_;
  std::chrono::steady_clock::time_point t0_, last_draw_{};
  int last_tenth_ = -1;
};

}  // namespace toy
