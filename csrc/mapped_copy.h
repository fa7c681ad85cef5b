// Copies out of a file mapped into memory, safely. Touching a page of a
// mapping beyond the end of its file (the file was truncated after it was
// mapped) raises SIGBUS, which would kill the process; inside CopyFromMapping
// it makes the copy return false instead, and the reader raises an error
// naming the shard.
#ifndef SDS_LOADER_MAPPED_COPY_H_
#define SDS_LOADER_MAPPED_COPY_H_

#include <cstddef>
#include <cstdint>

#include "shard_source.h"

namespace sdsl {

// Copies the `size` bytes at `source`, in order, into the buffers of
// `requests` (their sizes summing to `size`; their offsets are not read).
// False when a page of `source` no longer exists.
bool CopyFromMapping(const uint8_t* source, uint64_t size, const RangeRequest* requests,
                     size_t count);

// Makes sure the SIGBUS handler CopyFromMapping relies on is the process's:
// installs it the first time, and again when another one (faulthandler's,
// say) has replaced it since; a fault that is not a guarded copy's is passed
// on to the handler that was there before. A syscall, so a reader calls this
// once per batch, not per copy. False when it cannot be installed; then
// nothing may be copied out of a mapping.
bool GuardMappedCopies();

}  // namespace sdsl

#endif  // SDS_LOADER_MAPPED_COPY_H_
