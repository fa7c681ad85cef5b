// One JSON number, read from its text as Python's `json` reads it, which is
// how signal_dataset reads every header and descriptor.
//
// Python keeps an integer literal exact however long it is, and rounds a
// literal with a fraction or an exponent to the nearest double, overflowing
// to an infinity and underflowing to a signed zero. The parser only checks
// the grammar and hands the text here, so that no spelling (a 40-digit
// mantissa, `0e400`, an integer past 2^64) gets a value of the parser's own:
// RapidJSON 1.1's full-precision path has undefined behaviour on some of
// them, and refuses others that Python reads.
#ifndef SDS_LOADER_JSON_NUMBER_H_
#define SDS_LOADER_JSON_NUMBER_H_

#include <cstddef>
#include <cstdint>

namespace sdsl {

// Python's json refuses an integer literal of more digits than this
// (sys.get_int_max_str_digits(), a guard against quadratic conversion).
constexpr size_t kMaxJsonIntegerDigits = 4300;

struct JsonNumber {
  enum Kind {
    kSigned,      // a negative integer that fits int64: `integer`
    kUnsigned,    // a nonnegative integer that fits uint64: `unsigned_integer`
    kFloat,       // a literal with a fraction or an exponent: `real`
    kBigInteger,  // an integer past 64 bits: exact only as its text; `real` is its rounding
  } kind = kUnsigned;
  int64_t integer = 0;
  uint64_t unsigned_integer = 0;
  // For kFloat and kBigInteger: the nearest double, an infinity past the
  // largest double, a signed zero below the smallest.
  double real = 0;
};

// `text` must match JSON's number grammar (the parser has checked it).
JsonNumber ReadJsonNumber(const char* text, size_t size);

}  // namespace sdsl

#endif  // SDS_LOADER_JSON_NUMBER_H_
