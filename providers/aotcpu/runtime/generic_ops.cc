#include "providers/aotcpu/runtime/generic_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <type_traits>

#include <omp.h>

#include "providers/aotcpu/ir/slice_params.h"

namespace epctx {
namespace aotcpu {

int64_t GTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

size_t GenericElementSize(uint32_t dtype) {
  switch (dtype) {
    case kF32: case kI32: return 4;
    case kI64: return 8;
    case kBool: case kU8: case kI8: return 1;
    default: return 0;
  }
}

namespace {

using Dims = std::vector<int64_t>;

std::string Mismatch(const char* what, const Dims& expected, const Dims& got) {
  return std::string(what) + ": the output should be " + DimsText(expected) + ", its buffer is " + DimsText(got);
}

Dims RowStrides(const Dims& d) {
  Dims s(d.size(), 1);
  for (size_t i = d.size(); i-- > 1;) s[i - 1] = s[i] * d[i];
  return s;
}

// Strides (elements) of `in` read as broadcast to `out` (right-aligned; 0 on broadcast axes); false when the dims do
// not broadcast.
bool BcastStrides(const Dims& in, const Dims& out, Dims* s) {
  if (in.size() > out.size()) return false;
  const Dims rs = RowStrides(in);
  s->assign(out.size(), 0);
  const size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == out[off + i]) (*s)[off + i] = in[i] == 1 ? 0 : rs[i];
    else if (in[i] == 1) (*s)[off + i] = 0;
    else return false;
  }
  return true;
}

bool BcastDims(const Dims& a, const Dims& b, Dims* out) {
  const size_t r = std::max(a.size(), b.size());
  out->assign(r, 1);
  for (size_t i = 0; i < r; ++i) {
    const int64_t x = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const int64_t y = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (x == y || y == 1) (*out)[i] = x;
    else if (x == 1) (*out)[i] = y;
    else return false;
  }
  return true;
}

// Calls f(offsets of each operand, count, inner strides) for every run of the innermost output axis.
template <size_t N, typename F>
void ForEachRow(const Dims& out, const Dims (&strides)[N], F f) {
  const size_t r = out.size();
  for (int64_t d : out)
    if (d == 0) return;
  const int64_t inner = r == 0 ? 1 : out[r - 1];
  int64_t inner_stride[N];
  for (size_t k = 0; k < N; ++k) inner_stride[k] = r == 0 ? 0 : strides[k][r - 1];
  std::vector<int64_t> idx(r == 0 ? 0 : r - 1, 0);
  int64_t off[N] = {};
  int64_t out_off = 0;
  while (true) {
    f(out_off, off, inner, inner_stride);
    out_off += inner;
    // Advance the outer index (axes r-2 .. 0).
    size_t a = idx.size();
    while (a > 0) {
      --a;
      ++idx[a];
      for (size_t k = 0; k < N; ++k) off[k] += strides[k][a];
      if (idx[a] < out[a]) break;
      for (size_t k = 0; k < N; ++k) off[k] -= strides[k][a] * out[a];
      idx[a] = 0;
      if (a == 0) return;
    }
    if (idx.empty()) return;
  }
}

// Threads for a kernel of `work` (multiply-adds or bytes / 8): one for small work, where a parallel region costs
// more than it saves.
int Threads(int threads, double work) {
  if (work < 65536) return 1;
  return threads > 0 ? threads : omp_get_max_threads();
}

int64_t Axis(int64_t axis, size_t rank) { return axis < 0 ? axis + static_cast<int64_t>(rank) : axis; }

// ---- copies -------------------------------------------------------------------------------------------------------

std::string CopyKernel(const Graph&, const Node&, const std::vector<GTensor>& in,
                    const std::vector<GTensor>& out, int /*threads*/) {
  if (in[0].numel() != out[0].numel())
    return "the input has " + std::to_string(in[0].numel()) + " elements, the output " + DimsText(out[0].dims);
  std::memcpy(out[0].data, in[0].data, static_cast<size_t>(in[0].numel()) * GenericElementSize(in[0].dtype));
  return "";
}

std::string ConcatKernel(const Graph&, const Node& n, const std::vector<GTensor>& in,
                         const std::vector<GTensor>& out, int threads) {
  const Dims& od = out[0].dims;
  const int64_t axis = Axis(n.Int("axis", 0), od.size());
  if (axis < 0 || axis >= static_cast<int64_t>(od.size())) return "axis out of range";
  int64_t total = 0;
  for (const GTensor& t : in) {
    if (t.dims.size() != od.size()) return "inputs of different ranks";
    for (size_t i = 0; i < od.size(); ++i)
      if (static_cast<int64_t>(i) != axis && t.dims[i] != od[i]) return "input dims " + DimsText(t.dims) + " differ from the output's " + DimsText(od) + " off the axis";
    total += t.dims[static_cast<size_t>(axis)];
  }
  if (total != od[static_cast<size_t>(axis)]) return "the inputs add up to " + std::to_string(total) + " along the axis, the output has " + DimsText(od);
  const size_t es = GenericElementSize(out[0].dtype);
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= od[static_cast<size_t>(i)];
  for (size_t i = static_cast<size_t>(axis) + 1; i < od.size(); ++i) inner *= od[i];
  const size_t out_row = static_cast<size_t>(od[static_cast<size_t>(axis)] * inner) * es;
  std::vector<size_t> at(in.size() + 1, 0);
  for (size_t i = 0; i < in.size(); ++i) at[i + 1] = at[i] + static_cast<size_t>(in[i].dims[static_cast<size_t>(axis)] * inner) * es;
  const int nt = Threads(threads, static_cast<double>(outer * out_row) / 8);
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
  for (int64_t o = 0; o < outer; ++o)
    for (size_t i = 0; i < in.size(); ++i) {
      const size_t row = at[i + 1] - at[i];
      if (row)
        std::memcpy(static_cast<unsigned char*>(out[0].data) + o * out_row + at[i],
                    static_cast<const unsigned char*>(in[i].data) + o * row, row);
    }
  return "";
}

// Copies `count` elements of size ES along a row with a source stride.
template <typename T>
void StridedRow(T* dst, const T* src, int64_t count, int64_t stride) {
  if (stride == 1) {
    std::memcpy(dst, src, static_cast<size_t>(count) * sizeof(T));
    return;
  }
  for (int64_t i = 0; i < count; ++i) dst[i] = src[i * stride];
}

// dst (dense, dims od) = src read at `base + sum(i_k * strides_k)`.
std::string StridedGather(const GTensor& src, const Dims& strides, int64_t base, const GTensor& dst) {
  const Dims s[1] = {strides};
  const size_t es = GenericElementSize(dst.dtype);
  ForEachRow(dst.dims, s, [&](int64_t o, const int64_t* off, int64_t count, const int64_t* is) {
    const int64_t from = base + off[0];
    switch (es) {
      case 8: StridedRow(static_cast<int64_t*>(dst.data) + o, static_cast<const int64_t*>(src.data) + from, count, is[0]); break;
      case 4: StridedRow(static_cast<int32_t*>(dst.data) + o, static_cast<const int32_t*>(src.data) + from, count, is[0]); break;
      default: StridedRow(static_cast<uint8_t*>(dst.data) + o, static_cast<const uint8_t*>(src.data) + from, count, is[0]); break;
    }
  });
  return "";
}

std::string TransposeKernel(const Graph&, const Node& n, const std::vector<GTensor>& in,
                    const std::vector<GTensor>& out, int /*threads*/) {
  const Dims& id = in[0].dims;
  std::vector<int64_t> perm = n.Ints("perm");
  if (perm.empty())
    for (size_t i = id.size(); i-- > 0;) perm.push_back(static_cast<int64_t>(i));
  if (perm.size() != id.size()) return "perm has " + std::to_string(perm.size()) + " entries for rank " + std::to_string(id.size());
  const Dims rs = RowStrides(id);
  Dims od(id.size()), strides(id.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    const int64_t p = perm[i];
    if (p < 0 || p >= static_cast<int64_t>(id.size())) return "perm entry out of range";
    od[i] = id[static_cast<size_t>(p)];
    strides[i] = rs[static_cast<size_t>(p)];
  }
  if (od != out[0].dims) return Mismatch("Transpose", od, out[0].dims);
  return StridedGather(in[0], strides, 0, out[0]);
}

bool ReadInts(const GTensor& t, std::vector<int64_t>* out) {
  if (!t.data) return false;
  const int64_t n = t.numel();
  out->resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    (*out)[static_cast<size_t>(i)] = t.dtype == kI64 ? static_cast<const int64_t*>(t.data)[i]
                                                     : static_cast<const int32_t*>(t.data)[i];
  return true;
}

std::string SliceKernel(const Graph&, const Node& n, const std::vector<GTensor>& in,
                        const std::vector<GTensor>& out, int /*threads*/) {
  std::vector<int64_t> starts, ends, axes, steps;
  bool axes_given;
  if (n.opset < 10) {
    starts = n.Ints("starts");
    ends = n.Ints("ends");
    axes = n.Ints("axes");
    axes_given = n.Has("axes");
  } else {
    if (!ReadInts(in[1], &starts) || !ReadInts(in[2], &ends)) return "starts/ends missing";
    axes_given = in.size() > 3 && in[3].data;
    if (axes_given) ReadInts(in[3], &axes);
    if (in.size() > 4 && in[4].data) ReadInts(in[4], &steps);
  }
  SliceAxes sa;
  std::string why;
  if (!ResolveSlice(in[0].dims, starts, ends, axes, axes_given, steps, &sa, &why)) return why;
  if (sa.dims != out[0].dims) return Mismatch("Slice", sa.dims, out[0].dims);
  Dims strides;
  int64_t base = 0;
  sa.Strided(&strides, &base);
  return StridedGather(in[0], strides, base, out[0]);
}

std::string GatherKernel(const Graph&, const Node& n, const std::vector<GTensor>& in,
                    const std::vector<GTensor>& out, int /*threads*/) {
  const Dims& dd = in[0].dims;
  const int64_t axis = Axis(n.Int("axis", 0), dd.size());
  if (axis < 0 || axis >= static_cast<int64_t>(dd.size())) return "axis out of range";
  Dims od(dd.begin(), dd.begin() + axis);
  od.insert(od.end(), in[1].dims.begin(), in[1].dims.end());
  od.insert(od.end(), dd.begin() + axis + 1, dd.end());
  if (od != out[0].dims) return Mismatch("Gather", od, out[0].dims);
  std::vector<int64_t> idx;
  ReadInts(in[1], &idx);
  const int64_t d = dd[static_cast<size_t>(axis)];
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= dd[static_cast<size_t>(i)];
  for (size_t i = static_cast<size_t>(axis) + 1; i < dd.size(); ++i) inner *= dd[i];
  const size_t es = GenericElementSize(out[0].dtype), row = static_cast<size_t>(inner) * es;
  for (int64_t& k : idx) {
    if (k < -d || k >= d) return "index " + std::to_string(k) + " out of range for dim " + std::to_string(d);
    if (k < 0) k += d;
  }
  const auto* src = static_cast<const unsigned char*>(in[0].data);
  auto* dst = static_cast<unsigned char*>(out[0].data);
  for (int64_t o = 0; o < outer; ++o)
    for (size_t j = 0; j < idx.size(); ++j)
      std::memcpy(dst + (o * static_cast<int64_t>(idx.size()) + static_cast<int64_t>(j)) * static_cast<int64_t>(row),
                  src + (o * d + idx[j]) * static_cast<int64_t>(row), row);
  return "";
}

std::string ExpandKernel(const Graph&, const Node&, const std::vector<GTensor>& in,
                    const std::vector<GTensor>& out, int /*threads*/) {
  std::vector<int64_t> shape;
  ReadInts(in[1], &shape);
  Dims od;
  if (!BcastDims(in[0].dims, shape, &od)) return "the shape " + DimsText(shape) + " does not broadcast with " + DimsText(in[0].dims);
  if (od != out[0].dims) return Mismatch("Expand", od, out[0].dims);
  Dims s;
  BcastStrides(in[0].dims, od, &s);
  return StridedGather(in[0], s, 0, out[0]);
}

// ---- MatMul -------------------------------------------------------------------------------------------------------

// Per-ISA clones of the inner loops (resolved by ifunc at load). Not under ThreadSanitizer: an ifunc resolver runs
// before TSan's runtime is initialized, and the instrumented resolver crashes every binary at start.
#if defined(__SANITIZE_THREAD__)
#define EPCTX_ISA_CLONES
#else
#define EPCTX_ISA_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif

// c[n] += a * b[n], the inner loop of every product here (vectorized per ISA by the compiler's clones).
EPCTX_ISA_CLONES
void Axpy(float* c, float a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) c[i] += a * b[i];
}

// Sixteen partial sums (lanes), added up at the end: vectorizable without reassociating anything the compiler may
// not, and the same order on every ISA.
EPCTX_ISA_CLONES
float Dot(const float* a, const float* b, int64_t n) {
  float acc[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) acc[j] += a[i + j] * b[i + j];
  for (int j = 0; i < n; ++i, ++j) acc[j] += a[i] * b[i];
  float s = 0;
  for (int j = 0; j < 16; ++j) s += acc[j];
  return s;
}


std::string MatMulImpl(const std::vector<GTensor>& in, const std::vector<GTensor>& out, int threads, bool trans_b) {
  Dims a = in[0].dims, b = in[1].dims;
  if (a.empty() || b.empty()) return "MatMul of a scalar";
  if (trans_b && b.size() < 2) return "transposed MatMul input of rank < 2";
  const bool a1 = a.size() == 1, b1 = b.size() == 1;
  if (a1) a.insert(a.begin(), 1);
  if (b1) b.push_back(1);
  const int64_t M = a[a.size() - 2], K = a[a.size() - 1];
  const int64_t N = trans_b ? b[b.size() - 2] : b[b.size() - 1];
  const int64_t KB = trans_b ? b[b.size() - 1] : b[b.size() - 2];
  if (KB != K) return "inner dims " + DimsText(in[0].dims) + " x " + DimsText(in[1].dims) + " differ";
  const Dims ab(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  Dims batch;
  if (!BcastDims(ab, bb, &batch)) return "batch dims do not broadcast";
  Dims od = batch;
  if (!a1) od.push_back(M);
  if (!b1) od.push_back(N);
  if (od != out[0].dims) return Mismatch("MatMul", od, out[0].dims);
  Dims sa, sb;
  BcastStrides(ab, batch, &sa);
  BcastStrides(bb, batch, &sb);
  // Each batch's operand offsets, then the products, batches spread over the threads when there is enough work.
  std::vector<std::pair<int64_t, int64_t>> offs;
  Dims iter = batch;
  iter.push_back(1);
  Dims s2[2] = {sa, sb};
  s2[0].push_back(0);
  s2[1].push_back(0);
  ForEachRow(iter, s2, [&](int64_t, const int64_t* off, int64_t, const int64_t*) { offs.emplace_back(off[0], off[1]); });
  const float* A = static_cast<const float*>(in[0].data);
  const float* B = static_cast<const float*>(in[1].data);
  float* C = static_cast<float*>(out[0].data);
  const int64_t batches = static_cast<int64_t>(offs.size());
  const int nt = Threads(threads, static_cast<double>(batches) * M * N * K);
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
  for (int64_t bi = 0; bi < batches; ++bi) {
    const float* Ab = A + offs[static_cast<size_t>(bi)].first * M * K;
    const float* Bb = B + offs[static_cast<size_t>(bi)].second * K * N;
    float* Cb = C + bi * M * N;
    for (int64_t m = 0; m < M; ++m) {
      float* c = Cb + m * N;
      const float* arow = Ab + m * K;
      if (trans_b) {
        for (int64_t n = 0; n < N; ++n) c[n] = Dot(arow, Bb + n * K, K);
      } else if (N == 1) {
        float acc = 0;
        for (int64_t k = 0; k < K; ++k) acc += arow[k] * Bb[k];
        c[0] = acc;
      } else {
        std::fill(c, c + N, 0.0f);
        for (int64_t k = 0; k < K; ++k) Axpy(c, arow[k], Bb + k * N, N);
      }
    }
  }
  return "";
}

std::string MatMulKernel(const Graph&, const Node&, const std::vector<GTensor>& in, const std::vector<GTensor>& out,
                         int threads) {
  return MatMulImpl(in, out, threads, false);
}

// ---- elementwise ----------------------------------------------------------------------------------------------------

enum class Bin { kAdd, kSub, kMul, kDiv, kPow, kEq, kLt, kGt, kLe, kGe, kAnd, kOr };

Bin BinOf(const std::string& op) {
  static const std::map<std::string, Bin> m = {{"Add", Bin::kAdd}, {"Sub", Bin::kSub}, {"Mul", Bin::kMul},
                                               {"Div", Bin::kDiv}, {"Pow", Bin::kPow}, {"Equal", Bin::kEq},
                                               {"Less", Bin::kLt}, {"Greater", Bin::kGt}, {"LessOrEqual", Bin::kLe},
                                               {"GreaterOrEqual", Bin::kGe}, {"And", Bin::kAnd}, {"Or", Bin::kOr}};
  return m.at(op);
}

template <typename T, typename R>
bool ApplyBin(Bin op, T x, T y, R* r) {
  switch (op) {
    case Bin::kAdd: *r = static_cast<R>(x + y); return true;
    case Bin::kSub: *r = static_cast<R>(x - y); return true;
    case Bin::kMul: *r = static_cast<R>(x * y); return true;
    case Bin::kDiv:
      if constexpr (std::is_integral_v<T>) {
        if (y == 0) return false;
        if (x == std::numeric_limits<T>::min() && y == static_cast<T>(-1)) return false;
      }
      *r = static_cast<R>(x / y);
      return true;
    case Bin::kPow: *r = static_cast<R>(std::pow(x, y)); return true;
    case Bin::kEq: *r = static_cast<R>(x == y); return true;
    case Bin::kLt: *r = static_cast<R>(x < y); return true;
    case Bin::kGt: *r = static_cast<R>(x > y); return true;
    case Bin::kLe: *r = static_cast<R>(x <= y); return true;
    case Bin::kGe: *r = static_cast<R>(x >= y); return true;
    case Bin::kAnd: *r = static_cast<R>(x && y); return true;
    case Bin::kOr: *r = static_cast<R>(x || y); return true;
  }
  return false;
}

template <typename T, typename R>
std::string BinaryT(Bin op, const GTensor& a, const GTensor& b, const GTensor& o) {
  Dims sa, sb;
  BcastStrides(a.dims, o.dims, &sa);
  BcastStrides(b.dims, o.dims, &sb);
  const T* A = static_cast<const T*>(a.data);
  const T* B = static_cast<const T*>(b.data);
  R* O = static_cast<R*>(o.data);
  bool ok = true;
  const Dims s[2] = {sa, sb};
  ForEachRow(o.dims, s, [&](int64_t oo, const int64_t* off, int64_t count, const int64_t* is) {
    const T* x = A + off[0];
    const T* y = B + off[1];
    R* z = O + oo;
    if constexpr (std::is_same_v<T, float> && std::is_same_v<R, float>) {
      if (is[0] == 1 && is[1] == 1 && op == Bin::kAdd) { for (int64_t i = 0; i < count; ++i) z[i] = x[i] + y[i]; return; }
      if (is[0] == 1 && is[1] == 0 && op == Bin::kMul) { const float c = y[0]; for (int64_t i = 0; i < count; ++i) z[i] = x[i] * c; return; }
    }
    for (int64_t i = 0; i < count; ++i) ok &= ApplyBin<T, R>(op, x[i * is[0]], y[i * is[1]], &z[i]);
  });
  return ok ? "" : "integer division by zero or overflow";
}

std::string BinaryKernel(const Graph&, const Node& n, const std::vector<GTensor>& in,
                    const std::vector<GTensor>& out, int /*threads*/) {
  Dims od;
  if (!BcastDims(in[0].dims, in[1].dims, &od)) return "dims " + DimsText(in[0].dims) + " and " + DimsText(in[1].dims) + " do not broadcast";
  if (od != out[0].dims) return Mismatch(n.op.c_str(), od, out[0].dims);
  const Bin op = BinOf(n.op);
  const bool cmp = out[0].dtype == kBool;
  switch (in[0].dtype) {
    case kF32: return cmp ? BinaryT<float, bool>(op, in[0], in[1], out[0]) : BinaryT<float, float>(op, in[0], in[1], out[0]);
    case kI64: return cmp ? BinaryT<int64_t, bool>(op, in[0], in[1], out[0]) : BinaryT<int64_t, int64_t>(op, in[0], in[1], out[0]);
    case kI32: return cmp ? BinaryT<int32_t, bool>(op, in[0], in[1], out[0]) : BinaryT<int32_t, int32_t>(op, in[0], in[1], out[0]);
    case kBool: return BinaryT<bool, bool>(op, in[0], in[1], out[0]);
    default: return "unsupported element type";
  }
}

std::string WhereKernel(const Graph&, const Node&, const std::vector<GTensor>& in,
                    const std::vector<GTensor>& out, int /*threads*/) {
  Dims t, od;
  if (!BcastDims(in[0].dims, in[1].dims, &t) || !BcastDims(t, in[2].dims, &od)) return "inputs do not broadcast";
  if (od != out[0].dims) return Mismatch("Where", od, out[0].dims);
  Dims s[3];
  for (int k = 0; k < 3; ++k) BcastStrides(in[static_cast<size_t>(k)].dims, od, &s[k]);
  const size_t es = GenericElementSize(out[0].dtype);
  const bool* c = static_cast<const bool*>(in[0].data);
  const auto* x = static_cast<const unsigned char*>(in[1].data);
  const auto* y = static_cast<const unsigned char*>(in[2].data);
  auto* z = static_cast<unsigned char*>(out[0].data);
  ForEachRow(od, s, [&](int64_t o, const int64_t* off, int64_t count, const int64_t* is) {
    for (int64_t i = 0; i < count; ++i) {
      const bool pick = c[off[0] + i * is[0]];
      const unsigned char* from = pick ? x + (off[1] + i * is[1]) * static_cast<int64_t>(es)
                                       : y + (off[2] + i * is[2]) * static_cast<int64_t>(es);
      std::memcpy(z + (o + i) * static_cast<int64_t>(es), from, es);
    }
  });
  return "";
}

std::string UnaryKernel(const Graph&, const Node& n, const std::vector<GTensor>& in,
                    const std::vector<GTensor>& out, int /*threads*/) {
  if (in[0].dims != out[0].dims) return Mismatch(n.op.c_str(), in[0].dims, out[0].dims);
  const float* x = static_cast<const float*>(in[0].data);
  float* y = static_cast<float*>(out[0].data);
  const int64_t count = in[0].numel();
  const std::string& op = n.op;
  if (op == "Exp") for (int64_t i = 0; i < count; ++i) y[i] = std::exp(x[i]);
  else if (op == "Sqrt") for (int64_t i = 0; i < count; ++i) y[i] = std::sqrt(x[i]);
  else if (op == "Neg") for (int64_t i = 0; i < count; ++i) y[i] = -x[i];
  else if (op == "Abs") for (int64_t i = 0; i < count; ++i) y[i] = std::fabs(x[i]);
  else if (op == "Relu") for (int64_t i = 0; i < count; ++i) y[i] = x[i] > 0 ? x[i] : 0.0f;
  else if (op == "Tanh") for (int64_t i = 0; i < count; ++i) y[i] = std::tanh(x[i]);
  else if (op == "Sigmoid") for (int64_t i = 0; i < count; ++i) y[i] = 1.0f / (1.0f + std::exp(-x[i]));
  else if (op == "Erf") for (int64_t i = 0; i < count; ++i) y[i] = std::erf(x[i]);
  else if (op == "Reciprocal") for (int64_t i = 0; i < count; ++i) y[i] = 1.0f / x[i];
  else return "unsupported unary op";
  return "";
}

std::string SoftmaxKernel(const Graph&, const Node& n, const std::vector<GTensor>& in,
                    const std::vector<GTensor>& out, int /*threads*/) {
  const Dims& d = in[0].dims;
  if (d != out[0].dims) return Mismatch(n.op.c_str(), d, out[0].dims);
  if (d.empty()) return "Softmax of a scalar";
  const int64_t axis = Axis(n.Int("axis", n.opset >= 13 ? -1 : 1), d.size());
  if (axis < 0 || axis >= static_cast<int64_t>(d.size())) return "axis out of range";
  int64_t outer = 1, len = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= d[static_cast<size_t>(i)];
  if (n.opset >= 13) {
    len = d[static_cast<size_t>(axis)];
    for (size_t i = static_cast<size_t>(axis) + 1; i < d.size(); ++i) inner *= d[i];
  } else {  // opset < 13: the input flattened to 2D at `axis`
    for (size_t i = static_cast<size_t>(axis); i < d.size(); ++i) len *= d[i];
  }
  const bool log = n.op == "LogSoftmax";
  const float* x = static_cast<const float*>(in[0].data);
  float* y = static_cast<float*>(out[0].data);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      const float* xr = x + o * len * inner + j;
      float* yr = y + o * len * inner + j;
      float mx = -std::numeric_limits<float>::infinity();
      for (int64_t k = 0; k < len; ++k) mx = std::max(mx, xr[k * inner]);
      float sum = 0;
      for (int64_t k = 0; k < len; ++k) {
        const float e = std::exp(xr[k * inner] - mx);
        sum += e;
        if (!log) yr[k * inner] = e;
      }
      if (log) {
        const float ls = std::log(sum);
        for (int64_t k = 0; k < len; ++k) yr[k * inner] = xr[k * inner] - mx - ls;
      } else {
        const float inv = 1.0f / sum;
        for (int64_t k = 0; k < len; ++k) yr[k * inner] *= inv;
      }
    }
  return "";
}

// ---- data-dependent shapes (issue 27 item 3) ----------------------------------------------------------------------
// NonZero and Range size their outputs from data: the sizer (FindGenericSizer) computes the run-time symbols before
// the kernel runs, and the kernel checks that its output buffer has those dims.

template <typename T>
int64_t CountNonZero(const T* x, int64_t n) {
  int64_t c = 0;
  for (int64_t i = 0; i < n; ++i) c += x[i] != T(0);
  return c;
}

template <typename F>
std::string ByDtype(uint32_t dtype, F f) {
  switch (dtype) {
    case kF32: return f(float());
    case kI64: return f(int64_t());
    case kI32: return f(int32_t());
    case kBool: return f(bool());
    case kU8: return f(uint8_t());
    case kI8: return f(int8_t());
    default: return "element type " + std::to_string(dtype);
  }
}

std::string NonZeroSizes(const Graph&, const Node&, const std::vector<GTensor>& in, std::vector<int64_t>* sizes) {
  return ByDtype(in[0].dtype, [&](auto tag) -> std::string {
    using T = decltype(tag);
    sizes->assign(1, CountNonZero(static_cast<const T*>(in[0].data), in[0].numel()));
    return "";
  });
}

std::string NonZeroKernel(const Graph&, const Node&, const std::vector<GTensor>& in, const std::vector<GTensor>& out,
                          int /*threads*/) {
  const Dims& d = in[0].dims;
  return ByDtype(in[0].dtype, [&](auto tag) -> std::string {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(in[0].data);
    const int64_t n = in[0].numel(), count = CountNonZero(x, n);
    const Dims od = {static_cast<int64_t>(d.size()), count};
    if (od != out[0].dims) return Mismatch("NonZero", od, out[0].dims);
    int64_t* y = static_cast<int64_t*>(out[0].data);
    std::vector<int64_t> idx(d.size(), 0);
    int64_t k = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (x[i] != T(0)) {
        for (size_t a = 0; a < d.size(); ++a) y[static_cast<int64_t>(a) * count + k] = idx[a];
        ++k;
      }
      for (size_t a = d.size(); a-- > 0;) {
        if (++idx[a] < d[a]) break;
        idx[a] = 0;
      }
    }
    return "";
  });
}

// Range's length (CPU EP's formula: ceil((limit - start) / delta), at least 0; exact for integers).
std::string RangeLength(const std::vector<GTensor>& in, int64_t* len) {
  for (size_t i = 0; i < 3; ++i)
    if (in[i].numel() != 1 || in[i].dtype != in[0].dtype) return "start, limit and delta are not scalars of one type";
  if (in[0].dtype == kF32) {
    const float s = *static_cast<const float*>(in[0].data), l = *static_cast<const float*>(in[1].data),
                dl = *static_cast<const float*>(in[2].data);
    if (dl == 0) return "delta is 0";
    const double c = std::ceil((static_cast<double>(l) - s) / dl);
    if (std::isnan(c) || c > 9e18) return "the range has no finite length";
    *len = c > 0 ? static_cast<int64_t>(c) : 0;
    return "";
  }
  std::vector<int64_t> v[3];
  for (size_t i = 0; i < 3; ++i)
    if (!ReadInts(in[i], &v[i]) || (in[i].dtype != kI64 && in[i].dtype != kI32)) return "element type";
  const int64_t s = v[0][0], l = v[1][0], dl = v[2][0];
  if (dl == 0) return "delta is 0";
  const __int128 span = static_cast<__int128>(l) - s;
  __int128 q = span / dl;
  if (q * dl != span && (span > 0) == (dl > 0)) ++q;
  *len = q > 0 ? static_cast<int64_t>(q) : 0;
  return "";
}

std::string RangeSizes(const Graph&, const Node&, const std::vector<GTensor>& in, std::vector<int64_t>* sizes) {
  int64_t len = 0;
  std::string err = RangeLength(in, &len);
  if (err.empty()) sizes->assign(1, len);
  return err;
}

std::string RangeKernel(const Graph&, const Node&, const std::vector<GTensor>& in, const std::vector<GTensor>& out,
                        int /*threads*/) {
  int64_t len = 0;
  std::string err = RangeLength(in, &len);
  if (!err.empty()) return err;
  if (out[0].dims != Dims{len}) return Mismatch("Range", {len}, out[0].dims);
  if (in[0].dtype == kF32) {
    const float s = *static_cast<const float*>(in[0].data), dl = *static_cast<const float*>(in[2].data);
    float* y = static_cast<float*>(out[0].data);
    for (int64_t i = 0; i < len; ++i) y[i] = s + static_cast<float>(i) * dl;
  } else if (in[0].dtype == kI64) {
    const int64_t s = *static_cast<const int64_t*>(in[0].data), dl = *static_cast<const int64_t*>(in[2].data);
    int64_t* y = static_cast<int64_t*>(out[0].data);
    for (int64_t i = 0; i < len; ++i) y[i] = s + i * dl;
  } else {
    const int32_t s = *static_cast<const int32_t*>(in[0].data), dl = *static_cast<const int32_t*>(in[2].data);
    int32_t* y = static_cast<int32_t*>(out[0].data);
    for (int64_t i = 0; i < len; ++i) y[i] = static_cast<int32_t>(s + i * dl);
  }
  return "";
}

// Sums in index order along the axis (exclusive: the sum before the element; reverse: from the end).
std::string CumSumKernel(const Graph&, const Node& n, const std::vector<GTensor>& in, const std::vector<GTensor>& out,
                         int /*threads*/) {
  const Dims& d = in[0].dims;
  if (d != out[0].dims) return Mismatch("CumSum", d, out[0].dims);
  std::vector<int64_t> ax;
  if (in.size() < 2 || !ReadInts(in[1], &ax) || ax.size() != 1) return "axis is not one integer";
  if (d.empty()) return "CumSum of a scalar";
  const int64_t axis = Axis(ax[0], d.size());
  if (axis < 0 || axis >= static_cast<int64_t>(d.size())) return "axis " + std::to_string(ax[0]) + " out of range";
  const bool exclusive = n.Int("exclusive", 0) != 0, reverse = n.Int("reverse", 0) != 0;
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= d[static_cast<size_t>(i)];
  for (size_t i = static_cast<size_t>(axis) + 1; i < d.size(); ++i) inner *= d[i];
  const int64_t len = d[static_cast<size_t>(axis)];
  auto run = [&](auto tag) -> std::string {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(in[0].data);
    T* y = static_cast<T*>(out[0].data);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < inner; ++j) {
        T acc = T(0);
        for (int64_t t = 0; t < len; ++t) {
          const int64_t k = reverse ? len - 1 - t : t;
          const int64_t at = (o * len + k) * inner + j;
          if (exclusive) {
            y[at] = acc;
            acc += x[at];
          } else {
            acc += x[at];
            y[at] = acc;
          }
        }
      }
    return "";
  };
  if (in[0].dtype == kF32) return run(float());
  if (in[0].dtype == kI64) return run(int64_t());
  if (in[0].dtype == kI32) return run(int32_t());
  return "element type";
}

// Offset (elements) of the slice that index tuple `ix` (m entries) selects in dims `d` from axis `from`; false when an
// index is out of range (negative ones count from the end).
bool TupleOffset(const int64_t* ix, int64_t m, const Dims& d, size_t from, int64_t* off, std::string* why) {
  int64_t o = 0;
  for (int64_t k = 0; k < m; ++k) {
    const int64_t dim = d[from + static_cast<size_t>(k)];
    int64_t i = ix[k];
    if (i < -dim || i >= dim) {
      *why = "index " + std::to_string(i) + " out of range for dim " + std::to_string(dim);
      return false;
    }
    if (i < 0) i += dim;
    o = o * dim + i;
  }
  *off = o;
  return true;
}

std::string GatherNDKernel(const Graph&, const Node& n, const std::vector<GTensor>& in,
                           const std::vector<GTensor>& out, int /*threads*/) {
  const Dims& d = in[0].dims;
  const Dims& id = in[1].dims;
  const int64_t b = n.Int("batch_dims", 0);
  if (id.empty()) return "indices are a scalar";
  const int64_t m = id.back();
  if (b < 0 || m < 1 || b + m > static_cast<int64_t>(d.size()) || b >= static_cast<int64_t>(id.size()))
    return "index length " + std::to_string(m) + " does not fit data " + DimsText(d);
  for (int64_t i = 0; i < b; ++i)
    if (id[static_cast<size_t>(i)] != d[static_cast<size_t>(i)]) return "batch dims differ";
  Dims od(id.begin(), id.end() - 1);
  od.insert(od.end(), d.begin() + b + m, d.end());
  if (od != out[0].dims) return Mismatch("GatherND", od, out[0].dims);
  std::vector<int64_t> ix;
  ReadInts(in[1], &ix);
  int64_t batches = 1, per_batch = 1, slice = 1, batch_stride = 1;
  for (int64_t i = 0; i < b; ++i) batches *= d[static_cast<size_t>(i)];
  for (size_t i = static_cast<size_t>(b); i + 1 < id.size(); ++i) per_batch *= id[i];
  for (size_t i = static_cast<size_t>(b + m); i < d.size(); ++i) slice *= d[i];
  for (size_t i = static_cast<size_t>(b); i < d.size(); ++i) batch_stride *= d[i];
  const size_t es = GenericElementSize(out[0].dtype);
  const auto* src = static_cast<const unsigned char*>(in[0].data);
  auto* dst = static_cast<unsigned char*>(out[0].data);
  std::string why;
  for (int64_t bi = 0; bi < batches; ++bi)
    for (int64_t j = 0; j < per_batch; ++j) {
      const int64_t t = bi * per_batch + j;
      int64_t off = 0;
      if (!TupleOffset(&ix[static_cast<size_t>(t * m)], m, d, static_cast<size_t>(b), &off, &why)) return why;
      std::memcpy(dst + static_cast<size_t>(t * slice) * es, src + static_cast<size_t>(bi * batch_stride + off * slice) * es,
                  static_cast<size_t>(slice) * es);
    }
  return "";
}

// reduction "none" (the last update of an index wins, in order), "add", "mul", "max", "min".
std::string ScatterNDKernel(const Graph&, const Node& n, const std::vector<GTensor>& in,
                            const std::vector<GTensor>& out, int /*threads*/) {
  const Dims& d = in[0].dims;
  const Dims& id = in[1].dims;
  if (d != out[0].dims) return Mismatch("ScatterND", d, out[0].dims);
  if (id.empty()) return "indices are a scalar";
  const int64_t m = id.back();
  if (m < 1 || m > static_cast<int64_t>(d.size())) return "index length " + std::to_string(m) + " does not fit data " + DimsText(d);
  Dims ud(id.begin(), id.end() - 1);
  ud.insert(ud.end(), d.begin() + m, d.end());
  if (ud != in[2].dims) return "updates are " + DimsText(in[2].dims) + ", expected " + DimsText(ud);
  const std::string red = n.Str("reduction", "none");
  if (red != "none" && (in[0].dtype == kBool || (red != "add" && red != "mul" && red != "max" && red != "min")))
    return "reduction '" + red + "'";
  const size_t es = GenericElementSize(out[0].dtype);
  if (out[0].data != in[0].data) std::memcpy(out[0].data, in[0].data, static_cast<size_t>(in[0].numel()) * es);
  std::vector<int64_t> ix;
  ReadInts(in[1], &ix);
  int64_t tuples = 1, slice = 1;
  for (size_t i = 0; i + 1 < id.size(); ++i) tuples *= id[i];
  for (size_t i = static_cast<size_t>(m); i < d.size(); ++i) slice *= d[i];
  auto* dst = static_cast<unsigned char*>(out[0].data);
  const auto* upd = static_cast<const unsigned char*>(in[2].data);
  std::string why;
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t off = 0;
    if (!TupleOffset(&ix[static_cast<size_t>(t * m)], m, d, 0, &off, &why)) return why;
    unsigned char* to = dst + static_cast<size_t>(off * slice) * es;
    const unsigned char* from = upd + static_cast<size_t>(t * slice) * es;
    if (red == "none") {
      std::memcpy(to, from, static_cast<size_t>(slice) * es);
      continue;
    }
    std::string err = ByDtype(out[0].dtype, [&](auto tag) -> std::string {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, bool>) {
        return "bool reduction";
      } else {
        T* y = reinterpret_cast<T*>(to);
        const T* u = reinterpret_cast<const T*>(from);
        for (int64_t k = 0; k < slice; ++k) {
          if (red == "add") y[k] = static_cast<T>(y[k] + u[k]);
          else if (red == "mul") y[k] = static_cast<T>(y[k] * u[k]);
          else if (red == "max") y[k] = std::max(y[k], u[k]);
          else y[k] = std::min(y[k], u[k]);
        }
        return "";
      }
    });
    if (!err.empty()) return err;
  }
  return "";
}

std::string GatherElementsKernel(const Graph&, const Node& n, const std::vector<GTensor>& in,
                                 const std::vector<GTensor>& out, int /*threads*/) {
  const Dims& d = in[0].dims;
  const Dims& id = in[1].dims;
  if (id != out[0].dims) return Mismatch("GatherElements", id, out[0].dims);
  if (d.size() != id.size() || d.empty()) return "indices rank " + std::to_string(id.size()) + " differs from the data's";
  const int64_t axis = Axis(n.Int("axis", 0), d.size());
  if (axis < 0 || axis >= static_cast<int64_t>(d.size())) return "axis out of range";
  std::vector<int64_t> ix;
  ReadInts(in[1], &ix);
  const Dims ds = RowStrides(d);
  const size_t es = GenericElementSize(out[0].dtype);
  const auto* src = static_cast<const unsigned char*>(in[0].data);
  auto* dst = static_cast<unsigned char*>(out[0].data);
  std::vector<int64_t> pos(id.size(), 0);
  const int64_t dim = d[static_cast<size_t>(axis)];
  for (size_t i = 0; i < ix.size(); ++i) {
    int64_t k = ix[i];
    if (k < -dim || k >= dim) return "index " + std::to_string(k) + " out of range for dim " + std::to_string(dim);
    if (k < 0) k += dim;
    int64_t off = 0;
    for (size_t a = 0; a < pos.size(); ++a) {
      if (static_cast<int64_t>(a) != axis && pos[a] >= d[a]) return "indices dims " + DimsText(id) + " exceed the data's " + DimsText(d);
      off += (static_cast<int64_t>(a) == axis ? k : pos[a]) * ds[a];
    }
    std::memcpy(dst + i * es, src + static_cast<size_t>(off) * es, es);
    for (size_t a = pos.size(); a-- > 0;) {
      if (++pos[a] < id[a]) break;
      pos[a] = 0;
    }
  }
  return "";
}

// RandomNormalLike/RandomUniformLike as the CPU EP draws them: std::mt19937 seeded with the `seed` attribute (the same
// values every run), else from std::random_device. Never ORT's values: only a result scaled to zero matches it.
std::string RandomLikeKernel(const Graph&, const Node& n, const std::vector<GTensor>& in,
                             const std::vector<GTensor>& out, int /*threads*/) {
  if (in[0].dims != out[0].dims) return Mismatch(n.op.c_str(), in[0].dims, out[0].dims);
  if (out[0].dtype != kF32) return "output type is not float";
  std::mt19937 gen;
  if (n.Has("seed")) {
    gen.seed(static_cast<uint32_t>(static_cast<int64_t>(std::fmod(static_cast<double>(n.Float("seed", 0.f)), 4294967296.0))));
  } else {
    std::random_device rd;
    std::seed_seq seq{rd(), rd(), rd(), rd()};
    gen.seed(seq);
  }
  float* y = static_cast<float*>(out[0].data);
  const int64_t count = out[0].numel();
  if (n.op == "RandomNormalLike") {
    std::normal_distribution<double> normal(0.0, 1.0);
    const double mean = n.Float("mean", 0.f), scale = n.Float("scale", 1.f);
    for (int64_t i = 0; i < count; ++i) y[i] = static_cast<float>(mean + scale * normal(gen));
  } else {
    std::uniform_real_distribution<double> u(0.0, 1.0);
    const double lo = n.Float("low", 0.f), hi = n.Float("high", 1.f);
    for (int64_t i = 0; i < count; ++i) y[i] = static_cast<float>(lo + (hi - lo) * u(gen));
  }
  return "";
}

// ConstantOfShape to a shape computed at run time; its value attribute as ir.cc stores a tensor (i = dtype, ints = dims,
// s = bytes), 0.f without one.
std::string ConstantOfShapeKernel(const Graph&, const Node& n, const std::vector<GTensor>& in,
                                  const std::vector<GTensor>& out, int /*threads*/) {
  std::vector<int64_t> shape;
  if (!ReadInts(in[0], &shape)) return "the shape is missing";
  if (shape != out[0].dims) return Mismatch("ConstantOfShape", shape, out[0].dims);
  const size_t es = GenericElementSize(out[0].dtype);
  std::string value(es, '\0');
  if (auto it = n.attrs.find("value"); it != n.attrs.end()) {
    const Attr& a = it->second;
    if (a.type != EPCTX_ATTR_TENSOR || static_cast<uint32_t>(a.i) != out[0].dtype || a.s.size() != es)
      return "value is not one element of the output's type";
    value = a.s;
  }
  auto* y = static_cast<unsigned char*>(out[0].data);
  for (int64_t i = 0, c = out[0].numel(); i < c; ++i) std::memcpy(y + i * static_cast<int64_t>(es), value.data(), es);
  return "";
}

// ReduceSum/ReduceMax/ReduceMin of int64 or float in index order (axes from the input since opset 13 for ReduceSum, 18
// for the others; empty axes reduce everything unless noop_with_empty_axes).
std::string ReduceKernel(const Graph&, const Node& n, const std::vector<GTensor>& in, const std::vector<GTensor>& out,
                         int /*threads*/) {
  const Dims& d = in[0].dims;
  std::vector<int64_t> axes;
  const bool from_input = n.op == "ReduceSum" ? n.opset >= 13 : n.opset >= 18;
  if (from_input) {
    if (in.size() > 1 && in[1].data) ReadInts(in[1], &axes);
  } else {
    axes = n.Ints("axes");
  }
  const bool keep = n.Int("keepdims", 1) != 0;
  if (axes.empty() && n.Int("noop_with_empty_axes", 0) != 0) {
    if (d != out[0].dims) return Mismatch(n.op.c_str(), d, out[0].dims);
    std::memcpy(out[0].data, in[0].data, static_cast<size_t>(in[0].numel()) * GenericElementSize(in[0].dtype));
    return "";
  }
  std::vector<char> reduced(d.size(), axes.empty() ? 1 : 0);
  for (int64_t a : axes) {
    const int64_t x = Axis(a, d.size());
    if (x < 0 || x >= static_cast<int64_t>(d.size())) return "axis " + std::to_string(a) + " out of range";
    reduced[static_cast<size_t>(x)] = 1;
  }
  Dims od, kd(d.size());
  for (size_t i = 0; i < d.size(); ++i) {
    kd[i] = reduced[i] ? 1 : d[i];
    if (!reduced[i]) od.push_back(d[i]);
    else if (keep) od.push_back(1);
  }
  if (od != out[0].dims) return Mismatch(n.op.c_str(), od, out[0].dims);
  const Dims ks = RowStrides(kd);
  const int op = n.op == "ReduceSum" ? 0 : n.op == "ReduceMax" ? 1 : 2;
  auto run = [&](auto tag) -> std::string {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(in[0].data);
    T* y = static_cast<T*>(out[0].data);
    int64_t on = 1;
    for (int64_t v : kd) on *= v;
    const int64_t total = in[0].numel();
    if (total == 0 && op != 0) return "reducing an empty tensor";
    std::vector<char> first(static_cast<size_t>(on), 1);
    for (int64_t i = 0; i < on; ++i) y[i] = T(0);
    std::vector<int64_t> idx(d.size(), 0);
    for (int64_t i = 0; i < total; ++i) {
      int64_t o = 0;
      for (size_t a = 0; a < d.size(); ++a) o += (reduced[a] ? 0 : idx[a]) * ks[a];
      if (op == 0) y[o] += x[i];
      else if (first[static_cast<size_t>(o)]) y[o] = x[i];
      else y[o] = op == 1 ? std::max(y[o], x[i]) : std::min(y[o], x[i]);
      first[static_cast<size_t>(o)] = 0;
      for (size_t a = d.size(); a-- > 0;) {
        if (++idx[a] < d[a]) break;
        idx[a] = 0;
      }
    }
    return "";
  };
  if (in[0].dtype == kF32) return run(float());
  if (in[0].dtype == kI64) return run(int64_t());
  return "element type";
}

GenericKernel FindDataDependentKernel(const Graph& g, const Node& n, std::string* why) {
  const std::string& op = n.op;
  auto no = [&](const std::string& w) -> GenericKernel { *why = op + ": " + w; return nullptr; };
  auto dt = [&](size_t i) { return i < n.inputs.size() && n.inputs[i] >= 0 ? g.v(n.inputs[i]).dtype : 0u; };
  const uint32_t out0 = n.outputs.empty() || n.outputs[0] < 0 ? 0 : g.v(n.outputs[0]).dtype;
  auto is_int = [](uint32_t t) { return t == kI64 || t == kI32; };
  if (op == "NonZero") return out0 == kI64 ? NonZeroKernel : no("output not int64");
  if (op == "ReduceSum" || op == "ReduceMax" || op == "ReduceMin")
    return dt(0) == kI64 && out0 == kI64 ? ReduceKernel : no("not int64 (float reductions are lowered)");
  if (op == "ConstantOfShape") return dt(0) == kI64 ? ConstantOfShapeKernel : no("shape not int64");
  if (op == "Range") {
    if (n.inputs.size() != 3 || dt(1) != dt(0) || dt(2) != dt(0) || (dt(0) != kF32 && !is_int(dt(0))))
      return no("element types");
    return RangeKernel;
  }
  if (op == "CumSum") {
    if ((dt(0) != kF32 && !is_int(dt(0))) || !is_int(dt(1))) return no("element types");
    return CumSumKernel;
  }
  if (op == "GatherND") return dt(1) == kI64 ? GatherNDKernel : no("indices not int64");
  if (op == "ScatterND") return dt(1) == kI64 && dt(2) == dt(0) ? ScatterNDKernel : no("element types");
  if (op == "GatherElements") return is_int(dt(1)) ? GatherElementsKernel : no("indices not int64/int32");
  if (op == "RandomNormalLike" || op == "RandomUniformLike") return out0 == kF32 ? RandomLikeKernel : no("not f32");
  return nullptr;
}

// ---- support --------------------------------------------------------------------------------------------------------

uint32_t DtypeOf(const Graph& g, int v) { return v < 0 ? 0 : g.v(v).dtype; }

bool AllOf(const Graph& g, const std::vector<int>& vs, std::initializer_list<uint32_t> types) {
  for (int v : vs) {
    if (v < 0) continue;
    if (std::find(types.begin(), types.end(), g.v(v).dtype) == types.end()) return false;
  }
  return true;
}

}  // namespace

std::string MatMulTransposedB(const Graph&, const Node&, const std::vector<GTensor>& in,
                              const std::vector<GTensor>& out, int threads) {
  return MatMulImpl(in, out, threads, true);
}

namespace {
GenericKernel TypedElementwiseFor(const Graph& g, const Node& n);
std::string TriluKernel(const Graph&, const Node& n, const std::vector<GTensor>& in, const std::vector<GTensor>& out,
                        int threads);
std::string ReduceL2Kernel(const Graph&, const Node& n, const std::vector<GTensor>& in, const std::vector<GTensor>& out,
                           int threads);
}  // namespace
// Slice's output dims (elem = axis) from the input dims and its starts/ends/axes/steps data.
std::string SliceSizes(const Graph&, const Node& n, const std::vector<GTensor>& in, std::vector<int64_t>* sizes) {
  std::vector<int64_t> starts, ends, axes, steps;
  if (in.size() < 3 || !ReadInts(in[1], &starts) || !ReadInts(in[2], &ends)) return "starts/ends missing";
  const bool axes_given = in.size() > 3 && in[3].data;
  if (axes_given) ReadInts(in[3], &axes);
  if (in.size() > 4 && in[4].data) ReadInts(in[4], &steps);
  SliceAxes sa;
  std::string why;
  if (!ResolveSlice(in[0].dims, starts, ends, axes, axes_given, steps, &sa, &why)) return why;
  *sizes = sa.dims;
  return "";
}

// Reshape's output dims from its target data (0 copies the input dim unless allowzero, one -1 takes the rest).
std::string ReshapeSizes(const Graph&, const Node& n, const std::vector<GTensor>& in, std::vector<int64_t>* sizes) {
  std::vector<int64_t> t;
  if (in.size() < 2 || !ReadInts(in[1], &t)) return "the target shape is missing";
  const bool allowzero = n.Int("allowzero", 0) != 0;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == 0 && !allowzero) {
      if (i >= in[0].dims.size()) return "target dim " + std::to_string(i) + " is 0 beyond the input's rank";
      t[i] = in[0].dims[i];
    }
    if (t[i] == -1) {
      if (infer >= 0) return "two -1 in the target shape";
      infer = static_cast<int64_t>(i);
      continue;
    }
    if (t[i] < 0) return "target dim " + std::to_string(t[i]);
    known *= t[i];
  }
  const int64_t total = in[0].numel();
  if (infer >= 0) {
    if (known == 0 || total % known) return "cannot infer the -1 of the target shape for " + std::to_string(total) + " elements";
    t[static_cast<size_t>(infer)] = total / known;
  } else if (known != total) {
    return "the target shape has " + std::to_string(known) + " elements, the input " + std::to_string(total);
  }
  *sizes = t;
  return "";
}

GenericSizer FindGenericSizer(const Node& n) {
  if (n.op == "NonZero") return NonZeroSizes;
  if (n.op == "Reshape") return ReshapeSizes;
  if (n.op == "Slice" && n.opset >= 10) return SliceSizes;
  if (n.op == "Range") return RangeSizes;
  return nullptr;
}

GenericKernel FindGenericKernel(const Graph& g, const Node& n, std::string* why) {
  const std::string& op = n.op;
  auto no = [&](const std::string& w) -> GenericKernel { *why = op + ": " + w; return nullptr; };
  if (!n.domain.empty() && n.domain != "ai.onnx") return no("not an ONNX op");
  if (n.has_subgraphs) return no("has subgraphs");
  for (int v : n.inputs)
    if (v >= 0 && GenericElementSize(g.v(v).dtype) == 0) return no("input element type " + std::to_string(g.v(v).dtype));
  for (int v : n.outputs)
    if (v >= 0 && GenericElementSize(g.v(v).dtype) == 0) return no("output element type " + std::to_string(g.v(v).dtype));
  const uint32_t in0 = n.inputs.empty() ? 0 : DtypeOf(g, n.inputs[0]);
  if (n.outputs.size() != 1 || n.outputs[0] < 0) return no("not one output");
  const uint32_t out0 = DtypeOf(g, n.outputs[0]);
  if (GenericKernel k = TypedElementwiseFor(g, n)) return k;  // issue 27 item 6 (below)
  if (op == "ReduceL2" || op == "ReduceSumSquare") {
    if (in0 != kF32 || out0 != kF32) return no("not f32");
    if (n.inputs.size() > 1 && n.inputs[1] >= 0 && DtypeOf(g, n.inputs[1]) != kI64) return no("axes not int64");
    return ReduceL2Kernel;
  }
  if (op == "Trilu") {
    if (n.inputs.size() > 1 && n.inputs[1] >= 0 && DtypeOf(g, n.inputs[1]) != kI64) return no("k is not int64");
    if (in0 != out0) return no("element types");
    return TriluKernel;
  }
  std::string data_why;
  if (GenericKernel k = FindDataDependentKernel(g, n, &data_why)) return k;
  if (!data_why.empty()) return *why = data_why, nullptr;
  if (op == "Reshape" || op == "Squeeze" || op == "Unsqueeze" || op == "Flatten" || op == "Identity")
    return CopyKernel;
  if (op == "Concat") return ConcatKernel;
  if (op == "Transpose") return TransposeKernel;
  if (op == "Slice") return SliceKernel;
  if (op == "Gather") {
    if (n.inputs.size() < 2 || (DtypeOf(g, n.inputs[1]) != kI64 && DtypeOf(g, n.inputs[1]) != kI32))
      return no("indices not int64/int32");
    return GatherKernel;
  }
  if (op == "Expand") return ExpandKernel;
  if (op == "MatMul") {
    if (!AllOf(g, n.inputs, {kF32})) return no("not f32");
    return MatMulKernel;
  }
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Pow") {
    if (n.inputs.size() != 2 || DtypeOf(g, n.inputs[1]) != in0 || out0 != in0) return no("mixed element types");
    if (in0 == kBool || in0 == kU8 || in0 == kI8 || (op == "Pow" && in0 != kF32)) return no("element type");
    return BinaryKernel;
  }
  if (op == "Equal" || op == "Less" || op == "Greater" || op == "LessOrEqual" || op == "GreaterOrEqual" ||
      op == "And" || op == "Or") {
    if (n.inputs.size() != 2 || DtypeOf(g, n.inputs[1]) != in0 || out0 != kBool) return no("element types");
    if ((op == "And" || op == "Or") != (in0 == kBool)) return no("element types");
    if (in0 == kU8 || in0 == kI8) return no("element type");
    return BinaryKernel;
  }
  if (op == "Where") {
    if (n.inputs.size() != 3 || in0 != kBool || DtypeOf(g, n.inputs[1]) != out0 || DtypeOf(g, n.inputs[2]) != out0)
      return no("element types");
    return WhereKernel;
  }
  if (op == "Exp" || op == "Sqrt" || op == "Neg" || op == "Abs" || op == "Relu" || op == "Tanh" || op == "Sigmoid" ||
      op == "Erf" || op == "Reciprocal") {
    if (in0 != kF32 || out0 != kF32) return no("not f32");
    return UnaryKernel;
  }
  if (op == "Cast") {  // the typed kernel above takes every cast it computes
    std::vector<uint32_t> types;
    for (int v : n.inputs) types.push_back(DtypeOf(g, v));
    ElemOp cast = ElemOp::kCast;
    return no(CheckElementwise(cast, types, out0));
  }
  if (op == "Softmax" || op == "LogSoftmax") {
    if (in0 != kF32 || out0 != kF32) return no("not f32");
    return SoftmaxKernel;
  }
  return no("no shape-generic kernel");
}

// ---- Typed elementwise ops (issue 27 item 6; generic_ops.h) ---------------------------------------------------------

namespace {

bool IsInt(uint32_t t) { return t == kI64 || t == kI32; }

std::string TypeName(uint32_t t) {
  switch (t) {
    case kF32: return "float";
    case kI64: return "int64";
    case kI32: return "int32";
    case kBool: return "bool";
    case kU8: return "uint8";
    case kI8: return "int8";
    default: return "element type " + std::to_string(t);
  }
}
bool IsNumber(uint32_t t) { return t == kF32 || IsInt(t); }

// Calls f with a value of the C type that holds dtype `t` (bool as its byte); false for another type.
template <typename F>
bool WithType(uint32_t t, F f) {
  switch (t) {
    case kF32: f(float{}); return true;
    case kI64: f(int64_t{}); return true;
    case kI32: f(int32_t{}); return true;
    case kBool: case kU8: f(uint8_t{}); return true;
    case kI8: f(int8_t{}); return true;
    default: return false;
  }
}

// One element of a Cast from a non-bool type.
template <typename To, typename From>
To CastElem(From x) {
  if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    // [-2^(bits-1), 2^(bits-1)) is exact in float for 32 and 64 bits; outside it (and NaN) the minimum.
    const From lo = static_cast<From>(std::numeric_limits<To>::min());
    if (!(x >= lo && x < -lo)) return std::numeric_limits<To>::min();
    return static_cast<To>(x);
  } else if constexpr (std::is_integral_v<From> && std::is_integral_v<To>) {
    return static_cast<To>(static_cast<std::make_unsigned_t<To>>(x));  // the low bits
  } else {
    return static_cast<To>(x);
  }
}

template <typename T>
bool ArithElem(ElemOp op, T a, T b, T* r) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    switch (op) {
      case ElemOp::kAdd: *r = static_cast<T>(static_cast<U>(a) + static_cast<U>(b)); return true;
      case ElemOp::kSub: *r = static_cast<T>(static_cast<U>(a) - static_cast<U>(b)); return true;
      case ElemOp::kMul: *r = static_cast<T>(static_cast<U>(a) * static_cast<U>(b)); return true;
      case ElemOp::kDiv:
        if (b == 0 || (a == std::numeric_limits<T>::min() && b == static_cast<T>(-1))) return false;
        *r = static_cast<T>(a / b);  // C++ truncates toward zero, as ONNX Runtime
        return true;
      default: return false;
    }
  } else {
    switch (op) {
      case ElemOp::kAdd: *r = a + b; return true;
      case ElemOp::kSub: *r = a - b; return true;
      case ElemOp::kMul: *r = a * b; return true;
      case ElemOp::kDiv: *r = a / b; return true;
      default: return false;
    }
  }
}

template <typename T>
uint8_t CompareElem(ElemOp op, T a, T b) {
  switch (op) {
    case ElemOp::kEqual: return a == b;
    case ElemOp::kLess: return a < b;
    case ElemOp::kGreater: return a > b;
    case ElemOp::kLessOrEqual: return a <= b;
    case ElemOp::kGreaterOrEqual: return a >= b;
    default: return 0;
  }
}

template <typename T>
T UnaryElem(ElemOp op, T x) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    const T neg = static_cast<T>(U(0) - static_cast<U>(x));
    if (op == ElemOp::kNeg) return neg;
    if (op == ElemOp::kAbs) return x < 0 ? neg : x;
    return x;
  } else {
    switch (op) {
      case ElemOp::kNeg: return -x;
      case ElemOp::kAbs: return std::fabs(x);
      case ElemOp::kSin: return std::sin(x);
      case ElemOp::kCos: return std::cos(x);
      case ElemOp::kCeil: return std::ceil(x);
      case ElemOp::kFloor: return std::floor(x);
      default: return x;
    }
  }
}

size_t ElemOpInputs(ElemOp op) {
  const int64_t c = static_cast<int64_t>(op);
  return c < 10 ? 1 : c < 40 ? 2 : 3;
}

}  // namespace

bool ElemOpOf(const std::string& op, ElemOp* out) {
  static const std::map<std::string, ElemOp> m = {
      {"Cast", ElemOp::kCast}, {"Neg", ElemOp::kNeg}, {"Abs", ElemOp::kAbs}, {"Not", ElemOp::kNot},
      {"Sin", ElemOp::kSin}, {"Cos", ElemOp::kCos}, {"Ceil", ElemOp::kCeil}, {"Floor", ElemOp::kFloor},
      {"Add", ElemOp::kAdd}, {"Sub", ElemOp::kSub},
      {"Mul", ElemOp::kMul}, {"Div", ElemOp::kDiv}, {"Equal", ElemOp::kEqual}, {"Less", ElemOp::kLess},
      {"Greater", ElemOp::kGreater}, {"LessOrEqual", ElemOp::kLessOrEqual},
      {"GreaterOrEqual", ElemOp::kGreaterOrEqual}, {"And", ElemOp::kAnd}, {"Or", ElemOp::kOr},
      {"Xor", ElemOp::kXor}, {"Where", ElemOp::kWhere}};
  auto it = m.find(op);
  if (it == m.end()) return false;
  *out = it->second;
  return true;
}

bool ValidElemOp(int64_t code, size_t* inputs) {
  static const int64_t kCodes[] = {0, 1, 2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 20, 21, 22, 23, 24, 30, 31, 32, 40};
  if (std::find(std::begin(kCodes), std::end(kCodes), code) == std::end(kCodes)) return false;
  *inputs = ElemOpInputs(static_cast<ElemOp>(code));
  return true;
}

std::string CheckElementwise(ElemOp op, const std::vector<uint32_t>& in, uint32_t out) {
  size_t arity = 0;
  if (!ValidElemOp(static_cast<int64_t>(op), &arity)) return "unknown elementwise op";
  if (in.size() != arity) return "expects " + std::to_string(arity) + " inputs";
  auto tn = [](uint32_t t) { return TypeName(t); };
  switch (op) {
    case ElemOp::kCast: {
      const uint32_t f = in[0];
      if (GenericElementSize(f) == 0) return "Cast from " + tn(f) + " is not computed here";
      if (GenericElementSize(out) == 0) return "Cast to " + tn(out) + " is not computed here";
      if (f == kF32 && (out == kU8 || out == kI8))
        return "Cast from float to " + tn(out) + " is not computed here (ONNX Runtime's result outside the range "
               "depends on its vectorization)";
      return "";
    }
    case ElemOp::kNeg: case ElemOp::kAbs:
      if (!IsNumber(in[0]) || out != in[0]) return "input and output must be one of float, int64, int32";
      return "";
    case ElemOp::kSin: case ElemOp::kCos: case ElemOp::kCeil: case ElemOp::kFloor:
      if (in[0] != kF32 || out != kF32) return "only float";
      return "";
    case ElemOp::kNot:
      if (in[0] != kBool || out != kBool) return "only bool";
      return "";
    case ElemOp::kAdd: case ElemOp::kSub: case ElemOp::kMul: case ElemOp::kDiv:
      if (!IsNumber(in[0]) || in[1] != in[0] || out != in[0])
        return "inputs and output must be of one type among float, int64, int32 (here " + tn(in[0]) + ", " +
               tn(in[1]) + " -> " + tn(out) + ")";
      return "";
    case ElemOp::kEqual: case ElemOp::kLess: case ElemOp::kGreater: case ElemOp::kLessOrEqual:
    case ElemOp::kGreaterOrEqual:
      if (in[1] != in[0] || out != kBool || !(IsNumber(in[0]) || (op == ElemOp::kEqual && in[0] == kBool)))
        return "inputs must be of one type among float, int64, int32 (bool for Equal), the output bool";
      return "";
    case ElemOp::kAnd: case ElemOp::kOr: case ElemOp::kXor:
      if (in[0] != kBool || in[1] != kBool || out != kBool) return "only bool";
      return "";
    case ElemOp::kWhere:
      if (in[0] != kBool) return "the condition must be bool";
      if (GenericElementSize(in[1]) == 0 || in[1] != in[2] || out != in[1])
        return "the branches and the output must be of one type among float, int64, int32, bool, uint8, int8";
      return "";
  }
  return "unknown elementwise op";
}

std::string RunElementwise(ElemOp op, const std::vector<GTensor>& in, const GTensor& out, int /*threads*/) {
  std::vector<uint32_t> types;
  for (const GTensor& t : in) types.push_back(t.dtype);
  std::string why = CheckElementwise(op, types, out.dtype);
  if (!why.empty()) return why;
  for (const GTensor& t : in)
    if (!t.data) return "an input is missing";
  const size_t arity = in.size();
  if (op == ElemOp::kCast || arity == 1) {
    if (in[0].dims != out.dims) return Mismatch("elementwise", in[0].dims, out.dims);
  } else {
    Dims od = in[0].dims;
    for (size_t k = 1; k < arity; ++k) {
      Dims t;
      if (!BcastDims(od, in[k].dims, &t)) return "input dims " + DimsText(in[k].dims) + " do not broadcast with " + DimsText(od);
      od = t;
    }
    if (od != out.dims) return Mismatch("elementwise", od, out.dims);
  }
  const int64_t count = out.numel();
  if (op == ElemOp::kCast) {
    const bool from_bool = in[0].dtype == kBool, to_bool = out.dtype == kBool;
    WithType(in[0].dtype, [&](auto fx) {
      using F = decltype(fx);
      WithType(out.dtype, [&](auto tx) {
        using T = decltype(tx);
        const F* x = static_cast<const F*>(in[0].data);
        T* y = static_cast<T*>(out.data);
        if (to_bool || from_bool)
          for (int64_t i = 0; i < count; ++i) y[i] = static_cast<T>(x[i] != F(0));
        else
          for (int64_t i = 0; i < count; ++i) y[i] = CastElem<T, F>(x[i]);
      });
    });
    return "";
  }
  if (arity == 1) {
    if (op == ElemOp::kNot) {
      const auto* x = static_cast<const uint8_t*>(in[0].data);
      auto* y = static_cast<uint8_t*>(out.data);
      for (int64_t i = 0; i < count; ++i) y[i] = x[i] == 0;
      return "";
    }
    WithType(in[0].dtype, [&](auto tx) {
      using T = decltype(tx);
      const T* x = static_cast<const T*>(in[0].data);
      T* y = static_cast<T*>(out.data);
      for (int64_t i = 0; i < count; ++i) y[i] = UnaryElem<T>(op, x[i]);
    });
    return "";
  }
  if (arity == 3) {  // Where
    Dims s[3];
    for (size_t k = 0; k < 3; ++k) BcastStrides(in[k].dims, out.dims, &s[k]);
    WithType(out.dtype, [&](auto tx) {
      using T = decltype(tx);
      const auto* c = static_cast<const uint8_t*>(in[0].data);
      const T* x = static_cast<const T*>(in[1].data);
      const T* y = static_cast<const T*>(in[2].data);
      T* z = static_cast<T*>(out.data);
      ForEachRow(out.dims, s, [&](int64_t o, const int64_t* off, int64_t cnt, const int64_t* is) {
        for (int64_t i = 0; i < cnt; ++i)
          z[o + i] = c[off[0] + i * is[0]] != 0 ? x[off[1] + i * is[1]] : y[off[2] + i * is[2]];
      });
    });
    return "";
  }
  Dims s[2];
  BcastStrides(in[0].dims, out.dims, &s[0]);
  BcastStrides(in[1].dims, out.dims, &s[1]);
  const int64_t code = static_cast<int64_t>(op);
  bool ok = true;
  if (code >= 30) {  // And, Or, Xor on bool bytes
    const auto* a = static_cast<const uint8_t*>(in[0].data);
    const auto* b = static_cast<const uint8_t*>(in[1].data);
    auto* z = static_cast<uint8_t*>(out.data);
    ForEachRow(out.dims, s, [&](int64_t o, const int64_t* off, int64_t cnt, const int64_t* is) {
      for (int64_t i = 0; i < cnt; ++i) {
        const bool x = a[off[0] + i * is[0]] != 0, y = b[off[1] + i * is[1]] != 0;
        z[o + i] = op == ElemOp::kAnd ? (x && y) : op == ElemOp::kOr ? (x || y) : (x != y);
      }
    });
    return "";
  }
  WithType(in[0].dtype, [&](auto tx) {
    using T = decltype(tx);
    const T* a = static_cast<const T*>(in[0].data);
    const T* b = static_cast<const T*>(in[1].data);
    const bool bool_in = in[0].dtype == kBool;
    if (code >= 20) {
      auto* z = static_cast<uint8_t*>(out.data);
      ForEachRow(out.dims, s, [&](int64_t o, const int64_t* off, int64_t cnt, const int64_t* is) {
        for (int64_t i = 0; i < cnt; ++i) {
          T x = a[off[0] + i * is[0]], y = b[off[1] + i * is[1]];
          if (bool_in) x = x != 0, y = y != 0;
          z[o + i] = CompareElem<T>(op, x, y);
        }
      });
      return;
    }
    T* z = static_cast<T*>(out.data);
    ForEachRow(out.dims, s, [&](int64_t o, const int64_t* off, int64_t cnt, const int64_t* is) {
      for (int64_t i = 0; i < cnt; ++i) ok &= ArithElem<T>(op, a[off[0] + i * is[0]], b[off[1] + i * is[1]], &z[o + i]);
    });
  });
  return ok ? "" : "integer division by zero (or the minimum divided by -1)";
}

std::string RunTrilu(const GTensor& in, const GTensor& out, bool upper, int64_t k) {
  if (in.dims != out.dims) return Mismatch("Trilu", in.dims, out.dims);
  if (in.dims.size() < 2) return "Trilu needs rank >= 2";
  if (in.dtype != out.dtype || GenericElementSize(in.dtype) == 0) return "Trilu: unsupported element types";
  const size_t es = GenericElementSize(in.dtype);
  const int64_t rows = in.dims[in.dims.size() - 2], cols = in.dims.back();
  const int64_t mats = rows * cols == 0 ? 0 : in.numel() / (rows * cols);
  const auto* x = static_cast<const unsigned char*>(in.data);
  auto* y = static_cast<unsigned char*>(out.data);
  for (int64_t m = 0; m < mats; ++m)
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t at = (m * rows + i) * cols;
      // Kept columns: upper [max(0, i + k), cols), lower [0, min(cols, i + k + 1)); k is bounded by the caller.
      const int64_t lo = upper ? std::min(cols, std::max<int64_t>(0, i + k)) : 0;
      const int64_t hi = upper ? cols : std::max<int64_t>(0, std::min(cols, i + k + 1));
      std::memset(y + at * static_cast<int64_t>(es), 0, static_cast<size_t>(cols) * es);
      if (hi > lo)
        std::memcpy(y + (at + lo) * static_cast<int64_t>(es), x + (at + lo) * static_cast<int64_t>(es),
                    static_cast<size_t>(hi - lo) * es);
    }
  return "";
}

namespace {

// ReduceL2 / ReduceSumSquare over f32 (axes from the attribute, or from opset 18 a constant or run-time input; none:
// every axis unless noop_with_empty_axes), summed in index order in double, then rounded once.
std::string ReduceL2Kernel(const Graph&, const Node& n, const std::vector<GTensor>& in,
                           const std::vector<GTensor>& out, int /*threads*/) {
  const Dims& d = in[0].dims;
  const int64_t r = static_cast<int64_t>(d.size());
  std::vector<int64_t> axes;
  if (n.opset >= 18) {
    if (in.size() > 1 && in[1].data && !ReadInts(in[1], &axes)) return "axes unreadable";
  } else {
    axes = n.Ints("axes");
  }
  std::vector<bool> red(d.size(), false);
  if (axes.empty() && !(n.opset >= 18 && n.Int("noop_with_empty_axes", 0) != 0)) red.assign(d.size(), true);
  for (int64_t a : axes) {
    if (a < -r || a >= r) return "axis " + std::to_string(a) + " out of range for rank " + std::to_string(r);
    if (a < 0) a += r;
    if (red[static_cast<size_t>(a)]) return "repeated axis";
    red[static_cast<size_t>(a)] = true;
  }
  const bool keep = n.Int("keepdims", 1) != 0;
  Dims od, kd = d;
  for (size_t i = 0; i < d.size(); ++i) {
    if (red[i]) kd[i] = 1;
    if (!red[i] || keep) od.push_back(red[i] ? 1 : d[i]);
  }
  if (od != out[0].dims) return Mismatch(n.op.c_str(), od, out[0].dims);
  const int64_t count = out[0].numel();
  std::vector<double> acc(static_cast<size_t>(count), 0.0);
  Dims s[1];
  BcastStrides(kd, d, &s[0]);  // the input read in order, each element's output index by kd's strides
  const float* x = static_cast<const float*>(in[0].data);
  int64_t at = 0;
  ForEachRow(d, s, [&](int64_t, const int64_t* off, int64_t cnt, const int64_t* is) {
    for (int64_t i = 0; i < cnt; ++i, ++at) {
      const double v = x[at];
      acc[static_cast<size_t>(off[0] + i * is[0])] += v * v;
    }
  });
  float* y = static_cast<float*>(out[0].data);
  const bool root = n.op == "ReduceL2";
  for (int64_t i = 0; i < count; ++i)
    y[i] = static_cast<float>(root ? std::sqrt(acc[static_cast<size_t>(i)]) : acc[static_cast<size_t>(i)]);
  return "";
}

std::string TriluKernel(const Graph&, const Node& n, const std::vector<GTensor>& in, const std::vector<GTensor>& out,
                        int /*threads*/) {
  int64_t k = 0;
  if (in.size() > 1 && in[1].data) {
    std::vector<int64_t> ks;
    if (!ReadInts(in[1], &ks) || ks.size() != 1) return "k is not one integer";
    k = ks[0];
  }
  if (k < -(int64_t{1} << 40) || k > (int64_t{1} << 40)) return "k out of range";
  return RunTrilu(in[0], out[0], n.Int("upper", 1) != 0, k);
}

std::string TypedKernel(const Graph&, const Node& n, const std::vector<GTensor>& in, const std::vector<GTensor>& out,
                        int threads) {
  ElemOp op;
  if (!ElemOpOf(n.op, &op)) return "not an elementwise op";
  return RunElementwise(op, in, out[0], threads);
}

// The typed kernel for the nodes it covers beyond the float ones above: every Cast, Not, Xor, Sin, Cos, and the
// arithmetic, comparisons and Where of inputs that are not all float (the float ones keep their kernels).
GenericKernel TypedElementwiseFor(const Graph& g, const Node& n) {
  ElemOp op;
  if (!ElemOpOf(n.op, &op) || n.outputs.size() != 1 || n.outputs[0] < 0) return nullptr;
  std::vector<uint32_t> types;
  bool all_float = true;
  for (int v : n.inputs) {
    if (v < 0) return nullptr;
    types.push_back(g.v(v).dtype);
    all_float &= g.v(v).dtype == kF32;
  }
  const bool own = op == ElemOp::kCast || op == ElemOp::kNot || op == ElemOp::kXor || op == ElemOp::kSin ||
                   op == ElemOp::kCos || op == ElemOp::kCeil || op == ElemOp::kFloor || !all_float;
  if (!own || !CheckElementwise(op, types, g.v(n.outputs[0]).dtype).empty()) return nullptr;
  return TypedKernel;
}

}  // namespace

}  // namespace aotcpu
}  // namespace epctx
