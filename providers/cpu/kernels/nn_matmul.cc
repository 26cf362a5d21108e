// MatMul and Gemm. float (and float16/bfloat16 via float) run on oneDNN's matmul primitive: a constant right-hand
// side is packed once into the layout the primitive asks for, N-D MatMul against a 2-D right-hand side becomes one
// big 2-D product, batched products use oneDNN's batch broadcasting (or one 2-D primitive per batch when oneDNN
// refuses). Gemm maps transA/transB to strides, alpha to an output scale and beta*C to a bias or a sum post-op.
// double and integer types use plain loops.
#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include "providers/cpu/kernels/broadcast.h"
#include "providers/cpu/kernels/nn_common.h"
#include "providers/cpu/layout.h"

namespace epctx {
namespace nn {
namespace {

using dnnl::memory;

// One oneDNN matmul problem: descriptors of src (A), weights (B) and dst, plus the epilogue.
struct MatMulSpec {
  memory::dims src_dims, src_strides, w_dims, w_strides, dst_dims;
  float alpha = 1.f;
  bool accumulate = false;  // dst += result (sum post-op)
  bool has_bias = false;    // bias of shape [1, N]
  bool pack_weights = false;

  std::vector<int64_t> Key(int threads) const {
    uint32_t alpha_bits;
    std::memcpy(&alpha_bits, &alpha, sizeof(alpha_bits));
    std::vector<int64_t> k{threads, accumulate, has_bias, pack_weights, alpha_bits};
    for (const auto* v : {&src_dims, &src_strides, &w_dims, &w_strides, &dst_dims}) {
      k.push_back(static_cast<int64_t>(v->size()));
      k.insert(k.end(), v->begin(), v->end());
    }
    return k;
  }
};

struct DnnlMatMulPlan {
  dnnl::primitive prim;  // a matmul, or a 1x1 convolution over nhwc views (Conv1x1)
  memory::desc src, w_user, w_prim, dst, bias, scratch_md;
  dnnl::reorder w_reorder;
  memory packed_w;
  size_t scratch_total = 0;
};

memory::dims DenseStrides(const memory::dims& dims) {
  memory::dims s(dims.size());
  int64_t acc = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    s[i] = acc;
    acc *= std::max<int64_t>(dims[i], 1);
  }
  return s;
}

class DnnlMatMulRunner {
 public:
  void SetConstantWeights(Tensor w) { const_w_ = std::move(w); }
  bool has_constant_weights() const { return const_w_.defined(); }
  const Tensor& constant_weights() const { return const_w_; }

  // nullptr (OK) when oneDNN refuses the problem.
  std::shared_ptr<const DnnlMatMulPlan> GetPlan(const MatMulSpec& spec, int threads) const {
    std::vector<int64_t> key = spec.Key(threads);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = plans_.find(key);
    if (it != plans_.end()) return it->second;
    auto plan = std::make_shared<DnnlMatMulPlan>();
    ScopedOmpThreads omp(threads);
    Status st = DnnlCall("matmul setup", [&] { Build(spec, plan.get()); });
    std::shared_ptr<const DnnlMatMulPlan> result = st.ok() ? std::move(plan) : nullptr;
    if (plans_.size() >= kMaxCachedShapes) plans_.clear();
    plans_[key] = result;
    return result;
  }

  // Runs the plan `count` times, advancing src/weights/dst by the given element offsets (one call when count==1).
  Status Run(const DnnlMatMulPlan& plan, const float* a, const float* b, const float* bias, float* y, int threads,
             const std::vector<int64_t>* a_offsets = nullptr, const std::vector<int64_t>* b_offsets = nullptr,
             int64_t y_step = 0) const {
    ScopedOmpThreads omp(threads);
    ScratchCarver scratch(plan.scratch_total);
    RETURN_ERROR_IF(!scratch.ok(), FAIL, "out of memory for ", plan.scratch_total, " bytes of matmul scratch");
    return DnnlCall("matmul", [&] {
      const dnnl::engine& eng = CpuEngine();
      dnnl::stream s(eng);
      memory scratch_mem;
      if (plan.scratch_md.get_size() > 0)
        scratch_mem = memory(plan.scratch_md, eng, scratch.Take(plan.scratch_md.get_size()));
      memory w_buf;
      if (!plan.packed_w && plan.w_reorder) w_buf = memory(plan.w_prim, eng, scratch.Take(plan.w_prim.get_size()));
      const size_t count = a_offsets ? a_offsets->size() : 1;
      for (size_t i = 0; i < count; ++i) {
        memory src(plan.src, eng, const_cast<float*>(a + (a_offsets ? (*a_offsets)[i] : 0)));
        memory wts = plan.packed_w;
        if (!wts) {
          memory w_user(plan.w_user, eng, const_cast<float*>(b + (b_offsets ? (*b_offsets)[i] : 0)));
          wts = w_user;
          if (plan.w_reorder) {
            plan.w_reorder.execute(s, {{DNNL_ARG_FROM, w_user}, {DNNL_ARG_TO, w_buf}});
            wts = w_buf;
          }
        }
        memory dst(plan.dst, eng, y + i * y_step);
        std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wts}, {DNNL_ARG_DST, dst}};
        if (bias) args[DNNL_ARG_BIAS] = memory(plan.bias, eng, const_cast<float*>(bias));
        if (scratch_mem) args[DNNL_ARG_SCRATCHPAD] = scratch_mem;
        plan.prim.execute(s, args);
      }
      s.wait();
    });
  }

 private:
  void Build(const MatMulSpec& spec, DnnlMatMulPlan* plan) const {
    const dnnl::engine& eng = CpuEngine();
    const auto f32 = memory::data_type::f32;
    plan->src = memory::desc(spec.src_dims, f32, spec.src_strides);
    plan->w_user = memory::desc(spec.w_dims, f32, spec.w_strides);
    plan->dst = PlainDesc(spec.dst_dims);
    if (spec.has_bias) {
      memory::dims bd(spec.dst_dims.size(), 1);
      bd.back() = spec.dst_dims.back();
      plan->bias = PlainDesc(bd);
    }
    memory::desc w_md = spec.pack_weights ? memory::desc(spec.w_dims, f32, memory::format_tag::any) : plan->w_user;
    dnnl::primitive_attr attr = UserScratchpadAttr();
    if (spec.alpha != 1.f) attr.set_output_scales(0, {spec.alpha});
    if (spec.accumulate) {
      dnnl::post_ops po;
      po.append_sum(1.f);
      attr.set_post_ops(po);
    }
    dnnl::matmul::desc d = spec.has_bias ? dnnl::matmul::desc(plan->src, w_md, plan->bias, plan->dst)
                                         : dnnl::matmul::desc(plan->src, w_md, plan->dst);
    dnnl::matmul::primitive_desc pd(d, attr, eng);
    if (std::string(pd.impl_info_str()).compare(0, 4, "gemm") == 0 && Conv1x1(spec, plan)) return;
    plan->w_prim = pd.weights_desc();
    plan->scratch_md = pd.scratchpad_desc();
    plan->prim = dnnl::matmul(pd);
    size_t total = ScratchCarver::Rounded(plan->scratch_md.get_size());
    if (plan->w_prim != plan->w_user)
      plan->w_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(eng, plan->w_user, eng, plan->w_prim));
    if (spec.pack_weights && const_w_.defined()) {
      plan->packed_w = PackedConstantWeights(eng, plan->w_user, plan->w_prim, plan->w_reorder,
                                             const_cast<void*>(const_w_.raw_data()), &packed_);
    } else if (plan->w_reorder) {
      total += ScratchCarver::Rounded(plan->w_prim.get_size());
    }
    plan->scratch_total = total;
  }

  // oneDNN 2.6 has a packed-weight (brgemm) f32 matmul only from avx512_core; below it, its matmul runs the sgemm
  // driver, which packs B again on every call (perftest seed 4, graph 10 at AVX2: [156, 512] x [512, 2048] in
  // 3.44 ms, ORT 1.91 ms). A constant [K, N] against a dense [M, K] then runs as a 1x1 convolution over nhwc views
  // ([1, K, M, 1] with channels innermost is the same bytes as [M, K] row-major; [1, N, M, 1] likewise for Y), its
  // weights packed once, when oneDNN has a jit kernel for it (AotCpu does the same, lower/math_matmul.cc). False
  // (plan untouched) otherwise.
  bool Conv1x1(const MatMulSpec& spec, DnnlMatMulPlan* plan) const {
    if (!spec.pack_weights || !const_w_.defined() || spec.accumulate || spec.alpha != 1.f ||
        spec.src_dims.size() != 2 || spec.w_dims.size() != 2)
      return false;
    const int64_t M = spec.src_dims[0], K = spec.src_dims[1], N = spec.w_dims[1];
    if (spec.src_strides != memory::dims{K, 1} || spec.w_strides != memory::dims{N, 1} || spec.w_dims[0] != K ||
        spec.dst_dims != memory::dims{M, N})
      return false;
    const dnnl::engine& eng = CpuEngine();
    const auto f32 = memory::data_type::f32;
    const memory::desc src({1, K, M, 1}, f32, memory::dims{M * K, 1, K, K});
    const memory::desc dst({1, N, M, 1}, f32, memory::dims{M * N, 1, N, N});
    const memory::desc w_user({N, K, 1, 1}, f32, memory::dims{1, N, 1, 1});  // the [K, N] bytes as OIhw
    const memory::desc w_any({N, K, 1, 1}, f32, memory::format_tag::any);
    const memory::desc bias = spec.has_bias ? PlainDesc({N}) : memory::desc();
    dnnl::convolution_forward::primitive_desc pd;
    try {
      dnnl::convolution_forward::desc d =
          spec.has_bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                          dnnl::algorithm::convolution_direct, src, w_any, bias, dst,
                                                          {1, 1}, {0, 0}, {0, 0})
                        : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                          dnnl::algorithm::convolution_direct, src, w_any, dst, {1, 1},
                                                          {0, 0}, {0, 0});
      pd = dnnl::convolution_forward::primitive_desc(d, UserScratchpadAttr(), eng, true);
    } catch (const dnnl::error&) {
      return false;  // no convolution for this problem: the matmul
    }
    if (!pd || std::string(pd.impl_info_str()).compare(0, 3, "jit") != 0 || pd.src_desc() != src ||
        pd.dst_desc() != dst)
      return false;
    plan->src = src;
    plan->dst = dst;
    plan->bias = bias;
    plan->w_user = w_user;
    plan->w_prim = pd.weights_desc();
    plan->scratch_md = pd.scratchpad_desc();
    plan->prim = dnnl::convolution_forward(pd);
    if (plan->w_prim != plan->w_user)
      plan->w_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(eng, plan->w_user, eng, plan->w_prim));
    plan->packed_w = PackedConstantWeights(eng, plan->w_user, plan->w_prim, plan->w_reorder,
                                           const_cast<void*>(const_w_.raw_data()), &packed_);
    plan->scratch_total = ScratchCarver::Rounded(plan->scratch_md.get_size());
    return true;
  }

  Tensor const_w_;
  mutable std::mutex mu_;
  mutable std::map<std::vector<int64_t>, std::shared_ptr<const DnnlMatMulPlan>> plans_;
  mutable std::vector<std::pair<memory::desc, memory>> packed_;
};

// Element offsets of the A and B matrices for every output batch index under broadcasting.
void BatchOffsets(const Shape& out_batch, const Shape& a_batch, const Shape& b_batch, int64_t a_mat, int64_t b_mat,
                  std::vector<int64_t>* a_off, std::vector<int64_t>* b_off) {
  const size_t r = out_batch.size();
  int64_t total = 1;
  for (int64_t d : out_batch) total *= d;
  a_off->resize(total);
  b_off->resize(total);
  std::vector<int64_t> idx(r, 0);
  for (int64_t t = 0; t < total; ++t) {
    int64_t ai = 0, bi = 0;
    for (size_t d = 0; d < r; ++d) {
      ai = ai * a_batch[d] + (a_batch[d] == 1 ? 0 : idx[d]);
      bi = bi * b_batch[d] + (b_batch[d] == 1 ? 0 : idx[d]);
    }
    (*a_off)[t] = ai * a_mat;
    (*b_off)[t] = bi * b_mat;
    for (size_t d = r; d-- > 0;) {
      if (++idx[d] < out_batch[d]) break;
      idx[d] = 0;
    }
  }
}

bool IsFloatLike(DataType t) {
  return t == DataType::kFloat || t == DataType::kFloat16 || t == DataType::kBFloat16;
}

// ---------------------------------------------------------------------------------------------------------------

class MatMulKernel final : public OpKernel {
 public:
  explicit MatMulKernel(const KernelInfo& info) : has_bias_(info.GetInt(kMatMulBiasAttr, 0) != 0) {
    const Tensor* b = info.ConstantInput(1);
    if (b && IsFloatLike(b->dtype()) && b->rank() >= 1 && b->rank() <= 2) {
      auto bf = AsFloat(*b);
      if (bf.ok()) {
        runner_.SetConstantWeights(std::move(bf).value());
        // Pack for a typical row count (the declared one when the graph knows it).
        int64_t rows = 64;
        if (const ValueType* t = info.InputType(0); t && t->has_shape && !t->dims.empty()) {
          int64_t p = 1;
          bool known = true;
          for (size_t i = 0; i + 1 < t->dims.size(); ++i) {
            known = known && t->dims[i].known();
            p *= t->dims[i].known() ? t->dims[i].value : 1;
          }
          if (known && p > 0) rows = p;
        }
        const int64_t k = b->shape()[0], n = b->rank() == 2 ? b->shape()[1] : 1;
        MatMulSpec s = Spec2D(rows, k, n);
        s.has_bias = has_bias_;
        if (k > 0 && n > 0) runner_.GetPlan(s, ThreadsForWork(rows * k * n, info.num_threads()));
      }
    }
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* a = ctx.Input(0);
    const Tensor* b = ctx.Input(1);
    RETURN_ERROR_IF(!a || !b, INVALID_ARGUMENT, ctx.node().Describe(), ": inputs A and B are required");
    RETURN_ERROR_IF(a->dtype() != b->dtype(), INVALID_ARGUMENT, ctx.node().Describe(), ": A is ",
                    DataTypeName(a->dtype()), " but B is ", DataTypeName(b->dtype()));
    RETURN_ERROR_IF(a->rank() == 0 || b->rank() == 0, INVALID_ARGUMENT, ctx.node().Describe(),
                    ": MatMul inputs must have rank >= 1, got ", ShapeToString(a->shape()), " and ",
                    ShapeToString(b->shape()));
    Shape as = a->shape(), bs = b->shape();
    const bool a1 = as.size() == 1, b1 = bs.size() == 1;
    if (a1) as.insert(as.begin(), 1);
    if (b1) bs.push_back(1);
    const int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
    RETURN_ERROR_IF(bs[bs.size() - 2] != k, INVALID_ARGUMENT, ctx.node().Describe(), ": inner dimensions differ: A ",
                    ShapeToString(a->shape()), " x B ", ShapeToString(b->shape()));
    Shape a_batch(as.begin(), as.end() - 2), b_batch(bs.begin(), bs.end() - 2), batch;
    {
      auto b = BroadcastShapes(a_batch, b_batch);
      RETURN_IF_ERROR_CTX(b.status(), ctx.node().Describe(), ": batch dims");
      batch = std::move(b).value();
    }
    Shape y_shape = batch;
    if (!a1) y_shape.push_back(m);
    if (!b1) y_shape.push_back(n);
    a_batch.insert(a_batch.begin(), batch.size() - a_batch.size(), 1);
    b_batch.insert(b_batch.begin(), batch.size() - b_batch.size(), 1);
    // The bias of the session's MatMul + Add fusion (cpu_fusion.h): float [N], one value per output column.
    const Tensor* bias = has_bias_ ? ctx.Input(2) : nullptr;
    RETURN_ERROR_IF(has_bias_ && (!bias || bias->dtype() != DataType::kFloat || a->dtype() != DataType::kFloat ||
                                  bias->NumElements() != n || b1),
                    INVALID_ARGUMENT, ctx.node().Describe(), ": the fused bias must be float with ", n,
                    " elements for float A and a 2-D B");
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, a->dtype(), y_shape));
    if (y->NumElements() == 0) return Status::OK();
    if (k == 0) {
      if (bias) AddRowBias(bias->data<float>(), y->data<float>(), y->NumElements() / n, n);
      return Status::OK();
    }
    Problem p{batch, a_batch, b_batch, m, k, n};
    const int threads = ctx.num_threads();
    switch (a->dtype()) {
      case DataType::kFloat:
        return RunFloat(ctx, p, a->data<float>(), b->data<float>(), bias ? bias->data<float>() : nullptr,
                        y->data<float>());
      case DataType::kFloat16:
      case DataType::kBFloat16: {
        ASSIGN_OR_RETURN(Tensor af, AsFloat(*a));
        Tensor bf;
        if (runner_.has_constant_weights()) {
          bf = runner_.constant_weights();
        } else {
          ASSIGN_OR_RETURN(bf, AsFloat(*b));
        }
        ASSIGN_OR_RETURN(Tensor yf, Tensor::Allocate(DataType::kFloat, y_shape));
        RETURN_IF_ERROR(RunFloat(ctx, p, af.data<float>(), bf.data<float>(), nullptr, yf.data<float>()));
        StoreFloat(yf, y);
        return Status::OK();
      }
      default:
        return DispatchType<double, int32_t, int64_t, uint32_t, uint64_t>(
            a->dtype(), "MatMul", [&](auto tag) -> Status {
              using T = decltype(tag);
              RunPlain<T>(p, a->data<T>(), b->data<T>(), y->data<T>(), threads);
              return Status::OK();
            }).WithContext(ctx.node().Describe());
    }
  }

 private:
  struct Problem {
    Shape batch, a_batch, b_batch;  // a_batch/b_batch padded to batch's rank
    int64_t m, k, n;
  };

  static void AddRowBias(const float* bias, float* y, int64_t rows, int64_t n) {
    for (int64_t r = 0; r < rows; ++r, y += n)
      for (int64_t j = 0; j < n; ++j) y[j] += bias[j];
  }

  MatMulSpec Spec2D(int64_t rows, int64_t k, int64_t n) const {
    MatMulSpec s;
    s.src_dims = {rows, k};
    s.src_strides = {k, 1};
    s.w_dims = {k, n};
    s.w_strides = {n, 1};
    s.dst_dims = {rows, n};
    s.pack_weights = runner_.has_constant_weights();
    return s;
  }

  // `bias` (nullable): [n] added to every row, in the primitive when the product is one 2-D matmul.
  Status RunFloat(KernelContext& ctx, const Problem& p, const float* a, const float* b, const float* bias,
                  float* y) const {
    if (runner_.has_constant_weights()) b = runner_.constant_weights().data<float>();
    const bool b_single = std::all_of(p.b_batch.begin(), p.b_batch.end(), [](int64_t d) { return d == 1; });
    int64_t batch_total = 1;
    for (int64_t d : p.batch) batch_total *= d;
    const int threads = ThreadsForWork(batch_total * p.m * p.k * p.n, ctx.num_threads());
    if (b_single) {
      // All of A's rows against one B: a single 2-D product.
      MatMulSpec s = Spec2D(batch_total * p.m, p.k, p.n);
      s.has_bias = bias != nullptr;
      if (auto plan = runner_.GetPlan(s, threads))
        return runner_.Run(*plan, a, b, bias, y, threads).WithContext(ctx.node().Describe());
    } else if (p.batch.size() + 2 <= DNNL_MAX_NDIMS) {
      MatMulSpec s;
      s.src_dims = p.a_batch;
      s.src_dims.insert(s.src_dims.end(), {p.m, p.k});
      s.w_dims = p.b_batch;
      s.w_dims.insert(s.w_dims.end(), {p.k, p.n});
      s.dst_dims = p.batch;
      s.dst_dims.insert(s.dst_dims.end(), {p.m, p.n});
      s.src_strides = DenseStrides(s.src_dims);
      s.w_strides = DenseStrides(s.w_dims);
      if (auto plan = runner_.GetPlan(s, threads))
        return runner_.Run(*plan, a, b, nullptr, y, threads).WithContext(ctx.node().Describe());
    }
    RETURN_IF_ERROR(RunPerBatch(ctx, p, a, b, y, threads));
    if (bias) AddRowBias(bias, y, batch_total * p.m, p.n);
    return Status::OK();
  }

  // One 2-D product per batch index.
  Status RunPerBatch(KernelContext& ctx, const Problem& p, const float* a, const float* b, float* y,
                     int threads) const {
    std::vector<int64_t> a_off, b_off;
    BatchOffsets(p.batch, p.a_batch, p.b_batch, p.m * p.k, p.k * p.n, &a_off, &b_off);
    MatMulSpec s = Spec2D(p.m, p.k, p.n);
    s.pack_weights = false;
    if (auto plan = runner_.GetPlan(s, threads))
      return runner_.Run(*plan, a, b, nullptr, y, threads, &a_off, &b_off, p.m * p.n)
          .WithContext(ctx.node().Describe());
    for (size_t i = 0; i < a_off.size(); ++i)
      GemmPlain<float>(p.m, p.n, p.k, a + a_off[i], b + b_off[i], y + i * p.m * p.n, false, threads);
    return Status::OK();
  }

  template <typename T>
  static void RunPlain(const Problem& p, const T* a, const T* b, T* y, int threads) {
    std::vector<int64_t> a_off, b_off;
    BatchOffsets(p.batch, p.a_batch, p.b_batch, p.m * p.k, p.k * p.n, &a_off, &b_off);
    for (size_t i = 0; i < a_off.size(); ++i)
      GemmPlain<T>(p.m, p.n, p.k, a + a_off[i], b + b_off[i], y + i * p.m * p.n, false, threads);
  }

  bool has_bias_ = false;
  DnnlMatMulRunner runner_;
};

// ---------------------------------------------------------------------------------------------------------------

class GemmKernel final : public OpKernel {
 public:
  static StatusOr<std::unique_ptr<OpKernel>> Create(const KernelInfo& info) {
    std::unique_ptr<GemmKernel> k(new GemmKernel());
    k->trans_a_ = info.GetInt("transA", 0) != 0;
    k->trans_b_ = info.GetInt("transB", 0) != 0;
    k->alpha_ = info.GetFloat("alpha", 1.f);
    k->beta_ = info.GetFloat("beta", 1.f);
    if (info.num_inputs() < 2) return info.Error(ErrorCode::INVALID_GRAPH, "needs inputs A and B");
    if (info.opset() < 11 && !info.HasInput(2))
      return info.Error(ErrorCode::INVALID_GRAPH, "input C is required before opset 11");
    const Tensor* b = info.ConstantInput(1);
    if (b && IsFloatLike(b->dtype()) && b->rank() == 2) {
      auto bf = AsFloat(*b);
      if (bf.ok()) {
        k->runner_.SetConstantWeights(std::move(bf).value());
        int64_t kk = k->trans_b_ ? b->shape()[1] : b->shape()[0], n = k->trans_b_ ? b->shape()[0] : b->shape()[1];
        int64_t m = 64;
        if (const ValueType* t = info.InputType(0); t && t->has_shape && t->dims.size() == 2) {
          const Dim& d = t->dims[k->trans_a_ ? 1 : 0];
          if (d.known() && d.value > 0) m = d.value;
        }
        if (kk > 0 && n > 0)
          k->runner_.GetPlan(k->Spec(m, kk, n, false, false), ThreadsForWork(m * kk * n, info.num_threads()));
      }
    }
    return std::unique_ptr<OpKernel>(std::move(k));
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* a = ctx.Input(0);
    const Tensor* b = ctx.Input(1);
    const Tensor* c = ctx.Input(2);
    const std::string node = ctx.node().Describe();
    RETURN_ERROR_IF(!a || !b, INVALID_ARGUMENT, node, ": inputs A and B are required");
    RETURN_ERROR_IF(a->dtype() != b->dtype() || (c && c->dtype() != a->dtype()), INVALID_ARGUMENT, node,
                    ": A, B and C must have one element type");
    RETURN_ERROR_IF(a->rank() != 2 || b->rank() != 2, INVALID_ARGUMENT, node, ": A and B must be 2-D, got ",
                    ShapeToString(a->shape()), " and ", ShapeToString(b->shape()));
    const int64_t m = trans_a_ ? a->dim(1) : a->dim(0), k = trans_a_ ? a->dim(0) : a->dim(1);
    const int64_t kb = trans_b_ ? b->dim(1) : b->dim(0), n = trans_b_ ? b->dim(0) : b->dim(1);
    RETURN_ERROR_IF(k != kb, INVALID_ARGUMENT, node, ": inner dimensions differ: A ", ShapeToString(a->shape()),
                    (trans_a_ ? " (transposed)" : ""), " x B ", ShapeToString(b->shape()),
                    (trans_b_ ? " (transposed)" : ""));
    // C broadcasts unidirectionally to [M, N].
    int64_t c_rows = 1, c_cols = 1;
    const bool use_c = c && beta_ != 0.f;
    if (c) {
      const Shape& cs = c->shape();
      RETURN_ERROR_IF(cs.size() > 2, INVALID_ARGUMENT, node, ": C must have rank <= 2, got ", ShapeToString(cs));
      if (cs.size() == 2) c_rows = cs[0];
      if (!cs.empty()) c_cols = cs.back();
      RETURN_ERROR_IF((c_rows != 1 && c_rows != m) || (c_cols != 1 && c_cols != n), INVALID_ARGUMENT, node,
                      ": C of shape ", ShapeToString(cs), " does not broadcast to [", m, ",", n, "]");
    }
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, a->dtype(), {m, n}));
    if (m == 0 || n == 0) return Status::OK();
    const int threads = ctx.num_threads();
    CInfo ci{use_c, c_rows, c_cols};
    switch (a->dtype()) {
      case DataType::kFloat:
        return RunFloat(ctx, m, k, n, a->data<float>(), b->data<float>(), use_c ? c->data<float>() : nullptr, ci,
                        y->data<float>());
      case DataType::kFloat16:
      case DataType::kBFloat16: {
        ASSIGN_OR_RETURN(Tensor af, AsFloat(*a));
        Tensor bf, cf;
        if (runner_.has_constant_weights()) {
          bf = runner_.constant_weights();
        } else {
          ASSIGN_OR_RETURN(bf, AsFloat(*b));
        }
        if (use_c) {
          ASSIGN_OR_RETURN(cf, AsFloat(*c));
        }
        ASSIGN_OR_RETURN(Tensor yf, Tensor::Allocate(DataType::kFloat, {m, n}));
        RETURN_IF_ERROR(RunFloat(ctx, m, k, n, af.data<float>(), bf.data<float>(), use_c ? cf.data<float>() : nullptr,
                                 ci, yf.data<float>()));
        StoreFloat(yf, y);
        return Status::OK();
      }
      default:
        return DispatchType<double, int32_t, int64_t, uint32_t, uint64_t>(
            a->dtype(), "Gemm", [&](auto tag) -> Status {
              using T = decltype(tag);
              return RunPlain<T>(m, k, n, a->data<T>(), b->data<T>(), use_c ? c->data<T>() : nullptr, ci,
                                 y->data<T>(), threads);
            }).WithContext(node);
    }
  }

 private:
  struct CInfo {
    bool use;
    int64_t rows, cols;
  };

  GemmKernel() = default;

  MatMulSpec Spec(int64_t m, int64_t k, int64_t n, bool accumulate, bool bias) const {
    MatMulSpec s;
    s.src_dims = {m, k};
    s.src_strides = trans_a_ ? memory::dims{1, m} : memory::dims{k, 1};
    s.w_dims = {k, n};
    s.w_strides = trans_b_ ? memory::dims{1, k} : memory::dims{n, 1};
    s.dst_dims = {m, n};
    s.alpha = alpha_;
    s.accumulate = accumulate;
    s.has_bias = bias;
    s.pack_weights = runner_.has_constant_weights();
    return s;
  }

  // y = beta * broadcast(C).
  template <typename T>
  void FillC(int64_t m, int64_t n, const T* c, const CInfo& ci, T* y) const {
    for (int64_t i = 0; i < m; ++i) {
      const T* cr = c + (ci.rows == 1 ? 0 : i) * ci.cols;
      T* yr = y + i * n;
      if (ci.cols == 1) {
        const T v = static_cast<T>(beta_ * cr[0]);
        for (int64_t j = 0; j < n; ++j) yr[j] = v;
      } else {
        for (int64_t j = 0; j < n; ++j) yr[j] = static_cast<T>(beta_ * cr[j]);
      }
    }
  }

  Status RunFloat(KernelContext& ctx, int64_t m, int64_t k, int64_t n, const float* a, const float* b, const float* c,
                  const CInfo& ci, float* y) const {
    const int threads = ThreadsForWork(m * k * n, ctx.num_threads());
    if (runner_.has_constant_weights()) b = runner_.constant_weights().data<float>();
    if (k == 0) {  // alpha * (empty product) = 0
      if (ci.use) FillC<float>(m, n, c, ci, y);
      return Status::OK();
    }
    // A row-vector C with alpha == 1 is a bias; anything else is written into y first and accumulated.
    const bool as_bias = ci.use && ci.rows == 1 && ci.cols == n && alpha_ == 1.f;
    std::vector<float> scaled_bias;
    const float* bias = nullptr;
    if (as_bias) {
      bias = c;
      if (beta_ != 1.f) {
        scaled_bias.resize(n);
        for (int64_t j = 0; j < n; ++j) scaled_bias[j] = beta_ * c[j];
        bias = scaled_bias.data();
      }
    } else if (ci.use) {
      FillC<float>(m, n, c, ci, y);
    }
    auto plan = runner_.GetPlan(Spec(m, k, n, ci.use && !as_bias, as_bias), threads);
    if (plan) return runner_.Run(*plan, a, b, bias, y, threads).WithContext(ctx.node().Describe());
    if (as_bias) FillC<float>(m, n, c, ci, y);
    return RunPlain<float>(m, k, n, a, b, nullptr, CInfo{false, 1, 1}, y, threads, /*accumulate_y=*/ci.use);
  }

  // y = alpha * op(A) op(B) + beta * C with plain loops. When accumulate_y, y already holds beta * C.
  template <typename T>
  Status RunPlain(int64_t m, int64_t k, int64_t n, const T* a, const T* b, const T* c, const CInfo& ci, T* y,
                  int threads, bool accumulate_y = false) const {
    std::vector<T> at, bt;
    if (trans_a_) {
      at.resize(m * k);
      for (int64_t i = 0; i < k; ++i)
        for (int64_t j = 0; j < m; ++j) at[j * k + i] = a[i * m + j];
      a = at.data();
    }
    if (trans_b_) {
      bt.resize(k * n);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < k; ++j) bt[j * n + i] = b[i * k + j];
      b = bt.data();
    }
    std::vector<T> prod(m * n);
    GemmPlain<T>(m, n, k, a, b, prod.data(), false, threads);
    if (ci.use && c) FillC<T>(m, n, c, ci, y);
    const bool add = accumulate_y || (ci.use && c);
    for (int64_t i = 0; i < m * n; ++i) {
      T v = alpha_ == 1.f ? prod[i] : static_cast<T>(alpha_ * prod[i]);
      if constexpr (std::is_integral_v<T>) {  // wrap like the products instead of signed-overflow UB
        using U = std::make_unsigned_t<T>;
        y[i] = add ? static_cast<T>(static_cast<U>(y[i]) + static_cast<U>(v)) : v;
      } else {
        y[i] = add ? y[i] + v : v;
      }
    }
    return Status::OK();
  }

  bool trans_a_ = false, trans_b_ = false;
  float alpha_ = 1.f, beta_ = 1.f;
  DnnlMatMulRunner runner_;
};

}  // namespace

void RegisterMatMulKernels(KernelRegistry& r) {
  r.Register("", "MatMul", MakeFactory<MatMulKernel>());
  r.Register("", "Gemm", [](const KernelInfo& info) { return GemmKernel::Create(info); });
}

}  // namespace nn
}  // namespace epctx
