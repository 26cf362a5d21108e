// Constant folding: evaluates, once at compile time, the nodes whose inputs are all constant (and Shape/Size of a
// value with a static shape), so that shape arithmetic (position ids, mask slicing, reshape targets) leaves no step
// in the program. Results follow the CPU EP's kernels bit for bit (same conversions, wrapping, NaN rules).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "providers/aotcpu/capability/capability.h"
#include "providers/aotcpu/ir/slice_params.h"
#include "providers/aotcpu/lower/ops.h"

namespace epctx {
namespace aotcpu {
namespace {

constexpr uint64_t kMaxFoldBytes = uint64_t{256} << 20;

size_t ElemSize(uint32_t dtype) {
  switch (dtype) {
    case 2: case 3: case 9: return 1;       // u8, i8, bool
    case 4: case 5: case 10: case 16: return 2;  // u16, i16, f16, bf16
    case 1: case 6: case 12: return 4;      // f32, i32, u32
    case 7: case 11: case 13: return 8;     // i64, f64, u64
    default: return 0;
  }
}


// Product of dims, -1 on a negative dim or overflow past 2^62.
int64_t Numel(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) return -1;
    if (d != 0 && n > (int64_t{1} << 62) / d) return -1;
    n *= d;
  }
  return n;
}

// A constant input (borrowed bytes).
struct View {
  uint32_t dtype = 0;
  std::vector<int64_t> dims;
  const char* p = nullptr;
  int64_t numel = 0;
  template <typename T>
  const T* as() const { return reinterpret_cast<const T*>(p); }
};

// The single result of a folded node.
struct Result {
  uint32_t dtype = 0;
  std::vector<int64_t> dims;
  std::shared_ptr<std::string> bytes;
};

// kShape: shape-only mode computed the output's dtype and dims (no data).
enum class R { kDone, kSkip, kError, kShape };

// One node's evaluation. In shape-only mode (inputs with static shapes, not all constant) the op functions run up
// to Alloc, which records the output dtype and dims and returns kShape; parameter inputs they must read (shape,
// axes, starts...) still have to be constant, else they return kSkip.
struct Fold {
  Fold(const Graph& graph, const Node& node, bool shapes) : g(graph), n(node), shape_only(shapes) {}
  const Graph& g;
  const Node& n;
  bool shape_only = false;
  std::vector<View> in;        // in[i].p == nullptr for an absent input or one without constant data
  std::vector<bool> present;
  Result out;
  std::string error;

  R Bad(const std::string& why) {
    error = why;
    return R::kError;
  }
  // Reads input i (present) as int64s: kSkip when it has no constant data.
  R Ints(size_t i, std::vector<int64_t>* out, const char* what);
  bool Has(size_t i) const { return i < present.size() && present[i]; }
  // Allocates the output; kSkip when too large.
  R Alloc(uint32_t dtype, std::vector<int64_t> dims, char** p) {
    const int64_t numel = Numel(dims);
    const size_t es = ElemSize(dtype);
    if (numel < 0 || es == 0) return R::kSkip;
    if (shape_only) {
      out.dtype = dtype;
      out.dims = std::move(dims);
      return R::kShape;
    }
    if (static_cast<uint64_t>(numel) * es > kMaxFoldBytes) return R::kSkip;
    out.dtype = dtype;
    out.dims = std::move(dims);
    out.bytes = std::make_shared<std::string>(static_cast<size_t>(numel) * es, '\0');
    *p = &(*out.bytes)[0];
    return R::kDone;
  }
};

// ---- index helpers ----------------------------------------------------------------------------------------------

// Walks the elements of an `out`-shaped tensor in row-major order, tracking the element offset of a source with the
// given per-dimension strides (0 for broadcast dims).
class StridedIter {
 public:
  StridedIter(const std::vector<int64_t>& out, std::vector<int64_t> strides, int64_t base)
      : out_(out), strides_(std::move(strides)), idx_(out.size(), 0), offset_(base) {}
  int64_t offset() const { return offset_; }
  void Next() {
    for (size_t d = out_.size(); d-- > 0;) {
      offset_ += strides_[d];
      if (++idx_[d] < out_[d]) return;
      offset_ -= strides_[d] * out_[d];
      idx_[d] = 0;
    }
  }

 private:
  const std::vector<int64_t>& out_;
  std::vector<int64_t> strides_;
  std::vector<int64_t> idx_;
  int64_t offset_;
};

std::vector<int64_t> RowMajorStrides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i];
  return s;
}

// Strides of `in` broadcast (numpy, right-aligned) to `out`.
std::vector<int64_t> BroadcastStrides(const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  std::vector<int64_t> s(out.size(), 0);
  const std::vector<int64_t> rs = RowMajorStrides(in);
  const size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) s[off + i] = in[i] == 1 ? 0 : rs[i];
  return s;
}

// numpy multidirectional broadcast; false when incompatible.
bool BroadcastDims(const std::vector<const std::vector<int64_t>*>& shapes, std::vector<int64_t>* out) {
  size_t rank = 0;
  for (auto* s : shapes) rank = std::max(rank, s->size());
  out->assign(rank, 1);
  for (auto* s : shapes) {
    const size_t off = rank - s->size();
    for (size_t i = 0; i < s->size(); ++i) {
      int64_t& o = (*out)[off + i];
      const int64_t d = (*s)[i];
      if (d == o || d == 1) continue;
      if (o == 1) {
        o = d;
        continue;
      }
      return false;
    }
  }
  return true;
}

// Copies elements of `es` bytes from `src` (walked with `strides` from `base`) into a dense `dims` tensor.
void StridedCopy(const char* src, size_t es, const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                 int64_t base, char* dst) {
  const int64_t numel = Numel(dims);
  if (numel <= 0) return;
  if (dims.empty()) {
    std::memcpy(dst, src + base * static_cast<int64_t>(es), es);
    return;
  }
  // Copy runs along the innermost dim when it is contiguous in the source.
  const int64_t inner = dims.back();
  const bool contiguous = strides.back() == 1;
  std::vector<int64_t> outer(dims.begin(), dims.end() - 1);
  std::vector<int64_t> outer_strides(strides.begin(), strides.end() - 1);
  StridedIter it(outer, outer_strides, base);
  const int64_t rows = numel / inner;
  const int64_t step = strides.back();
  for (int64_t r = 0; r < rows; ++r, it.Next()) {
    char* d = dst + r * inner * static_cast<int64_t>(es);
    if (contiguous) {
      std::memcpy(d, src + it.offset() * static_cast<int64_t>(es), static_cast<size_t>(inner) * es);
    } else {
      for (int64_t i = 0; i < inner; ++i)
        std::memcpy(d + i * static_cast<int64_t>(es), src + (it.offset() + i * step) * static_cast<int64_t>(es), es);
    }
  }
}

// Normalizes an axis against `rank`; false when out of [-rank, rank).
bool NormAxis(int64_t a, int64_t rank, int64_t* out) {
  if (a < -rank || a >= rank) return false;
  *out = a < 0 ? a + rank : a;
  return true;
}

bool ReadInts(const View& v, std::vector<int64_t>* out) {
  out->clear();
  if (v.dtype == kI64) {
    out->assign(v.as<int64_t>(), v.as<int64_t>() + v.numel);
  } else if (v.dtype == kI32) {
    for (int64_t i = 0; i < v.numel; ++i) out->push_back(v.as<int32_t>()[i]);
  } else {
    return false;
  }
  return true;
}

R Fold::Ints(size_t i, std::vector<int64_t>* v, const char* what) {
  if (!Has(i) || !in[i].p) return R::kSkip;
  if (!ReadInts(in[i], v)) return Bad(std::string(what) + " must be int64 or int32");
  return R::kDone;
}

// Calls f(T{}) for the numeric types arithmetic folds handle.
template <typename F>
R DispatchNumeric(uint32_t dtype, F&& f) {
  switch (dtype) {
    case kF32: return f(float{});
    case kI64: return f(int64_t{});
    case kI32: return f(int32_t{});
    default: return R::kSkip;
  }
}

template <typename T>
T WrapAdd(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}
template <typename T>
T WrapSub(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
  } else {
    return a - b;
  }
}
template <typename T>
T WrapMul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}

// ---- ops ----------------------------------------------------------------------------------------------------------

R FoldShape(Fold& f, bool size) {
  const Value& x = f.g.v(f.n.inputs[0]);
  if (!x.has_shape) return R::kSkip;
  char* p;
  if (size) {
    const int64_t numel = Numel(x.dims);
    if (numel < 0) return R::kSkip;
    R r = f.Alloc(kI64, {}, &p);
    if (r != R::kDone) return r;
    std::memcpy(p, &numel, 8);
    return R::kDone;
  }
  const int64_t rank = static_cast<int64_t>(x.dims.size());
  int64_t start = f.n.Int("start", 0), end = f.n.Int("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  const int64_t count = std::max<int64_t>(end - start, 0);
  R r = f.Alloc(kI64, {count}, &p);
  if (r != R::kDone) return r;
  if (count) std::memcpy(p, x.dims.data() + start, static_cast<size_t>(count) * 8);
  return R::kDone;
}

// Constant / ConstantOfShape tensor attributes: ir.cc stores an EPCTX_ATTR_TENSOR as i = dtype, ints = dims,
// s = raw little-endian bytes.
bool TensorAttr(const Attr& a, uint32_t* dtype, std::vector<int64_t>* dims, const std::string** bytes) {
  if (a.type != EPCTX_ATTR_TENSOR) return false;
  const int64_t numel = Numel(a.ints);
  const size_t es = ElemSize(static_cast<uint32_t>(a.i));
  if (a.i <= 0 || es == 0 || numel < 0 || a.s.size() != static_cast<size_t>(numel) * es) return false;
  *dtype = static_cast<uint32_t>(a.i);
  *dims = a.ints;
  *bytes = &a.s;
  return true;
}

R FoldConstant(Fold& f) {
  const Node& n = f.n;
  char* p;
  if (n.attrs.size() != 1) return R::kSkip;  // exactly one value attribute (sparse/string values: not folded)
  const auto& [key, a] = *n.attrs.begin();
  if (key == "value") {
    uint32_t dt;
    std::vector<int64_t> dims;
    const std::string* bytes;
    if (!TensorAttr(a, &dt, &dims, &bytes)) return R::kSkip;
    R r = f.Alloc(dt, dims, &p);
    if (r != R::kDone) return r;
    if (!bytes->empty()) std::memcpy(p, bytes->data(), bytes->size());
    return R::kDone;
  }
  if (key == "value_float" && a.type == EPCTX_ATTR_FLOAT) {
    R r = f.Alloc(kF32, {}, &p);
    if (r == R::kDone) std::memcpy(p, &a.f, 4);
    return r;
  }
  if (key == "value_int" && a.type == EPCTX_ATTR_INT) {
    R r = f.Alloc(kI64, {}, &p);
    if (r == R::kDone) std::memcpy(p, &a.i, 8);
    return r;
  }
  if (key == "value_floats" && a.type == EPCTX_ATTR_FLOATS) {
    R r = f.Alloc(kF32, {static_cast<int64_t>(a.floats.size())}, &p);
    if (r == R::kDone && !a.floats.empty()) std::memcpy(p, a.floats.data(), a.floats.size() * 4);
    return r;
  }
  if (key == "value_ints" && a.type == EPCTX_ATTR_INTS) {
    R r = f.Alloc(kI64, {static_cast<int64_t>(a.ints.size())}, &p);
    if (r == R::kDone && !a.ints.empty()) std::memcpy(p, a.ints.data(), a.ints.size() * 8);
    return r;
  }
  return R::kSkip;
}

R FoldConstantOfShape(Fold& f) {
  std::vector<int64_t> dims;
  R r = f.Ints(0, &dims, "input");
  if (r != R::kDone) return r;
  if (f.in[0].dims.size() != 1) return f.Bad("input must be a 1-D tensor");
  for (int64_t d : dims)
    if (d < 0) return f.Bad("shape " + DimsText(dims) + " has a negative dim");
  uint32_t dt = kF32;
  std::string zero(4, '\0');
  const std::string* value = &zero;
  auto it = f.n.attrs.find("value");
  if (it != f.n.attrs.end()) {
    std::vector<int64_t> vdims;
    if (!TensorAttr(it->second, &dt, &vdims, &value)) return R::kSkip;
    if (Numel(vdims) != 1) return f.Bad("value must hold one element");
  }
  char* p;
  r = f.Alloc(dt, dims, &p);
  if (r != R::kDone) return r;
  const size_t es = value->size();
  const size_t count = f.out.bytes->size() / es;
  for (size_t i = 0; i < count; ++i) std::memcpy(p + i * es, value->data(), es);
  return R::kDone;
}

R FoldRange(Fold& f) {
  const uint32_t dt = f.in[0].dtype;
  for (int i = 0; i < 3; ++i) {
    if (!f.Has(i)) return f.Bad("start, limit and delta are required");
    if (f.in[i].dtype != dt) return f.Bad("start, limit and delta must have one type");
    if (f.in[i].numel != 1) return f.Bad("start, limit and delta must be scalars, got " + DimsText(f.in[i].dims));
    if (!f.in[i].p) return R::kSkip;
  }
  return DispatchNumeric(dt, [&](auto tag) -> R {
    using T = decltype(tag);
    const T start = f.in[0].as<T>()[0], limit = f.in[1].as<T>()[0], delta = f.in[2].as<T>()[0];
    if (delta == 0) return f.Bad("delta is 0");
    int64_t count = 0;
    if constexpr (std::is_floating_point_v<T>) {
      const double c = std::ceil((static_cast<double>(limit) - start) / delta);
      if (std::isnan(c) || c > 9e18) return f.Bad("range has no finite length");
      count = c > 0 ? static_cast<int64_t>(c) : 0;
    } else {
      const __int128 span = static_cast<__int128>(limit) - start;
      __int128 q = span / delta;
      if (q * delta != span && (span > 0) == (delta > 0)) ++q;
      count = q > 0 ? static_cast<int64_t>(q) : 0;
    }
    char* p;
    R r = f.Alloc(dt, {count}, &p);
    if (r != R::kDone) return r;
    T* o = reinterpret_cast<T*>(p);
    for (int64_t i = 0; i < count; ++i) o[i] = static_cast<T>(start + static_cast<T>(i) * delta);
    return R::kDone;
  });
}

// One element converted for Cast; false when the value has no defined result (NaN/out of range to an integer).
template <typename To, typename From>
bool Convert(From v, To* out) {
  if constexpr (std::is_same_v<To, bool>) {
    *out = v != From(0);
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    const double t = std::trunc(static_cast<double>(v));  // NaN fails both comparisons
    if (!(t >= static_cast<double>(std::numeric_limits<To>::min()) &&
          t < static_cast<double>(std::numeric_limits<To>::max()) + 1.0))
      return false;
    *out = static_cast<To>(v);
  } else if constexpr (std::is_integral_v<To> && std::is_integral_v<From> && !std::is_same_v<From, bool>) {
    using U = std::make_unsigned_t<To>;
    *out = static_cast<To>(static_cast<U>(v));  // two's-complement wrap
  } else {
    *out = static_cast<To>(v);
  }
  return true;
}

template <typename F>
R DispatchCastType(uint32_t dtype, F&& f) {
  switch (dtype) {
    case kF32: return f(float{});
    case kI64: return f(int64_t{});
    case kI32: return f(int32_t{});
    case kBool: return f(bool{});
    case kU8: return f(uint8_t{});
    case kI8: return f(int8_t{});
    default: return R::kSkip;
  }
}

R FoldCast(Fold& f) {
  if (!f.n.Has("to")) return f.Bad("attribute 'to' is required");
  const uint32_t to = static_cast<uint32_t>(f.n.Int("to", 0));
  const View& x = f.in[0];
  return DispatchCastType(x.dtype, [&](auto from_tag) -> R {
    using From = decltype(from_tag);
    return DispatchCastType(to, [&](auto to_tag) -> R {
      using To = decltype(to_tag);
      char* p;
      R r = f.Alloc(to, x.dims, &p);
      if (r != R::kDone) return r;
      for (int64_t i = 0; i < x.numel; ++i) {
        From v;
        std::memcpy(&v, x.p + i * static_cast<int64_t>(sizeof(From)), sizeof(From));
        To o;
        if (!Convert<To>(v, &o)) return R::kSkip;
        std::memcpy(p + i * static_cast<int64_t>(sizeof(To)), &o, sizeof(To));
      }
      return R::kDone;
    });
  });
}

// Applies `op(a, b)` (element types T -> O) over the numpy broadcast of inputs 0 and 1.
template <typename T, typename O, typename Op>
R Broadcast2(Fold& f, uint32_t out_dtype, Op op) {
  const View &a = f.in[0], &b = f.in[1];
  std::vector<int64_t> dims;
  if (!BroadcastDims({&a.dims, &b.dims}, &dims))
    return f.Bad("shapes " + DimsText(a.dims) + " and " + DimsText(b.dims) + " do not broadcast");
  char* p;
  R r = f.Alloc(out_dtype, dims, &p);
  if (r != R::kDone) return r;
  StridedIter ia(dims, BroadcastStrides(a.dims, dims), 0), ib(dims, BroadcastStrides(b.dims, dims), 0);
  O* o = reinterpret_cast<O*>(p);
  const int64_t numel = Numel(dims);
  for (int64_t i = 0; i < numel; ++i, ia.Next(), ib.Next()) o[i] = op(a.as<T>()[ia.offset()], b.as<T>()[ib.offset()]);
  return R::kDone;
}

R FoldArith(Fold& f) {
  if (f.n.opset < 7) return R::kSkip;  // legacy broadcast attributes
  if (!f.Has(0) || !f.Has(1)) return f.Bad("two inputs are required");
  if (f.in[0].dtype != f.in[1].dtype) return f.Bad("inputs have different types");
  const std::string& op = f.n.op;
  return DispatchNumeric(f.in[0].dtype, [&](auto tag) -> R {
    using T = decltype(tag);
    if (op == "Add") return Broadcast2<T, T>(f, f.in[0].dtype, [](T a, T b) { return WrapAdd(a, b); });
    if (op == "Sub") return Broadcast2<T, T>(f, f.in[0].dtype, [](T a, T b) { return WrapSub(a, b); });
    if (op == "Mul") return Broadcast2<T, T>(f, f.in[0].dtype, [](T a, T b) { return WrapMul(a, b); });
    if constexpr (std::is_integral_v<T>) {
      const View& b = f.in[1];
      for (int64_t i = 0; i < b.numel; ++i)
        if (b.as<T>()[i] == 0) return R::kSkip;  // the run would fail; leave it to the kernel
    }
    return Broadcast2<T, T>(f, f.in[0].dtype, [](T a, T b) -> T {
      if constexpr (std::is_integral_v<T>) {
        if (b == -1) return WrapSub(T(0), a);
        return static_cast<T>(a / b);
      } else {
        return a / b;
      }
    });
  });
}

R FoldCompare(Fold& f) {
  if (f.n.opset < 7) return R::kSkip;
  if (!f.Has(0) || !f.Has(1)) return f.Bad("two inputs are required");
  if (f.in[0].dtype != f.in[1].dtype) return f.Bad("inputs have different types");
  const std::string& op = f.n.op;
  if (f.in[0].dtype == kBool) {
    if (op != "Equal") return R::kSkip;
    return Broadcast2<bool, bool>(f, kBool, [](bool a, bool b) { return a == b; });
  }
  return DispatchNumeric(f.in[0].dtype, [&](auto tag) -> R {
    using T = decltype(tag);
    if (op == "Equal") return Broadcast2<T, bool>(f, kBool, [](T a, T b) { return a == b; });
    if (op == "Less") return Broadcast2<T, bool>(f, kBool, [](T a, T b) { return a < b; });
    return Broadcast2<T, bool>(f, kBool, [](T a, T b) { return a > b; });
  });
}

R FoldNot(Fold& f) {
  const View& x = f.in[0];
  if (x.dtype != kBool) return f.Bad("input must be bool");
  char* p;
  R r = f.Alloc(kBool, x.dims, &p);
  if (r != R::kDone) return r;
  for (int64_t i = 0; i < x.numel; ++i) p[i] = x.p[i] ? 0 : 1;
  return R::kDone;
}

R FoldNeg(Fold& f) {
  const View& x = f.in[0];
  return DispatchNumeric(x.dtype, [&](auto tag) -> R {
    using T = decltype(tag);
    char* p;
    R r = f.Alloc(x.dtype, x.dims, &p);
    if (r != R::kDone) return r;
    T* o = reinterpret_cast<T*>(p);
    for (int64_t i = 0; i < x.numel; ++i) o[i] = WrapSub(T(0), x.as<T>()[i]);
    return R::kDone;
  });
}

R FoldWhere(Fold& f) {
  if (!f.Has(0) || !f.Has(1) || !f.Has(2)) return f.Bad("three inputs are required");
  const View &c = f.in[0], &x = f.in[1], &y = f.in[2];
  if (c.dtype != kBool) return f.Bad("condition must be bool");
  if (x.dtype != y.dtype) return f.Bad("X and Y have different types");
  const size_t es = ElemSize(x.dtype);
  if (es == 0) return R::kSkip;
  std::vector<int64_t> dims;
  if (!BroadcastDims({&c.dims, &x.dims, &y.dims}, &dims))
    return f.Bad("shapes " + DimsText(c.dims) + ", " + DimsText(x.dims) + " and " + DimsText(y.dims) +
                 " do not broadcast");
  char* p;
  R r = f.Alloc(x.dtype, dims, &p);
  if (r != R::kDone) return r;
  StridedIter ic(dims, BroadcastStrides(c.dims, dims), 0), ix(dims, BroadcastStrides(x.dims, dims), 0),
      iy(dims, BroadcastStrides(y.dims, dims), 0);
  const int64_t numel = Numel(dims);
  const int64_t e = static_cast<int64_t>(es);
  for (int64_t i = 0; i < numel; ++i, ic.Next(), ix.Next(), iy.Next()) {
    const char* src = c.p[ic.offset()] ? x.p + ix.offset() * e : y.p + iy.offset() * e;
    std::memcpy(p + i * e, src, es);
  }
  return R::kDone;
}

R FoldMinMax(Fold& f) {
  const bool is_max = f.n.op == "Max";
  std::vector<const View*> ins;
  for (size_t i = 0; i < f.in.size(); ++i)
    if (f.Has(i)) ins.push_back(&f.in[i]);
  if (ins.empty()) return f.Bad("at least one input is required");
  std::vector<const std::vector<int64_t>*> shapes;
  for (const View* v : ins) {
    if (v->dtype != ins[0]->dtype) return f.Bad("inputs have different types");
    if (f.n.opset < 8 && v->dims != ins[0]->dims) return R::kSkip;
    shapes.push_back(&v->dims);
  }
  std::vector<int64_t> dims;
  if (!BroadcastDims(shapes, &dims)) return f.Bad("input shapes do not broadcast");
  return DispatchNumeric(ins[0]->dtype, [&](auto tag) -> R {
    using T = decltype(tag);
    char* p;
    R r = f.Alloc(ins[0]->dtype, dims, &p);
    if (r != R::kDone) return r;
    T* o = reinterpret_cast<T*>(p);
    const int64_t numel = Numel(dims);
    for (size_t k = 0; k < ins.size(); ++k) {
      StridedIter it(dims, BroadcastStrides(ins[k]->dims, dims), 0);
      const T* src = ins[k]->as<T>();
      for (int64_t i = 0; i < numel; ++i, it.Next()) {
        const T b = src[it.offset()];
        if (k == 0) {
          o[i] = b;
        } else {
          const T a = o[i];  // NaN propagates, like the CPU kernels
          o[i] = is_max ? ((a > b || a != a) ? a : b) : ((a < b || a != a) ? a : b);
        }
      }
    }
    return R::kDone;
  });
}

// Output dims of the reshaping ops (shared with nothing else: the lowering reads the output value's dims).
R ReshapeDims(Fold& f, std::vector<int64_t>* out) {
  const Node& n = f.n;
  const View& x = f.in[0];
  const int64_t rank = static_cast<int64_t>(x.dims.size());
  const std::string& op = n.op;
  if (op == "Identity") {
    *out = x.dims;
    return R::kDone;
  }
  if (op == "Flatten") {
    int64_t axis = n.Int("axis", 1);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis > rank) return f.Bad("axis " + std::to_string(n.Int("axis", 1)) + " out of range");
    int64_t a = 1, b = 1;
    for (int64_t i = 0; i < rank; ++i) (i < axis ? a : b) *= x.dims[static_cast<size_t>(i)];
    *out = {a, b};
    return R::kDone;
  }
  std::vector<int64_t> axes;
  bool has_axes = false;
  if (op == "Squeeze" || op == "Unsqueeze") {
    if (n.opset >= 13) {
      if (f.Has(1)) {
        R r = f.Ints(1, &axes, "axes");
        if (r != R::kDone) return r;
        has_axes = true;
      }
    } else if (n.Has("axes")) {
      axes = n.Ints("axes");
      has_axes = true;
    }
  }
  if (op == "Squeeze") {
    std::vector<bool> drop(x.dims.size(), false);
    if (!has_axes) {
      for (size_t i = 0; i < x.dims.size(); ++i) drop[i] = x.dims[i] == 1;
    } else {
      for (int64_t a : axes) {
        int64_t ax;
        if (!NormAxis(a, rank, &ax)) return f.Bad("axis " + std::to_string(a) + " out of range");
        if (x.dims[static_cast<size_t>(ax)] != 1)
          return f.Bad("cannot squeeze axis " + std::to_string(a) + " of shape " + DimsText(x.dims));
        drop[static_cast<size_t>(ax)] = true;
      }
    }
    out->clear();
    for (size_t i = 0; i < x.dims.size(); ++i)
      if (!drop[i]) out->push_back(x.dims[i]);
    return R::kDone;
  }
  if (op == "Unsqueeze") {
    if (!has_axes) return f.Bad("axes are required");
    const int64_t out_rank = rank + static_cast<int64_t>(axes.size());
    std::vector<bool> insert(static_cast<size_t>(out_rank), false);
    for (int64_t a : axes) {
      int64_t ax;
      if (!NormAxis(a, out_rank, &ax)) return f.Bad("axis " + std::to_string(a) + " out of range");
      if (insert[static_cast<size_t>(ax)]) return f.Bad("axis " + std::to_string(a) + " repeated");
      insert[static_cast<size_t>(ax)] = true;
    }
    out->clear();
    size_t j = 0;
    for (int64_t i = 0; i < out_rank; ++i) out->push_back(insert[static_cast<size_t>(i)] ? 1 : x.dims[j++]);
    return R::kDone;
  }
  // Reshape
  std::vector<int64_t> shape;
  if (n.opset < 5) {
    shape = n.Ints("shape");
  } else {
    if (!f.Has(1)) return f.Bad("shape is required");
    R r = f.Ints(1, &shape, "shape");
    if (r != R::kDone) return r;
    if (f.in[1].dims.size() != 1) return f.Bad("shape must be a 1-D tensor");
  }
  const bool allowzero = n.opset >= 14 && n.Int("allowzero", 0) != 0;
  int64_t infer = -1, known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t& d = shape[i];
    if (d == 0 && !allowzero) {
      if (i >= x.dims.size()) return f.Bad("shape " + DimsText(shape) + " copies a dim the input lacks");
      d = x.dims[i];
    }
    if (d == -1) {
      if (infer >= 0) return f.Bad("shape " + DimsText(shape) + " has more than one -1");
      infer = static_cast<int64_t>(i);
      continue;
    }
    if (d < 0) return f.Bad("shape " + DimsText(shape) + " has invalid dim " + std::to_string(d));
    known *= d;
  }
  const int64_t numel = x.numel;
  if (infer >= 0) {
    if (known == 0 || numel % known != 0)
      return f.Bad("cannot reshape " + DimsText(x.dims) + " to " + DimsText(shape));
    shape[static_cast<size_t>(infer)] = numel / known;
  } else if (known != numel) {
    return f.Bad("cannot reshape " + DimsText(x.dims) + " to " + DimsText(shape));
  }
  *out = std::move(shape);
  return R::kDone;
}

R FoldReshape(Fold& f) {
  std::vector<int64_t> dims;
  R r = ReshapeDims(f, &dims);
  if (r != R::kDone) return r;
  if (Numel(dims) != f.in[0].numel) return f.Bad("element count changes");
  char* p;
  r = f.Alloc(f.in[0].dtype, dims, &p);
  if (r != R::kDone) return r;
  if (!f.out.bytes->empty()) std::memcpy(p, f.in[0].p, f.out.bytes->size());
  return R::kDone;
}

R FoldConcat(Fold& f) {
  if (!f.n.Has("axis")) return f.Bad("attribute 'axis' is required");
  std::vector<const View*> ins;
  for (size_t i = 0; i < f.in.size(); ++i)
    if (f.Has(i)) ins.push_back(&f.in[i]);
  if (ins.empty()) return f.Bad("at least one input is required");
  const std::vector<int64_t>& d0 = ins[0]->dims;
  const int64_t rank = static_cast<int64_t>(d0.size());
  int64_t axis;
  if (!NormAxis(f.n.Int("axis", 0), rank, &axis)) return f.Bad("axis out of range for rank " + std::to_string(rank));
  std::vector<int64_t> dims = d0;
  dims[static_cast<size_t>(axis)] = 0;
  for (const View* v : ins) {
    if (v->dtype != ins[0]->dtype) return f.Bad("inputs have different types");
    if (v->dims.size() != d0.size()) return f.Bad("inputs have different ranks");
    for (int64_t i = 0; i < rank; ++i)
      if (i != axis && v->dims[static_cast<size_t>(i)] != d0[static_cast<size_t>(i)])
        return f.Bad("input shapes " + DimsText(d0) + " and " + DimsText(v->dims) + " differ off the axis");
    dims[static_cast<size_t>(axis)] += v->dims[static_cast<size_t>(axis)];
  }
  char* p;
  R r = f.Alloc(ins[0]->dtype, dims, &p);
  if (r != R::kDone) return r;
  const size_t es = ElemSize(ins[0]->dtype);
  int64_t outer = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= dims[static_cast<size_t>(i)];
  int64_t inner = static_cast<int64_t>(es);
  for (int64_t i = axis + 1; i < rank; ++i) inner *= dims[static_cast<size_t>(i)];
  const int64_t out_row = dims[static_cast<size_t>(axis)] * inner;
  int64_t col = 0;
  for (const View* v : ins) {
    const int64_t row = v->dims[static_cast<size_t>(axis)] * inner;
    for (int64_t o = 0; o < outer && row; ++o) std::memcpy(p + o * out_row + col, v->p + o * row, static_cast<size_t>(row));
    col += row;
  }
  return R::kDone;
}

R FoldGather(Fold& f) {
  if (!f.Has(0) || !f.Has(1)) return f.Bad("two inputs are required");
  const View &x = f.in[0], &ind = f.in[1];
  const int64_t rank = static_cast<int64_t>(x.dims.size());
  if (rank == 0) return f.Bad("data must have rank >= 1");
  int64_t axis;
  if (!NormAxis(f.n.Int("axis", 0), rank, &axis)) return f.Bad("axis out of range for rank " + std::to_string(rank));
  if (ind.dtype != kI64 && ind.dtype != kI32) return f.Bad("indices must be int64 or int32");
  std::vector<int64_t> dims(x.dims.begin(), x.dims.begin() + axis);
  dims.insert(dims.end(), ind.dims.begin(), ind.dims.end());
  dims.insert(dims.end(), x.dims.begin() + axis + 1, x.dims.end());
  char* p;
  R r = f.Alloc(x.dtype, dims, &p);
  if (r != R::kDone) return r;
  std::vector<int64_t> idx;
  ReadInts(ind, &idx);
  const int64_t bound = x.dims[static_cast<size_t>(axis)];
  for (int64_t& i : idx) {
    if (i < -bound || i >= bound)
      return f.Bad("index " + std::to_string(i) + " is out of range [" + std::to_string(-bound) + ", " +
                   std::to_string(bound) + ")");
    if (i < 0) i += bound;
  }
  int64_t outer = 1, inner = static_cast<int64_t>(ElemSize(x.dtype));
  for (int64_t i = 0; i < axis; ++i) outer *= x.dims[static_cast<size_t>(i)];
  for (int64_t i = axis + 1; i < rank; ++i) inner *= x.dims[static_cast<size_t>(i)];
  const int64_t nidx = static_cast<int64_t>(idx.size());
  for (int64_t o = 0; o < outer && inner; ++o)
    for (int64_t j = 0; j < nidx; ++j)
      std::memcpy(p + (o * nidx + j) * inner, x.p + (o * bound + idx[static_cast<size_t>(j)]) * inner,
                  static_cast<size_t>(inner));
  return R::kDone;
}

R FoldSlice(Fold& f) {
  const Node& n = f.n;
  const View& x = f.in[0];
  std::vector<int64_t> starts, ends, axes, steps;
  if (n.opset < 10) {
    starts = n.Ints("starts");
    ends = n.Ints("ends");
    axes = n.Ints("axes");
  } else {
    if (!f.Has(1) || !f.Has(2)) return f.Bad("starts and ends are required");
    R r;
    if ((r = f.Ints(1, &starts, "starts")) != R::kDone || (r = f.Ints(2, &ends, "ends")) != R::kDone) return r;
    if (f.Has(3) && (r = f.Ints(3, &axes, "axes")) != R::kDone) return r;
    if (f.Has(4) && (r = f.Ints(4, &steps, "steps")) != R::kDone) return r;
  }
  SliceAxes sa;
  std::string why;
  if (!ResolveSlice(x.dims, starts, ends, axes, n.opset < 10 ? n.Has("axes") : f.Has(3), steps, &sa, &why))
    return f.Bad(why);
  char* p;
  R r = f.Alloc(x.dtype, sa.dims, &p);
  if (r != R::kDone) return r;
  std::vector<int64_t> strides;
  int64_t base = 0;
  sa.Strided(&strides, &base);
  StridedCopy(x.p, ElemSize(x.dtype), sa.dims, strides, base, p);
  return R::kDone;
}

R FoldTranspose(Fold& f) {
  const View& x = f.in[0];
  const size_t rank = x.dims.size();
  std::vector<int64_t> perm = f.n.Ints("perm");
  if (!f.n.Has("perm"))
    for (size_t i = 0; i < rank; ++i) perm.push_back(static_cast<int64_t>(rank - 1 - i));
  if (perm.size() != rank) return f.Bad("perm " + DimsText(perm) + " does not match rank " + std::to_string(rank));
  std::vector<bool> seen(rank, false);
  for (int64_t a : perm) {
    if (a < 0 || a >= static_cast<int64_t>(rank) || seen[static_cast<size_t>(a)])
      return f.Bad("perm " + DimsText(perm) + " is not a permutation");
    seen[static_cast<size_t>(a)] = true;
  }
  const std::vector<int64_t> rs = RowMajorStrides(x.dims);
  std::vector<int64_t> dims(rank), strides(rank);
  for (size_t i = 0; i < rank; ++i) {
    dims[i] = x.dims[static_cast<size_t>(perm[i])];
    strides[i] = rs[static_cast<size_t>(perm[i])];
  }
  char* p;
  R r = f.Alloc(x.dtype, dims, &p);
  if (r != R::kDone) return r;
  StridedCopy(x.p, ElemSize(x.dtype), dims, strides, 0, p);
  return R::kDone;
}

R FoldExpand(Fold& f) {
  if (!f.Has(1)) return f.Bad("shape is required");
  const View& x = f.in[0];
  std::vector<int64_t> shape;
  R r = f.Ints(1, &shape, "shape");
  if (r != R::kDone) return r;
  if (f.in[1].dims.size() != 1) return f.Bad("shape must be a 1-D tensor");
  for (int64_t d : shape)
    if (d < 0) return f.Bad("shape " + DimsText(shape) + " has a negative dim");
  std::vector<int64_t> dims;
  if (!BroadcastDims({&x.dims, &shape}, &dims))
    return f.Bad("cannot expand " + DimsText(x.dims) + " to " + DimsText(shape));
  char* p;
  r = f.Alloc(x.dtype, dims, &p);
  if (r != R::kDone) return r;
  StridedCopy(x.p, ElemSize(x.dtype), dims, BroadcastStrides(x.dims, dims), 0, p);
  return R::kDone;
}

// DequantizeLinear of constants (per tensor or per axis): y = float(x - zp) * scale, as the CPU EP and ONNX Runtime.
// Left alone when only QDQ convolutions read it (they keep the 8-bit data: lower/nn_qdq.cc) and when its parameters
// are not valid (the support check then names the reason).
R FoldDequantize(Fold& f) {
  std::string why;
  if (!CheckDequantizeParams(f.g, f.n, &why) || DequantizeReadOnlyByQdqConvs(f.g, f.n)) return R::kSkip;
  const View& x = f.in[0];
  if (x.dtype != 2 && x.dtype != 3 && x.dtype != 6) return R::kSkip;  // u8, i8, i32
  if (!f.Has(1) || f.in[1].p == nullptr || (f.Has(2) && f.in[2].p == nullptr)) return R::kSkip;
  const View& s = f.in[1];
  const bool per_axis = s.numel != 1;
  int64_t axis = f.n.Int("axis", 1);
  if (axis < 0) axis += static_cast<int64_t>(x.dims.size());
  char* p = nullptr;
  const R r = f.Alloc(1, x.dims, &p);
  if (r != R::kDone) return r;
  int64_t inner = 1;
  if (per_axis)
    for (size_t i = static_cast<size_t>(axis) + 1; i < x.dims.size(); ++i) inner *= x.dims[i];
  auto elem = [](const View& v, int64_t i) -> int64_t {
    switch (v.dtype) {
      case 2: return v.as<uint8_t>()[i];
      case 3: return v.as<int8_t>()[i];
      default: return v.as<int32_t>()[i];
    }
  };
  float* y = reinterpret_cast<float*>(p);
  for (int64_t i = 0; i < x.numel; ++i) {
    const int64_t c = per_axis ? (i / inner) % s.numel : 0;
    const int64_t zp = f.Has(2) ? elem(f.in[2], c) : 0;
    y[i] = static_cast<float>(static_cast<int32_t>(elem(x, i) - zp)) * s.as<float>()[c];
  }
  return R::kDone;
}

bool Known(const std::string& op) {
  static const char* const kOps[] = {"Shape", "Size", "Constant", "ConstantOfShape", "Range", "Cast", "Add", "Sub",
                                     "Mul", "Div", "Equal", "Less", "Greater", "Where", "Not", "Neg", "Min", "Max",
                                     "Squeeze", "Unsqueeze", "Reshape", "Flatten", "Identity", "Concat", "Gather",
                                     "Slice", "Transpose", "Expand", "DequantizeLinear"};
  for (const char* k : kOps)
    if (op == k) return true;
  return false;
}

R Evaluate(Fold& f) {
  const std::string& op = f.n.op;
  if (op == "Shape") return FoldShape(f, false);
  if (op == "Size") return FoldShape(f, true);
  if (op == "Constant") return FoldConstant(f);
  // Every other op needs its first input.
  if (!f.Has(0)) return op == "Min" || op == "Max" || op == "Concat" ? R::kSkip : f.Bad("input 0 is required");
  if (op == "ConstantOfShape") return FoldConstantOfShape(f);
  if (op == "Range") return FoldRange(f);
  if (op == "Cast") return FoldCast(f);
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") return FoldArith(f);
  if (op == "Equal" || op == "Less" || op == "Greater") return FoldCompare(f);
  if (op == "Where") return FoldWhere(f);
  if (op == "Not") return FoldNot(f);
  if (op == "Neg") return FoldNeg(f);
  if (op == "Min" || op == "Max") return FoldMinMax(f);
  if (op == "Squeeze" || op == "Unsqueeze" || op == "Reshape" || op == "Flatten" || op == "Identity")
    return FoldReshape(f);
  if (op == "Concat") return FoldConcat(f);
  if (op == "Gather") return FoldGather(f);
  if (op == "Slice") return FoldSlice(f);
  if (op == "Transpose") return FoldTranspose(f);
  if (op == "Expand") return FoldExpand(f);
  if (op == "DequantizeLinear") return FoldDequantize(f);
  return R::kSkip;
}

bool NeedsOnlyShape(const std::string& op) { return op == "Shape" || op == "Size"; }

bool OneOf(const std::string& op, std::initializer_list<const char*> ops) {
  for (const char* k : ops)
    if (op == k) return true;
  return false;
}

// numpy matmul dims; false when the operands do not fit.
bool MatMulDims(std::vector<int64_t> a, std::vector<int64_t> b, std::vector<int64_t>* out) {
  if (a.empty() || b.empty()) return false;
  const bool a1 = a.size() == 1, b1 = b.size() == 1;
  if (a1) a.insert(a.begin(), 1);
  if (b1) b.push_back(1);
  if (a.back() != b[b.size() - 2]) return false;
  const std::vector<int64_t> ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  if (!BroadcastDims({&ba, &bb}, out)) return false;
  if (!a1) out->push_back(a[a.size() - 2]);
  if (!b1) out->push_back(b.back());
  return true;
}

// Output 0's dtype and dims from the inputs' static shapes (shape-only mode), for ops whose output shape does not
// depend on data other than constant parameters. The runtime's own inference cannot see through values that only
// folding made static (a mask sliced to the sequence length), so without this their consumers would stay
// dynamic.
R InferShape(Fold& f) {
  const std::string& op = f.n.op;
  if (!f.Has(0)) return R::kSkip;
  const View& x = f.in[0];
  if (OneOf(op, {"Relu", "LeakyRelu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Exp", "Log", "Sqrt", "Abs",
                 "Neg", "Erf", "Elu", "Selu", "Softplus", "Softsign", "Clip", "Identity", "Softmax", "LogSoftmax",
                 "Not", "Reciprocal", "Floor", "Ceil", "Round", "Sign", "Sin", "Cos", "Gelu", "Dropout", "PRelu",
                 "LayerNormalization", "BatchNormalization", "InstanceNormalization", "LpNormalization", "Cast"})) {
    f.out.dims = x.dims;
    f.out.dtype = op == "Cast" ? static_cast<uint32_t>(f.n.Int("to", 0)) : op == "Not" ? kBool : x.dtype;
    return R::kShape;
  }
  const bool compare = OneOf(op, {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"});
  const bool variadic = OneOf(op, {"Max", "Min", "Sum", "Mean"});
  if (compare || variadic || OneOf(op, {"Add", "Sub", "Mul", "Div", "Pow", "Mod", "And", "Or", "Xor", "Where"})) {
    if (f.n.opset < (variadic ? 8 : 7)) return R::kSkip;  // legacy broadcast rules
    std::vector<const std::vector<int64_t>*> shapes;
    for (size_t i = 0; i < f.in.size(); ++i) {
      if (!f.Has(i)) return R::kSkip;
      shapes.push_back(&f.in[i].dims);
    }
    if (!BroadcastDims(shapes, &f.out.dims)) return R::kSkip;
    f.out.dtype = compare ? kBool : op == "Where" ? (f.Has(1) ? f.in[1].dtype : 0) : x.dtype;
    return R::kShape;
  }
  if (op == "MatMul") {
    if (!f.Has(1) || !MatMulDims(x.dims, f.in[1].dims, &f.out.dims)) return R::kSkip;
    f.out.dtype = x.dtype;
    return R::kShape;
  }
  if (op == "Gemm") {
    if (!f.Has(1) || x.dims.size() != 2 || f.in[1].dims.size() != 2) return R::kSkip;
    const bool ta = f.n.Int("transA", 0) != 0, tb = f.n.Int("transB", 0) != 0;
    const int64_t k1 = x.dims[ta ? 0 : 1], k2 = f.in[1].dims[tb ? 1 : 0];
    if (k1 != k2) return R::kSkip;
    f.out.dims = {x.dims[ta ? 1 : 0], f.in[1].dims[tb ? 0 : 1]};
    f.out.dtype = x.dtype;
    return R::kShape;
  }
  if (!Known(op) || NeedsOnlyShape(op)) return R::kSkip;
  return Evaluate(f) == R::kShape ? R::kShape : R::kSkip;
}

}  // namespace

CheckResult FoldConstants(Graph* g, std::vector<bool>* folded) {
  folded->assign(g->nodes.size(), false);
  for (size_t ni = 0; ni < g->nodes.size(); ++ni) {
    const Node& n = g->nodes[ni];
    if (!n.domain.empty() && n.domain != "ai.onnx") continue;
    if (n.has_subgraphs || n.outputs.empty() || n.outputs[0] < 0) continue;
    Fold f(*g, n, false);
    bool all_const = true, all_shaped = true;
    for (int vi : n.inputs) {
      View v;
      if (vi < 0) {
        f.in.push_back(v);
        f.present.push_back(false);
        continue;
      }
      const Value& val = g->v(vi);
      v.dtype = val.dtype;
      if (val.has_shape) {
        v.dims = val.dims;
        v.numel = Numel(val.dims);
      }
      const bool shaped = val.has_shape && v.numel >= 0;
      all_shaped &= shaped;
      if (val.is_const() && shaped && ElemSize(val.dtype) != 0)
        v.p = static_cast<const char*>(val.data);
      else
        all_const = false;
      f.in.push_back(std::move(v));
      f.present.push_back(true);
    }
    Value& out = g->v(n.outputs[0]);
    const bool foldable = NeedsOnlyShape(n.op) ? (f.Has(0) && g->v(n.inputs[0]).has_shape) : all_const;
    if (n.outputs.size() == 1 && Known(n.op) && foldable) {
      const R r = Evaluate(f);
      if (r == R::kError) return CheckResult::Fail("node '" + n.name + "' (" + n.op + "): " + f.error);
      if (r == R::kDone) {
        if (out.has_shape && out.dims != f.out.dims)
          return CheckResult::Fail("node '" + n.name + "' (" + n.op + "): folded result has shape " +
                                   DimsText(f.out.dims) + " but the graph says " + DimsText(out.dims));
        if (out.dtype != 0 && out.dtype != f.out.dtype)
          return CheckResult::Fail("node '" + n.name + "' (" + n.op + "): folded result has type " +
                                   std::to_string(f.out.dtype) + " but the graph says " +
                                   std::to_string(out.dtype));
        out.dtype = f.out.dtype;
        out.dims = f.out.dims;
        out.has_shape = true;
        out.folded = std::move(f.out.bytes);
        out.data = out.folded->data();
        (*folded)[ni] = true;
        continue;
      }
    }
    if (out.has_shape || !all_shaped) continue;
    Fold s(*g, n, /*shapes=*/true);
    s.in = f.in;
    s.present = f.present;
    if (InferShape(s) != R::kShape || (out.dtype != 0 && s.out.dtype != out.dtype)) continue;
    const uint32_t dtype = out.dtype;
    out.dtype = s.out.dtype;
    out.dims = s.out.dims;
    out.has_shape = true;
    // Only through nodes this EP runs: a node left to the CPU EP cuts the partition, and the next partition's
    // Compile sees its output with the runtime's (unknown) shape, so its consumers must not be claimed for a
    // shape only this pass knew.
    std::string why;
    if (!IsNodeSupported(*g, n, &why)) {
      out.dtype = dtype;
      out.dims.clear();
      out.has_shape = false;
    }
  }
  return CheckResult::Ok();
}

}  // namespace aotcpu
}  // namespace epctx
