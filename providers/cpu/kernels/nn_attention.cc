// Transformer kernels of opsets 23-24: RotaryEmbedding-23 and Attention-23/24 (float), following the ONNX
// reference (onnx/reference/ops/op_rotary_embedding.py, op_attention.py): 3-D inputs are viewed as
// (batch, seq, heads, head_size), 4-D ones are (batch, heads, seq, head_size).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "providers/cpu/kernel.h"

namespace epctx {
namespace {

using KernelPtr = std::unique_ptr<OpKernel>;

StatusOr<std::vector<int64_t>> Int64Values(const KernelContext& ctx, const Tensor& t, const char* what) {
  std::vector<int64_t> v(static_cast<size_t>(t.NumElements()));
  if (t.dtype() == DataType::kInt64) {
    std::copy_n(t.data<int64_t>(), v.size(), v.begin());
  } else if (t.dtype() == DataType::kInt32) {
    std::copy_n(t.data<int32_t>(), v.size(), v.begin());
  } else {
    return ctx.Error(ErrorCode::INVALID_ARGUMENT, what, " must be int32 or int64, got ", DataTypeName(t.dtype()));
  }
  return v;
}

// ---------------------------------------------------------------------------------------------------------------
// RotaryEmbedding: rotates the first rotary_embedding_dim values of each head by position-dependent angles, as
// pairs (x[i], x[i + rd/2]) or, interleaved, (x[2i], x[2i+1]).

class RotaryEmbeddingKernel final : public OpKernel {
 public:
  static StatusOr<KernelPtr> Create(const KernelInfo& info) {
    auto k = std::make_unique<RotaryEmbeddingKernel>();
    k->interleaved_ = info.GetInt("interleaved", 0) != 0;
    k->num_heads_ = info.GetInt("num_heads", 0);
    k->rotary_dim_ = info.GetInt("rotary_embedding_dim", 0);
    if (k->num_heads_ < 0 || k->rotary_dim_ < 0)
      return info.Error(ErrorCode::INVALID_GRAPH, "num_heads and rotary_embedding_dim must not be negative");
    return KernelPtr(std::move(k));
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    const Tensor* cos = ctx.Input(1);
    const Tensor* sin = ctx.Input(2);
    const Tensor* pos = ctx.Input(3);
    if (!x || !cos || !sin) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "inputs X, cos_cache and sin_cache are required");
    if (x->dtype() != DataType::kFloat || cos->dtype() != DataType::kFloat || sin->dtype() != DataType::kFloat)
      return ctx.Error(ErrorCode::NOT_IMPLEMENTED, "element type ", DataTypeName(x->dtype()),
                       " is not supported (float only)");
    int64_t b, s, h, d;
    bool four_d = x->rank() == 4;
    if (four_d) {
      b = x->dim(0), h = x->dim(1), s = x->dim(2), d = x->dim(3);
    } else if (x->rank() == 3) {
      if (num_heads_ <= 0 || x->dim(2) % num_heads_ != 0)
        return ctx.Error(ErrorCode::INVALID_ARGUMENT, "a 3-D X needs num_heads dividing its hidden size ", x->dim(2));
      b = x->dim(0), s = x->dim(1), h = num_heads_, d = x->dim(2) / num_heads_;
    } else {
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "X must be 3-D or 4-D, got ", ShapeToString(x->shape()));
    }
    const int64_t rd = rotary_dim_ == 0 ? d : rotary_dim_;
    if (rd > d || rd % 2 != 0)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "rotary_embedding_dim ", rd, " must be even and <= head size ", d);
    const int64_t half = rd / 2;
    std::vector<int64_t> ids;
    if (pos) {
      ASSIGN_OR_RETURN(ids, Int64Values(ctx, *pos, "position_ids"));
      if (pos->rank() != 2 || pos->dim(0) != b || pos->dim(1) != s)
        return ctx.Error(ErrorCode::INVALID_ARGUMENT, "position_ids ", ShapeToString(pos->shape()), " must be (", b, ", ",
                         s, ")");
      if (cos->rank() != 2 || cos->dim(1) != half || sin->shape() != cos->shape())
        return ctx.Error(ErrorCode::INVALID_ARGUMENT, "cos_cache/sin_cache ", ShapeToString(cos->shape()),
                         " must be (max_position + 1, ", half, ")");
      for (int64_t p : ids)
        if (p < 0 || p >= cos->dim(0))
          return ctx.Error(ErrorCode::INVALID_ARGUMENT, "position id ", p, " is outside the cache of ", cos->dim(0));
    } else if (cos->rank() != 3 || cos->dim(0) != b || cos->dim(1) != s || cos->dim(2) != half ||
               sin->shape() != cos->shape()) {
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "without position_ids cos_cache/sin_cache ",
                       ShapeToString(cos->shape()), " must be (", b, ", ", s, ", ", half, ")");
    }
    ASSIGN_OR_RETURN(Tensor * y, ctx.OutputForOverwrite(0, x->dtype(), x->shape()));
    const float* xp = x->data<float>();
    const float* cp = cos->data<float>();
    const float* sp = sin->data<float>();
    float* yp = y->data<float>();
    const bool inter = interleaved_;
    ParallelFor(ctx.num_threads(), b * s, static_cast<double>(h * d), [&](int64_t lo, int64_t hi) {
      for (int64_t bs = lo; bs < hi; ++bs) {
        const int64_t bi = bs / s, si = bs % s;
        const int64_t row = pos ? ids[bs] : bs;
        const float* c = cp + row * half;
        const float* sn = sp + row * half;
        for (int64_t hi2 = 0; hi2 < h; ++hi2) {
          // Offset of (bi, hi2, si, 0) in X's layout.
          const int64_t off = four_d ? ((bi * h + hi2) * s + si) * d : ((bi * s + si) * h + hi2) * d;
          const float* in = xp + off;
          float* out = yp + off;
          if (inter) {
            for (int64_t i = 0; i < half; ++i) {
              const float x1 = in[2 * i], x2 = in[2 * i + 1];
              out[2 * i] = c[i] * x1 - sn[i] * x2;
              out[2 * i + 1] = sn[i] * x1 + c[i] * x2;
            }
          } else {
#pragma omp simd
            for (int64_t i = 0; i < half; ++i) {
              const float x1 = in[i], x2 = in[i + half];
              out[i] = c[i] * x1 - sn[i] * x2;
              out[i + half] = sn[i] * x1 + c[i] * x2;
            }
          }
          for (int64_t i = rd; i < d; ++i) out[i] = in[i];
        }
      }
    });
    return Status::OK();
  }

 private:
  bool interleaved_ = false;
  int64_t num_heads_ = 0, rotary_dim_ = 0;
};

// ---------------------------------------------------------------------------------------------------------------
// Attention: softmax(softcap(Q K^T * scale) + bias) V per (batch, query head); key/value head = query head /
// (q_heads / kv_heads) (grouped-query attention). past_key/past_value are prepended to K/V and returned as
// present_key/present_value. The bias comes from attn_mask (bool: false -> -inf; float: added; its last dim may be
// shorter than the total length, the rest masked), is_causal (a query at i sees keys j <= i + past length) and,
// from opset 24, nonpad_kv_seqlen (keys j >= nonpad[b] masked). Output 3 is the QK matrix at the stage
// qk_matmul_output_mode names (0 raw, 1 softcapped, 2 with bias, 3 softmax).

class AttentionKernel final : public OpKernel {
 public:
  static StatusOr<KernelPtr> Create(const KernelInfo& info) {
    auto k = std::make_unique<AttentionKernel>();
    k->causal_ = info.GetInt("is_causal", 0) != 0;
    k->q_heads_ = info.GetInt("q_num_heads", 0);
    k->kv_heads_ = info.GetInt("kv_num_heads", 0);
    k->has_scale_ = info.HasAttr("scale");
    k->scale_ = info.GetFloat("scale", 1.0f);
    k->softcap_ = info.GetFloat("softcap", 0.0f);
    k->qk_mode_ = info.GetInt("qk_matmul_output_mode", 0);
    if (k->qk_mode_ < 0 || k->qk_mode_ > 3)
      return info.Error(ErrorCode::INVALID_GRAPH, "qk_matmul_output_mode must be 0..3, got ", k->qk_mode_);
    const int64_t sp = info.GetInt("softmax_precision", 0);
    if (sp != 0 && sp != static_cast<int64_t>(DataType::kFloat))
      return info.Error(ErrorCode::NOT_IMPLEMENTED, "softmax_precision ", sp, " is not supported (float only)");
    return KernelPtr(std::move(k));
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* q = ctx.Input(0);
    const Tensor* k = ctx.Input(1);
    const Tensor* v = ctx.Input(2);
    const Tensor* mask = ctx.Input(3);
    const Tensor* past_k = ctx.Input(4);
    const Tensor* past_v = ctx.Input(5);
    const Tensor* nonpad = ctx.Input(6);
    if (!q || !k || !v) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "inputs Q, K and V are required");
    for (const Tensor* t : {q, k, v, past_k, past_v})
      if (t && t->dtype() != DataType::kFloat)
        return ctx.Error(ErrorCode::NOT_IMPLEMENTED, "element type ", DataTypeName(t->dtype()),
                         " is not supported (float only)");
    if (q->rank() != k->rank() || q->rank() != v->rank() || (q->rank() != 3 && q->rank() != 4))
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "Q, K and V must all be 3-D or all 4-D, got ",
                       ShapeToString(q->shape()), ", ", ShapeToString(k->shape()), ", ", ShapeToString(v->shape()));
    const bool three_d = q->rank() == 3;
    const int64_t batch = q->dim(0);
    int64_t hq, hkv, sq, skv, d, dv;
    if (three_d) {
      if (q_heads_ <= 0 || kv_heads_ <= 0)
        return ctx.Error(ErrorCode::INVALID_ARGUMENT, "3-D inputs need q_num_heads and kv_num_heads");
      hq = q_heads_, hkv = kv_heads_, sq = q->dim(1), skv = k->dim(1);
      if (q->dim(2) % hq || k->dim(2) % hkv || v->dim(2) % hkv)
        return ctx.Error(ErrorCode::INVALID_ARGUMENT, "hidden sizes are not multiples of the head counts");
      d = q->dim(2) / hq, dv = v->dim(2) / hkv;
      if (k->dim(2) / hkv != d) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "Q and K head sizes differ");
    } else {
      hq = q->dim(1), hkv = k->dim(1), sq = q->dim(2), skv = k->dim(2), d = q->dim(3), dv = v->dim(3);
      if (k->dim(3) != d || v->dim(1) != hkv || v->dim(2) != skv)
        return ctx.Error(ErrorCode::INVALID_ARGUMENT, "K ", ShapeToString(k->shape()), " / V ",
                         ShapeToString(v->shape()), " do not match Q ", ShapeToString(q->shape()));
    }
    if (k->dim(0) != batch || v->dim(0) != batch || (three_d && v->dim(1) != skv))
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "Q, K and V disagree on batch or key length");
    if (hkv <= 0 || hq % hkv != 0)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "q heads ", hq, " are not a multiple of kv heads ", hkv);
    const int64_t past = past_k ? past_k->dim(2) : 0;
    if ((past_k == nullptr) != (past_v == nullptr))
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "past_key and past_value must be given together");
    if (past_k && (past_k->rank() != 4 || past_k->dim(0) != batch || past_k->dim(1) != hkv || past_k->dim(3) != d ||
                   past_v->rank() != 4 || past_v->dim(0) != batch || past_v->dim(1) != hkv || past_v->dim(2) != past ||
                   past_v->dim(3) != dv))
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "past_key ", ShapeToString(past_k->shape()), " / past_value ",
                       ShapeToString(past_v->shape()), " do not match (", batch, ", ", hkv, ", past, head)");
    const int64_t total = past + skv;

    // present K/V (B, Hkv, total, d|dv), contiguous, in the 4-D layout.
    ASSIGN_OR_RETURN(Tensor kall, Tensor::Allocate(DataType::kFloat, {batch, hkv, total, d}));
    ASSIGN_OR_RETURN(Tensor vall, Tensor::Allocate(DataType::kFloat, {batch, hkv, total, dv}));
    Gather(*k, past_k, three_d, batch, hkv, skv, past, d, kall.data<float>());
    Gather(*v, past_v, three_d, batch, hkv, skv, past, dv, vall.data<float>());

    std::vector<int64_t> nonpad_len;
    if (nonpad) {
      ASSIGN_OR_RETURN(nonpad_len, Int64Values(ctx, *nonpad, "nonpad_kv_seqlen"));
      if (static_cast<int64_t>(nonpad_len.size()) != batch)
        return ctx.Error(ErrorCode::INVALID_ARGUMENT, "nonpad_kv_seqlen has ", nonpad_len.size(), " values for batch ",
                         batch);
    }
    // Mask broadcast to (B, Hq, Sq, mask_len) through strides (0 on broadcast dims); mask_len <= total.
    int64_t mstride[4] = {0, 0, 0, 0}, mlen = 0;
    if (mask) {
      if (mask->dtype() != DataType::kBool && mask->dtype() != DataType::kFloat)
        return ctx.Error(ErrorCode::NOT_IMPLEMENTED, "attn_mask of type ", DataTypeName(mask->dtype()),
                         " is not supported (bool or float)");
      const Shape& ms = mask->shape();
      if (ms.size() < 2 || ms.size() > 4 || ms.back() > total)
        return ctx.Error(ErrorCode::INVALID_ARGUMENT, "attn_mask ", ShapeToString(ms), " does not broadcast to (", batch,
                         ", ", hq, ", ", sq, ", ", total, ")");
      mlen = ms.back();
      const int64_t full[4] = {batch, hq, sq, mlen};
      int64_t st = 1;
      for (size_t i = ms.size(); i-- > 0;) {
        const size_t fi = 4 - ms.size() + i;
        if (ms[i] != 1 && ms[i] != full[fi])
          return ctx.Error(ErrorCode::INVALID_ARGUMENT, "attn_mask ", ShapeToString(ms), " does not broadcast to (",
                           batch, ", ", hq, ", ", sq, ", ", total, ")");
        mstride[fi] = ms[i] == 1 ? 0 : st;
        st *= ms[i];
      }
    }
    const float scale = has_scale_ ? scale_ : 1.0f / std::sqrt(static_cast<float>(d));

    Shape y_shape = three_d ? Shape{batch, sq, hq * dv} : Shape{batch, hq, sq, dv};
    ASSIGN_OR_RETURN(Tensor * y, ctx.OutputForOverwrite(0, DataType::kFloat, y_shape));
    if (ctx.OutputRequested(1)) {
      ASSIGN_OR_RETURN(Tensor * pk, ctx.OutputForOverwrite(1, DataType::kFloat, kall.shape()));
      std::copy_n(kall.data<float>(), kall.NumElements(), pk->data<float>());
    }
    if (ctx.OutputRequested(2)) {
      ASSIGN_OR_RETURN(Tensor * pv, ctx.OutputForOverwrite(2, DataType::kFloat, vall.shape()));
      std::copy_n(vall.data<float>(), vall.NumElements(), pv->data<float>());
    }
    float* qk_out = nullptr;
    if (ctx.num_outputs() > 3 && ctx.OutputRequested(3)) {
      ASSIGN_OR_RETURN(Tensor * t, ctx.OutputForOverwrite(3, DataType::kFloat, {batch, hq, sq, total}));
      qk_out = t->data<float>();
    }
    const float* qp = q->data<float>();
    const float* kp = kall.data<float>();
    const float* vp = vall.data<float>();
    float* yp = y->data<float>();
    const bool causal = causal_;
    const float cap = softcap_;
    const int64_t mode = qk_mode_, group = hq / hkv;
    const float neg_inf = -std::numeric_limits<float>::infinity();
    ParallelFor(ctx.num_threads(), batch * hq * sq, static_cast<double>(total * (d + dv) * 2), [&](int64_t lo, int64_t hi) {
      std::vector<float> row(static_cast<size_t>(total)), acc(static_cast<size_t>(dv));
      for (int64_t it = lo; it < hi; ++it) {
        const int64_t bi = it / (hq * sq), h = (it / sq) % hq, i = it % sq, kh = h / group;
        const float* qrow = three_d ? qp + ((bi * sq + i) * hq + h) * d : qp + ((bi * hq + h) * sq + i) * d;
        const float* kb = kp + (bi * hkv + kh) * total * d;
        const float* vb = vp + (bi * hkv + kh) * total * dv;
        float* qko = qk_out ? qk_out + it * total : nullptr;
        // Causal frontier: keys j <= i + offset are visible.
        int64_t offset = past;
        if (!past_k && nonpad) offset = nonpad_len[bi] - sq;
        for (int64_t j = 0; j < total; ++j) {
          const float* krow = kb + j * d;
          float dot = 0;
#pragma omp simd reduction(+ : dot)
          for (int64_t c = 0; c < d; ++c) dot += qrow[c] * krow[c];
          float x = dot * scale;
          if (qko && mode == 0) qko[j] = x;
          if (cap > 0) x = std::tanh(x / cap) * cap;
          if (qko && mode == 1) qko[j] = x;
          float bias = 0;
          if (mask) {
            if (j >= mlen) {
              bias = neg_inf;
            } else {
              const int64_t mi = bi * mstride[0] + h * mstride[1] + i * mstride[2] + j * mstride[3];
              if (mask->dtype() == DataType::kBool) bias = mask->data<bool>()[mi] ? 0.0f : neg_inf;
              else bias = mask->data<float>()[mi];
            }
          }
          if (causal && j > i + offset) bias = neg_inf;
          if (nonpad && j >= nonpad_len[bi]) bias = neg_inf;
          x += bias;
          if (qko && mode == 2) qko[j] = x;
          row[j] = x;
        }
        float mx = neg_inf;
        for (int64_t j = 0; j < total; ++j) mx = std::max(mx, row[j]);
        float sum = 0;
        for (int64_t j = 0; j < total; ++j) {
          row[j] = mx == neg_inf ? 0.0f : std::exp(row[j] - mx);
          sum += row[j];
        }
        const float inv = sum > 0 ? 1.0f / sum : 0.0f;
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int64_t j = 0; j < total; ++j) {
          const float p = row[j] * inv;
          if (qko && mode == 3) qko[j] = p;
          if (p == 0) continue;
          const float* vrow = vb + j * dv;
          float* a = acc.data();
#pragma omp simd
          for (int64_t c = 0; c < dv; ++c) a[c] += p * vrow[c];
        }
        float* out = three_d ? yp + ((bi * sq + i) * hq + h) * dv : yp + ((bi * hq + h) * sq + i) * dv;
        std::copy(acc.begin(), acc.end(), out);
      }
    });
    return Status::OK();
  }

 private:
  // Writes past (B, H, past, w) followed by cur (3-D (B, S, H * w) or 4-D (B, H, S, w)) into dst (B, H, past + S, w).
  static void Gather(const Tensor& cur, const Tensor* past_t, bool three_d, int64_t b, int64_t h, int64_t s,
                     int64_t past, int64_t w, float* dst) {
    const float* c = cur.data<float>();
    const float* p = past_t ? past_t->data<float>() : nullptr;
    const int64_t total = past + s;
    for (int64_t bi = 0; bi < b; ++bi)
      for (int64_t hi = 0; hi < h; ++hi) {
        float* o = dst + (bi * h + hi) * total * w;
        if (p) std::copy_n(p + (bi * h + hi) * past * w, past * w, o);
        for (int64_t si = 0; si < s; ++si) {
          const float* src = three_d ? c + ((bi * s + si) * h + hi) * w : c + ((bi * h + hi) * s + si) * w;
          std::copy_n(src, w, o + (past + si) * w);
        }
      }
  }

  bool causal_ = false, has_scale_ = false;
  int64_t q_heads_ = 0, kv_heads_ = 0, qk_mode_ = 0;
  float scale_ = 1.0f, softcap_ = 0.0f;
};

}  // namespace

void RegisterAttentionKernels(KernelRegistry& r) {
  r.Register("", "RotaryEmbedding", RotaryEmbeddingKernel::Create, 23);
  r.Register("", "Attention", AttentionKernel::Create, 23);
}

}  // namespace epctx
