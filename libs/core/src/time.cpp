#include "flotilla/core/time.h"

#include <cstdio>
#include <ctime>

namespace flotilla {
namespace {

// Reads `count` ASCII digits at text[pos] into `out`; false if any is missing or not a digit.
bool readDigits(std::string_view text, size_t pos, size_t count, int& out) {
  if (pos + count > text.size()) {
    return false;
  }
  out = 0;
  for (size_t i = pos; i < pos + count; ++i) {
    if (text[i] < '0' || text[i] > '9') {
      return false;
    }
    out = out * 10 + (text[i] - '0');
  }
  return true;
}

struct Fields {
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
};

// "YYYY-MM-DDTHH:MM:SS": the fixed-width part every RFC 3339 date-time starts with.
bool readDateTime(std::string_view text, Fields& f) {
  return readDigits(text, 0, 4, f.year) && text[4] == '-' && readDigits(text, 5, 2, f.month) && text[7] == '-' &&
         readDigits(text, 8, 2, f.day) && (text[10] == 'T' || text[10] == 't') && readDigits(text, 11, 2, f.hour) &&
         text[13] == ':' && readDigits(text, 14, 2, f.minute) && text[16] == ':' && readDigits(text, 17, 2, f.second);
}

bool inRange(const Fields& f) {
  return f.month >= 1 && f.month <= 12 && f.day >= 1 && f.day <= 31 && f.hour <= 23 && f.minute <= 59 &&
         f.second <= 60;  // 60: a leap second, which timegm folds into the next minute
}

// ".123456" after the seconds: the first three digits are kept as milliseconds. Advances `pos`.
bool readFraction(std::string_view text, size_t& pos, int& millis) {
  millis = 0;
  if (pos >= text.size() || text[pos] != '.') {
    return true;
  }
  const size_t start = ++pos;
  while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
    if (pos - start < 3) {
      millis = millis * 10 + (text[pos] - '0');
    }
    ++pos;
  }
  for (size_t digits = pos - start; digits < 3; ++digits) {
    millis *= 10;
  }
  return pos > start;
}

// "Z" or "+HH:MM"/"-HH:MM": the offset to subtract from the local time to get UTC.
std::optional<std::chrono::minutes> readZone(std::string_view zone) {
  if (zone == "Z" || zone == "z") {
    return std::chrono::minutes(0);
  }
  int hours = 0;
  int minutes = 0;
  if (zone.size() != 6 || (zone[0] != '+' && zone[0] != '-') || !readDigits(zone, 1, 2, hours) || zone[3] != ':' ||
      !readDigits(zone, 4, 2, minutes) || hours > 23 || minutes > 59) {
    return std::nullopt;
  }
  std::chrono::minutes offset(hours * 60 + minutes);
  return zone[0] == '+' ? offset : -offset;
}

}  // namespace

int64_t epochMillis(SystemTime at) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(at.time_since_epoch()).count();
}

std::string formatRfc3339Millis(int64_t epoch_ms) {
  // Floor division so times before 1970 still print a non-negative millisecond part.
  int64_t seconds = epoch_ms / 1000;
  int64_t millis = epoch_ms % 1000;
  if (millis < 0) {
    millis += 1000;
    --seconds;
  }
  const auto whole = static_cast<std::time_t>(seconds);
  std::tm utc{};
  gmtime_r(&whole, &utc);
  char buffer[48];
  std::snprintf(buffer, sizeof buffer, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900, utc.tm_mon + 1,
                utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, static_cast<int>(millis));
  return buffer;
}

std::string formatRfc3339(SystemTime at) {
  return formatRfc3339Millis(epochMillis(at));
}

std::optional<SystemTime> parseRfc3339(std::string_view text) {
  Fields f;
  if (text.size() < 20 || !readDateTime(text, f) || !inRange(f)) {
    return std::nullopt;
  }
  size_t pos = 19;
  int millis = 0;
  if (!readFraction(text, pos, millis)) {
    return std::nullopt;
  }
  auto offset = readZone(text.substr(pos));
  if (!offset) {
    return std::nullopt;
  }
  std::tm tm{};
  tm.tm_year = f.year - 1900;
  tm.tm_mon = f.month - 1;
  tm.tm_mday = f.day;
  tm.tm_hour = f.hour;
  tm.tm_min = f.minute;
  tm.tm_sec = f.second;
  const SystemTime local = std::chrono::system_clock::from_time_t(timegm(&tm)) + std::chrono::milliseconds(millis);
  return local - *offset;
}

}  // namespace flotilla
