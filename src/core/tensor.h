// Tensor: element type, shape and a pointer into memory kept alive by a shared holder (owned, mapped file, or
// caller memory). Copying a Tensor shares the memory. IValue: what flows along a graph edge (tensor, sequence
// of tensors, or an empty optional).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/data_type.h"
#include "core/status.h"

namespace epctx {

using Shape = std::vector<int64_t>;

// Product of dims; -1 if any dim is negative or the product overflows int64.
int64_t ShapeSize(const Shape& shape);
std::string ShapeToString(const Shape& shape);  // "[2,3,4]"

class Tensor {
 public:
  Tensor() = default;

  // Allocates zero-initialised, 64-byte aligned storage (strings are default-constructed).
  // INVALID_ARGUMENT for negative dims; FAIL when the size overflows or exceeds the allocation limit.
  static StatusOr<Tensor> Allocate(DataType dtype, Shape shape);
  // As Allocate, but numeric storage is left uninitialised: for a producer that writes every element (the CPU EP's
  // elementwise and convolution kernels), where zeroing was a whole extra pass over each output.
  static StatusOr<Tensor> AllocateForOverwrite(DataType dtype, Shape shape);
  // A view over memory owned elsewhere; `holder` (may be null) is kept alive as long as any copy of the view.
  static Tensor View(DataType dtype, Shape shape, void* data, std::shared_ptr<void> holder);

  bool defined() const { return dtype_ != DataType::kUndefined; }
  DataType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  size_t rank() const { return shape_.size(); }
  int64_t dim(size_t i) const { return shape_[i]; }
  int64_t NumElements() const { return num_elements_; }
  size_t SizeInBytes() const { return static_cast<size_t>(num_elements_) * DataTypeSize(dtype_); }

  void* raw_data() { return data_; }
  const void* raw_data() const { return data_; }
  template <typename T>
  T* data() { return static_cast<T*>(data_); }
  template <typename T>
  const T* data() const { return static_cast<const T*>(data_); }

  // Same memory, new shape (element count must match; checked by the caller).
  Tensor Reshaped(Shape shape) const;
  // Deep copy into freshly allocated memory.
  StatusOr<Tensor> Clone() const;
  const std::shared_ptr<void>& holder() const { return holder_; }

 private:
  static StatusOr<Tensor> AllocateImpl(DataType dtype, Shape shape, bool zero);
  DataType dtype_ = DataType::kUndefined;
  Shape shape_;
  int64_t num_elements_ = 0;
  void* data_ = nullptr;
  std::shared_ptr<void> holder_;
};

using TensorSequence = std::vector<Tensor>;

// The value on a graph edge.
class IValue {
 public:
  enum class Kind { kNone, kTensor, kSequence };
  IValue() = default;                                  // an empty optional / absent value
  IValue(Tensor t) : kind_(Kind::kTensor), tensor_(std::move(t)) {}  // NOLINT
  static IValue Sequence(TensorSequence seq, DataType elem_type) {
    IValue v;
    v.kind_ = Kind::kSequence;
    v.seq_ = std::make_shared<TensorSequence>(std::move(seq));
    v.seq_elem_type_ = elem_type;
    return v;
  }
  Kind kind() const { return kind_; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_tensor() const { return kind_ == Kind::kTensor; }
  bool is_sequence() const { return kind_ == Kind::kSequence; }
  const Tensor& tensor() const { return tensor_; }
  Tensor& tensor() { return tensor_; }
  const TensorSequence& sequence() const { return *seq_; }
  DataType sequence_elem_type() const { return seq_elem_type_; }

 private:
  Kind kind_ = Kind::kNone;
  Tensor tensor_;
  std::shared_ptr<const TensorSequence> seq_;
  DataType seq_elem_type_ = DataType::kUndefined;
};

}  // namespace epctx
