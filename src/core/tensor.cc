#include "core/tensor.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <sstream>

namespace epctx {

namespace {
constexpr size_t kAlignment = 64;
constexpr uint64_t kMaxAllocationBytes = uint64_t{1} << 40;  // refuse > 1 TiB outright rather than die in malloc

// Large blocks are kept for reuse: a fresh multi-megabyte block costs a page fault per 4 KiB on first touch,
// which dominated data-movement kernels (64 MiB took ~38 ms). Blocks are bucketed by size rounded up to a power of
// two; the cache holds at most kMaxCachedBytes and is shared by all sessions of the process. From 64 KiB: glibc
// maps blocks above its mmap threshold (128 KiB at first) fresh on every malloc, and the CPU EP allocates every
// output on every run (page faults were a visible share of a small CNN's run, issue 14). The cap is an eighth of
// the machine's memory, from 256 MiB to 2 GiB: a 1024 x 1024 network's activations are 64-128 MiB each, and with
// 256 MiB most of them went back to the kernel and were faulted in again on every run (ISNet-fp16 on the CPU EP,
// issue 26: 12.4 -> 8.4 s per run, peak RSS unchanged, since those blocks are live during a run anyway).
constexpr size_t kMinCachedBlock = size_t{64} << 10;

size_t MaxCachedBytes() {
  static const size_t cap = [] {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    const size_t lo = size_t{256} << 20, hi = size_t{2048} << 20;
    if (pages <= 0 || page <= 0) return lo;
    const size_t eighth = static_cast<size_t>(pages) / 8 * static_cast<size_t>(page);
    return std::min(hi, std::max(lo, eighth));
  }();
  return cap;
}

class BlockCache {
 public:
  static BlockCache& Get() {
    static BlockCache* cache = new BlockCache();  // never destroyed: tensors may outlive static destruction
    return *cache;
  }
  static size_t Bucket(size_t bytes) {
    size_t b = kMinCachedBlock;
    while (b < bytes) b <<= 1;
    return b;
  }
  void* Take(size_t bucket) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.find(bucket);
    if (it == free_.end() || it->second.empty()) return nullptr;
    void* p = it->second.back();
    it->second.pop_back();
    cached_ -= bucket;
    return p;
  }
  void Give(void* p, size_t bucket) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (cached_ + bucket <= MaxCachedBytes()) {
        free_[bucket].push_back(p);
        cached_ += bucket;
        return;
      }
    }
    std::free(p);
  }

 private:
  std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;
  size_t cached_ = 0;
};
}  // namespace

int64_t ShapeSize(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    if (d != 0 && n > INT64_MAX / d) return -1;
    n *= d;
  }
  return n;
}

std::string ShapeToString(const Shape& shape) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? "," : "") << shape[i];
  os << ']';
  return os.str();
}

StatusOr<Tensor> Tensor::Allocate(DataType dtype, Shape shape) { return AllocateImpl(dtype, std::move(shape), true); }

StatusOr<Tensor> Tensor::AllocateForOverwrite(DataType dtype, Shape shape) {
  return AllocateImpl(dtype, std::move(shape), false);
}

StatusOr<Tensor> Tensor::AllocateImpl(DataType dtype, Shape shape, bool zero) {
  for (int64_t d : shape)
    RETURN_ERROR_IF(d < 0, INVALID_ARGUMENT, "cannot allocate a tensor of shape ", ShapeToString(shape),
                    ": negative dimension");
  int64_t n = ShapeSize(shape);
  size_t esize = DataTypeSize(dtype);
  RETURN_ERROR_IF(esize == 0, INVALID_ARGUMENT, "cannot allocate a tensor of element type ", DataTypeName(dtype));
  RETURN_ERROR_IF(n < 0 || static_cast<uint64_t>(n) > kMaxAllocationBytes / esize, FAIL,
                  "tensor of shape ", ShapeToString(shape), " and type ", DataTypeName(dtype),
                  " is too large to allocate");
  size_t bytes = static_cast<size_t>(n) * esize;
  size_t padded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (padded == 0) padded = kAlignment;
  const bool cached = dtype != DataType::kString && padded >= kMinCachedBlock;
  void* p = nullptr;
  if (cached) {
    padded = BlockCache::Bucket(padded);
    p = BlockCache::Get().Take(padded);
  }
  if (!p) p = std::aligned_alloc(kAlignment, padded);
  RETURN_ERROR_IF(p == nullptr, FAIL, "out of memory allocating ", bytes, " bytes for a tensor of shape ",
                  ShapeToString(shape));
  std::shared_ptr<void> holder;
  if (dtype == DataType::kString) {
    auto* s = static_cast<std::string*>(p);
    for (int64_t i = 0; i < n; ++i) new (s + i) std::string();
    holder = std::shared_ptr<void>(p, [n](void* q) {
      auto* str = static_cast<std::string*>(q);
      for (int64_t i = 0; i < n; ++i) str[i].~basic_string();
      std::free(q);
    });
  } else if (cached) {
    if (zero) std::memset(p, 0, bytes);
    holder = std::shared_ptr<void>(p, [padded](void* q) { BlockCache::Get().Give(q, padded); });
  } else {
    if (zero) std::memset(p, 0, padded);
    holder = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  }
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.num_elements_ = n;
  t.data_ = p;
  t.holder_ = std::move(holder);
  return t;
}

Tensor Tensor::View(DataType dtype, Shape shape, void* data, std::shared_ptr<void> holder) {
  Tensor t;
  t.dtype_ = dtype;
  t.num_elements_ = ShapeSize(shape);
  t.shape_ = std::move(shape);
  t.data_ = data;
  t.holder_ = std::move(holder);
  return t;
}

Tensor Tensor::Reshaped(Shape shape) const {
  Tensor t = *this;
  t.num_elements_ = ShapeSize(shape);
  t.shape_ = std::move(shape);
  return t;
}

StatusOr<Tensor> Tensor::Clone() const {
  ASSIGN_OR_RETURN(Tensor t, Allocate(dtype_, shape_));
  if (dtype_ == DataType::kString) {
    for (int64_t i = 0; i < num_elements_; ++i) t.data<std::string>()[i] = data<std::string>()[i];
  } else if (SizeInBytes() > 0) {
    std::memcpy(t.data_, data_, SizeInBytes());
  }
  return t;
}

}  // namespace epctx
