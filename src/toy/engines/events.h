// engines/events.h — the run-bundle event log: `events.jsonl`, one JSON object per line.
//
// Schema `toy/v1`, the seeds' run-log schema (docs/events.md, docs/events.schema.json): every
// line has "kind" (run_start, step, eval, checkpoint, run_end) and "t" (Unix time in seconds,
// fractional), then the event's own fields. Lines are appended and flushed one at a time, so a
// reader (or a crash) only ever sees whole events, except a torn last line after a kill, which
// repair_event_log() cuts off.
#pragma once

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace toy {

inline constexpr const char* kEventSchema = "toy/v1";

// "2026-11-30T03:45:01.123Z"
std::string utc_timestamp();
// Unix time in seconds, with microseconds: 1764474301.123456
double unix_seconds();
// Where a run runs, for run_start: "host" (the host name), "os" (e.g. Linux), "arch" (e.g.
// x86_64) and "backend" ("cpu").
nlohmann::ordered_json provenance();

// Cuts a torn last line (one a killed process left without its newline) off the log at `path`,
// so that appending continues on a line of its own. Returns the bytes removed (0: intact or
// absent). Throws std::runtime_error when the file cannot be read or truncated.
size_t repair_event_log(const std::string& path);

class EventLog {
 public:
  EventLog() = default;
  // Opens `path` for appending (creating it). Throws std::runtime_error naming the file.
  explicit EventLog(const std::string& path);
  ~EventLog();
  EventLog(EventLog&& o) noexcept : f_(o.f_) { o.f_ = nullptr; }
  EventLog& operator=(EventLog&& o) noexcept;
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  // Writes {"kind": kind, "t": unix_seconds(), ...fields} as one line and flushes it.
  void emit(std::string_view kind, const nlohmann::ordered_json& fields = nlohmann::ordered_json::object());
  bool is_open() const { return f_ != nullptr; }

 private:
  std::FILE* f_ = nullptr;
};

}  // namespace toy
