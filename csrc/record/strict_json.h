// JSON parsed as strictly as signal_dataset's own loader: duplicate keys,
// non-finite numbers, and documents nested or sized past its limits are
// refused rather than silently resolved.
#ifndef SDS_LOADER_STRICT_JSON_H_
#define SDS_LOADER_STRICT_JSON_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace sdsl {

// signal_dataset's ResourcePolicy defaults for headers and descriptors.
constexpr int kMaxJsonDepth = 128;
constexpr uint64_t kMaxJsonNodes = 1000000;

// Throws a corrupt error naming `what` for anything signal_dataset's
// strict_json_loads refuses.
// An integer past 64 bits is kept exact, as Python keeps it: as its decimal
// text in a binary value, which JSON text cannot otherwise produce.
nlohmann::json ParseStrictJson(const uint8_t* data, uint64_t size, const char* what);

bool IsBigInteger(const nlohmann::json& value);
nlohmann::json::binary_t BigIntegerDigits(const std::string& text);
std::string BigIntegerText(const nlohmann::json& value);
// The nearest double (an infinity past the largest), as Python's float() of it.
double BigIntegerRounded(const nlohmann::json& value);

// value.dump(), with big integers written as their text.
std::string DumpJson(const nlohmann::json& value);

}  // namespace sdsl

#endif  // SDS_LOADER_STRICT_JSON_H_
