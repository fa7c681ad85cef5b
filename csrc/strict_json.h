// JSON parsed as strictly as signal_dataset's own loader: duplicate keys,
// non-finite numbers, and documents nested or sized past its limits are
// refused rather than silently resolved.
#ifndef SDS_LOADER_STRICT_JSON_H_
#define SDS_LOADER_STRICT_JSON_H_

#include <cstdint>
#include <nlohmann/json.hpp>

namespace sdsl {

// signal_dataset's ResourcePolicy defaults for headers and descriptors.
constexpr int kMaxJsonDepth = 128;
constexpr uint64_t kMaxJsonNodes = 1000000;

// Throws a corrupt error naming `what` for anything signal_dataset's
// strict_json_loads refuses.
nlohmann::json ParseStrictJson(const uint8_t* data, uint64_t size, const char* what);

}  // namespace sdsl

#endif  // SDS_LOADER_STRICT_JSON_H_
