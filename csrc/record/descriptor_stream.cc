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
#include "record/descriptor_scalar.h"
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

MetadataValue MetadataOf(const std::string& key, const DescriptorScalar& value) {
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
    return OnScalar(DescriptorScalar{});
  }
  bool boolean(bool value) override {
    if (capture_) capture_->boolean(value);
    DescriptorScalar scalar;
    scalar.type = json::value_t::boolean;
    scalar.boolean = value;
    return OnScalar(scalar);
  }
  bool number_integer(number_integer_t value) override {
    if (capture_) capture_->number_integer(value);
    DescriptorScalar scalar;
    scalar.type = json::value_t::number_integer;
    scalar.integer = value;
    return OnScalar(scalar);
  }
  bool number_unsigned(number_unsigned_t value) override {
    if (capture_) capture_->number_unsigned(value);
    DescriptorScalar scalar;
    scalar.type = json::value_t::number_unsigned;
    scalar.unsigned_integer = value;
    return OnScalar(scalar);
  }
  bool number_float(number_float_t value, const string_t& text) override {
    if (!std::isfinite(value)) Corrupt("record descriptor holds a number too large for a float");
    if (capture_) capture_->number_float(value, text);
    DescriptorScalar scalar;
    scalar.type = json::value_t::number_float;
    scalar.real = value;
    return OnScalar(scalar);
  }
  bool number_big_integer(double rounded, const string_t& text) {
    if (capture_) {
      json::binary_t digits = BigIntegerDigits(text);
      capture_->binary(digits);
    }
    DescriptorScalar scalar;
    scalar.type = json::value_t::binary;
    scalar.real = rounded;
    scalar.text = &text;
    return OnScalar(scalar);
  }
  bool string(string_t& value) override {
    if (capture_) capture_->string(value);
    DescriptorScalar scalar;
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
  static void MetadataScalar(const DescriptorScalar& value, Where where) {
    if (!value.falsy()) Malformed(where() + " metadata is not an object");
  }

  bool OnScalar(const DescriptorScalar& value) {
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

  void OnAxisMember(const std::string& key, const DescriptorScalar& value) {
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

}  // namespace

void ParseDescriptorStreamInFull(const uint8_t* text, uint64_t size, Descriptor* out) {
  thread_local DescriptorEvents events;
  events.Parse(text, size, out);
}

}  // namespace sdsl
