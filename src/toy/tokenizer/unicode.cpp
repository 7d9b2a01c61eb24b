// tokenizer/unicode.cpp — UTF-8 helpers, the GPT-2 byte table and WordPiece lookups.
#include "toy/tokenizer/unicode.h"

#include <algorithm>
#include <array>

namespace toy::unicode {

int utf8_check(std::string_view s) {
  const auto b = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  const uint8_t c = b(0);
  if (c < 0x80) return 1;
  size_t n;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte (rules out overlongs etc.)
  if (c >= 0xC2 && c <= 0xDF)
    n = 2;
  else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;  // overlong
    if (c == 0xED) hi = 0x9F;  // UTF-16 surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;  // overlong
    if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return -1;  // continuation byte, C0/C1 or F5..FF as a lead
  }
  for (size_t i = 1; i < n; ++i) {
    if (i >= s.size()) return 0;
    const uint8_t x = b(i);
    if (i == 1 ? (x < lo || x > hi) : (x < 0x80 || x > 0xBF)) return -1;
  }
  return static_cast<int>(n);
}

bool is_valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const int n = utf8_check(s.substr(i));
    if (n <= 0) return false;
    i += size_t(n);
  }
  return true;
}

static uint32_t decode_valid(std::string_view s, size_t n) {
  const auto b = [&](size_t i) { return uint32_t(static_cast<uint8_t>(s[i])); };
  switch (n) {
    case 1:
      return b(0);
    case 2:
      return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
    case 3:
      return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    default:
      return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
  }
}

std::vector<uint32_t> codepoints(std::string_view s) {
  std::vector<uint32_t> r;
  r.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const int n = utf8_check(s.substr(i));
    if (n > 0) {
      r.push_back(decode_valid(s.substr(i), size_t(n)));
      i += size_t(n);
    } else {
      r.push_back(kReplacement);
      ++i;
    }
  }
  return r;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

namespace {
// The table maps the 256 bytes onto the printable bytes themselves plus U+0100..U+0143.
struct ByteTable {
  std::array<uint32_t, 256> to_cp{};
  std::array<int16_t, 0x144> from_cp{};
  ByteTable() {
    const auto printable = [](int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE); };
    from_cp.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      to_cp[size_t(b)] = printable(b) ? uint32_t(b) : next++;
      from_cp[to_cp[size_t(b)]] = int16_t(b);
    }
  }
};
const ByteTable& byte_table() {
  static const ByteTable t;
  return t;
}
}  // namespace

uint32_t byte_to_codepoint(uint8_t b) { return byte_table().to_cp[b]; }

int byte_from_codepoint(uint32_t cp) {
  const auto& t = byte_table().from_cp;
  return cp < t.size() ? t[cp] : -1;
}

uint8_t flags(uint32_t cp) {
  using tables::kFlagRuns;
  const auto* end = kFlagRuns + tables::kFlagRunsSize;
  const auto* it =
      std::upper_bound(kFlagRuns, end, cp, [](uint32_t c, const tables::FlagRun& r) { return c < r.first; });
  return it == kFlagRuns ? 0 : (it - 1)->flags;
}

bool is_whitespace(uint32_t cp) {
  switch (cp) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

uint32_t to_lower(uint32_t cp) {
  using tables::kLower;
  const auto* end = kLower + tables::kLowerSize;
  const auto* it = std::lower_bound(kLower, end, cp, [](const tables::CpMap& m, uint32_t c) { return m.from < c; });
  return it != end && it->from == cp ? it->to : cp;
}

uint32_t nfd_first(uint32_t cp) {
  using tables::kNfd;
  const auto* end = kNfd + tables::kNfdSize;
  const auto* it = std::upper_bound(kNfd, end, cp, [](uint32_t c, const tables::CpRangeMap& r) { return c < r.first; });
  if (it == kNfd) return cp;
  --it;
  return cp <= it->last ? it->to : cp;
}

}  // namespace toy::unicode
