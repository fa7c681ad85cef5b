// A vector whose first element lives inside it: most holders of one (a
// batch's run, which almost always covers one chunk, a chunk, which almost
// always yields one wanted record) never allocate. A std::vector each cost
// two mallocs and two frees per record of a batch of short records, the
// frees often on another thread than the mallocs.
//
// Elements are contiguous: while there is one it is the inline slot; a
// second moves both to the heap. Pointers into it are invalidated then, as
// by a std::vector's growth.
#ifndef SDS_LOADER_INLINE_VECTOR_H_
#define SDS_LOADER_INLINE_VECTOR_H_

#include <cassert>
#include <cstddef>
#include <optional>
#include <utility>
#include <vector>

namespace sdsl {

template <typename T>
class InlineVector {
 public:
  size_t size() const { return more_.empty() ? (first_.has_value() ? 1 : 0) : more_.size(); }
  bool empty() const { return size() == 0; }

  T* begin() { return more_.empty() ? (first_.has_value() ? &*first_ : nullptr) : more_.data(); }
  T* end() { return begin() + size(); }
  const T* begin() const {
    return more_.empty() ? (first_.has_value() ? &*first_ : nullptr) : more_.data();
  }
  const T* end() const { return begin() + size(); }

  T& front() { return (*this)[0]; }
  const T& front() const { return (*this)[0]; }
  T& back() { return (*this)[size() - 1]; }
  const T& back() const { return (*this)[size() - 1]; }
  T& operator[](size_t k) {
    assert(k < size());
    return begin()[k];
  }
  const T& operator[](size_t k) const {
    assert(k < size());
    return begin()[k];
  }

  void push_back(T value) {
    if (more_.empty() && !first_.has_value()) {
      first_.emplace(std::move(value));
      return;
    }
    if (more_.empty()) {
      more_.reserve(4);
      more_.push_back(std::move(*first_));
      first_.reset();
    }
    more_.push_back(std::move(value));
  }

 private:
  std::optional<T> first_;  // the only element, while there is one
  std::vector<T> more_;     // every element, once there are two or more
};

}  // namespace sdsl

#endif  // SDS_LOADER_INLINE_VECTOR_H_
