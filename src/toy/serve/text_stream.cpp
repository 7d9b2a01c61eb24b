// serve/text_stream.cpp — incremental stop-string matching with UTF-8-safe release points.
#include "toy/serve/text_stream.h"

#include <algorithm>

namespace toy::serve {

std::string TextStream::push(std::string_view piece) {
  if (stopped_) return "";
  bytes_.append(piece);
  // A complete stop string can only start in the unreleased part: everything released so far
  // was checked not to be a stop-string prefix.
  size_t first = std::string::npos;
  for (const std::string& s : stops_) first = std::min(first, bytes_.find(s, released_));
  if (first != std::string::npos) {
    stopped_ = true;
    stop_at_ = first;
    std::string out = bytes_.substr(released_, first - released_);
    released_ = first;
    return out;
  }
  const size_t end = bytes_.size() - hold_back();
  if (end <= released_) return "";
  std::string out = bytes_.substr(released_, end - released_);
  released_ = end;
  return out;
}

std::string TextStream::finish() {
  if (stopped_) return "";
  std::string out = bytes_.substr(released_);
  released_ = bytes_.size();
  return out;
}

size_t TextStream::hold_back() const {
  const std::string_view pending = std::string_view(bytes_).substr(released_);
  // 1. The longest suffix that is a proper prefix of a stop string.
  size_t hold = 0;
  for (const std::string& s : stops_)
    for (size_t n = std::min(s.size() - 1, pending.size()); n > hold; --n)
      if (pending.substr(pending.size() - n) == std::string_view(s).substr(0, n)) {
        hold = n;
        break;
      }
  // 2. Do not end inside a UTF-8 character: step back over continuation bytes (10xxxxxx) to the
  //    lead byte when the character it starts is not complete before the cut.
  size_t cut = pending.size() - hold;
  for (size_t back = 1; back <= 4 && back <= cut; ++back) {
    const unsigned char c = static_cast<unsigned char>(pending[cut - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    const size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (len > back) cut -= back;  // the character is incomplete: hold it back whole
    break;
  }
  return pending.size() - cut;
}

}  // namespace toy::serve
