// Feeds the events of one JSON document to an nlohmann-style SAX handler
// (null, boolean, number_integer, number_unsigned, number_float, string, key,
// start_object, end_object, start_array, end_array), plus
// number_big_integer(rounded, text) for an integer past 64 bits and
// Restart() to begin the document again.
//
// Every record carries a SafeTensors header and a descriptor, so their JSON is
// parsed once per record. nlohmann's lexer spends about 90 instructions a
// byte on them, which cost as much as hashing a 64 KiB record; RapidJSON's
// reader checks the same strict grammar (RFC 8259, UTF-8 validated) an order
// of magnitude faster. Numbers reach the handler as json_number.h reads their
// text, never as RapidJSON converts them. RapidJSON also refuses numbers past
// a double's decimal range (`0e400`, an integer of 400 digits) that Python
// reads; such a rare document is parsed again by nlohmann's lexer, which
// takes any length. The handlers keep every check they make, whichever
// parser drives them.
#ifndef SDS_LOADER_JSON_EVENTS_H_
#define SDS_LOADER_JSON_EVENTS_H_

// RapidJSON 1.1's stack computes `top + n` on its null pointer before it
// first allocates (fixed upstream since); harmless, but clang's
// -fsanitize=undefined stops on it, in the fuzz and sanitizer builds.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((no_sanitize("pointer-overflow"))), apply_to = function)
#endif
#include <rapidjson/error/en.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>
#if defined(__clang__)
#pragma clang attribute pop
#endif

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/reader_error.h"
#include "record/json_number.h"

namespace sdsl {
namespace json_events_detail {

// RapidJSON's handler concept, forwarded to the nlohmann-style `Events`.
// A number's event, from its text: negative integers as number_integer and
// the others as number_unsigned, as nlohmann reports them.
template <typename Events>
bool NumberEvent(Events* events, const char* data, size_t size, std::string* text) {
  const JsonNumber number = ReadJsonNumber(data, size);
  const size_t digits = size - (*data == '-' ? 1 : 0);
  if (number.kind == JsonNumber::kBigInteger && digits > kMaxJsonIntegerDigits) {
    Corrupt("JSON holds an integer of " + std::to_string(digits) +
            " digits; Python's json reads at most " + std::to_string(kMaxJsonIntegerDigits));
  }
  switch (number.kind) {
    case JsonNumber::kSigned:
      return events->number_integer(number.integer);
    case JsonNumber::kUnsigned:
      return events->number_unsigned(number.unsigned_integer);
    case JsonNumber::kFloat:
      text->assign(data, size);
      return events->number_float(number.real, *text);
    case JsonNumber::kBigInteger:
      break;
  }
  text->assign(data, size);
  return events->number_big_integer(number.real, *text);
}

// RapidJSON's handler concept, forwarded to the nlohmann-style `Events`.
// Numbers arrive as text (kParseNumbersAsStringsFlag).
template <typename Events>
class Forward {
 public:
  Forward(Events* events, std::string* text) : events_(events), text_(*text) {}
  bool Null() { return events_->null(); }
  bool Bool(bool value) { return events_->boolean(value); }
  bool Int(int) { return false; }  // not called: numbers come as text
  bool Int64(int64_t) { return false; }
  bool Uint(unsigned) { return false; }
  bool Uint64(uint64_t) { return false; }
  bool Double(double) { return false; }
  bool RawNumber(const char* data, rapidjson::SizeType size, bool) {
    return NumberEvent(events_, data, size, &text_);
  }
  bool String(const char* data, rapidjson::SizeType size, bool) {
    text_.assign(data, size);
    return events_->string(text_);
  }
  bool Key(const char* data, rapidjson::SizeType size, bool) {
    text_.assign(data, size);
    return events_->key(text_);
  }
  bool StartObject() { return events_->start_object(static_cast<std::size_t>(-1)); }
  bool EndObject(rapidjson::SizeType) { return events_->end_object(); }
  bool StartArray() { return events_->start_array(static_cast<std::size_t>(-1)); }
  bool EndArray(rapidjson::SizeType) { return events_->end_array(); }

 private:
  Events* events_;
  std::string& text_;  // a key's or string's text, kept for the handler
};

// nlohmann's document type with long double floats, for its lexer alone:
// nlohmann refuses a number that overflows its float type, and Python reads
// integers of up to 4,300 digits (about 1e4300), which overflow a double but
// not a long double. A float literal past that is an infinity to Python, so
// refused either way.
using WideJson = nlohmann::basic_json<std::map, std::vector, std::string, bool, std::int64_t,
                                      std::uint64_t, long double>;

// nlohmann's SAX interface, forwarded to `Events`, for the documents
// RapidJSON cannot take. nlohmann reports an integer past 64 bits as a float
// rounded by strtold: every float is read again from its text.
template <typename Events>
class FromNlohmann {
 public:
  explicit FromNlohmann(Events* events) : events_(events) {}
  bool null() { return events_->null(); }
  bool boolean(bool value) { return events_->boolean(value); }
  bool number_integer(int64_t value) { return events_->number_integer(value); }
  bool number_unsigned(uint64_t value) { return events_->number_unsigned(value); }
  bool number_float(long double, const std::string& text) {
    return NumberEvent(events_, text.data(), text.size(), &text_);
  }
  bool string(std::string& value) { return events_->string(value); }
  bool binary(WideJson::binary_t&) { return false; }  // not in JSON text
  bool start_object(std::size_t size) { return events_->start_object(size); }
  bool key(std::string& value) { return events_->key(value); }
  bool end_object() { return events_->end_object(); }
  bool start_array(std::size_t size) { return events_->start_array(size); }
  bool end_array() { return events_->end_array(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& error) {
    error_ = error.what();
    return false;
  }
  const std::string& error() const { return error_; }

 private:
  Events* events_;
  std::string text_;
  std::string error_;
};

}  // namespace json_events_detail

// Throws a corrupt error naming `what` when `text` is not one JSON document
// (whitespace around it allowed). Returns false when a handler returned
// false, which stops the parse.
namespace json_events_detail {

// Whether every byte is below 0x80. ASCII is valid UTF-8, so such a document
// needs no encoding check, which costs RapidJSON a branchy step per byte.
inline bool IsAscii(const uint8_t* text, size_t size) {
  uint64_t high = 0;
  size_t at = 0;
  for (; at + 8 <= size; at += 8) {
    uint64_t word;
    std::memcpy(&word, text + at, 8);
    high |= word;
  }
  for (; at < size; ++at) high |= text[at];
  return (high & 0x8080808080808080ull) == 0;
}

}  // namespace json_events_detail

template <typename Events>
bool ParseJsonEvents(const uint8_t* text, size_t size, Events* events, const char* what) {
  constexpr unsigned kAsciiFlags = rapidjson::kParseNumbersAsStringsFlag |
                                   rapidjson::kParseIterativeFlag |
                                   rapidjson::kParseStopWhenDoneFlag;
  constexpr unsigned kFlags = kAsciiFlags | rapidjson::kParseValidateEncodingFlag;
  rapidjson::MemoryStream memory(reinterpret_cast<const char*>(text), size);
  // One reader and text buffer per thread: the parse stack and the buffer
  // keep their allocations from one record to the next (two documents a
  // record otherwise cost several mallocs and frees). A parse started from
  // inside a handler gets its own.
  thread_local rapidjson::Reader shared_reader;
  thread_local std::string shared_text;
  thread_local bool shared_busy = false;
  struct Claim {  // holds the shared pair for this parse, if it is free
    bool took = !shared_busy;
    Claim() { shared_busy = true; }
    ~Claim() {
      if (took) shared_busy = false;
    }
  } claim;
  rapidjson::Reader own_reader;
  std::string own_text;
  rapidjson::Reader& reader = claim.took ? shared_reader : own_reader;
  json_events_detail::Forward<Events> forward(events, claim.took ? &shared_text : &own_text);
  const rapidjson::ParseResult result = json_events_detail::IsAscii(text, size)
                                            ? reader.Parse<kAsciiFlags>(memory, forward)
                                            : reader.Parse<kFlags>(memory, forward);
  if (result.Code() == rapidjson::kParseErrorTermination) return false;
  if (result.Code() == rapidjson::kParseErrorNumberTooBig) {
    events->Restart();
    json_events_detail::FromNlohmann<Events> from(events);
    if (json_events_detail::WideJson::sax_parse(text, text + size, &from)) return true;
    if (from.error().empty()) return false;  // a handler stopped the parse
    Corrupt(std::string(what) + " is not valid JSON: " + from.error());
  }
  if (result.IsError()) {
    Corrupt(std::string(what) +
            " is not valid JSON: " + rapidjson::GetParseError_En(result.Code()) + " at byte " +
            std::to_string(result.Offset()));
  }
  // The reader stops after the document, and its stream reads a NUL byte as
  // the end: only JSON whitespace may follow, NUL included in what is refused.
  for (size_t at = memory.Tell(); at < size; ++at) {
    const uint8_t c = text[at];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
      Corrupt(std::string(what) +
              " is not valid JSON: unexpected byte after the document at byte " +
              std::to_string(at));
    }
  }
  return true;
}

}  // namespace sdsl

#endif  // SDS_LOADER_JSON_EVENTS_H_
