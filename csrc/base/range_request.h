// A range of one shard's bytes and where they go: what a read asks of the
// stage that fetches (sources/), and what the container stage splits a
// chunk's range into (riegeli_layout.h).
#ifndef SDS_LOADER_BASE_RANGE_REQUEST_H_
#define SDS_LOADER_BASE_RANGE_REQUEST_H_

#include <cstddef>
#include <cstdint>

namespace sdsl {

struct RangeRequest {
  size_t file = 0;      // the shard's number in the dataset
  uint64_t offset = 0;  // where in the shard the range begins
  uint64_t size = 0;    // bytes to fill at dst, exactly
  uint8_t* dst = nullptr;
};

}  // namespace sdsl

#endif  // SDS_LOADER_BASE_RANGE_REQUEST_H_
