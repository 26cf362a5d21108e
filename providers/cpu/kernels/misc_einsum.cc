// Einsum (opset 12).
//
// The equation is parsed once at creation into label lists ("..." is kept as a marker and expanded per run, when
// the input ranks are known). A run then:
//   1. turns every operand into a contiguous tensor over its distinct labels, taking diagonals of repeated
//      labels and summing labels that no other operand and not the output use;
//   2. contracts the operands left to right: each step lays both out as [batch, rows, k] / [batch, k, cols]
//      (size-1 dimensions broadcast with stride 0) and runs a plain batched matrix product;
//   3. sums leftover labels and permutes the result into the output order.
// Accumulation: float for float16/bfloat16, uint64 (wrap-around, like NumPy) for integers, else the type itself.
#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <oneapi/dnnl/dnnl.h>

#include "providers/cpu/kernel.h"

namespace epctx {
namespace misc {
namespace {

constexpr int kEllipsis = -1;
constexpr int kNumLetterLabels = 52;  // a-z -> 0..25, A-Z -> 26..51; ellipsis dims get 52, 53, ...

int LabelOf(char c) {
  if (c >= 'a' && c <= 'z') return c - 'a';
  if (c >= 'A' && c <= 'Z') return 26 + (c - 'A');
  return -2;
}
// ASCII order of a letter label (implicit outputs are sorted as NumPy sorts them: upper case first).
int AsciiOf(int label) { return label < 26 ? 'a' + label : 'A' + (label - 26); }

template <typename T>
using EinsumAcc = std::conditional_t<std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>, float,
                                     std::conditional_t<std::is_integral_v<T>, uint64_t, T>>;

template <typename Acc, typename T>
inline Acc ToAcc(const T& v) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return static_cast<float>(v);
  } else {
    return static_cast<Acc>(v);
  }
}
template <typename T, typename Acc>
inline T FromAcc(Acc v) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return T(v);
  } else {
    return static_cast<T>(v);
  }
}

// A contiguous row-major tensor whose dimension i carries labels[i]: its own buffer, or (when no copy was needed)
// an input's memory.
template <typename Acc>
struct Operand {
  std::vector<int> labels;
  Shape dims;
  std::vector<Acc> owned;
  const Acc* borrowed = nullptr;
  const Acc* data() const { return borrowed != nullptr ? borrowed : owned.data(); }
};

// dst[i] = sum over r of src[offset(i) + offset(r)], i over out_dims (strides out_strides), r over red_dims.
template <typename Src, typename Dst, typename Acc>
void StridedSum(const Src* src, const Shape& out_dims, const std::vector<int64_t>& out_strides, const Shape& red_dims,
                const std::vector<int64_t>& red_strides, Dst* dst, int num_threads) {
  const int64_t total = ShapeSize(out_dims);
  if (total <= 0) return;
  // All offsets of the reduced sub-space.
  std::vector<int64_t> red_off(1, 0);
  for (size_t d = 0; d < red_dims.size(); ++d) {
    std::vector<int64_t> next;
    next.reserve(red_off.size() * static_cast<size_t>(red_dims[d]));
    for (int64_t base : red_off)
      for (int64_t j = 0; j < red_dims[d]; ++j) next.push_back(base + j * red_strides[d]);
    red_off.swap(next);
  }
  const size_t rank = out_dims.size();
  bool contiguous = red_dims.empty();
  for (size_t d = rank, expect = 1; contiguous && d-- > 0;) {
    contiguous = out_dims[d] == 1 || out_strides[d] == static_cast<int64_t>(expect);
    expect *= static_cast<size_t>(out_dims[d]);
  }
  if (contiguous) {  // a plain conversion copy
    ParallelFor(num_threads, total, 1, [&](int64_t begin, int64_t end) {
#pragma omp simd
      for (int64_t i = begin; i < end; ++i) dst[i] = FromAcc<Dst>(ToAcc<Acc>(src[i]));
    });
    return;
  }
  ParallelFor(num_threads, total, static_cast<double>(red_off.size()) + 1, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> idx(rank, 0);
    int64_t rem = begin, off = 0;
    for (size_t d = rank; d-- > 0;) {
      idx[d] = rem % out_dims[d];
      rem /= out_dims[d];
      off += idx[d] * out_strides[d];
    }
    for (int64_t i = begin; i < end; ++i) {
      Acc sum = 0;
      for (int64_t r : red_off) sum += ToAcc<Acc>(src[off + r]);
      dst[i] = FromAcc<Dst>(sum);
      for (size_t d = rank; d-- > 0;) {  // advance the odometer
        off += out_strides[d];
        if (++idx[d] < out_dims[d]) break;
        off -= idx[d] * out_strides[d];
        idx[d] = 0;
      }
    }
  });
}

class EinsumKernel final : public OpKernel {
 public:
  static StatusOr<std::unique_ptr<OpKernel>> Create(const KernelInfo& info) {
    const auto* attr = info.node().attr("equation");
    if (attr == nullptr || attr->type != Attribute::Type::kString)
      return info.Error(ErrorCode::INVALID_GRAPH, "required string attribute 'equation' is missing");
    std::string eq;
    for (char c : attr->s)
      if (c != ' ') eq += c;
    auto k = std::unique_ptr<EinsumKernel>(new EinsumKernel());
    std::string lhs = eq, rhs;
    const size_t arrow = eq.find("->");
    k->explicit_ = arrow != std::string::npos;
    if (k->explicit_) {
      lhs = eq.substr(0, arrow);
      rhs = eq.substr(arrow + 2);
    }
    size_t start = 0;
    while (true) {
      const size_t comma = lhs.find(',', start);
      std::vector<int> term;
      RETURN_IF_ERROR(ParseTerm(info, lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start),
                                &term));
      k->inputs_.push_back(std::move(term));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    if (k->explicit_) {
      RETURN_IF_ERROR(ParseTerm(info, rhs, &k->output_));
      for (size_t i = 0; i < k->output_.size(); ++i) {
        const int l = k->output_[i];
        if (l == kEllipsis) continue;
        if (std::count(k->output_.begin(), k->output_.end(), l) > 1)
          return info.Error(ErrorCode::INVALID_ARGUMENT, "equation '", attr->s, "': output label '",
                            static_cast<char>(AsciiOf(l)), "' appears twice");
        bool found = false;
        for (const auto& t : k->inputs_) found = found || std::count(t.begin(), t.end(), l) > 0;
        if (!found)
          return info.Error(ErrorCode::INVALID_ARGUMENT, "equation '", attr->s, "': output label '",
                            static_cast<char>(AsciiOf(l)), "' does not appear in any input");
      }
    } else {
      // Implicit output: the ellipsis, then the labels used exactly once, in ASCII order.
      std::map<int, int> count;
      bool any_ellipsis = false;
      for (const auto& t : k->inputs_)
        for (int l : t) (l == kEllipsis ? (void)(any_ellipsis = true) : (void)++count[l]);
      std::vector<int> once;
      for (const auto& [l, c] : count)
        if (c == 1) once.push_back(l);
      std::sort(once.begin(), once.end(), [](int a, int b) { return AsciiOf(a) < AsciiOf(b); });
      if (any_ellipsis) k->output_.push_back(kEllipsis);
      k->output_.insert(k->output_.end(), once.begin(), once.end());
    }
    if (info.num_inputs() != k->inputs_.size())
      return info.Error(ErrorCode::INVALID_ARGUMENT, "equation '", attr->s, "' has ", k->inputs_.size(),
                        " operand terms but the node has ", info.num_inputs(), " inputs");
    k->equation_ = attr->s;
    return std::unique_ptr<OpKernel>(std::move(k));
  }

  Status Compute(KernelContext& ctx) const override {
    std::vector<const Tensor*> in(inputs_.size());
    for (size_t i = 0; i < in.size(); ++i) {
      in[i] = ctx.Input(i);
      RETURN_ERROR_IF(in[i] == nullptr, INVALID_ARGUMENT, ctx.node().Describe(), ": input ", i, " is missing");
      RETURN_ERROR_IF(in[i]->dtype() != in[0]->dtype(), INVALID_ARGUMENT, ctx.node().Describe(), ": input ", i,
                      " has type ", DataTypeName(in[i]->dtype()), ", input 0 has ", DataTypeName(in[0]->dtype()));
    }
    return DispatchType<EPCTX_NUMERIC_TYPES>(in[0]->dtype(), "Einsum", [&](auto tag) {
             using T = decltype(tag);
             return Run<T>(ctx, in);
           }).WithContext(ctx.node().Describe());
  }

 private:
  EinsumKernel() = default;

  static Status ParseTerm(const KernelInfo& info, const std::string& s, std::vector<int>* term) {
    bool ellipsis = false;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s.compare(i, 3, "...") == 0) {
        if (ellipsis) return info.Error(ErrorCode::INVALID_ARGUMENT, "term '", s, "' has more than one ellipsis");
        ellipsis = true;
        term->push_back(kEllipsis);
        i += 2;
        continue;
      }
      const int l = LabelOf(s[i]);
      if (l < 0)
        return info.Error(ErrorCode::INVALID_ARGUMENT, "term '", s, "' has the invalid character '", s[i],
                          "' (labels are letters; '...' is the ellipsis)");
      term->push_back(l);
    }
    return Status::OK();
  }

  // Labels (letters and ellipsis dims) of every input, and the output's, with the ellipsis expanded.
  Status ExpandLabels(const KernelContext& ctx, const std::vector<const Tensor*>& in,
                      std::vector<std::vector<int>>* labels, std::vector<int>* out_labels) const {
    int ell = 0;
    std::vector<int> ell_dims(in.size(), 0);
    for (size_t i = 0; i < in.size(); ++i) {
      const auto& t = inputs_[i];
      const bool has_ell = std::count(t.begin(), t.end(), kEllipsis) > 0;
      const int letters = static_cast<int>(t.size()) - (has_ell ? 1 : 0);
      const int rank = static_cast<int>(in[i]->rank());
      RETURN_ERROR_IF(has_ell ? rank < letters : rank != letters, INVALID_ARGUMENT, ctx.node().Describe(),
                      ": equation '", equation_, "': input ", i, " has rank ", rank, " but its term has ", letters,
                      " labels", has_ell ? " and an ellipsis" : "");
      ell_dims[i] = has_ell ? rank - letters : 0;
      ell = std::max(ell, ell_dims[i]);
    }
    labels->assign(in.size(), {});
    for (size_t i = 0; i < in.size(); ++i) {
      for (int l : inputs_[i]) {
        if (l != kEllipsis) {
          (*labels)[i].push_back(l);
          continue;
        }
        for (int d = ell - ell_dims[i]; d < ell; ++d) (*labels)[i].push_back(kNumLetterLabels + d);
      }
    }
    out_labels->clear();
    bool out_has_ell = false;
    for (int l : output_) {
      if (l != kEllipsis) {
        out_labels->push_back(l);
        continue;
      }
      out_has_ell = true;
      for (int d = 0; d < ell; ++d) out_labels->push_back(kNumLetterLabels + d);
    }
    RETURN_ERROR_IF(ell > 0 && !out_has_ell, INVALID_ARGUMENT, ctx.node().Describe(), ": equation '", equation_,
                    "': the inputs have ellipsis dimensions but the output has no '...'");
    return Status::OK();
  }

  template <typename T>
  Status Run(KernelContext& ctx, const std::vector<const Tensor*>& in) const {
    using Acc = EinsumAcc<T>;
    std::vector<std::vector<int>> labels;
    std::vector<int> out_labels;
    RETURN_IF_ERROR(ExpandLabels(ctx, in, &labels, &out_labels));
    const int num_labels = kNumLetterLabels + 64;
    // Global size of each label: all occurrences agree, or are 1 (broadcast).
    std::vector<int64_t> size(num_labels, -1);
    std::vector<int> uses(num_labels, 0);  // operands using the label
    for (size_t i = 0; i < in.size(); ++i) {
      for (size_t d = 0; d < labels[i].size(); ++d) {
        const int l = labels[i][d];
        RETURN_ERROR_IF(l >= num_labels, INVALID_ARGUMENT, ctx.node().Describe(), ": too many ellipsis dimensions");
        const int64_t n = in[i]->dim(d);
        if (size[l] == -1 || size[l] == 1) {
          size[l] = n;
        } else if (n != 1 && n != size[l]) {
          return ctx.Error(ErrorCode::INVALID_ARGUMENT, "equation '", equation_, "': dimension ", d, " of input ", i,
                           " is ", n, " but label '", l < kNumLetterLabels ? std::string(1, static_cast<char>(AsciiOf(l)))
                                                                            : std::string("..."),
                           "' has size ", size[l], " elsewhere");
        }
      }
      std::vector<int> distinct = labels[i];
      std::sort(distinct.begin(), distinct.end());
      distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
      for (int l : distinct) ++uses[l];
    }
    std::vector<bool> in_output(num_labels, false);
    for (int l : out_labels) in_output[l] = true;

    Shape out_shape;
    for (int l : out_labels) out_shape.push_back(size[l]);
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, in[0]->dtype(), out_shape));

    // 1. Every operand over its distinct labels: diagonals taken, private labels summed.
    std::vector<Operand<Acc>> ops(in.size());
    for (size_t i = 0; i < in.size(); ++i) {
      const Tensor& t = *in[i];
      std::vector<int64_t> strides(t.rank(), 1);
      for (size_t d = t.rank(); d-- > 1;) strides[d - 1] = strides[d] * t.dim(d);
      std::vector<int> distinct;
      std::vector<int64_t> dim_of, stride_of;
      for (size_t d = 0; d < labels[i].size(); ++d) {
        const int l = labels[i][d];
        auto it = std::find(distinct.begin(), distinct.end(), l);
        if (it == distinct.end()) {
          distinct.push_back(l);
          dim_of.push_back(t.dim(d));
          stride_of.push_back(strides[d]);
        } else {
          const size_t k = it - distinct.begin();
          RETURN_ERROR_IF(dim_of[k] != t.dim(d), INVALID_ARGUMENT, ctx.node().Describe(), ": equation '", equation_,
                          "': input ", i, " repeats a label over dimensions of sizes ", dim_of[k], " and ", t.dim(d));
          stride_of[k] += strides[d];
        }
      }
      Operand<Acc>& op = ops[i];
      Shape red_dims;
      std::vector<int64_t> out_strides, red_strides;
      for (size_t k = 0; k < distinct.size(); ++k) {
        const int l = distinct[k];
        if (in_output[l] || uses[l] > 1) {
          op.labels.push_back(l);
          op.dims.push_back(dim_of[k]);
          out_strides.push_back(stride_of[k]);
        } else {
          red_dims.push_back(dim_of[k]);
          red_strides.push_back(stride_of[k]);
        }
      }
      if constexpr (std::is_same_v<T, Acc>) {
        if (red_dims.empty() && distinct.size() == labels[i].size()) {  // no diagonal, nothing to sum: use as is
          op.borrowed = t.data<T>();
          continue;
        }
      }
      op.owned.resize(static_cast<size_t>(ShapeSize(op.dims)));
      StridedSum<T, Acc, Acc>(t.data<T>(), op.dims, out_strides, red_dims, red_strides, op.owned.data(),
                              ctx.num_threads());
    }

    // 2. Contract left to right.
    Operand<Acc> cur = std::move(ops[0]);
    for (size_t i = 1; i < ops.size(); ++i) {
      // Labels needed after this step: the output's and those of operands not yet contracted.
      std::vector<bool> keep = in_output;
      for (size_t j = i + 1; j < ops.size(); ++j)
        for (int l : ops[j].labels) keep[l] = true;
      auto next = Contract(cur, ops[i], keep, size, ctx.num_threads());
      if (!next.ok()) return next.status().WithContext(ctx.node().Describe() + ": equation '" + equation_ + "'");
      cur = std::move(next).value();
    }

    // 3. Sum what the output does not use and permute into the output order.
    std::vector<int64_t> cur_strides(cur.dims.size(), 1);
    for (size_t d = cur.dims.size(); d-- > 1;) cur_strides[d - 1] = cur_strides[d] * cur.dims[d];
    std::vector<int64_t> out_strides;
    for (int l : out_labels) {
      auto it = std::find(cur.labels.begin(), cur.labels.end(), l);
      if (it == cur.labels.end()) return ctx.Error(ErrorCode::FAIL, "internal error: lost output label");
      const size_t d = it - cur.labels.begin();
      out_strides.push_back(cur.dims[d] == 1 ? 0 : cur_strides[d]);
    }
    Shape red_dims;
    std::vector<int64_t> red_strides;
    for (size_t d = 0; d < cur.labels.size(); ++d) {
      if (!in_output[cur.labels[d]]) {
        red_dims.push_back(cur.dims[d]);
        red_strides.push_back(cur_strides[d]);
      }
    }
    StridedSum<Acc, T, Acc>(cur.data(), out_shape, out_strides, red_dims, red_strides, y->data<T>(),
                            ctx.num_threads());
    return Status::OK();
  }

  // Sums the labels `priv` out of o (keeping the order of the others).
  template <typename Acc>
  static Operand<Acc> SumOut(const Operand<Acc>& o, const std::vector<int>& priv, int num_threads) {
    std::vector<int64_t> strides(o.dims.size(), 1);
    for (size_t d = o.dims.size(); d-- > 1;) strides[d - 1] = strides[d] * o.dims[d];
    Operand<Acc> r;
    Shape red_dims;
    std::vector<int64_t> st, red_st;
    for (size_t d = 0; d < o.labels.size(); ++d) {
      if (std::find(priv.begin(), priv.end(), o.labels[d]) != priv.end()) {
        red_dims.push_back(o.dims[d]);
        red_st.push_back(strides[d]);
      } else {
        r.labels.push_back(o.labels[d]);
        r.dims.push_back(o.dims[d]);
        st.push_back(strides[d]);
      }
    }
    r.owned.resize(static_cast<size_t>(ShapeSize(r.dims)));
    StridedSum<Acc, Acc, Acc>(o.data(), r.dims, st, red_dims, red_st, r.owned.data(), num_threads);
    return r;
  }

  // A and B over their labels -> result over (batch, A-only, B-only) labels, summing the shared labels that
  // `keep` does not need. Labels of one operand that neither the other nor `keep` uses are summed first.
  // Each operand is used in place when its layout already is [batch, rows, k] or [batch, k, rows] (the matrix
  // product takes a transposition flag); otherwise it is copied into [batch, rows, k] / [batch, k, cols].
  template <typename Acc>
  static StatusOr<Operand<Acc>> Contract(const Operand<Acc>& a_in, const Operand<Acc>& b_in,
                                         const std::vector<bool>& keep, const std::vector<int64_t>& size,
                                         int num_threads) {
    auto has = [](const Operand<Acc>& o, int l) { return std::find(o.labels.begin(), o.labels.end(), l) != o.labels.end(); };
    std::vector<int> a_private, b_private;
    for (int l : a_in.labels)
      if (!has(b_in, l) && !keep[l]) a_private.push_back(l);
    for (int l : b_in.labels)
      if (!has(a_in, l) && !keep[l]) b_private.push_back(l);
    Operand<Acc> a_summed, b_summed;
    if (!a_private.empty()) a_summed = SumOut(a_in, a_private, num_threads);
    if (!b_private.empty()) b_summed = SumOut(b_in, b_private, num_threads);
    const Operand<Acc>& a = a_private.empty() ? a_in : a_summed;
    const Operand<Acc>& b = b_private.empty() ? b_in : b_summed;

    std::vector<int> batch, rows, cols, inner;
    for (int l : a.labels) {
      if (has(b, l)) (keep[l] ? batch : inner).push_back(l);
      else rows.push_back(l);
    }
    for (int l : b.labels)
      if (!has(a, l)) cols.push_back(l);
    // Intermediates can outgrow every input and the output (an outer product summed later): bound them.
    auto approx = [&](std::initializer_list<const std::vector<int>*> groups) {
      double p = 1;
      for (const auto* g : groups)
        for (int l : *g) p *= static_cast<double>(size[l]);
      return p;
    };
    constexpr double kMaxIntermediate = 4294967296.0;  // elements
    for (double n : {approx({&batch, &rows, &cols}), approx({&batch, &rows, &inner}), approx({&batch, &inner, &cols})}) {
      if (n > kMaxIntermediate)
        return MakeStatus(ErrorCode::FAIL, "an intermediate of the contraction would hold ", n,
                          " elements (limit 2^32); reorder the operands");
    }
    auto prod = [&](const std::vector<int>& g) {
      int64_t p = 1;
      for (int l : g) p *= size[l];
      return p;
    };
    const int64_t nb = prod(batch), M = prod(rows), N = prod(cols), K = prod(inner);
    auto concat = [](std::initializer_list<const std::vector<int>*> groups) {
      std::vector<int> v;
      for (const auto* g : groups) v.insert(v.end(), g->begin(), g->end());
      return v;
    };
    auto full_size = [&](const Operand<Acc>& o) {  // no dimension broadcasts
      for (size_t d = 0; d < o.labels.size(); ++d)
        if (o.dims[d] != size[o.labels[d]]) return false;
      return true;
    };
    // Copies o into the concatenation of label groups (sizes global; size-1 dims broadcast with stride 0).
    auto layout = [&](const Operand<Acc>& o, std::initializer_list<const std::vector<int>*> groups) {
      std::vector<int64_t> strides(o.dims.size(), 1);
      for (size_t d = o.dims.size(); d-- > 1;) strides[d - 1] = strides[d] * o.dims[d];
      Shape dims;
      std::vector<int64_t> st;
      for (int l : concat(groups)) {
        const size_t d = std::find(o.labels.begin(), o.labels.end(), l) - o.labels.begin();
        dims.push_back(size[l]);
        st.push_back(o.dims[d] == 1 ? 0 : strides[d]);
      }
      std::vector<Acc> out(static_cast<size_t>(ShapeSize(dims)));
      StridedSum<Acc, Acc, Acc>(o.data(), dims, st, {}, {}, out.data(), num_threads);
      return out;
    };
    std::vector<Acc> a_copy, b_copy;
    const Acc* A = a.data();
    const Acc* B = b.data();
    bool trans_a = false, trans_b = false;
    if (full_size(a) && a.labels == concat({&batch, &rows, &inner})) {
    } else if (full_size(a) && a.labels == concat({&batch, &inner, &rows})) {
      trans_a = true;
    } else {
      a_copy = layout(a, {&batch, &rows, &inner});
      A = a_copy.data();
    }
    if (full_size(b) && b.labels == concat({&batch, &inner, &cols})) {
    } else if (full_size(b) && b.labels == concat({&batch, &cols, &inner})) {
      trans_b = true;
    } else {
      b_copy = layout(b, {&batch, &inner, &cols});
      B = b_copy.data();
    }
    Operand<Acc> r;
    r.labels = concat({&batch, &rows, &cols});
    for (int l : r.labels) r.dims.push_back(size[l]);
    r.owned.assign(static_cast<size_t>(nb * M * N), Acc(0));
    if (M == 0 || N == 0 || K == 0) return r;
    RETURN_IF_ERROR(BatchedGemm(nb, M, N, K, A, trans_a, B, trans_b, r.owned.data(), num_threads));
    return r;
  }

  // C[b] = op(A[b]) * op(B[b]) for row-major M x K / K x M (trans) A and K x N / N x K (trans) B; C zeroed.
  template <typename Acc>
  static Status BatchedGemm(int64_t nb, int64_t M, int64_t N, int64_t K, const Acc* A, bool trans_a, const Acc* B,
                            bool trans_b, Acc* C, int num_threads) {
    if constexpr (std::is_same_v<Acc, float>) {
      // oneDNN's GEMM; it threads itself, so batches run one after another unless they are many and small.
      auto one = [&](int64_t b) {
        return dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, 1.0f, A + b * M * K, trans_a ? M : K,
                          B + b * K * N, trans_b ? K : N, 0.0f, C + b * M * N, N);
      };
      const double work = static_cast<double>(M) * N * K;
      if (nb > 1 && work < 262144.0) {
        std::vector<int> failed(static_cast<size_t>(nb), 0);
        ParallelFor(num_threads, nb, work, [&](int64_t begin, int64_t end) {
          for (int64_t b = begin; b < end; ++b) failed[b] = one(b) != dnnl_success;
        });
        for (int f : failed)
          if (f) return MakeStatus(ErrorCode::FAIL, "oneDNN sgemm failed");
        return Status::OK();
      }
      for (int64_t b = 0; b < nb; ++b)
        if (one(b) != dnnl_success) return MakeStatus(ErrorCode::FAIL, "oneDNN sgemm failed");
      return Status::OK();
    } else {
      ParallelFor(num_threads, nb * M, static_cast<double>(K) * N + 1, [&](int64_t begin, int64_t end) {
        for (int64_t bm = begin; bm < end; ++bm) {
          const int64_t bi = bm / M, m = bm % M;
          const Acc* amat = A + bi * M * K;
          const Acc* bmat = B + bi * K * N;
          Acc* crow = C + bm * N;
          for (int64_t k = 0; k < K; ++k) {
            const Acc av = trans_a ? amat[k * M + m] : amat[m * K + k];
            if (trans_b) {
              for (int64_t n = 0; n < N; ++n) crow[n] += av * bmat[n * K + k];
            } else {
              const Acc* brow = bmat + k * N;
#pragma omp simd
              for (int64_t n = 0; n < N; ++n) crow[n] += av * brow[n];
            }
          }
        }
      });
      return Status::OK();
    }
  }

  std::string equation_;
  bool explicit_ = false;
  std::vector<std::vector<int>> inputs_;
  std::vector<int> output_;
};

}  // namespace

void RegisterEinsumKernels(KernelRegistry& r) { r.Register("", "Einsum", EinsumKernel::Create, 12); }

}  // namespace misc
}  // namespace epctx
