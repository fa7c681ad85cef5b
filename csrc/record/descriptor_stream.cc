#include "record/descriptor_stream.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "record/descriptor_rules.h"
#include "record/json_events.h"
#include "record/json_number.h"
#include "record/strict_json.h"

namespace sdsl {
namespace {

using nlohmann::json;

// What a container is, by where it sits in the descriptor.
enum class Role : uint8_t {
  kRoot,
  kFields,      // root.fields
  kField,       // root.fields.<name>
  kAxes,        // <field>.axes
  kAxis,        // <field>.axes[i]
  kCoordinate,  // <axis>.coordinate: captured whole, checked by CheckCoordinate
  kMetadata,    // root.metadata: its scalars become targets
  kEmptyOnly,   // a metadata given as a list: only [] stands for none
  kAny,         // anything else: only JSON strictness applies
};

// One scalar event, whatever its type.
struct Scalar {
  json::value_t type = json::value_t::null;
  bool boolean = false;
  int64_t integer = 0;
  uint64_t unsigned_integer = 0;
  double real = 0;
  const std::string* text = nullptr;

  // value_t::binary stands for an integer past 64 bits, `text` its digits.
  bool is_number() const {
    return type == json::value_t::number_integer || type == json::value_t::number_unsigned ||
           type == json::value_t::number_float || type == json::value_t::binary;
  }
  bool is_string() const { return type == json::value_t::string; }
  bool is_null() const { return type == json::value_t::null; }
  // Python's truth value, which signal_dataset's `value or {}` tests.
  bool falsy() const {
    switch (type) {
      case json::value_t::null:
        return true;
      case json::value_t::boolean:
        return !boolean;
      case json::value_t::number_integer:
        return integer == 0;
      case json::value_t::number_unsigned:
        return unsigned_integer == 0;
      case json::value_t::number_float:
        return real == 0;
      case json::value_t::string:
        return text->empty();
      default:
        return false;
    }
  }
};

// A top-level metadata entry's value, from its scalar: what a batch target
// reads, or for anything else a description for the error.
void SetMetadataValue(const Scalar& value, MetadataValue* item) {
  item->kind = MetadataValue::kOther;
  item->integer = 0;
  item->unsigned_integer = 0;
  item->real = 0;
  item->text.clear();
  item->description.clear();
  switch (value.type) {
    case json::value_t::boolean:
      item->kind = MetadataValue::kBool;
      item->integer = value.boolean ? 1 : 0;
      break;
    case json::value_t::number_integer:
      item->kind = MetadataValue::kInteger;
      item->integer = value.integer;
      break;
    case json::value_t::number_unsigned:
      item->kind = MetadataValue::kUnsigned;
      item->unsigned_integer = value.unsigned_integer;
      break;
    case json::value_t::number_float:
      item->kind = MetadataValue::kFloat;
      item->real = value.real;
      break;
    case json::value_t::binary:
      item->kind = MetadataValue::kBigInteger;
      item->real = value.real;
      item->text = *value.text;
      break;
    case json::value_t::string:
      item->description = "a string";
      break;
    default:
      item->description = "null";
      break;
  }
}

MetadataValue MetadataOf(const std::string& key, const Scalar& value) {
  MetadataValue item;
  item.key = key;
  SetMetadataValue(value, &item);
  return item;
}

// Keys of one object, to refuse repeats. Descriptor objects are small, so a
// reused vector searched linearly beats a set; a large metadata object
// switches to one.
class KeySet {
 public:
  void Clear() {
    size_ = 0;
    large_.clear();
  }
  bool Insert(const std::string& key) {
    if (size_ < kLinear) {
      for (size_t i = 0; i < size_; ++i) {
        if (slots_[i] == key) return false;
      }
      if (slots_.size() <= size_) slots_.emplace_back();
      slots_[size_++] = key;
      return true;
    }
    if (large_.empty()) large_.insert(slots_.begin(), slots_.begin() + static_cast<long>(size_));
    return large_.insert(key).second;
  }

 private:
  static constexpr size_t kLinear = 32;
  std::vector<std::string> slots_;
  size_t size_ = 0;
  std::set<std::string> large_;
};

struct Frame {
  Role role = Role::kAny;
  bool object = false;
  size_t count = 0;
  std::string key;  // the member being read, for objects
};

struct FieldEntry {
  std::string name;
  std::string tensor;
  std::vector<uint64_t> lengths;
};

// Walks the events of one descriptor, checking each where it falls. Kept per
// thread and reused, so that its buffers are allocated once.
class DescriptorEvents final : public nlohmann::json_sax<json> {
 public:
  void Parse(const uint8_t* text, uint64_t size, Descriptor* out) {
    Reset(out);
    // RapidJSON's reader, as for every record's JSON (json_events.h). No
    // handler stops the parse.
    ParseJsonEvents(text, static_cast<size_t>(size), this, "record descriptor");
    Finish();
  }

  bool null() override {
    if (capture_) capture_->null();
    return OnScalar(Scalar{});
  }
  bool boolean(bool value) override {
    if (capture_) capture_->boolean(value);
    Scalar scalar;
    scalar.type = json::value_t::boolean;
    scalar.boolean = value;
    return OnScalar(scalar);
  }
  bool number_integer(number_integer_t value) override {
    if (capture_) capture_->number_integer(value);
    Scalar scalar;
    scalar.type = json::value_t::number_integer;
    scalar.integer = value;
    return OnScalar(scalar);
  }
  bool number_unsigned(number_unsigned_t value) override {
    if (capture_) capture_->number_unsigned(value);
    Scalar scalar;
    scalar.type = json::value_t::number_unsigned;
    scalar.unsigned_integer = value;
    return OnScalar(scalar);
  }
  bool number_float(number_float_t value, const string_t& text) override {
    if (!std::isfinite(value)) Corrupt("record descriptor holds a number too large for a float");
    if (capture_) capture_->number_float(value, text);
    Scalar scalar;
    scalar.type = json::value_t::number_float;
    scalar.real = value;
    return OnScalar(scalar);
  }
  bool number_big_integer(double rounded, const string_t& text) {
    if (capture_) {
      json::binary_t digits = BigIntegerDigits(text);
      capture_->binary(digits);
    }
    Scalar scalar;
    scalar.type = json::value_t::binary;
    scalar.real = rounded;
    scalar.text = &text;
    return OnScalar(scalar);
  }
  bool string(string_t& value) override {
    if (capture_) capture_->string(value);
    Scalar scalar;
    scalar.type = json::value_t::string;
    scalar.text = &value;
    return OnScalar(scalar);
  }
  bool binary(binary_t&) override { return true; }
  // A coordinate's events also build its document (capture_), from its
  // opening brace, which Open starts capturing, to its closing one.
  bool start_object(std::size_t size) override {
    Open(true);
    if (capture_) capture_->start_object(size);
    return true;
  }
  bool start_array(std::size_t size) override {
    Open(false);
    if (capture_) capture_->start_array(size);
    return true;
  }
  bool end_object() override {
    if (capture_) capture_->end_object();
    return Close();
  }
  bool end_array() override {
    if (capture_) capture_->end_array();
    return Close();
  }
  bool key(string_t& value) override {
    Frame& frame = frames_[depth_ - 1];
    if (!keys_[depth_ - 1].Insert(value)) {
      Corrupt("record descriptor repeats the key \"" + value + "\"");
    }
    if (capture_) capture_->key(value);
    frame.key = value;
    return true;
  }
  bool parse_error(std::size_t, const std::string&,
                   const nlohmann::detail::exception& error) override {
    Corrupt(std::string("record descriptor is not valid JSON: ") + error.what());
  }

  // For a document RapidJSON cannot take, read again by another parser.
  void Restart() { Reset(out_); }

 private:
  void Reset(Descriptor* out) {
    out_ = out;
    out->fields.clear();
    out->axis_lengths.clear();
    out->metadata.clear();
    depth_ = 0;
    nodes_ = 0;
    format_ok_ = version_ok_ = has_id_ = has_fields_ = false;
    entries_used_ = 0;
    references_.clear();
    axis_ids_.clear();
    capture_.reset();
  }

  // Where a value sits: the role of its parent, and its key there.
  const Frame* Parent() const { return depth_ == 0 ? nullptr : &frames_[depth_ - 1]; }

  void CountNode() {
    if (++nodes_ > kMaxJsonNodes) {
      Corrupt("record descriptor has more than " + std::to_string(kMaxJsonNodes) + " values");
    }
    if (depth_ + 1 > static_cast<size_t>(kMaxJsonDepth)) {
      Corrupt("record descriptor nests deeper than " + std::to_string(kMaxJsonDepth));
    }
  }

  FieldEntry& CurrentField() { return entries_[entries_used_ - 1]; }

  // `where()` names the owner of the metadata; called only for a message,
  // since every record's every axis passes here.
  template <typename Where>
  static void MetadataScalar(const Scalar& value, Where where) {
    if (!value.falsy()) Malformed(where() + " metadata is not an object");
  }

  bool OnScalar(const Scalar& value) {
    CountNode();
    const Frame* parent = Parent();
    if (parent == nullptr) Malformed("it is not a JSON object");
    const std::string& key = parent->key;
    switch (parent->role) {
      case Role::kRoot:
        if (key == "format") {
          format_ok_ = value.is_string() && *value.text == "signal-dataset.record";
        } else if (key == "version") {
          version_ok_ = value.is_string() && *value.text == "0.1";
        } else if (key == "id") {
          if (!value.is_string() || value.text->empty())
            Malformed("the record id is not a non-empty string");
          has_id_ = true;
        } else if (key == "scene_id") {
          if (!value.is_null() && !value.is_string())
            Malformed("the record's scene_id is not a string");
        } else if (key == "fields") {
          Malformed("fields is not an object");
        } else if (key == "metadata") {
          MetadataScalar(value, [] { return std::string("the record's"); });
        }
        break;
      case Role::kFields:
        Malformed("field \"" + key + "\" is not an object");
      case Role::kField:
        if (key == "tensor") {
          if (!value.is_string()) Malformed(FieldWhere() + " names no tensor string");
          CurrentField().tensor = *value.text;
          field_has_tensor_ = true;
        } else if (key == "axes") {
          Malformed(FieldWhere() + " axes are not a list");
        } else if (key == "metadata") {
          MetadataScalar(value, [this] { return FieldWhere(); });
        }
        break;
      case Role::kAxes:
        Malformed(FieldWhere() + " has an axis that is not an object");
      case Role::kAxis:
        OnAxisMember(key, value);
        break;
      case Role::kCoordinate:  // checked whole when its axis closes
        break;
      case Role::kMetadata:
        out_->metadata.push_back(MetadataOf(key, value));
        break;
      case Role::kEmptyOnly:
        Malformed("a metadata given as a list is not an object");
      case Role::kAny:
        break;
    }
    return true;
  }

  void OnAxisMember(const std::string& key, const Scalar& value) {
    const auto where = [this] { return FieldWhere() + " axis"; };  // for messages only
    if (key == "name") {
      if (!value.is_string() || value.text->empty())
        Malformed(FieldWhere() + " has an invalid axis name");
      for (const std::string& name : axis_names_) {
        if (name == *value.text) Malformed(FieldWhere() + " repeats axis name \"" + name + "\"");
      }
      axis_names_.push_back(*value.text);
      axis_has_name_ = true;
    } else if (key == "length") {
      if (value.type == json::value_t::number_unsigned) {
        axis_length_ = value.unsigned_integer;
      } else if (value.type == json::value_t::number_integer && value.integer >= 0) {
        axis_length_ = static_cast<uint64_t>(value.integer);
      } else {
        Malformed(where() + " length is not a nonnegative integer");
      }
      axis_has_length_ = true;
    } else if (key == "role" || key == "id") {
      if (!value.is_null() && !value.is_string())
        Malformed(where() + " " + key + " is not a string");
      if (key == "id") axis_id_ = value.is_string() ? *value.text : std::string();
    } else if (key == "metadata") {
      MetadataScalar(value, where);
    } else if (key == "coordinate") {
      if (!value.is_null()) Malformed(where() + " coordinate is not an object");
    }
  }

  // The role of a container opening here; throws where only a scalar (or
  // nothing) may stand.
  void ChildRole(bool object, Role* role) {
    const Frame* parent = Parent();
    if (parent == nullptr) {
      if (!object) Malformed("it is not a JSON object");
      *role = Role::kRoot;
      return;
    }
    const std::string& key = parent->key;
    *role = Role::kAny;
    switch (parent->role) {
      case Role::kRoot:
        if (key == "fields") {
          if (!object) Malformed("fields is not an object");
          has_fields_ = true;
          *role = Role::kFields;
        } else if (key == "metadata") {
          *role = object ? Role::kMetadata : Role::kEmptyOnly;
        } else if (key == "id") {
          Malformed("the record id is not a non-empty string");
        } else if (key == "scene_id") {
          Malformed("the record's scene_id is not a string");
        } else if (key == "format") {
          format_ok_ = false;
        } else if (key == "version") {
          version_ok_ = false;
        }
        break;
      case Role::kFields:
        if (!object) Malformed("field \"" + key + "\" is not an object");
        if (key.empty()) Malformed("a field has an empty name");
        if (entries_used_ >= kMaxFields)
          Malformed("more than " + std::to_string(kMaxFields) + " fields");
        if (entries_.size() <= entries_used_) entries_.emplace_back();
        entries_[entries_used_].name = key;
        entries_[entries_used_].tensor.clear();
        entries_[entries_used_].lengths.clear();
        ++entries_used_;
        field_has_tensor_ = false;
        axis_names_.clear();
        *role = Role::kField;
        break;
      case Role::kField:
        if (key == "tensor") Malformed(FieldWhere() + " names no tensor string");
        if (key == "axes") {
          if (object) Malformed(FieldWhere() + " axes are not a list");
          *role = Role::kAxes;
        } else if (key == "metadata" && !object) {
          *role = Role::kEmptyOnly;
        }
        break;
      case Role::kAxes:
        if (!object) Malformed(FieldWhere() + " has an axis that is not an object");
        if (CurrentField().lengths.size() + 1 > kMaxAxesPerField)
          Malformed(FieldWhere() + " has too many axes");
        axis_has_name_ = axis_has_length_ = axis_has_coordinate_ = false;
        axis_length_ = 0;
        axis_id_.clear();
        *role = Role::kAxis;
        break;
      case Role::kAxis:
        if (key == "name" || key == "length" || key == "role" || key == "id") {
          Malformed(FieldWhere() + " axis " + key + " is not a " +
                    (key == "length" ? "nonnegative integer" : "string"));
        }
        if (key == "coordinate") {
          if (!object) Malformed(FieldWhere() + " axis coordinate is not an object");
          axis_has_coordinate_ = true;
          coordinate_ = json();
          capture_.emplace(coordinate_, true);
          *role = Role::kCoordinate;
        } else if (key == "metadata" && !object) {
          *role = Role::kEmptyOnly;
        }
        break;
      case Role::kCoordinate:  // captured, checked whole
        break;
      case Role::kMetadata: {
        MetadataValue item;
        item.key = key;
        item.description = object ? "an object" : "an array";
        out_->metadata.push_back(std::move(item));
        break;
      }
      case Role::kEmptyOnly:
        Malformed("a metadata given as a list is not an object");
      case Role::kAny:
        break;
    }
  }

  void Open(bool object) {
    CountNode();
    Role role;
    ChildRole(object, &role);
    if (frames_.size() <= depth_) {
      frames_.emplace_back();
      keys_.emplace_back();
    }
    Frame& frame = frames_[depth_];
    frame.role = role;
    frame.object = object;
    frame.count = 0;
    frame.key.clear();
    keys_[depth_].Clear();
    ++depth_;
  }

  bool Close() {
    const Role role = frames_[depth_ - 1].role;
    --depth_;
    switch (role) {
      case Role::kField:
        if (!field_has_tensor_) Malformed(FieldWhere() + " has no tensor");
        break;
      case Role::kAxis:
        return CloseAxis();
      case Role::kCoordinate:
        capture_.reset();
        break;
      default:
        break;
    }
    return true;
  }

  bool CloseAxis() {
    if (!axis_has_name_ || !axis_has_length_)
      Malformed(FieldWhere() + " has an axis without name or length");
    // The coordinate is checked here, once the axis's length is known (the
    // keys of an axis come in any order).
    json normal;
    if (axis_has_coordinate_)
      normal = CheckCoordinate(coordinate_, axis_length_, FieldWhere() + " axis", &references_);
    CurrentField().lengths.push_back(axis_length_);
    if (axis_id_.empty()) return true;
    // Axes sharing an id must agree on length and coordinate.
    for (const SharedAxis& shared : axis_ids_) {
      if (shared.id == axis_id_ && (shared.length != axis_length_ || shared.coordinate != normal)) {
        Malformed("shared axis \"" + shared.id + "\" declarations disagree");
      }
    }
    axis_ids_.push_back(SharedAxis{axis_id_, axis_length_, std::move(normal)});
    return true;
  }

  void Finish() {
    if (!format_ok_ || !version_ok_)
      Corrupt("record descriptor is not a signal-dataset.record of version 0.1");
    if (!has_id_) Malformed("no id");
    if (!has_fields_) Malformed("no fields");
    if (entries_used_ == 0) Malformed("the record has no fields");
    for (const std::string& reference : references_) {
      bool found = false;
      for (size_t f = 0; f < entries_used_ && !found; ++f) found = entries_[f].name == reference;
      for (const SharedAxis& shared : axis_ids_) found = found || shared.id == reference;
      if (!found) Malformed("coordinate reference \"" + reference + "\" does not resolve");
    }
    std::vector<size_t> order(entries_used_);
    for (size_t f = 0; f < order.size(); ++f) order[f] = f;
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return entries_[a].name < entries_[b].name; });
    for (size_t f : order) {
      out_->fields.emplace_back(entries_[f].name, entries_[f].tensor);
      out_->axis_lengths.push_back(entries_[f].lengths);
    }
  }

  std::string FieldWhere() const {
    return entries_used_ == 0 ? std::string("a field")
                              : "field \"" + entries_[entries_used_ - 1].name + "\"";
  }

  Descriptor* out_ = nullptr;
  std::vector<Frame> frames_;
  std::vector<KeySet> keys_;
  size_t depth_ = 0;
  uint64_t nodes_ = 0;
  bool format_ok_ = false, version_ok_ = false, has_id_ = false, has_fields_ = false;
  std::vector<FieldEntry> entries_;
  size_t entries_used_ = 0;
  bool field_has_tensor_ = false;
  std::vector<std::string> axis_names_;
  bool axis_has_name_ = false, axis_has_length_ = false, axis_has_coordinate_ = false;
  uint64_t axis_length_ = 0;
  std::string axis_id_;
  json coordinate_;  // the open or last axis's coordinate, built by capture_
  std::optional<nlohmann::detail::json_sax_dom_parser<json>> capture_;
  std::vector<std::string> references_;
  struct SharedAxis {
    std::string id;
    uint64_t length;
    json coordinate;  // normalized by CheckCoordinate; null for none
  };
  std::vector<SharedAxis> axis_ids_;
};

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
      Scalar value;
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
  static bool LexScalar(const uint8_t** at, const uint8_t* end, Scalar* value) {
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

void ParseDescriptorStreamInFull(const uint8_t* text, uint64_t size, Descriptor* out) {
  thread_local DescriptorEvents events;
  events.Parse(text, size, out);
}

void ParseDescriptorStream(const uint8_t* text, uint64_t size, Descriptor* out) {
  thread_local DescriptorTemplate last;
  if (last.Match(text, size, out)) return;
  ParseDescriptorStreamInFull(text, size, out);
  last.Learn(text, size, *out);
}

}  // namespace sdsl
