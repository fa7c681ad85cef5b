// Copies out of a file mapped into memory, safely. Touching a page of a
// mapping beyond the end of its file (the file was truncated after it was
// mapped) raises SIGBUS, which would kill the process; inside CopyFromMapping
// it makes the copy return false instead, and the reader raises an error
// naming the shard.
#ifndef SDS_LOADER_MAPPED_COPY_H_
#define SDS_LOADER_MAPPED_COPY_H_

#include <cstddef>
#include <cstdint>

#include "container/chunk_hasher.h"
#include "sources/shard_source.h"

namespace sdsl {

// Copies the `size` bytes at `source`, in order, into the buffers of
// `requests` (their sizes summing to `size`; their offsets are not read).
// False when a page of `source` no longer exists. Only while
// GuardMappedCopies() says true may it be called.
// `hashed` (when not null): the requests whose bytes are also appended to
// `hasher`, each in the same pass as its copy.
bool CopyFromMapping(const uint8_t* source, uint64_t size, const RangeRequest* requests,
                     size_t count, const uint8_t* hashed = nullptr, ChunkHasher* hasher = nullptr);

// Whether SIGBUS goes to the handler CopyFromMapping relies on first. Our
// handler is installed over another only once, the first time: a handler
// installed after that one may have recorded ours as its predecessor, and
// recording it as ours would make the two call each other forever. When
// something has replaced ours since (faulthandler enabled after the first
// batch, say), this is false and the batch reads with pread instead; ours is
// installed again only over the default action or SIG_IGN, which call no
// one. A fault that is not a guarded copy's is passed on, exactly once, to
// the handler that was there before ours. A forked child starts afresh: the
// first call there installs ours over whatever the child has installed (a
// DataLoader worker's own handler, say). A syscall, so a reader asks once
// per batch, not per copy.
bool GuardMappedCopies();

}  // namespace sdsl

#endif  // SDS_LOADER_MAPPED_COPY_H_
