// RNN, GRU and LSTM (opsets 1..14+). One engine serves the three cells: the input projection X*W^T of every
// time step is computed up front as one GEMM, then each step adds H*R^T for the active batch rows and applies the
// cell's gate equations. float16/bfloat16 compute in float, double in double. Buffers are local to Compute, so
// one kernel may run on several threads at once.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "providers/cpu/kernel.h"

namespace epctx {
namespace {

enum class CellType { kRnn, kGru, kLstm };

int GatesPerCell(CellType c) { return c == CellType::kRnn ? 1 : c == CellType::kGru ? 3 : 4; }
int ActivationsPerDirection(CellType c) { return c == CellType::kRnn ? 1 : c == CellType::kGru ? 2 : 3; }

// ---------------------------------------------------------------------------------------------------------------
// Activations. The table is the one place names, alpha/beta use and defaults are written down.

enum class ActKind { kRelu, kTanh, kSigmoid, kAffine, kLeakyRelu, kThresholdedRelu, kScaledTanh, kHardSigmoid, kElu,
                     kSoftsign, kSoftplus };

struct ActivationSpec {
  const char* name;
  ActKind kind;
  bool uses_alpha;
  float default_alpha;
  bool uses_beta;
  float default_beta;
};

constexpr ActivationSpec kActivationTable[] = {
    {"Relu", ActKind::kRelu, false, 0.f, false, 0.f},
    {"Tanh", ActKind::kTanh, false, 0.f, false, 0.f},
    {"Sigmoid", ActKind::kSigmoid, false, 0.f, false, 0.f},
    {"Affine", ActKind::kAffine, true, 1.f, true, 0.f},
    {"LeakyRelu", ActKind::kLeakyRelu, true, 0.01f, false, 0.f},
    {"ThresholdedRelu", ActKind::kThresholdedRelu, true, 1.f, false, 0.f},
    {"ScaledTanh", ActKind::kScaledTanh, true, 1.f, true, 1.f},
    {"HardSigmoid", ActKind::kHardSigmoid, true, 0.2f, true, 0.5f},
    {"Elu", ActKind::kElu, true, 1.f, false, 0.f},
    {"Softsign", ActKind::kSoftsign, false, 0.f, false, 0.f},
    {"Softplus", ActKind::kSoftplus, false, 0.f, false, 0.f},
};

struct Activation {
  ActKind kind = ActKind::kTanh;
  float alpha = 0.f;
  float beta = 0.f;
};

bool EqualsIgnoreCase(const std::string& a, const char* b) {
  size_t n = a.size();
  for (size_t i = 0; i < n; ++i) {
    if (b[i] == '\0') return false;
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  }
  return b[n] == '\0';
}

// Applies `a` in place to x[0..n). One switch per call; the loops inside are plain so they can vectorize.
template <typename T>
void ApplyActivation(const Activation& a, T* x, int64_t n) {
  const T alpha = static_cast<T>(a.alpha), beta = static_cast<T>(a.beta);
  switch (a.kind) {
    case ActKind::kRelu:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] > T(0) ? x[i] : T(0);
      break;
    case ActKind::kTanh:
      for (int64_t i = 0; i < n; ++i) x[i] = std::tanh(x[i]);
      break;
    case ActKind::kSigmoid:
      for (int64_t i = 0; i < n; ++i) x[i] = T(1) / (T(1) + std::exp(-x[i]));
      break;
    case ActKind::kAffine:
      for (int64_t i = 0; i < n; ++i) x[i] = alpha * x[i] + beta;
      break;
    case ActKind::kLeakyRelu:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] >= T(0) ? x[i] : alpha * x[i];
      break;
    case ActKind::kThresholdedRelu:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] > alpha ? x[i] : T(0);
      break;
    case ActKind::kScaledTanh:
      for (int64_t i = 0; i < n; ++i) x[i] = alpha * std::tanh(beta * x[i]);
      break;
    case ActKind::kHardSigmoid:
      for (int64_t i = 0; i < n; ++i) x[i] = std::min(T(1), std::max(T(0), alpha * x[i] + beta));
      break;
    case ActKind::kElu:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] >= T(0) ? x[i] : alpha * (std::exp(x[i]) - T(1));
      break;
    case ActKind::kSoftsign:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] / (T(1) + std::abs(x[i]));
      break;
    case ActKind::kSoftplus:  // log(1 + e^x) without overflow for large x
      for (int64_t i = 0; i < n; ++i)
        x[i] = x[i] > T(0) ? x[i] + std::log1p(std::exp(-x[i])) : std::log1p(std::exp(x[i]));
      break;
  }
}

template <typename T>
void Clip(T* x, int64_t n, T limit) {
  for (int64_t i = 0; i < n; ++i) x[i] = std::min(limit, std::max(-limit, x[i]));
}

// ---------------------------------------------------------------------------------------------------------------
// Small GEMM: C[m, :] += sum_k A[m, k] * Bt[k, :]. Bt is the transposed weight (row-major [K, N]) so the inner loop
// is an axpy over contiguous memory, which g++ vectorizes without reassociation flags.

template <typename T>
void GemmRowAcc(const T* a, int64_t k_size, const T* bt, int64_t ldb, int64_t n, T* c) {
  for (int64_t k = 0; k < k_size; ++k) {
    const T av = a[k];
    const T* b = bt + k * ldb;
    for (int64_t j = 0; j < n; ++j) c[j] += av * b[j];
  }
}

// Transposes src [rows, cols] into dst [cols, rows].
template <typename T>
void Transpose(const T* src, int64_t rows, int64_t cols, T* dst) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[c * rows + r] = src[r * cols + c];
}

// Converts a tensor of any floating type into compute type A.
template <typename A>
Status ToCompute(const Tensor& t, const char* what, std::vector<A>* out) {
  const int64_t n = t.NumElements();
  out->resize(static_cast<size_t>(n));
  return DispatchType<float, double, Float16, BFloat16>(t.dtype(), what, [&](auto tag) {
    using S = decltype(tag);
    const S* src = t.data<S>();
    for (int64_t i = 0; i < n; ++i) (*out)[i] = static_cast<A>(src[i]);
    return Status::OK();
  });
}

template <typename D, typename A>
D FromCompute(A v) {
  if constexpr (std::is_same_v<D, Float16> || std::is_same_v<D, BFloat16>) {
    return D(static_cast<float>(v));
  } else {
    return static_cast<D>(v);
  }
}

Status FromComputeTensor(const std::vector<float>& src, Tensor* dst) {
  return DispatchType<float, Float16, BFloat16>(dst->dtype(), "RNN output", [&](auto tag) {
    using D = decltype(tag);
    D* d = dst->data<D>();
    for (size_t i = 0; i < src.size(); ++i) d[i] = FromCompute<D>(src[i]);
    return Status::OK();
  });
}
Status FromComputeTensor(const std::vector<double>& src, Tensor* dst) {
  double* d = dst->data<double>();
  std::copy(src.begin(), src.end(), d);
  return Status::OK();
}

// ---------------------------------------------------------------------------------------------------------------

struct RecurrentConfig {
  CellType cell = CellType::kRnn;
  int64_t hidden = 0;
  int num_directions = 1;
  bool reverse = false;  // only for num_directions == 1
  std::vector<Activation> activations;  // ActivationsPerDirection(cell) per direction
  bool has_clip = false;
  float clip = 0.f;
  bool linear_before_reset = false;  // GRU
  bool input_forget = false;         // LSTM
  int layout = 0;
};

class RecurrentKernel final : public OpKernel {
 public:
  explicit RecurrentKernel(RecurrentConfig cfg) : cfg_(std::move(cfg)) {}

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    if (!x) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input X is missing");
    if (x->dtype() == DataType::kDouble) return Run<double>(ctx);
    return Run<float>(ctx);
  }

 private:
  template <typename A>
  Status Run(KernelContext& ctx) const;

  RecurrentConfig cfg_;
};

template <typename A>
Status RecurrentKernel::Run(KernelContext& ctx) const {
  const Tensor& x = *ctx.Input(0);
  const Tensor* w = ctx.Input(1);
  const Tensor* r = ctx.Input(2);
  const Tensor* b = ctx.Input(3);
  const Tensor* seq_lens_t = ctx.Input(4);
  const Tensor* init_h = ctx.Input(5);
  const Tensor* init_c = cfg_.cell == CellType::kLstm ? ctx.Input(6) : nullptr;
  const Tensor* p = cfg_.cell == CellType::kLstm ? ctx.Input(7) : nullptr;

  const int64_t hs = cfg_.hidden, nd = cfg_.num_directions, gates = GatesPerCell(cfg_.cell);
  const int64_t gh = gates * hs;
  const int layout = cfg_.layout;
  auto shape_error = [&](const char* name, const Tensor& t, const Shape& want) {
    return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input ", name, " has shape ", ShapeToString(t.shape()),
                     ", expected ", ShapeToString(want));
  };

  if (x.rank() != 3)
    return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input X must have rank 3, got shape ", ShapeToString(x.shape()));
  const int64_t seq = layout == 0 ? x.dim(0) : x.dim(1);
  const int64_t batch = layout == 0 ? x.dim(1) : x.dim(0);
  const int64_t in_size = x.dim(2);
  if (!w || !r) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "inputs W and R are required");
  for (const Tensor* t : {w, r, b, init_h, init_c, p})
    if (t && t->dtype() != x.dtype())
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "all float inputs must have X's type ", DataTypeName(x.dtype()),
                       ", got ", DataTypeName(t->dtype()));
  if (w->shape() != Shape{nd, gh, in_size}) return shape_error("W", *w, {nd, gh, in_size});
  if (r->shape() != Shape{nd, gh, hs}) return shape_error("R", *r, {nd, gh, hs});
  if (b && b->shape() != Shape{nd, 2 * gh}) return shape_error("B", *b, {nd, 2 * gh});
  const Shape state_shape = layout == 0 ? Shape{nd, batch, hs} : Shape{batch, nd, hs};
  if (init_h && init_h->shape() != state_shape) return shape_error("initial_h", *init_h, state_shape);
  if (init_c && init_c->shape() != state_shape) return shape_error("initial_c", *init_c, state_shape);
  if (p && p->shape() != Shape{nd, 3 * hs}) return shape_error("P", *p, {nd, 3 * hs});

  // Scratch sizes come from X's dims, which may be large even when X is empty (input_size 0): bound them before
  // allocating so a hostile shape gives a status, not bad_alloc.
  constexpr int64_t kMaxScratchElements = int64_t{1} << 32;
  for (const Shape& s : {Shape{seq, batch, gh}, Shape{seq, nd, batch, hs}, Shape{in_size, gh}}) {
    const int64_t n = ShapeSize(s);
    if (n < 0 || n > kMaxScratchElements)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "scratch of shape ", ShapeToString(s),
                       " is too large (X is ", ShapeToString(x.shape()), ", hidden_size ", hs, ")");
  }
  std::vector<int64_t> seq_lens(static_cast<size_t>(batch), seq);
  if (seq_lens_t) {
    if (seq_lens_t->shape() != Shape{batch}) return shape_error("sequence_lens", *seq_lens_t, {batch});
    for (int64_t i = 0; i < batch; ++i) {
      int64_t v;
      if (seq_lens_t->dtype() == DataType::kInt32) v = seq_lens_t->data<int32_t>()[i];
      else if (seq_lens_t->dtype() == DataType::kInt64) v = seq_lens_t->data<int64_t>()[i];
      else return ctx.Error(ErrorCode::INVALID_ARGUMENT, "sequence_lens must be int32, got ",
                            DataTypeName(seq_lens_t->dtype()));
      if (v < 0 || v > seq)
        return ctx.Error(ErrorCode::INVALID_ARGUMENT, "sequence_lens[", i, "] = ", v, " is outside [0, ", seq, "]");
      seq_lens[i] = v;
    }
  }

  // Everything in compute type, X reordered to [seq, batch, in].
  std::vector<A> xv, wv, rv, bv, hv, cv, pv;
  RETURN_IF_ERROR(ToCompute<A>(x, "RNN input X", &xv));
  if (layout == 1) {
    std::vector<A> tmp(xv.size());
    for (int64_t bi = 0; bi < batch; ++bi)
      for (int64_t t = 0; t < seq; ++t)
        std::copy_n(&xv[(bi * seq + t) * in_size], in_size, &tmp[(t * batch + bi) * in_size]);
    xv.swap(tmp);
  }
  RETURN_IF_ERROR(ToCompute<A>(*w, "RNN input W", &wv));
  RETURN_IF_ERROR(ToCompute<A>(*r, "RNN input R", &rv));
  if (b) RETURN_IF_ERROR(ToCompute<A>(*b, "RNN input B", &bv));
  if (p) RETURN_IF_ERROR(ToCompute<A>(*p, "RNN input P", &pv));
  // States as [nd, batch, hs].
  auto load_state = [&](const Tensor* t, std::vector<A>* out) -> Status {
    out->assign(static_cast<size_t>(nd * batch * hs), A(0));
    if (!t) return Status::OK();
    std::vector<A> raw;
    RETURN_IF_ERROR(ToCompute<A>(*t, "RNN initial state", &raw));
    for (int64_t d = 0; d < nd; ++d)
      for (int64_t bi = 0; bi < batch; ++bi) {
        int64_t src = layout == 0 ? (d * batch + bi) * hs : (bi * nd + d) * hs;
        std::copy_n(&raw[src], hs, &(*out)[(d * batch + bi) * hs]);
      }
    return Status::OK();
  };
  RETURN_IF_ERROR(load_state(init_h, &hv));
  if (cfg_.cell == CellType::kLstm) RETURN_IF_ERROR(load_state(init_c, &cv));

  const bool want_y = ctx.OutputRequested(0);
  std::vector<A> yv(want_y ? static_cast<size_t>(seq * nd * batch * hs) : 0, A(0));  // [seq, nd, batch, hs]

  const int per_dir = ActivationsPerDirection(cfg_.cell);
  const A clip = static_cast<A>(cfg_.clip);
  const int threads = ctx.num_threads();

  std::vector<A> wt(static_cast<size_t>(in_size * gh)), rt(static_cast<size_t>(hs * gh));
  std::vector<A> xw(static_cast<size_t>(seq * batch * gh));
  std::vector<A> g(static_cast<size_t>(batch * gh));
  std::vector<A> aux(static_cast<size_t>(batch * hs));  // GRU: r (.) H or H*Rh^T + Rbh
  std::vector<A> bias(static_cast<size_t>(gh));

  for (int64_t d = 0; d < nd; ++d) {
    const bool reverse = nd == 2 ? d == 1 : cfg_.reverse;
    const Activation* act = &cfg_.activations[static_cast<size_t>(d * per_dir)];
    Transpose(&wv[d * gh * in_size], gh, in_size, wt.data());
    Transpose(&rv[d * gh * hs], gh, hs, rt.data());
    const A* wb = b ? &bv[d * 2 * gh] : nullptr;
    const A* rb = b ? &bv[d * 2 * gh + gh] : nullptr;
    // Bias folded into the input projection. For GRU with linear_before_reset the recurrent bias of the h gate
    // stays inside r (.) (H*Rh^T + Rbh) and is applied per step.
    for (int64_t j = 0; j < gh; ++j) {
      A v = wb ? wb[j] + rb[j] : A(0);
      if (cfg_.cell == CellType::kGru && cfg_.linear_before_reset && j >= 2 * hs && wb) v = wb[j];
      bias[j] = v;
    }
    const A* rbh = (cfg_.cell == CellType::kGru && rb) ? rb + 2 * hs : nullptr;
    const A* pi = p ? &pv[d * 3 * hs] : nullptr;
    const A* po = p ? pi + hs : nullptr;
    const A* pf = p ? pi + 2 * hs : nullptr;

    // XW = X * W^T + bias for every (t, b).
    ParallelFor(threads, seq * batch, static_cast<double>(in_size * gh), [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        A* out = &xw[row * gh];
        std::copy(bias.begin(), bias.end(), out);
        GemmRowAcc(&xv[row * in_size], in_size, wt.data(), gh, gh, out);
      }
    });

    A* h = &hv[d * batch * hs];
    A* c = cfg_.cell == CellType::kLstm ? &cv[d * batch * hs] : nullptr;
    for (int64_t s = 0; s < seq; ++s) {
      ParallelFor(threads, batch, static_cast<double>(hs * gh + 20 * gh), [&](int64_t begin, int64_t end) {
        for (int64_t bi = begin; bi < end; ++bi) {
          const int64_t len = seq_lens[bi];
          if (s >= len) continue;  // finished: state stays, Y stays zero
          const int64_t t = reverse ? len - 1 - s : s;
          A* gr = &g[bi * gh];
          A* hb = h + bi * hs;
          std::copy_n(&xw[(t * batch + bi) * gh], gh, gr);
          switch (cfg_.cell) {
            case CellType::kRnn: {
              GemmRowAcc(hb, hs, rt.data(), gh, gh, gr);
              if (cfg_.has_clip) Clip(gr, hs, clip);
              ApplyActivation(act[0], gr, hs);
              std::copy_n(gr, hs, hb);
              break;
            }
            case CellType::kGru: {
              A* z = gr;
              A* rg = gr + hs;
              A* hh = gr + 2 * hs;
              GemmRowAcc(hb, hs, rt.data(), gh, 2 * hs, gr);  // z and r gates
              if (cfg_.has_clip) Clip(gr, 2 * hs, clip);
              ApplyActivation(act[0], gr, 2 * hs);
              A* tmp = &aux[bi * hs];
              if (cfg_.linear_before_reset) {
                for (int64_t j = 0; j < hs; ++j) tmp[j] = rbh ? rbh[j] : A(0);
                GemmRowAcc(hb, hs, rt.data() + 2 * hs, gh, hs, tmp);
                for (int64_t j = 0; j < hs; ++j) hh[j] += rg[j] * tmp[j];
              } else {
                for (int64_t j = 0; j < hs; ++j) tmp[j] = rg[j] * hb[j];
                GemmRowAcc(tmp, hs, rt.data() + 2 * hs, gh, hs, hh);
              }
              if (cfg_.has_clip) Clip(hh, hs, clip);
              ApplyActivation(act[1], hh, hs);
              for (int64_t j = 0; j < hs; ++j) hb[j] = (A(1) - z[j]) * hh[j] + z[j] * hb[j];
              break;
            }
            case CellType::kLstm: {
              A* ig = gr;
              A* og = gr + hs;
              A* fg = gr + 2 * hs;
              A* cg = gr + 3 * hs;
              A* cb = c + bi * hs;
              GemmRowAcc(hb, hs, rt.data(), gh, gh, gr);
              if (pi) {
                for (int64_t j = 0; j < hs; ++j) ig[j] += pi[j] * cb[j];
                for (int64_t j = 0; j < hs; ++j) fg[j] += pf[j] * cb[j];
              }
              if (cfg_.has_clip) {
                Clip(ig, hs, clip);
                Clip(fg, 2 * hs, clip);  // f and c, adjacent
              }
              ApplyActivation(act[0], ig, hs);
              if (cfg_.input_forget) {
                for (int64_t j = 0; j < hs; ++j) fg[j] = A(1) - ig[j];
              } else {
                ApplyActivation(act[0], fg, hs);
              }
              ApplyActivation(act[1], cg, hs);
              for (int64_t j = 0; j < hs; ++j) cb[j] = fg[j] * cb[j] + ig[j] * cg[j];
              if (po)
                for (int64_t j = 0; j < hs; ++j) og[j] += po[j] * cb[j];
              if (cfg_.has_clip) Clip(og, hs, clip);
              ApplyActivation(act[0], og, hs);
              A* hc = &aux[bi * hs];
              std::copy_n(cb, hs, hc);
              ApplyActivation(act[2], hc, hs);
              for (int64_t j = 0; j < hs; ++j) hb[j] = og[j] * hc[j];
              break;
            }
          }
          if (want_y) std::copy_n(hb, hs, &yv[((t * nd + d) * batch + bi) * hs]);
        }
      });
    }
  }

  if (want_y) {
    const Shape y_shape = layout == 0 ? Shape{seq, nd, batch, hs} : Shape{batch, seq, nd, hs};
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.dtype(), y_shape));
    if (layout == 1) {
      std::vector<A> tmp(yv.size());
      for (int64_t t = 0; t < seq; ++t)
        for (int64_t d = 0; d < nd; ++d)
          for (int64_t bi = 0; bi < batch; ++bi)
            std::copy_n(&yv[((t * nd + d) * batch + bi) * hs], hs, &tmp[((bi * seq + t) * nd + d) * hs]);
      yv.swap(tmp);
    }
    RETURN_IF_ERROR(FromComputeTensor(yv, y));
  }
  auto store_state = [&](size_t index, std::vector<A>& state) -> Status {
    if (!ctx.OutputRequested(index)) return Status::OK();
    ASSIGN_OR_RETURN(Tensor * out, ctx.Output(index, x.dtype(), state_shape));
    if (layout == 1) {
      std::vector<A> tmp(state.size());
      for (int64_t d = 0; d < nd; ++d)
        for (int64_t bi = 0; bi < batch; ++bi)
          std::copy_n(&state[(d * batch + bi) * hs], hs, &tmp[(bi * nd + d) * hs]);
      state.swap(tmp);
    }
    return FromComputeTensor(state, out);
  };
  RETURN_IF_ERROR(store_state(1, hv));
  if (cfg_.cell == CellType::kLstm) RETURN_IF_ERROR(store_state(2, cv));
  return Status::OK();
}

// Reads and validates the attributes shared by the three ops.
StatusOr<RecurrentConfig> ParseConfig(const KernelInfo& info, CellType cell) {
  RecurrentConfig cfg;
  cfg.cell = cell;
  ASSIGN_OR_RETURN(cfg.hidden, info.RequireInt("hidden_size"));
  if (cfg.hidden <= 0)
    return info.Error(ErrorCode::INVALID_GRAPH, "hidden_size must be positive, got ", cfg.hidden);
  const std::string direction = info.GetString("direction", "forward");
  if (direction == "forward") {
    cfg.num_directions = 1;
  } else if (direction == "reverse") {
    cfg.num_directions = 1;
    cfg.reverse = true;
  } else if (direction == "bidirectional") {
    cfg.num_directions = 2;
  } else {
    return info.Error(ErrorCode::INVALID_GRAPH, "direction '", direction,
                      "' is not one of forward, reverse, bidirectional");
  }
  cfg.layout = static_cast<int>(info.opset() >= 14 ? info.GetInt("layout", 0) : 0);
  if (cfg.layout != 0 && cfg.layout != 1)
    return info.Error(ErrorCode::INVALID_GRAPH, "layout must be 0 or 1, got ", cfg.layout);
  if (info.HasAttr("clip")) {
    cfg.has_clip = true;
    cfg.clip = info.GetFloat("clip", 0.f);
    if (!(cfg.clip > 0.f))
      return info.Error(ErrorCode::INVALID_GRAPH, "clip must be a positive threshold, got ", cfg.clip);
  }
  cfg.linear_before_reset = cell == CellType::kGru && info.GetInt("linear_before_reset", 0) != 0;
  cfg.input_forget = cell == CellType::kLstm && info.GetInt("input_forget", 0) != 0;

  const int per_dir = ActivationsPerDirection(cell);
  const size_t needed = static_cast<size_t>(per_dir * cfg.num_directions);
  std::vector<std::string> names = info.GetStrings("activations");
  if (names.empty()) {
    if (cell == CellType::kRnn) names = {"Tanh"};
    else if (cell == CellType::kGru) names = {"Sigmoid", "Tanh"};
    else names = {"Sigmoid", "Tanh", "Tanh"};
  }
  if (names.size() == static_cast<size_t>(per_dir) && needed > names.size()) {
    std::vector<std::string> twice = names;
    twice.insert(twice.end(), names.begin(), names.end());
    names = twice;
  }
  // RNN's schema default lists two entries; a forward RNN uses the first.
  if (names.size() < needed || (names.size() > needed && !(cell == CellType::kRnn && names.size() == 2)))
    return info.Error(ErrorCode::INVALID_GRAPH, "activations lists ", names.size(), " functions, expected ", needed);
  const std::vector<float> alphas = info.GetFloats("activation_alpha");
  const std::vector<float> betas = info.GetFloats("activation_beta");
  size_t next_alpha = 0, next_beta = 0;
  for (size_t i = 0; i < needed; ++i) {
    const ActivationSpec* spec = nullptr;
    for (const ActivationSpec& s : kActivationTable)
      if (EqualsIgnoreCase(names[i], s.name)) spec = &s;
    if (!spec) return info.Error(ErrorCode::INVALID_GRAPH, "unsupported activation '", names[i], "'");
    Activation a;
    a.kind = spec->kind;
    a.alpha = spec->default_alpha;
    a.beta = spec->default_beta;
    // alpha/beta values are consumed in order by the activations that take them.
    if (spec->uses_alpha && next_alpha < alphas.size()) a.alpha = alphas[next_alpha++];
    if (spec->uses_beta && next_beta < betas.size()) a.beta = betas[next_beta++];
    cfg.activations.push_back(a);
  }
  return cfg;
}

KernelFactory RecurrentFactory(CellType cell) {
  return [cell](const KernelInfo& info) -> StatusOr<std::unique_ptr<OpKernel>> {
    ASSIGN_OR_RETURN(RecurrentConfig cfg, ParseConfig(info, cell));
    return std::unique_ptr<OpKernel>(new RecurrentKernel(std::move(cfg)));
  };
}

}  // namespace

void RegisterRecurrentKernels(KernelRegistry& r) {
  r.Register("", "RNN", RecurrentFactory(CellType::kRnn));
  r.Register("", "GRU", RecurrentFactory(CellType::kGru));
  r.Register("", "LSTM", RecurrentFactory(CellType::kLstm));
}

}  // namespace epctx
