// RNN, GRU and LSTM (opsets 1..14+). One engine serves the three cells: the input projection X*W^T of every
// time step is computed up front as one GEMM, then each step computes H*R^T for all batch rows and applies the
// cell's gate equations. float16/bfloat16 compute in float, double in double.
//
// When W and R are constant initializers (the usual case) they are converted to float and packed once, at kernel
// creation, for oneDNN matmul primitives (built per problem size and cached), so a run only executes: one matmul
// for XW of all steps and directions, one per step and direction for H*R^T (two for GRU without
// linear_before_reset). Otherwise (double, weights computed at run time, shapes oneDNN refuses) plain loops over
// transposed copies of W and R do the same work. Per-run buffers come from the thread's scratch, so one kernel may
// run on several threads at once.
#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "providers/cpu/kernel.h"
#include "providers/common/fast_math.h"
#include "providers/cpu/kernels/nn_common.h"

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

// float sigmoid and tanh without libm calls (fast_math.h), so the loops vectorize: glibc's tanhf alone took a third
// of a Silero VAD LSTM step.
void FastSigmoid(float* x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) x[i] = SigmoidF(x[i]);
}

void FastTanh(float* x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) x[i] = TanhF(x[i]);
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
      if constexpr (std::is_same_v<T, float>) {
        FastTanh(x, n);
        break;
      }
      for (int64_t i = 0; i < n; ++i) x[i] = std::tanh(x[i]);
      break;
    case ActKind::kSigmoid:
      if constexpr (std::is_same_v<T, float>) {
        FastSigmoid(x, n);
        break;
      }
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

// Copies a tensor of any floating type into dst (NumElements values) as compute type A.
template <typename A>
Status ConvertInto(const Tensor& t, const char* what, A* dst) {
  const int64_t n = t.NumElements();
  return DispatchType<float, double, Float16, BFloat16>(t.dtype(), what, [&](auto tag) {
    using S = decltype(tag);
    const S* src = t.data<S>();
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<A>(src[i]);
    return Status::OK();
  });
}

// Converts a tensor of any floating type into compute type A.
template <typename A>
Status ToCompute(const Tensor& t, const char* what, std::vector<A>* out) {
  out->resize(static_cast<size_t>(t.NumElements()));
  return ConvertInto<A>(t, what, out->data());
}

template <typename D, typename A>
D FromCompute(A v) {
  if constexpr (std::is_same_v<D, Float16> || std::is_same_v<D, BFloat16>) {
    return D(static_cast<float>(v));
  } else {
    return static_cast<D>(v);
  }
}

// Writes n compute values into dst (of any floating type, n elements).
template <typename A>
Status StoreCompute(const A* src, Tensor* dst) {
  const int64_t n = dst->NumElements();
  return DispatchType<float, double, Float16, BFloat16>(dst->dtype(), "RNN output", [&](auto tag) {
    using D = decltype(tag);
    D* d = dst->data<D>();
    for (int64_t i = 0; i < n; ++i) d[i] = FromCompute<D>(src[i]);
    return Status::OK();
  });
}

template <typename A>
constexpr DataType ComputeType() {
  return std::is_same_v<A, double> ? DataType::kDouble : DataType::kFloat;
}

bool IsFloatLike(DataType t) {
  return t == DataType::kFloat || t == DataType::kFloat16 || t == DataType::kBFloat16;
}

// Runs fn(begin, end) over [0, n) rows; a single row (the streaming case: batch 1) is called directly, without the
// std::function ParallelFor takes.
template <typename Fn>
void ForRows(int threads, int64_t n, double cost_per_row, Fn&& fn) {
  if (n <= 0) return;
  if (n == 1 || threads <= 1) {
    fn(int64_t{0}, n);
    return;
  }
  ParallelFor(threads, n, cost_per_row, fn);
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

  int64_t gates_hidden() const { return GatesPerCell(cell) * hidden; }
  // GRU without linear_before_reset needs r before it can multiply by the h gate's weights, so its recurrent product
  // is split in two: H * [Rz; Rr]^T first, then (r (.) H) * Rh^T.
  bool split_gru() const { return cell == CellType::kGru && !linear_before_reset; }
  // Columns of the first recurrent product.
  int64_t recurrent_cols() const { return split_gru() ? 2 * hidden : gates_hidden(); }
};

using PackCache = std::vector<std::pair<dnnl::memory::desc, dnnl::memory>>;

// W and R in float when both are constant initializers of a float type, and their copies packed in the layouts the
// primitives chose (one per layout; guarded by the kernel's mutex).
struct ConstantWeights {
  Tensor w, r;  // [nd, gates * hidden, input], [nd, gates * hidden, hidden]
  PackCache w_packed;                           // W^T of all directions: [input, nd * gates * hidden]
  std::vector<PackCache> r_packed, rh_packed;   // per direction: R^T (or [Rz; Rr]^T), and Rh^T for split GRU
};

// The oneDNN primitives of one problem size (rows of X, batch) with the packed weights they read. Immutable once
// built, so runs on several threads share it.
struct RecurrentPlan {
  dnnl::matmul x_prim;   // X [rows, input] * W^T + bias -> [rows, nd * gates * hidden], all time steps at once
  dnnl::matmul h_prim;   // H [batch, hidden] * R^T -> [batch, recurrent_cols], one time step
  dnnl::matmul h2_prim;  // split GRU: (r (.) H) [batch, hidden] * Rh^T -> [batch, hidden]
  dnnl::memory::desc x_src, x_bias, x_dst, h_src, h_dst, h2_dst;
  dnnl::memory w;
  std::vector<dnnl::memory> r, rh;  // per direction
  size_t scratchpad_bytes = 0;      // the largest of the three primitives' (they run one after another)
};

class RecurrentKernel final : public OpKernel {
 public:
  RecurrentKernel(RecurrentConfig cfg, const KernelInfo& info) : cfg_(std::move(cfg)) { PrepareWeights(info); }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    if (!x) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input X is missing");
    if (x->dtype() == DataType::kDouble) return Run<double>(ctx);
    if (!IsFloatLike(x->dtype()))
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input X must be a float type, got ", DataTypeName(x->dtype()));
    return Run<float>(ctx);
  }

 private:
  void PrepareWeights(const KernelInfo& info);
  // nullptr when there are no constant weights or oneDNN refuses the problem (the plain loops run instead).
  std::shared_ptr<const RecurrentPlan> GetPlan(int64_t rows, int64_t batch, int threads) const;
  void BuildPlan(int64_t rows, int64_t batch, RecurrentPlan* plan) const;  // throws dnnl::error
  template <typename A>
  Status Run(KernelContext& ctx) const;

  RecurrentConfig cfg_;
  std::unique_ptr<ConstantWeights> weights_;  // null: W and R are converted and transposed on every run
  int64_t input_size_ = 0;                    // W's last dim when weights_ is set
  mutable std::mutex mu_;
  mutable std::map<std::array<int64_t, 3>, std::shared_ptr<const RecurrentPlan>> plans_;
};

void RecurrentKernel::PrepareWeights(const KernelInfo& info) {
  const Tensor* w = info.ConstantInput(1);
  const Tensor* r = info.ConstantInput(2);
  const int64_t nd = cfg_.num_directions, gh = cfg_.gates_hidden(), hs = cfg_.hidden;
  // Anything unusual (shapes that do not match the attributes, an empty input size) is left to the plain loops,
  // which validate every run and name the problem.
  if (!w || !r || !IsFloatLike(w->dtype()) || w->dtype() != r->dtype() || w->rank() != 3 || w->dim(0) != nd ||
      w->dim(1) != gh || w->dim(2) <= 0 || r->shape() != Shape{nd, gh, hs})
    return;
  auto wf = nn::AsFloat(*w);
  auto rf = nn::AsFloat(*r);
  if (!wf.ok() || !rf.ok()) return;
  auto cw = std::make_unique<ConstantWeights>();
  cw->w = std::move(wf).value();
  cw->r = std::move(rf).value();
  cw->r_packed.resize(static_cast<size_t>(nd));
  cw->rh_packed.resize(static_cast<size_t>(nd));
  weights_ = std::move(cw);
  input_size_ = w->dim(2);
  // Build the primitives (and pack the weights) for the declared shape now, so the first run only executes them.
  int64_t seq = 1, batch = 1;
  if (const ValueType* t = info.InputType(0); t && t->has_shape && t->dims.size() == 3) {
    const Dim& ds = t->dims[cfg_.layout == 0 ? 0 : 1];
    const Dim& db = t->dims[cfg_.layout == 0 ? 1 : 0];
    if (ds.known() && ds.value > 0) seq = ds.value;
    if (db.known() && db.value > 0) batch = db.value;
  }
  GetPlan(seq * batch, batch, info.num_threads());
}

std::shared_ptr<const RecurrentPlan> RecurrentKernel::GetPlan(int64_t rows, int64_t batch, int threads) const {
  if (!weights_) return nullptr;
  const std::array<int64_t, 3> key{rows, batch, threads};
  std::lock_guard<std::mutex> lock(mu_);
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  auto plan = std::make_shared<RecurrentPlan>();
  nn::ScopedOmpThreads omp(threads);
  Status st = nn::DnnlCall("recurrent setup", [&] { BuildPlan(rows, batch, plan.get()); });
  std::shared_ptr<const RecurrentPlan> result = st.ok() ? std::move(plan) : nullptr;
  if (plans_.size() >= nn::kMaxCachedShapes) plans_.clear();
  plans_[key] = result;
  return result;
}

void RecurrentKernel::BuildPlan(int64_t rows, int64_t batch, RecurrentPlan* plan) const {
  using dnnl::memory;
  const dnnl::engine& eng = nn::CpuEngine();
  const auto f32 = memory::data_type::f32;
  const int64_t hs = cfg_.hidden, nd = cfg_.num_directions, gh = cfg_.gates_hidden(), in = input_size_;
  const int64_t ncols = cfg_.recurrent_cols();
  const dnnl::primitive_attr attr = nn::UserScratchpadAttr();
  size_t scratchpad = 0;
  // A matmul src [m, k] * B [k, n] (+ bias [1, n]) with B in the layout the primitive prefers; `b_user` describes
  // the constant B at `data` (a transposed view of ONNX's [n, k] weights) and `cache` keeps its packed copy.
  auto make = [&](int64_t m, int64_t k, int64_t n, bool bias, const float* data, memory::dim b_col_stride,
                  PackCache* cache, dnnl::matmul* prim, memory* packed) {
    // A product this small (Silero's steps: 64K multiply-adds, ~2 us) gains nothing from a second thread but would
    // pay an OpenMP fork/join per step, and wait for a busy core under load: build it for one thread, which oneDNN
    // then runs inline.
    nn::ScopedOmpThreads omp(m * k * n < (int64_t{1} << 18) ? 1 : 0);
    const memory::desc src = nn::PlainDesc({m, k}), dst = nn::PlainDesc({m, n});
    const memory::desc b_any({k, n}, f32, memory::format_tag::any);
    const memory::desc b_user({k, n}, f32, memory::dims{1, b_col_stride});
    dnnl::matmul::desc d = bias ? dnnl::matmul::desc(src, b_any, nn::PlainDesc({1, n}), dst)
                                : dnnl::matmul::desc(src, b_any, dst);
    dnnl::matmul::primitive_desc pd(d, attr, eng);
    dnnl::reorder pack;
    if (pd.weights_desc() != b_user)
      pack = dnnl::reorder(dnnl::reorder::primitive_desc(eng, b_user, eng, pd.weights_desc()));
    *packed = nn::PackedConstantWeights(eng, b_user, pd.weights_desc(), pack, const_cast<float*>(data), cache);
    scratchpad = std::max(scratchpad, pd.scratchpad_desc().get_size());
    *prim = dnnl::matmul(pd);
  };
  const float* w = weights_->w.data<float>();
  const float* r = weights_->r.data<float>();
  // W is [nd * gh, in] row-major, so W^T [in, nd * gh] has column stride `in`; likewise R_d^T with stride hs.
  make(rows, in, nd * gh, true, w, in, &weights_->w_packed, &plan->x_prim, &plan->w);
  plan->r.resize(static_cast<size_t>(nd));
  for (int64_t d = 0; d < nd; ++d)
    make(batch, hs, ncols, false, r + d * gh * hs, hs, &weights_->r_packed[d], &plan->h_prim, &plan->r[d]);
  if (cfg_.split_gru()) {
    plan->rh.resize(static_cast<size_t>(nd));
    for (int64_t d = 0; d < nd; ++d)
      make(batch, hs, hs, false, r + (d * gh + 2 * hs) * hs, hs, &weights_->rh_packed[d], &plan->h2_prim,
           &plan->rh[d]);
  }
  plan->x_src = nn::PlainDesc({rows, in});
  plan->x_bias = nn::PlainDesc({1, nd * gh});
  plan->x_dst = nn::PlainDesc({rows, nd * gh});
  plan->h_src = nn::PlainDesc({batch, hs});
  plan->h_dst = nn::PlainDesc({batch, ncols});
  plan->h2_dst = nn::PlainDesc({batch, hs});
  plan->scratchpad_bytes = scratchpad;
}

// Executes a primitive through the C API with the arguments on the stack: the C++ execute() builds an
// unordered_map per call, which shows at one call per time step.
void Execute(const dnnl::primitive& prim, const dnnl::stream& s, const dnnl::memory& src, const dnnl::memory& wts,
             const dnnl::memory* bias, const dnnl::memory& dst, const dnnl::memory* scratchpad) {
  dnnl_exec_arg_t args[5];
  int n = 0;
  args[n++] = {DNNL_ARG_SRC, src.get()};
  args[n++] = {DNNL_ARG_WEIGHTS, wts.get()};
  if (bias) args[n++] = {DNNL_ARG_BIAS, bias->get()};
  args[n++] = {DNNL_ARG_DST, dst.get()};
  if (scratchpad) args[n++] = {DNNL_ARG_SCRATCHPAD, scratchpad->get()};
  dnnl::error::wrap_c_api(dnnl_primitive_execute(prim.get(), s.get(), n, args), "could not execute a matmul");
}

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

  const int64_t hs = cfg_.hidden, nd = cfg_.num_directions;
  const int64_t gh = cfg_.gates_hidden();
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
  for (const Shape& s : {Shape{seq, batch, nd, gh}, Shape{seq, nd, batch, hs}, Shape{in_size, gh}}) {
    const int64_t n = ShapeSize(s);
    if (n < 0 || n > kMaxScratchElements)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "scratch of shape ", ShapeToString(s),
                       " is too large (X is ", ShapeToString(x.shape()), ", hidden_size ", hs, ")");
  }

  const int threads = ctx.num_threads();
  // The oneDNN path: float compute with W and R packed at creation.
  std::shared_ptr<const RecurrentPlan> plan;
  if constexpr (std::is_same_v<A, float>) {
    if (seq > 0 && batch > 0 && in_size == input_size_) plan = GetPlan(seq * batch, batch, threads);
  }

  const bool want_y = ctx.OutputRequested(0);
  const Shape y_shape = layout == 0 ? Shape{seq, nd, batch, hs} : Shape{batch, seq, nd, hs};
  Tensor* y = nullptr;
  if (want_y) {
    ASSIGN_OR_RETURN(y, ctx.Output(0, x.dtype(), y_shape));
  }
  const DataType compute = ComputeType<A>();
  const bool lstm = cfg_.cell == CellType::kLstm;
  const int64_t ncols = cfg_.recurrent_cols();
  const int64_t state_n = nd * batch * hs;

  // Every per-run buffer comes from the thread's scratch (no allocation once it has grown). Rows of X stay in X's
  // order (layout 0: t * batch + b; layout 1: b * seq + t), and so do the rows of XW.
  const bool convert_x = x.dtype() != compute;
  const bool convert_y = want_y && y->dtype() != compute;
  const bool convert_b = b && b->dtype() != compute;
  const bool convert_p = p && p->dtype() != compute;
  const size_t sizes[] = {
      static_cast<size_t>(convert_x ? x.NumElements() : 0) * sizeof(A),  // 0: X in compute type
      static_cast<size_t>(convert_b ? nd * 2 * gh : 0) * sizeof(A),      // 1: B in compute type
      static_cast<size_t>(convert_p ? nd * 3 * hs : 0) * sizeof(A),      // 2: P in compute type
      static_cast<size_t>(nd * gh) * sizeof(A),                          // 3: bias folded into XW
      static_cast<size_t>(seq * batch * nd * gh) * sizeof(A),            // 4: XW
      static_cast<size_t>(state_n) * sizeof(A),                          // 5: H
      static_cast<size_t>(lstm ? state_n : 0) * sizeof(A),               // 6: C
      static_cast<size_t>(state_n) * sizeof(A),                          // 7: a state in the other layout
      static_cast<size_t>(batch * ncols) * sizeof(A),                    // 8: recurrent product
      static_cast<size_t>(batch * hs) * sizeof(A),                       // 9: per-row temporary
      static_cast<size_t>(batch * hs) * sizeof(A),                       // 10: split GRU's second product
      static_cast<size_t>(convert_y ? y->NumElements() : 0) * sizeof(A), // 11: Y in compute type
      static_cast<size_t>(batch) * sizeof(int64_t),                      // 12: sequence lengths
      plan ? plan->scratchpad_bytes : 0,                                 // 13: oneDNN scratchpad
  };
  size_t total = 0;
  for (size_t s : sizes) total += nn::ScratchCarver::Rounded(s);
  nn::ScratchCarver carver(total);
  if (!carver.ok()) return ctx.Error(ErrorCode::FAIL, "out of memory for ", total, " bytes of scratch");
  void* region[std::size(sizes)];
  for (size_t i = 0; i < std::size(sizes); ++i) region[i] = carver.Take(sizes[i]);
  A* const xw = static_cast<A*>(region[4]);
  A* const hv = static_cast<A*>(region[5]);
  A* const cv = static_cast<A*>(region[6]);
  A* const state_tmp = static_cast<A*>(region[7]);
  A* const rec = static_cast<A*>(region[8]);
  A* const tmp = static_cast<A*>(region[9]);
  A* const rec2 = static_cast<A*>(region[10]);
  int64_t* const seq_lens = static_cast<int64_t*>(region[12]);

  for (int64_t i = 0; i < batch; ++i) seq_lens[i] = seq;
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

  // Inputs in compute type: the tensor's own data when it already is, else converted into scratch.
  const A* xv = convert_x ? static_cast<A*>(region[0]) : x.data<A>();
  if (convert_x) RETURN_IF_ERROR(ConvertInto<A>(x, "RNN input X", static_cast<A*>(region[0])));
  const A* bv = nullptr;
  if (b) {
    bv = convert_b ? static_cast<A*>(region[1]) : b->data<A>();
    if (convert_b) RETURN_IF_ERROR(ConvertInto<A>(*b, "RNN input B", static_cast<A*>(region[1])));
  }
  const A* pv = nullptr;
  if (p) {
    pv = convert_p ? static_cast<A*>(region[2]) : p->data<A>();
    if (convert_p) RETURN_IF_ERROR(ConvertInto<A>(*p, "RNN input P", static_cast<A*>(region[2])));
  }
  // States as [nd, batch, hs].
  auto load_state = [&](const Tensor* t, A* out) -> Status {
    if (!t) {
      std::fill_n(out, state_n, A(0));
      return Status::OK();
    }
    if (layout == 0) return ConvertInto<A>(*t, "RNN initial state", out);
    RETURN_IF_ERROR(ConvertInto<A>(*t, "RNN initial state", state_tmp));
    for (int64_t d = 0; d < nd; ++d)
      for (int64_t bi = 0; bi < batch; ++bi)
        std::copy_n(&state_tmp[(bi * nd + d) * hs], hs, &out[(d * batch + bi) * hs]);
    return Status::OK();
  };
  RETURN_IF_ERROR(load_state(init_h, hv));
  if (lstm) RETURN_IF_ERROR(load_state(init_c, cv));

  // The bias added to XW: Wb + Rb, except that GRU with linear_before_reset keeps Rbh inside r (.) (H*Rh^T + Rbh).
  A* const bias = static_cast<A*>(region[3]);
  for (int64_t d = 0; d < nd; ++d)
    for (int64_t j = 0; j < gh; ++j) {
      const A* wb = bv ? bv + d * 2 * gh : nullptr;
      A v = wb ? wb[j] + wb[gh + j] : A(0);
      if (cfg_.cell == CellType::kGru && cfg_.linear_before_reset && j >= 2 * hs && wb) v = wb[j];
      bias[d * gh + j] = v;
    }

  A* const yv = !want_y ? nullptr : convert_y ? static_cast<A*>(region[11]) : y->data<A>();
  if (convert_y) std::fill_n(yv, y->NumElements(), A(0));  // rows past a sequence's end stay zero
  const int per_dir = ActivationsPerDirection(cfg_.cell);
  const A clip = static_cast<A>(cfg_.clip);
  const int64_t xw_ld = nd * gh;

  // One time step of direction d for batch rows [begin, end): `rec` holds H*R^T (the first recurrent product) and
  // the gates are finished here. For the split GRU this is the first half; FinishSplitGru does the rest once
  // (r (.) H) * Rh^T is in rec2.
  auto xrow = [&](int64_t t, int64_t bi) { return layout == 0 ? t * batch + bi : bi * seq + t; };
  auto yrow = [&](int64_t t, int64_t d, int64_t bi) {
    return layout == 0 ? ((t * nd + d) * batch + bi) * hs : ((bi * seq + t) * nd + d) * hs;
  };
  auto time_of = [&](int64_t d, int64_t s, int64_t bi) {
    const bool reverse = nd == 2 ? d == 1 : cfg_.reverse;
    return reverse ? seq_lens[bi] - 1 - s : s;
  };
  auto cell_step = [&](int64_t d, int64_t s, int64_t begin, int64_t end) {
    const Activation* act = &cfg_.activations[static_cast<size_t>(d * per_dir)];
    A* h = hv + d * batch * hs;
    for (int64_t bi = begin; bi < end; ++bi) {
      if (s >= seq_lens[bi]) continue;  // finished: state stays, Y stays zero
      const int64_t t = time_of(d, s, bi);
      const A* xr = xw + xrow(t, bi) * xw_ld + d * gh;
      A* gr = rec + bi * ncols;
      A* hb = h + bi * hs;
      switch (cfg_.cell) {
        case CellType::kRnn: {
          for (int64_t j = 0; j < hs; ++j) gr[j] += xr[j];
          if (cfg_.has_clip) Clip(gr, hs, clip);
          ApplyActivation(act[0], gr, hs);
          std::copy_n(gr, hs, hb);
          break;
        }
        case CellType::kGru: {
          A* z = gr;
          A* rg = gr + hs;
          for (int64_t j = 0; j < 2 * hs; ++j) gr[j] += xr[j];
          if (cfg_.has_clip) Clip(gr, 2 * hs, clip);
          ApplyActivation(act[0], gr, 2 * hs);
          if (!cfg_.linear_before_reset) {
            A* rh = tmp + bi * hs;
            for (int64_t j = 0; j < hs; ++j) rh[j] = rg[j] * hb[j];
            continue;  // the h gate waits for (r (.) H) * Rh^T
          }
          A* hh = gr + 2 * hs;  // H * Rh^T
          const A* rbh = bv ? bv + d * 2 * gh + gh + 2 * hs : nullptr;
          if (rbh) {
            for (int64_t j = 0; j < hs; ++j) hh[j] = xr[2 * hs + j] + rg[j] * (hh[j] + rbh[j]);
          } else {
            for (int64_t j = 0; j < hs; ++j) hh[j] = xr[2 * hs + j] + rg[j] * hh[j];
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
          A* cb = cv + (d * batch + bi) * hs;
          const A* pi = pv ? pv + d * 3 * hs : nullptr;
          for (int64_t j = 0; j < gh; ++j) gr[j] += xr[j];
          if (pi) {
            const A* pf = pi + 2 * hs;
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
          if (pi) {
            const A* po = pi + hs;
            for (int64_t j = 0; j < hs; ++j) og[j] += po[j] * cb[j];
          }
          if (cfg_.has_clip) Clip(og, hs, clip);
          ApplyActivation(act[0], og, hs);
          A* hc = tmp + bi * hs;
          std::copy_n(cb, hs, hc);
          ApplyActivation(act[2], hc, hs);
          for (int64_t j = 0; j < hs; ++j) hb[j] = og[j] * hc[j];
          break;
        }
      }
      if (yv) std::copy_n(hb, hs, &yv[yrow(t, d, bi)]);
    }
  };
  auto finish_split_gru = [&](int64_t d, int64_t s, int64_t begin, int64_t end) {
    const Activation* act = &cfg_.activations[static_cast<size_t>(d * per_dir)];
    A* h = hv + d * batch * hs;
    for (int64_t bi = begin; bi < end; ++bi) {
      if (s >= seq_lens[bi]) continue;
      const int64_t t = time_of(d, s, bi);
      const A* xr = xw + xrow(t, bi) * xw_ld + d * gh;
      const A* z = rec + bi * ncols;
      A* hh = rec2 + bi * hs;
      A* hb = h + bi * hs;
      for (int64_t j = 0; j < hs; ++j) hh[j] += xr[2 * hs + j];
      if (cfg_.has_clip) Clip(hh, hs, clip);
      ApplyActivation(act[1], hh, hs);
      for (int64_t j = 0; j < hs; ++j) hb[j] = (A(1) - z[j]) * hh[j] + z[j] * hb[j];
      if (yv) std::copy_n(hb, hs, &yv[yrow(t, d, bi)]);
    }
  };
  const double cell_cost = 30.0 * static_cast<double>(gh);

  // The time loop, given the two products: project() fills XW (with the bias) for every row of X, and
  // recurrent(d, second, src, dst) writes src [batch, hs] times R_d^T (first) or Rh_d^T (second, split GRU) to dst.
  auto run_steps = [&](auto&& project, auto&& recurrent) {
    project();
    for (int64_t d = 0; d < nd; ++d) {
      A* h = hv + d * batch * hs;
      for (int64_t s = 0; s < seq; ++s) {
        recurrent(d, false, h, rec);
        ForRows(threads, batch, cell_cost, [&](int64_t begin, int64_t end) { cell_step(d, s, begin, end); });
        if (cfg_.split_gru()) {
          recurrent(d, true, tmp, rec2);
          ForRows(threads, batch, cell_cost, [&](int64_t begin, int64_t end) { finish_split_gru(d, s, begin, end); });
        }
      }
    }
  };

  if constexpr (std::is_same_v<A, float>) {
    if (plan) {
      nn::ScopedOmpThreads omp(threads);
      Status st = nn::DnnlCall("recurrent", [&] {
        using dnnl::memory;
        const dnnl::engine& eng = nn::CpuEngine();
        dnnl::stream strm(eng);
        memory scratchpad;
        if (plan->scratchpad_bytes > 0)
          scratchpad = memory(memory::desc({static_cast<memory::dim>(plan->scratchpad_bytes)}, memory::data_type::u8,
                                           memory::format_tag::a),
                              eng, region[13]);
        const memory* sp = plan->scratchpad_bytes > 0 ? &scratchpad : nullptr;
        memory h_src(plan->h_src, eng, hv), h_dst(plan->h_dst, eng, rec);
        memory h2_src, h2_dst;
        if (cfg_.split_gru()) {
          h2_src = memory(plan->h_src, eng, tmp);
          h2_dst = memory(plan->h2_dst, eng, rec2);
        }
        run_steps(
            [&] {
              memory src(plan->x_src, eng, const_cast<float*>(xv)), dst(plan->x_dst, eng, xw),
                  bias_mem(plan->x_bias, eng, bias);
              Execute(plan->x_prim, strm, src, plan->w, &bias_mem, dst, sp);
            },
            [&](int64_t d, bool second, float* src, float* /*dst: the memory objects point at rec, rec2*/) {
              if (second) {
                Execute(plan->h2_prim, strm, h2_src, plan->rh[d], nullptr, h2_dst, sp);
              } else {
                h_src.set_data_handle(src);
                Execute(plan->h_prim, strm, h_src, plan->r[d], nullptr, h_dst, sp);
              }
            });
        strm.wait();
      });
      RETURN_IF_ERROR(st.WithContext(ctx.node().Describe()));
    }
  }
  if (!plan) {
    // Plain loops: W and R converted and transposed (W_d^T [in, gh], R_d^T [hs, gh]) so the inner loops are axpys
    // over contiguous memory.
    std::vector<A> wv, rv;
    RETURN_IF_ERROR(ToCompute<A>(*w, "RNN input W", &wv));
    RETURN_IF_ERROR(ToCompute<A>(*r, "RNN input R", &rv));
    std::vector<A> wt(static_cast<size_t>(nd * in_size * gh)), rt(static_cast<size_t>(nd * hs * gh));
    for (int64_t d = 0; d < nd; ++d) {
      Transpose(&wv[d * gh * in_size], gh, in_size, &wt[d * in_size * gh]);
      Transpose(&rv[d * gh * hs], gh, hs, &rt[d * hs * gh]);
    }
    run_steps(
        [&] {
          for (int64_t d = 0; d < nd; ++d)
            ParallelFor(threads, seq * batch, static_cast<double>(in_size * gh), [&](int64_t begin, int64_t end) {
              for (int64_t row = begin; row < end; ++row) {
                A* out = xw + row * xw_ld + d * gh;
                std::copy_n(bias + d * gh, gh, out);
                GemmRowAcc(xv + row * in_size, in_size, &wt[d * in_size * gh], gh, gh, out);
              }
            });
        },
        [&](int64_t d, bool second, A* src, A* dst) {
          const int64_t cols = second ? hs : ncols;
          const A* bt = &rt[d * hs * gh] + (second ? 2 * hs : 0);
          ForRows(threads, batch, static_cast<double>(hs * cols), [&](int64_t begin, int64_t end) {
            for (int64_t bi = begin; bi < end; ++bi) {
              std::fill_n(dst + bi * cols, cols, A(0));
              GemmRowAcc(src + bi * hs, hs, bt, gh, cols, dst + bi * cols);
            }
          });
        });
  }

  if (convert_y) RETURN_IF_ERROR(StoreCompute<A>(yv, y));
  auto store_state = [&](size_t index, const A* state) -> Status {
    if (!ctx.OutputRequested(index)) return Status::OK();
    ASSIGN_OR_RETURN(Tensor * out, ctx.Output(index, x.dtype(), state_shape));
    if (layout == 1) {
      for (int64_t d = 0; d < nd; ++d)
        for (int64_t bi = 0; bi < batch; ++bi)
          std::copy_n(&state[(d * batch + bi) * hs], hs, &state_tmp[(bi * nd + d) * hs]);
      state = state_tmp;
    }
    if (out->dtype() == compute) {
      std::copy_n(state, state_n, out->data<A>());
      return Status::OK();
    }
    return StoreCompute<A>(state, out);
  };
  RETURN_IF_ERROR(store_state(1, hv));
  if (lstm) RETURN_IF_ERROR(store_state(2, cv));
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
    return std::unique_ptr<OpKernel>(new RecurrentKernel(std::move(cfg), info));
  };
}

}  // namespace

void RegisterRecurrentKernels(KernelRegistry& r) {
  r.Register("", "RNN", RecurrentFactory(CellType::kRnn));
  r.Register("", "GRU", RecurrentFactory(CellType::kGru));
  r.Register("", "LSTM", RecurrentFactory(CellType::kLstm));
}

}  // namespace epctx
