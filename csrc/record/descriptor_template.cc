#include "record/descriptor_template.h"

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "record/descriptor_scalar.h"
#include "record/descriptor_stream.h"
#include "record/json_number.h"

namespace sdsl {
namespace {

using nlohmann::json;

// signal_dataset writes every descriptor with one encoder (keys sorted, no
// spaces), so the records of a dataset have descriptors equal byte for byte
// but for the record's id and its metadata's values. Parsing one in full
// costs some 80 instructions a byte, as much as decompressing a short record.
//
// The last descriptor parsed in full on a thread is kept as a template: its
// bytes, with slots cut out where the record's id and each top-level metadata
// scalar stand, and what the full parse gave. A descriptor equal to it byte
// for byte outside the slots, with a plain string (printable ASCII, no
// escape), a JSON number, true, false or null in each, makes the same parser
// events as the template but for those values: the same keys in the same
// places, so every structural check comes out as it did. What the full parse
// checks of the values themselves is checked here the same way (a non-empty
// string for the id; numbers read by ReadJsonNumber, refusing none that it
// accepts). Anything else (a byte that differs outside a slot, an escape, an
// integer past 64 bits, a float out of range, an id that is not a non-empty
// string) goes to the full parse, which decides, and becomes the template
// when it passes.
class DescriptorTemplate {
 public:
  // Fills `out` as the full parse would and returns true when `text` fits
  // the template; otherwise returns false, `out` left undefined.
  bool Match(const uint8_t* text, uint64_t size, Descriptor* out) const {
    if (!valid_) return false;
    *out = parsed_;
    const uint8_t* const end = text + size;
    const uint8_t* at = text;
    size_t from = 0;  // in bytes_
    for (const Slot& slot : slots_) {
      if (!SameBytes(&at, end, from, slot.begin)) return false;
      DescriptorScalar value;
      const uint8_t* const token = at;
      if (!LexScalar(&at, end, &value)) return false;
      if (slot.metadata == kRecordId) {
        if (!value.is_string() || at - token == 2) return false;
      } else {
        SetMetadataValue(value, &out->metadata[slot.metadata]);
      }
      from = slot.end;
    }
    return SameBytes(&at, end, from, bytes_.size()) && at == end;
  }

  // Makes `text`, which the full parse just read into `parsed`, the template.
  void Learn(const uint8_t* text, uint64_t size, const Descriptor& parsed) {
    valid_ = false;
    slots_.clear();
    if (size > kMaxTemplateBytes) return;
    // `text` is valid JSON (it parsed), so a plain walk finds its tokens.
    const uint8_t* const t = text;
    const size_t n = static_cast<size_t>(size);
    size_t at = SkipSpace(t, n, 0);
    if (at >= n || t[at] != '{') return;
    at = SkipSpace(t, n, at + 1);
    size_t entries = 0;  // of the top-level metadata object
    while (at < n && t[at] == '"') {
      const size_t key = at;
      at = SkipString(t, n, at);
      const bool is_id = Is(t, key, at, "\"id\"");
      const bool is_metadata = Is(t, key, at, "\"metadata\"");
      at = SkipSpace(t, n, at);
      if (at >= n || t[at] != ':') return;
      at = SkipSpace(t, n, at + 1);
      if (at >= n) return;
      if (is_id && t[at] == '"') {
        const size_t value_end = SkipString(t, n, at);
        slots_.push_back(Slot{at, value_end, kRecordId});
        at = value_end;
      } else if (is_metadata && t[at] == '{') {
        at = SkipSpace(t, n, at + 1);
        while (at < n && t[at] == '"') {
          at = SkipSpace(t, n, SkipString(t, n, at));
          if (at >= n || t[at] != ':') return;
          at = SkipSpace(t, n, at + 1);
          if (at >= n) return;
          const size_t value_end = SkipValue(t, n, at);
          if (t[at] != '{' && t[at] != '[') slots_.push_back(Slot{at, value_end, entries});
          ++entries;
          at = SkipSpace(t, n, value_end);
          if (at < n && t[at] == ',') at = SkipSpace(t, n, at + 1);
        }
        if (at >= n || t[at] != '}') return;
        ++at;
      } else {
        at = SkipValue(t, n, at);
      }
      at = SkipSpace(t, n, at);
      if (at < n && t[at] == ',') at = SkipSpace(t, n, at + 1);
    }
    if (at >= n || t[at] != '}') return;
    // Every top-level metadata entry is one of parsed.metadata, in order;
    // if the walk counted otherwise, no slot can be trusted to its entry.
    if (entries != parsed.metadata.size()) return;
    bytes_.assign(text, text + n);
    parsed_ = parsed;
    valid_ = true;
  }

 private:
  // A larger descriptor (many fields or coordinates) is rare, and would pin
  // its size per thread.
  static constexpr uint64_t kMaxTemplateBytes = 64 << 10;
  static constexpr size_t kRecordId = SIZE_MAX;  // Slot::metadata of the id's slot
  struct Slot {
    size_t begin, end;  // the value's token in bytes_
    size_t metadata;    // its entry in parsed_.metadata, or kRecordId
  };

  // Whether `*at` starts with bytes_[from, to); moves past them.
  bool SameBytes(const uint8_t** at, const uint8_t* end, size_t from, size_t to) const {
    const size_t length = to - from;
    if (static_cast<size_t>(end - *at) < length) return false;
    if (std::memcmp(*at, bytes_.data() + from, length) != 0) return false;
    *at += length;
    return true;
  }

  // One scalar token as the slot takes it, moving past it.
  static bool LexScalar(const uint8_t** at, const uint8_t* end, DescriptorScalar* value) {
    static const std::string kEmpty;
    const uint8_t* p = *at;
    if (p >= end) return false;
    const auto word = [&](const char* literal, size_t length) {
      if (static_cast<size_t>(end - p) < length || std::memcmp(p, literal, length) != 0)
        return false;
      *at = p + length;
      return true;
    };
    switch (*p) {
      case '"':
        for (++p; p < end && *p != '"'; ++p) {
          if (*p < 0x20 || *p >= 0x7f || *p == '\\') return false;
        }
        if (p >= end) return false;
        *at = p + 1;
        value->type = json::value_t::string;
        value->text = &kEmpty;  // a string's text is not kept (SetMetadataValue)
        return true;
      case 't':
        value->type = json::value_t::boolean;
        value->boolean = true;
        return word("true", 4);
      case 'f':
        value->type = json::value_t::boolean;
        value->boolean = false;
        return word("false", 5);
      case 'n':
        value->type = json::value_t::null;
        return word("null", 4);
      default:
        break;
    }
    // JSON's number grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
    const auto digit = [&] { return p < end && *p >= '0' && *p <= '9'; };
    const uint8_t* const begin = p;
    if (p < end && *p == '-') ++p;
    if (!digit()) return false;
    if (*p++ != '0') {
      while (digit()) ++p;
    }
    if (p < end && *p == '.') {
      ++p;
      if (!digit()) return false;
      while (digit()) ++p;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
      ++p;
      if (p < end && (*p == '+' || *p == '-')) ++p;
      if (!digit()) return false;
      while (digit()) ++p;
    }
    const JsonNumber number =
        ReadJsonNumber(reinterpret_cast<const char*>(begin), static_cast<size_t>(p - begin));
    switch (number.kind) {
      case JsonNumber::kSigned:
        value->type = json::value_t::number_integer;
        value->integer = number.integer;
        break;
      case JsonNumber::kUnsigned:
        value->type = json::value_t::number_unsigned;
        value->unsigned_integer = number.unsigned_integer;
        break;
      case JsonNumber::kFloat:
        if (!std::isfinite(number.real)) return false;
        value->type = json::value_t::number_float;
        value->real = number.real;
        break;
      case JsonNumber::kBigInteger:
        return false;
    }
    *at = p;
    return true;
  }

  static size_t SkipSpace(const uint8_t* t, size_t n, size_t at) {
    while (at < n && (t[at] == ' ' || t[at] == '\t' || t[at] == '\n' || t[at] == '\r')) ++at;
    return at;
  }
  // From a string's opening quote to just past its closing one.
  static size_t SkipString(const uint8_t* t, size_t n, size_t at) {
    for (++at; at < n; ++at) {
      if (t[at] == '\\') {
        ++at;
      } else if (t[at] == '"') {
        return at + 1;
      }
    }
    return n;
  }
  static size_t SkipValue(const uint8_t* t, size_t n, size_t at) {
    if (t[at] == '"') return SkipString(t, n, at);
    if (t[at] == '{' || t[at] == '[') {
      size_t depth = 0;
      while (at < n) {
        const uint8_t c = t[at];
        if (c == '"') {
          at = SkipString(t, n, at);
          continue;
        }
        if (c == '{' || c == '[') ++depth;
        if ((c == '}' || c == ']') && --depth == 0) return at + 1;
        ++at;
      }
      return n;
    }
    while (at < n && t[at] != ',' && t[at] != '}' && t[at] != ']' && t[at] != ' ' &&
           t[at] != '\t' && t[at] != '\n' && t[at] != '\r') {
      ++at;
    }
    return at;
  }
  static bool Is(const uint8_t* t, size_t begin, size_t end, const char* literal) {
    const size_t length = std::strlen(literal);
    return end - begin == length && std::memcmp(t + begin, literal, length) == 0;
  }

  bool valid_ = false;
  std::vector<uint8_t> bytes_;
  std::vector<Slot> slots_;  // in the order of their tokens
  Descriptor parsed_;
};

}  // namespace

void ParseDescriptorStream(const uint8_t* text, uint64_t size, Descriptor* out) {
  thread_local DescriptorTemplate last;
  if (last.Match(text, size, out)) return;
  ParseDescriptorStreamInFull(text, size, out);
  last.Learn(text, size, *out);
}

}  // namespace sdsl
