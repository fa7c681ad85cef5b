// One Riegeli chunk located in a file range: its header checked, its data
// gathered as pieces around any block headers, its data hash verified.
#ifndef SDS_LOADER_RIEGELI_CHUNK_H_
#define SDS_LOADER_RIEGELI_CHUNK_H_

#include <cstdint>

#include "base/byte_span.h"
#include "container/riegeli_layout.h"

namespace sdsl {

enum ChunkType : uint8_t {
  kSignatureChunk = 's',
  kMetadataChunk = 'm',
  kPaddingChunk = 'p',
  kSimpleChunk = 'r',
  kTransposedChunk = 't',
};

struct ChunkHeader {
  uint64_t data_size = 0;
  uint64_t data_hash = 0;
  uint8_t type = 0;
  uint64_t num_records = 0;
  uint64_t decoded_data_size = 0;
};

struct Chunk {
  uint64_t begin = 0;
  uint64_t end = 0;  // where the next chunk may begin
  ChunkHeader header;
  Pieces data;
};

// Reads the chunk that begins at `begin`. `limit` is the first position the
// chunk may not reach (the next chunk, or the footer). Always checked, since
// a wrong size would misdirect every read after it: the chunk header's hash
// (and that of a block header interrupting it), and that every block header
// inside the chunk places it where its header says. Checked only when
// `verify_data`, as the data hash covers what they guard: the hashes of the
// block headers interrupting the data, and the data hash.
void ReadChunk(const FileRange& range, uint64_t begin, uint64_t limit, bool verify_data,
               Chunk* chunk);

// Where the chunk at `begin` ends (the next chunk's start), from its header:
// Riegeli's rule, the data and the records both fitting before `limit`.
uint64_t ChunkEnd(uint64_t begin, uint64_t limit, const ChunkHeader& header);

// The checks of ReadChunk that need only the chunk header: fills `chunk`
// but its data, and returns where the data begins. For a reader that places
// the data itself, then checks it with CheckChunkDataHash.
uint64_t ReadChunkFrame(const FileRange& range, uint64_t begin, uint64_t limit, Chunk* chunk);
void CheckChunkDataHash(const Chunk& chunk);
// The same check, of a hash computed as the data was read (ChunkHasher).
void CheckChunkDataHash(const Chunk& chunk, uint64_t data_hash);

// Every block header inside a chunk says how far back the chunk began and
// how far on it ends; Riegeli's reader checks both, and so does this one.
// `header_at(block)` gives the 24 bytes of the block header at `block`, or
// nullptr when the bytes read do not hold it.
void CheckBlockHeader(uint64_t begin, uint64_t end, uint64_t block, const uint8_t* header);
template <typename HeaderAt>
void CheckBlockHeaders(uint64_t begin, uint64_t end, HeaderAt header_at) {
  for (uint64_t block = (begin + kBlockSize - 1) / kBlockSize * kBlockSize; block < end;
       block += kBlockSize) {
    CheckBlockHeader(begin, end, block, header_at(block));
  }
}

// Reads only the 40-byte header of the chunk at `begin` (checked).
ChunkHeader ReadChunkHeader(const FileRange& range, uint64_t begin);

}  // namespace sdsl

#endif  // SDS_LOADER_RIEGELI_CHUNK_H_
