#include "strict_json.h"

#include <cmath>
#include <string>
#include <vector>

#include "reader_error.h"

namespace sdsl {

using nlohmann::json;

json ParseStrictJson(const uint8_t* data, uint64_t size, const char* what) {
  // Keys seen per open object. nlohmann keeps the last of repeated keys, so
  // an object that ends up with fewer members than keys repeated one: no set
  // of names is needed to tell.
  std::vector<size_t> keys;
  uint64_t nodes = 0;
  auto callback = [&](int depth, json::parse_event_t event, json& parsed) -> bool {
    // nlohmann counts the top level as depth 0; signal_dataset counts it as 1.
    if (depth + 1 > kMaxJsonDepth) {
      Corrupt(std::string(what) + " nests deeper than " + std::to_string(kMaxJsonDepth));
    }
    switch (event) {
      case json::parse_event_t::object_start:
        keys.push_back(0);
        break;
      case json::parse_event_t::key:
        if (!keys.empty()) ++keys.back();
        break;
      case json::parse_event_t::object_end:
        if (!keys.empty()) {
          if (parsed.size() != keys.back()) Corrupt(std::string(what) + " repeats a key");
          keys.pop_back();
        }
        break;
      case json::parse_event_t::value:
        if (parsed.is_number_float() && !std::isfinite(parsed.get<double>())) {
          Corrupt(std::string(what) + " holds a number too large for a float");
        }
        if (++nodes > kMaxJsonNodes) {
          Corrupt(std::string(what) + " has more than " + std::to_string(kMaxJsonNodes) + " values");
        }
        break;
      default:
        break;
    }
    return true;
  };
  try {
    const char* begin = reinterpret_cast<const char*>(data);
    return json::parse(begin, begin + size, callback);
  } catch (const json::exception& error) {
    Corrupt(std::string(what) + " is not valid JSON: " + error.what());
  }
}

}  // namespace sdsl
