// engines/events.cpp — appending events to events.jsonl.
#include "toy/engines/events.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace toy {

std::string utc_timestamp() {
  using namespace std::chrono;
  const auto now = system_clock::now();
  const std::time_t secs = system_clock::to_time_t(now);
  const auto ms = duration_cast<milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[80];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, int(ms));
  return buf;
}

double unix_seconds() {
  using namespace std::chrono;
  return double(duration_cast<microseconds>(system_clock::now().time_since_epoch()).count()) / 1e6;
}

nlohmann::ordered_json provenance() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = 0;
  struct utsname u {};
  const bool have_uname = ::uname(&u) == 0;
  return {{"host", host},
          {"os", have_uname ? u.sysname : "unknown"},
          {"arch", have_uname ? u.machine : "unknown"},
          {"backend", "cpu"}};
}

size_t repair_event_log(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return 0;
  std::ifstream in(path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) throw std::runtime_error(path + ": cannot read");
  if (text.empty() || text.back() == '\n') return 0;
  const size_t keep = text.rfind('\n') + 1;  // npos + 1 = 0: the only line is torn
  std::filesystem::resize_file(path, keep, ec);
  if (ec) throw std::runtime_error(path + ": cannot truncate the torn last line: " + ec.message());
  return text.size() - keep;
}

EventLog::EventLog(const std::string& path) : f_(std::fopen(path.c_str(), "ab")) {
  if (!f_) throw std::runtime_error(path + ": cannot open for appending: " + std::strerror(errno));
}

EventLog::~EventLog() {
  if (f_) std::fclose(f_);
}

EventLog& EventLog::operator=(EventLog&& o) noexcept {
  if (this != &o) {
    if (f_) std::fclose(f_);
    f_ = o.f_;
    o.f_ = nullptr;
  }
  return *this;
}

void EventLog::emit(std::string_view kind, const nlohmann::ordered_json& fields) {
  if (!f_) return;
  nlohmann::ordered_json e;
  e["kind"] = kind;
  e["t"] = unix_seconds();
  for (const auto& [k, v] : fields.items()) e[k] = v;
  const std::string line = e.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  if (std::fwrite(line.data(), 1, line.size(), f_) != line.size() || std::fflush(f_) != 0)
    throw std::runtime_error(std::string("events.jsonl: write failed: ") + std::strerror(errno));
}

}  // namespace toy
