#include "record/json_number.h"

#include <charconv>
#include <limits>
#include <system_error>

namespace sdsl {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Whether a number that does not fit a double is too large rather than too
// small: the decimal position of its first nonzero digit, moved by the
// exponent. Out of range means |x| above about 1.8e308 or below about
// 2.5e-324, so the sign of that position alone decides.
bool Overflows(const char* at, const char* end) {
  int64_t position = 0;  // of the first nonzero digit: 0 for units, -1 for tenths
  bool found = false;
  int64_t integer_digits = 0;
  for (; at < end && IsDigit(*at); ++at, ++integer_digits) {
    if (!found && *at != '0') {
      found = true;
      position = integer_digits;  // made relative to the point below
    }
  }
  if (found) position = integer_digits - 1 - position;
  if (at < end && *at == '.') {
    int64_t fraction_digits = 0;
    for (++at; at < end && IsDigit(*at); ++at) {
      ++fraction_digits;
      if (!found && *at != '0') {
        found = true;
        position = -fraction_digits;
      }
    }
  }
  if (!found) return false;  // a zero, however spelled
  int64_t exponent = 0;
  if (at < end && (*at == 'e' || *at == 'E')) {
    ++at;
    const bool negative = at < end && *at == '-';
    if (at < end && (*at == '-' || *at == '+')) ++at;
    // Saturate: past a billion the answer no longer depends on the digits.
    for (; at < end && IsDigit(*at); ++at) {
      if (exponent < 1000000000) exponent = exponent * 10 + (*at - '0');
    }
    if (negative) exponent = -exponent;
  }
  return position + exponent > 0;
}

// The nearest double, as Python's float() gives it.
double Round(const char* text, const char* end) {
  double value = 0;
  const std::from_chars_result read = std::from_chars(text, end, value);
  if (read.ec == std::errc() && read.ptr == end) return value;
  const bool negative = *text == '-';
  const double magnitude =
      Overflows(text + (negative ? 1 : 0), end) ? std::numeric_limits<double>::infinity() : 0.0;
  return negative ? -magnitude : magnitude;
}

}  // namespace

JsonNumber ReadJsonNumber(const char* text, size_t size) {
  const char* end = text + size;
  JsonNumber number;
  bool integral = true;
  for (const char* at = text; at < end; ++at) {
    if (*at == '.' || *at == 'e' || *at == 'E') {
      integral = false;
      break;
    }
  }
  if (!integral) {
    number.kind = JsonNumber::kFloat;
    number.real = Round(text, end);
    return number;
  }
  if (size > 0 && *text == '-') {
    const std::from_chars_result read = std::from_chars(text, end, number.integer);
    if (read.ec == std::errc() && read.ptr == end) {
      number.kind = JsonNumber::kSigned;
      return number;
    }
  } else {
    const std::from_chars_result read = std::from_chars(text, end, number.unsigned_integer);
    if (read.ec == std::errc() && read.ptr == end) {
      number.kind = JsonNumber::kUnsigned;
      return number;
    }
  }
  number.kind = JsonNumber::kBigInteger;
  number.integer = 0;
  number.unsigned_integer = 0;
  number.real = Round(text, end);
  return number;
}

}  // namespace sdsl
