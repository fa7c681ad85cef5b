// Every failure the core can report. The core never asserts on input: each
// malformed byte becomes one of these, and the binding maps them to Python.
#ifndef SDS_LOADER_READER_ERROR_H_
#define SDS_LOADER_READER_ERROR_H_

#include <cstdint>
#include <stdexcept>
#include <string>

namespace sdsl {

enum class ErrorKind {
  kCorrupt,         // bytes fail a hash, a bound or a format rule
  kUnsupported,     // valid, but this core does not decode it (transposed)
  kSchemaMismatch,  // a record disagrees with the batch layout asked for
  kTarget,          // a metadata target is missing or not a scalar
  kIo,              // the operating system refused a read or an open
  kArgument,        // the caller passed something unusable
  kIndex,           // a window start outside the record it is asked of
  kStorage,         // an object store refused, failed, or holds other bytes than read before
  kUnsafePath,      // a local path a dataset may not use: a link below its root, not a regular file
};

class ReaderError : public std::runtime_error {
 public:
  ReaderError(ErrorKind kind, const std::string& message, int os_error = 0)
      : std::runtime_error(message), kind_(kind), os_error_(os_error) {}
  ErrorKind kind() const { return kind_; }
  int os_error() const { return os_error_; }

 private:
  ErrorKind kind_;
  int os_error_;
};

[[noreturn]] inline void Fail(ErrorKind kind, const std::string& message) {
  throw ReaderError(kind, message);
}

[[noreturn]] inline void Corrupt(const std::string& message) {
  throw ReaderError(ErrorKind::kCorrupt, message);
}

// What a message about bytes fetched `failures` times that failed a check
// each time adds: which bytes of `object` they were, and how often.
inline std::string FailedFetches(const std::string& object, uint64_t first, uint64_t end,
                                 int failures) {
  return " (bytes " + std::to_string(first) + "-" + std::to_string(end) + " of " + object +
         " as the store sent them failed this check " +
         (failures == 1 ? std::string("once") : std::to_string(failures) + " times") +
         ": the object itself is damaged, or every fetch of it was)";
}

}  // namespace sdsl

#endif  // SDS_LOADER_READER_ERROR_H_
