#include "record/strict_json.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "base/reader_error.h"
#include "record/json_events.h"
#include "record/json_number.h"

namespace sdsl {
namespace {

using nlohmann::json;

// A big integer's binary subtype: "B".
constexpr std::uint8_t kBigIntegerSubtype = 0x42;

// Builds nlohmann's document from the parser's events, refusing what
// signal_dataset's strict loader refuses: duplicate keys, non-finite numbers,
// documents nested or sized past its limits.
class StrictDocument {
 public:
  StrictDocument(json* root, const char* what) : root_(root), what_(what) {
    dom_.emplace(*root_, true);
  }

  void Restart() {
    *root_ = json();
    dom_.emplace(*root_, true);
    depth_ = 0;
    nodes_ = 0;
  }

  bool null() { return Value() && dom_->null(); }
  bool boolean(bool value) { return Value() && dom_->boolean(value); }
  bool number_integer(json::number_integer_t value) {
    return Value() && dom_->number_integer(value);
  }
  bool number_unsigned(json::number_unsigned_t value) {
    return Value() && dom_->number_unsigned(value);
  }
  bool number_float(json::number_float_t value, const std::string& text) {
    if (!std::isfinite(value))
      Corrupt(std::string(what_) + " holds a number too large for a float");
    return Value() && dom_->number_float(value, text);
  }
  // Python keeps such an integer exact; so does the document, as its text.
  bool number_big_integer(double, const std::string& text) {
    json::binary_t digits = BigIntegerDigits(text);
    return Value() && dom_->binary(digits);
  }
  bool string(std::string& value) { return Value() && dom_->string(value); }
  bool start_object(std::size_t size) {
    Nest();
    ++depth_;
    if (seen_.size() < static_cast<size_t>(depth_)) seen_.resize(depth_);
    seen_[depth_ - 1].clear();
    return dom_->start_object(size);
  }
  bool end_object() {
    --depth_;
    return dom_->end_object();
  }
  bool start_array(std::size_t size) {
    Nest();
    ++depth_;
    return dom_->start_array(size);
  }
  bool end_array() {
    --depth_;
    return dom_->end_array();
  }
  bool key(std::string& value) {
    Nest();
    // Objects here are small: a linear search beats building a set per object.
    std::vector<std::string>& seen = seen_[depth_ - 1];
    if (std::find(seen.begin(), seen.end(), value) != seen.end()) {
      Corrupt(std::string(what_) + " repeats the key \"" + value + "\"");
    }
    seen.push_back(value);
    return dom_->key(value);
  }

 private:
  // signal_dataset counts the top level as depth 1: nothing may sit deeper
  // than kMaxJsonDepth.
  void Nest() const {
    if (depth_ + 1 > kMaxJsonDepth) {
      Corrupt(std::string(what_) + " nests deeper than " + std::to_string(kMaxJsonDepth));
    }
  }
  bool Value() {
    Nest();
    if (++nodes_ > kMaxJsonNodes) {
      Corrupt(std::string(what_) + " has more than " + std::to_string(kMaxJsonNodes) + " values");
    }
    return true;
  }

  json* root_;
  std::optional<nlohmann::detail::json_sax_dom_parser<json>> dom_;
  const char* what_;
  int depth_ = 0;
  uint64_t nodes_ = 0;
  // Keys seen in the open object at each depth (kept allocated across objects).
  std::vector<std::vector<std::string>> seen_;
};

void Dump(const json& value, std::string* out) {
  if (IsBigInteger(value)) {
    out->append(BigIntegerText(value));
  } else if (value.is_object()) {
    out->push_back('{');
    bool first = true;
    for (const auto& [key, item] : value.items()) {
      if (!first) out->push_back(',');
      first = false;
      out->append(json(key).dump());
      out->push_back(':');
      Dump(item, out);
    }
    out->push_back('}');
  } else if (value.is_array()) {
    out->push_back('[');
    for (size_t i = 0; i < value.size(); ++i) {
      if (i > 0) out->push_back(',');
      Dump(value[i], out);
    }
    out->push_back(']');
  } else {
    out->append(value.dump());
  }
}

}  // namespace

bool IsBigInteger(const json& value) {
  return value.is_binary() && value.get_binary().has_subtype() &&
         value.get_binary().subtype() == kBigIntegerSubtype;
}

json::binary_t BigIntegerDigits(const std::string& text) {
  return json::binary_t(std::vector<std::uint8_t>(text.begin(), text.end()), kBigIntegerSubtype);
}

std::string BigIntegerText(const json& value) {
  const json::binary_t& digits = value.get_binary();
  return std::string(digits.begin(), digits.end());
}

double BigIntegerRounded(const json& value) {
  const std::string text = BigIntegerText(value);
  return ReadJsonNumber(text.data(), text.size()).real;
}

std::string DumpJson(const json& value) {
  std::string out;
  Dump(value, &out);
  return out;
}

json ParseStrictJson(const uint8_t* data, uint64_t size, const char* what) {
  json root;
  StrictDocument events(&root, what);
  ParseJsonEvents(data, static_cast<size_t>(size), &events, what);
  return root;
}

}  // namespace sdsl
