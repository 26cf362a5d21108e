// Conv and ConvTranspose (1-D ones as 2-D with H = 1): support check, lowering with the fusion chain and the layout
// and thread probing, the kConv/kDeconv step builders, and the rewrite SplitConvTransposeBias. Step parameters and the
// fusion rule: nn_common.h.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <omp.h>

#include "providers/aotcpu/lower/nn_common.h"

namespace epctx {
namespace aotcpu {
namespace {

template <typename Prim>
typename Prim::primitive_desc MakeConvPd(const ConvSpec& s, const Md& src, const Md& wt, const Md& bias, const Md& dst,
                                         const dnnl::primitive_attr& attr, dnnl::engine& eng) {
  const dnnl::algorithm alg = s.deconv ? dnnl::algorithm::deconvolution_direct : dnnl::algorithm::convolution_direct;
  memory::dims pe = s.w.pad_end_dnnl;
  if (bias.data.ndims == 0) {
    typename Prim::desc d(dnnl::prop_kind::forward_inference, alg, src, wt, dst, s.w.stride, DnnlDilations(s.w),
                          s.w.pad_begin, pe);
    return typename Prim::primitive_desc(d, attr, eng);
  }
  typename Prim::desc d(dnnl::prop_kind::forward_inference, alg, src, wt, bias, dst, s.w.stride, DnnlDilations(s.w),
                        s.w.pad_begin, pe);
  return typename Prim::primitive_desc(d, attr, eng);
}

struct PdDescs {
  Md src, weights, dst;
  std::string impl;
};

// Creates the (de)convolution pd; false when oneDNN refuses.
bool TryConvPd(const ConvSpec& s, const Md& src, const Md& wt, const Md& bias, const Md& dst,
               const dnnl::primitive_attr& attr, PdDescs* out) {
  try {
    if (s.deconv) {
      auto pd = MakeConvPd<dnnl::deconvolution_forward>(s, src, wt, bias, dst, attr, ProbeEngine());
      *out = {pd.src_desc(), pd.weights_desc(), pd.dst_desc(), pd.impl_info_str()};
    } else {
      auto pd = MakeConvPd<dnnl::convolution_forward>(s, src, wt, bias, dst, attr, ProbeEngine());
      *out = {pd.src_desc(), pd.weights_desc(), pd.dst_desc(), pd.impl_info_str()};
    }
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}


// ---- 1-D convolutions as 2-D ones with H = 1 ---------------------------------------------------------------------
//
// oneDNN 2.6 has depthwise jit kernels (jit_dw) for 2-D problems only: a 1-D depthwise convolution got the gemm-based
// kernel (im2col + sgemm, whose sgemm is JIT-generated on the first run; Silero VAD v4's
// g258mb1_ic258oc258_iw24ow24kw5). So every 1-D (de)convolution is lowered as the 2-D one with H = 1: its step
// describes src, dst and the binary post-op operands as 4-D views [N, C, 1, W] of the bytes their 3-D values hold
// (ncw, nwc, nCw16c, nCw8c are nchw, nhwc, nChw16c, nChw8c with H = 1, so no copy is made), and weights packed for
// the 2-D primitive ([g,] OC/g, IC/g, 1, k). Other steps read the 3-D values as before. The program format does not
// change: the step is an ordinary 2-D convolution over operands any build checks and runs.

// `d` (rank 3: N, C, W) with a size-1 H inserted at axis 2, strided as the 4-D tags stride it (just outside W: nchw
// W, nhwc W*C, nChw16c 16*W): oneDNN's kernels compare strides of size-1 dims too (see SameLayout), and the view
// then names the 4-D tag exactly. Empty when `d` is not a blocked rank-3 layout.
Md InsertH(const Md& d) {
  const dnnl_memory_desc_t& md = d.data;
  if (md.ndims != 3 || md.format_kind != dnnl_blocked || md.offset0 != 0 || md.extra.flags != 0) return Md();
  dnnl_memory_desc_t out = md;
  out.ndims = 4;
  out.dims[3] = md.dims[2];
  out.padded_dims[3] = md.padded_dims[2];
  out.padded_offsets[3] = md.padded_offsets[2];
  out.dims[2] = out.padded_dims[2] = 1;
  out.padded_offsets[2] = 0;
  dnnl_blocking_desc_t& b = out.format_desc.blocking;
  b.strides[3] = md.format_desc.blocking.strides[2];
  b.strides[2] = b.strides[3] * md.padded_dims[2];
  for (int i = 0; i < b.inner_nblks; ++i)
    if (b.inner_idxs[i] >= 2) ++b.inner_idxs[i];
  return Md(out);
}

// The inverse: `d` (rank 4, H = 1, unpadded and unblocked) without its H. Empty otherwise.
Md DropH(const Md& d) {
  const dnnl_memory_desc_t& md = d.data;
  if (md.ndims != 4 || md.format_kind != dnnl_blocked || md.offset0 != 0 || md.extra.flags != 0) return Md();
  if (md.dims[2] != 1 || md.padded_dims[2] != 1 || md.padded_offsets[2] != 0) return Md();
  dnnl_memory_desc_t out = md;
  dnnl_blocking_desc_t& b = out.format_desc.blocking;
  for (int i = 0; i < b.inner_nblks; ++i) {
    if (b.inner_idxs[i] == 2) return Md();
    if (b.inner_idxs[i] > 2) --b.inner_idxs[i];
  }
  out.ndims = 3;
  out.dims[2] = md.dims[3];
  out.padded_dims[2] = md.padded_dims[3];
  out.padded_offsets[2] = md.padded_offsets[3];
  b.strides[2] = md.format_desc.blocking.strides[3];
  out.dims[3] = out.padded_dims[3] = 0;
  out.padded_offsets[3] = 0;
  b.strides[3] = 0;
  return Md(out);
}

// A 3-D activation's layout as the lifted step's operand describes it (empty when no program can).
Md LiftDesc(const Md& d3) { return AsStored(InsertH(d3)); }

// A 4-D layout oneDNN chose as it comes back through the 3-D value the compiler defines or reads: the layout the
// lifted step's operand will have. Empty when the 3-D layout has no program form or H is not just outside W.
Md ThroughThreeD(const Md& d4) {
  const Md d3 = AsStored(DropH(d4));
  return d3.data.ndims == 0 ? Md() : LiftDesc(d3);
}

// The 4-D view of a 3-D activation operand: same buffer, offset and bytes. kNone when its layout has no 4-D form.
Operand LiftOperand(const Operand& op) {
  Md d;
  if (!op.present() || !OperandDesc(op, &d).ok) return Operand();
  Operand out = op;
  if (!LayoutFromDesc(InsertH(d), &out)) return Operand();
  return out;
}

// The 1-D problem as the 2-D one with H = 1: kernel 1, stride 1, dilation 1, no padding along H.
void LiftSpec(ConvSpec* s) {
  Window& w = s->w;
  for (std::vector<int64_t>* v : {&w.in, &w.out, &w.kernel, &w.stride, &w.dilation})
    v->insert(v->begin(), 1);
  for (std::vector<int64_t>* v : {&w.pad_begin, &w.pad_end, &w.pad_end_dnnl}) v->insert(v->begin(), 0);
  s->src_dims.insert(s->src_dims.begin() + 2, 1);
  s->dst_dims.insert(s->dst_dims.begin() + 2, 1);
  s->wdims.insert(s->wdims.end() - 1, 1);
}


CheckResult LowerConvLike(LowerContext& ctx, int node, bool deconv) {
  const Graph& g = ctx.graph();
  const Node& n = ctx.node(node);
  ConvSpec spec;
  std::string why;
  if (!ResolveConv(g, n, deconv, &spec, &why)) return ctx.Fail(node, why);
  const bool portable = ctx.options().portable_layouts;
  // A 1-D problem runs as the 2-D one with H = 1 (LiftSpec): every candidate below is the lifted problem, and its
  // activation operands are 4-D views of the 3-D values (`lifted` for layouts, `view` for operands).
  const bool lift = spec.w.rank() == 1;
  if (lift) LiftSpec(&spec);
  auto lifted = [lift](const Md& d) { return lift ? LiftDesc(d) : d; };
  auto view = [lift](const Operand& o) { return lift ? LiftOperand(o) : o; };

  // Weights in oneDNN's logical order [g][OC/g][IC/g][k...], row-major. Conv's ONNX layout already is; the
  // transposed convolution's ONNX weights are [g][IC/g][OC/g][k...].
  const int wv = In(n, 1), bv = In(n, 2);
  const float* wsrc = ConstF32(g, wv);
  const int64_t ksize = static_cast<int64_t>(g.v(wv).numel()) / (g.v(wv).dims[0] * g.v(wv).dims[1]);
  const int64_t ocg = spec.oc / spec.groups, icg = spec.ic / spec.groups;
  // A later shape of a dynamic graph replays the first shape's folding (LoweringMemo::Fold): the same constants give
  // the same weights and bias, so neither is copied or folded again.
  LoweringMemo* memo = ctx.options().memo.get();
  std::shared_ptr<const std::vector<float>> memo_wts;
  std::vector<float> wts, bias(static_cast<size_t>(spec.oc), 0.f);
  bool has_bias = bv >= 0;
  std::vector<int> absorbed;
  int cur = Out(n, 0);
  bool replayed = false;
  if (memo) {
    auto it = memo->fold.find(n.name);
    if (it != memo->fold.end()) {
      replayed = true;
      for (const std::string& name : it->second.absorbed) {
        const int next = ctx.SoleConsumer(cur);
        if (next < 0 || ctx.IsAbsorbed(next) || ctx.node(next).name != name) {
          replayed = false;
          break;
        }
        absorbed.push_back(next);
        cur = Out(ctx.node(next), 0);
      }
      if (replayed) {
        memo_wts = it->second.weights;
        bias = it->second.bias;
        has_bias = it->second.has_bias;
      } else {
        absorbed.clear();
        cur = Out(n, 0);
      }
    }
  }
  if (!replayed) {
    wts.resize(static_cast<size_t>(g.v(wv).numel()));
    if (!deconv) {
      std::memcpy(wts.data(), wsrc, wts.size() * sizeof(float));
    } else {
      for (int64_t gi = 0; gi < spec.groups; ++gi)
        for (int64_t o = 0; o < ocg; ++o)
          for (int64_t i = 0; i < icg; ++i)
            std::memcpy(&wts[static_cast<size_t>(((gi * ocg + o) * icg + i) * ksize)],
                        wsrc + ((gi * icg + i) * ocg + o) * ksize, static_cast<size_t>(ksize) * sizeof(float));
    }
    if (has_bias) std::memcpy(bias.data(), ConstF32(g, bv), bias.size() * sizeof(float));

    // Fusion chain: BatchNormalizations and per-channel affine maps by constants folded into weights and bias, then
    // post-ops. PaddlePaddle exports spell batch normalization and "learnable affine blocks" as Mul/Add by constants
    // (PP-OCRv4's detector: 56 of them, each a step of its own, 28% of the run, issue 14).
    // Neither into a transposed convolution: oneDNN 2.6 runs a deconvolution's bias and post-ops in slow loops of
    // their own (PP-OCRv4's upsampling ConvTransposes, 24 and 1 output channels, blocked: 0.8 -> 8.7 ms and 1.8 ->
    // 11-16 ms with a folded bias, 1.8 -> 106 ms with a linear post-op; the same implementation name).
    while (!deconv) {
      const int next = ctx.SoleConsumer(cur);
      if (next < 0 || ctx.IsAbsorbed(next)) break;
      std::vector<double> fold_scale, fold_shift;
      if (!FoldableBatchNorm(g, ctx.node(next), cur, spec.oc, &fold_scale, &fold_shift) &&
          !ChannelAffine(g, ctx.node(next), cur, spec.oc, &fold_scale, &fold_shift))
        break;
      const int64_t per_oc = icg * ksize;
      std::vector<float> new_wts = wts, new_bias = bias;
      bool finite = true;
      for (int64_t c = 0; c < spec.oc && finite; ++c) {
        const double s = fold_scale[static_cast<size_t>(c)];
        float* wp = &new_wts[static_cast<size_t>(c * per_oc)];
        for (int64_t j = 0; j < per_oc; ++j) {
          wp[j] = static_cast<float>(static_cast<double>(wp[j]) * s);
          finite = finite && std::isfinite(wp[j]);
        }
        float& b = new_bias[static_cast<size_t>(c)];
        b = static_cast<float>(static_cast<double>(b) * s + fold_shift[static_cast<size_t>(c)]);
        finite = finite && std::isfinite(b);
      }
      if (!finite) break;  // kept as a step of its own: folding would turn an overflow into another value
      wts.swap(new_wts);
      bias.swap(new_bias);
      has_bias = true;
      absorbed.push_back(next);
      cur = Out(ctx.node(next), 0);
    }
    if (memo) {
      LoweringMemo::Fold f;
      for (int a : absorbed) f.absorbed.push_back(ctx.node(a).name);
      if (deconv || !absorbed.empty()) f.weights = std::make_shared<const std::vector<float>>(wts);
      f.bias = bias;
      f.has_bias = has_bias;
      memo->fold[n.name] = std::move(f);
    }
  }  // !replayed
  // The weights to pack: folded or reordered above (or by the first shape), else the initializer as it is.
  const float* wdata = !wts.empty() ? wts.data() : memo_wts ? memo_wts->data() : wsrc;
  std::vector<FusedOp> chain = deconv ? std::vector<FusedOp>() : CollectPostOps(ctx, cur);
  std::vector<Md> other_mds;
  OtherDescs(ctx, &chain, &other_mds);
  // The binary operands as the primitive sees them (lifted: the chain is cut before one without a 4-D view).
  std::vector<Md> post_mds(other_mds.size());
  for (size_t i = 0; i < other_mds.size(); ++i) {
    if (other_mds[i].data.ndims == 0) continue;  // an eltwise entry
    post_mds[i] = lifted(other_mds[i]);
    if (post_mds[i].data.ndims == 0) {
      chain.resize(i);
      other_mds.resize(i);
      post_mds.resize(i);
      break;
    }
  }

  // Layouts: src as it is when the primitive takes it, else plain; weights and dst chosen by oneDNN.
  const int x = In(n, 0);
  const Md plain_src = PlainDesc(spec.src_dims, kF32);
  const Operand* cur_op = ctx.Peek(x);
  if (!cur_op) cur_op = ctx.PeekView(x);  // a deferred Transpose: its strided layout is the current one (no copy yet)
  Md cur_src = cur_op ? lifted(DescOfOperand(*cur_op)) : plain_src;
  if (cur_src.data.ndims == 0) cur_src = plain_src;
  const Md bias_md = has_bias ? PlainDesc({spec.oc}, kF32) : Md();
  Md w_req = portable ? PlainDesc(spec.wdims, kF32) : F32Desc(spec.wdims, dnnl_format_tag_any);

  // The best implementation wins, ranked reference < gemm-based (im2col on plain layouts, handing plain layouts on
  // to the next step) < oneDNN's direct kernels; among equals the longest fusion chain, then the earlier candidate
  // (no reorder of the source). A shorter chain on a direct kernel beats a longer one on gemm: gemm-based
  // convolutions also JIT oneDNN's sgemm on their first run (~10-20 ms per process on AVX-512, issue 14). The source layout
  // oneDNN prefers ("any") is taken with one reorder of the source when it differs from the current one: on the
  // PaddleOCR classifier a plain source made 51 of 53 convolutions gemm-based (x64:gemm:jit), 90% of its run time
  // (issue 14). Blocked sources need an explicitly blocked dst: with dst "any" some kernels (depthwise) refuse.
  // Among direct kernels oneDNN's brgemm convolutions ("brgconv") beat its older jit ones, and a fused residual Add
  // (a full-tensor binary post-op) is what makes brgconv refuse some problems: on ISNet (AVX-512) the 11 Conv+Relu+Add
  // steps got jit:avx512_core at about half brgconv's speed, so a shorter chain on brgconv (the Add as its own
  // step, one pass over memory) wins over the longer chain on the jit kernel. Without brgemm kernels (AVX2) the
  // search stops at the first direct kernel as before.
  auto brg = [](const std::string& impl) { return impl.rfind("brg", 0) == 0; };
  const unsigned avx512 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core);
  const bool brg_possible = (static_cast<unsigned>(dnnl::get_effective_cpu_isa()) & avx512) == avx512;
  struct Choice {
    bool found = false, plain_src = false, brg = false;
    size_t k = 0;
    int score = -1;
    PdDescs pd;
  };
  Choice best;
  const Md cur_like_dst = SameLayoutAs(cur_src, spec.dst_dims);
  // A later shape of a dynamic graph (CompileOptions::memo): the layouts and fusion the first shape chose, tried
  // first; the search below runs only when they no longer give a direct kernel at every thread count.
  const std::string& memo_key = ctx.node(node).name;
  if (memo && !lift && !portable) {
    auto it = memo->conv.find(memo_key);
    if (it != memo->conv.end() && it->second.fused <= chain.size()) {
      const LoweringMemo::Conv& m = it->second;
      const Md src = m.plain_src ? plain_src : F32Desc(spec.src_dims, m.src_tag);
      const Md wts_md = F32Desc(spec.wdims, m.weights_tag), dst = F32Desc(spec.dst_dims, m.dst_tag);
      const dnnl::primitive_attr attr = PostOpAttr(chain, m.fused, post_mds);
      // Checked at the session's thread count only: the first shape's search found a direct kernel at every count
      // for these layouts, and a later shape whose executor cannot build a step is lowered again without the memo
      // (DynamicGraph::Build), so a kernel missing at one thread costs time, never the run.
      int score = 2;
      std::string impl;
      for (int t : {ProbeThreadCounts()[0]}) {
        OmpThreadsScope scope(t);
        PdDescs again;
        if (!TryConvPd(spec, src, wts_md, bias_md, dst, attr, &again)) {
          score = -1;
          break;
        }
        score = std::min(score, ConvImplScore(again.impl));
        if (impl.empty()) impl = again.impl;
      }
      if (score == 2) {
        best.found = true;
        best.k = m.fused;
        best.plain_src = m.plain_src;
        best.score = score;
        best.pd = {AsStored(src), AsStored(wts_md), AsStored(dst), impl};
        ++memo->hits;
      } else {
        ++memo->misses;
      }
    }
  }
  // Second attempt, when no layout oneDNN chose for the weights can be named: plain weights.
  for (int attempt = 0; attempt < 2 && !best.found; ++attempt) {
    if (attempt == 1) w_req = PlainDesc(spec.wdims, kF32);
    for (size_t k = chain.size() + 1; k-- > 0 && (best.score < 2 || (brg_possible && !best.brg));) {
      const int final_value = k == 0 ? cur : chain[k - 1].out;
      // A value read only as a graph output goes straight to the output buffer, plain.
      const bool plain_dst = portable || (IsGraphOutput(g, final_value) && g.v(final_value).consumers.empty());
      const Md dst_any = plain_dst ? PlainDesc(spec.dst_dims, kF32) : F32Desc(spec.dst_dims, dnnl_format_tag_any);
      const dnnl::primitive_attr attr = PostOpAttr(chain, k, post_mds);
      struct Option {
        Md src, dst;
        bool plain_src;
        bool channels_last = false;  // taken only on a direct kernel (below)
      };
      std::vector<Option> options;
      // Channels-last activations (CompileOptions::channels_last, the layout plan's other candidate): nhwc first, so
      // it wins among equally ranked kernels; the options after it remain for a convolution that has none in it.
      if (!portable && ctx.options().channels_last && !lift) {
        const uint32_t cl = ChannelsLastTag(spec.src_dims.size());
        if (cl != 0)
          options.push_back({F32Desc(spec.src_dims, cl),
                             plain_dst ? PlainDesc(spec.dst_dims, kF32) : F32Desc(spec.dst_dims, cl), false, true});
      }
      if (!portable) {
        options.push_back({F32Desc(spec.src_dims, dnnl_format_tag_any), dst_any, false});
        options.push_back({cur_src, dst_any, false});
        if (!plain_dst && cur_like_dst.data.ndims != 0) options.push_back({cur_src, cur_like_dst, false});
      }
      options.push_back({plain_src, dst_any, !(cur_src == plain_src)});
      // Channel-blocked source and destination (16 for AVX-512, 8 for AVX2): oneDNN's direct jit kernels take them
      // at every thread count, where brgconv (the "any" choice on AVX-512) refuses some batch-1 problems with one
      // thread and the rest is gemm-based (Silero's strided 1-D convolutions, issue 14).
      if (!portable && !plain_dst)
        for (int block : {16, 8}) {
          const uint32_t tag = ChannelBlockedTag(spec.src_dims.size(), block);
          if (tag != 0)
            options.push_back({F32Desc(spec.src_dims, tag), F32Desc(spec.dst_dims, tag), false});
        }
      for (const Option& o : options) {
        for (int resolve_threads : ProbeThreadCounts()) {
          PdDescs pd;
          bool ok;
          {
            OmpThreadsScope scope(resolve_threads);
            ok = TryConvPd(spec, o.src, w_req, bias_md, o.dst, attr, &pd);
          }
          if (!ok) continue;
          // Layouts a program can name (a format tag or strides): oneDNN picks some blocked (de)convolution weights
          // no tag describes, and the compile failed (found by tests/difftest: SAME ConvTranspose after a Conv).
          // A layout given stays as given (oneDNN may report an equal one with other strides on size-1 dims).
          auto given_or = [](const Md& asked, const Md& got) {
            return AsStored(asked.data.format_kind == dnnl_format_kind_any ? got : asked);
          };
          Md src = given_or(o.src, pd.src), wts = given_or(w_req, pd.weights), dst = given_or(o.dst, pd.dst);
          // Lifted: src and dst as they come back through the 3-D values the program defines and reads.
          if (lift) {
            src = ThroughThreeD(src);
            dst = ThroughThreeD(dst);
          }
          if (src.data.ndims == 0 || wts.data.ndims == 0 || dst.data.ndims == 0) continue;
          // The score: the worst implementation the executor gets from these layouts at any thread count.
          int score = ConvImplScore(pd.impl);
          bool all_brg = brg(pd.impl);
          for (int t : ProbeThreadCounts()) {
            OmpThreadsScope scope(t);
            PdDescs again;
            score = TryConvPd(spec, src, wts, bias_md, dst, attr, &again)
                        ? std::min(score, ConvImplScore(again.impl)) : -1;
            if (score < 0) break;
            all_brg = all_brg && brg(again.impl);
          }
          if (score < 0) continue;
          // Channels-last only on oneDNN's direct kernels: its gemm-based convolution on nhwc with groups computed
          // wrong values at avx2 (difftest seed 20261128 model 254: grouped 1x1 and 2x2 convolutions with a residual
          // sum, 14 of 16 outputs off by up to 3.2); the other layouts' gemm path is the one the tests cover.
          if (o.channels_last && score < 2) continue;
          Choice c;
          c.found = true;
          c.k = k;
          c.plain_src = o.plain_src;
          c.score = score;
          c.brg = all_brg && score == 2;
          c.pd = {src, wts, dst, pd.impl};  // as stored, so as the executor creates the primitive
          // Among equals, a transposed convolution takes the layouts with the fewest bytes: oneDNN's "any" pads its
          // channels to blocks of 16, and the detector's last ConvTranspose (1 output channel) ran 3x slower on
          // that padding than on blocks of 8 (4.5 vs 1.4 ms at one thread, the same direct kernels).
          auto bytes = [](const PdDescs& d) { return d.src.get_size() + d.dst.get_size(); };
          const bool smaller = deconv && best.found && c.score == best.score && c.k == best.k &&
                               bytes(c.pd) < bytes(best.pd);
          if (c.score > best.score || smaller || (c.score == best.score && c.brg && !best.brg)) best = c;
        }
      }
    }
  }
  if (!best.found) return ctx.Fail(node, "oneDNN has no implementation for this convolution");
  if (memo && !lift && !portable) {
    LoweringMemo::Conv m{best.k, best.plain_src, FormatTagOf(best.pd.src), FormatTagOf(best.pd.weights),
                         FormatTagOf(best.pd.dst)};
    if ((m.plain_src || m.src_tag) && m.weights_tag && m.dst_tag) memo->conv[memo_key] = m;
  }
  for (size_t i = 0; i < best.k; ++i) absorbed.push_back(chain[i].node);
  const int final_value = best.k == 0 ? cur : chain[best.k - 1].out;

  Step st;
  st.kind = deconv ? StepKind::kDeconv : StepKind::kConv;
  st.name = JoinNames(ctx, node, absorbed);
  // The source exactly as the primitive was created: UseAs makes a view when only the strides of size-1 dims
  // differ (no copy), else the reorder the choice counted.
  // A deferred view (a Transpose) taken in a layout other than plain goes through UseAs alone, which reads it in place
  // when it is that layout (tf2onnx's NHWC input as the nhwc source) and else reorders it once.
  Operand src_op = !best.plain_src && ctx.PeekView(x) ? view(ctx.UseAs(x, lift ? DropH(best.pd.src) : best.pd.src))
                                                      : view(best.plain_src ? ctx.UsePlain(x) : ctx.Use(x));
  if (!SameLayout(DescOfOperand(src_op), best.pd.src))
    src_op = view(ctx.UseAs(x, lift ? DropH(best.pd.src) : best.pd.src));
  if (!SameLayout(DescOfOperand(src_op), best.pd.src)) return ctx.Fail(node, "source operand layout mismatch");
  st.ops.push_back(src_op);
  Operand wop, bop;
  CheckResult r = ctx.PackWeight(WeightName(ctx, node, wv, absorbed.empty() ? "packed" : "fused"), wdata,
                                 PlainDesc(spec.wdims, kF32), best.pd.weights, &wop);
  if (!r.ok) return r;
  st.ops.push_back(wop);
  if (has_bias) {
    std::string bytes(reinterpret_cast<const char*>(bias.data()), bias.size() * sizeof(float));
    r = ctx.AddWeight(WeightName(ctx, node, bv, "bias"), std::move(bytes), bias_md, &bop);
    if (!r.ok) return r;
  }
  st.ops.push_back(bop);
  st.ops.push_back(Operand());  // dst, defined after every input is used
  r = AppendPostOps(ctx, node, chain, best.k, other_mds, &st);
  if (!r.ok) return r;
  for (size_t i = 4; i < st.ops.size(); ++i) {
    st.ops[i] = view(st.ops[i]);
    if (!st.ops[i].present()) return ctx.Fail(node, "residual operand has no 4-D view");
  }
  st.ops[3] = view(ctx.Define(final_value, lift ? DropH(best.pd.dst) : best.pd.dst));
  if (lift && !SameLayout(DescOfOperand(st.ops[3]), best.pd.dst))
    return ctx.Fail(node, "destination operand layout mismatch");
  st.ints.push_back(spec.groups);
  st.ints.push_back(static_cast<int64_t>(spec.w.rank()));
  std::vector<int64_t> dil = DnnlDilations(spec.w);
  for (const std::vector<int64_t>* v : {&spec.w.stride, &dil, &spec.w.pad_begin, &spec.w.pad_end_dnnl})
    st.ints.insert(st.ints.end(), v->begin(), v->end());
  for (int a : absorbed) ctx.Absorb(a);
  ctx.Emit(std::move(st));
  return Ok();
}

bool SupportConvLike(const Graph& g, const Node& n, bool deconv, std::string* why) {
  ConvSpec spec;
  if (!ResolveConv(g, n, deconv, &spec, why)) return false;
  PdDescs pd;
  const Md bias = In(n, 2) >= 0 ? PlainDesc({spec.oc}, kF32) : Md();
  if (!TryConvPd(spec, PlainDesc(spec.src_dims, kF32), F32Desc(spec.wdims, dnnl_format_tag_any), bias,
                 PlainDesc(spec.dst_dims, kF32), dnnl::primitive_attr(), &pd))
    return Reject(why, "oneDNN has no implementation for this geometry");
  return true;
}


CheckResult BuildConvLike(BuildContext& bc, std::unique_ptr<StepExec>* out, bool deconv) {
  const Step& s = bc.step();
  if (s.ints.size() < 2) return bc.Fail("expected groups and spatial rank in ints");
  const int64_t groups = s.ints[0], r64 = s.ints[1];
  if (r64 < 1 || r64 > 3) return bc.Fail("spatial rank " + I2S(r64) + " is outside 1..3");
  const size_t r = static_cast<size_t>(r64);
  CheckResult c = bc.ExpectCounts(4, true, 2 + 4 * r, 0);
  if (!c.ok) return c;
  if (groups < 1 || groups > kMaxWindow) return bc.Fail("groups " + I2S(groups) + " out of range");
  c = CheckPostOpOperands(bc, 4);
  if (!c.ok) return c;
  const memory::dims strides = Slice(s.ints, 2, r), dil = Slice(s.ints, 2 + r, r), pb = Slice(s.ints, 2 + 2 * r, r),
                     pe = Slice(s.ints, 2 + 3 * r, r);
  if (!InRange(s.ints, 2, r, 1, kMaxWindow)) return bc.Fail("stride out of range");
  if (!InRange(s.ints, 2 + r, r, 0, kMaxWindow)) return bc.Fail("dilation out of range");
  if (!InRange(s.ints, 2 + 2 * r, r, 0, kMaxWindow)) return bc.Fail("pads_begin out of range");
  for (size_t i = 0; i < r; ++i) {
    const int64_t lo = deconv ? -(std::max(strides[i], dil[i] + 1) - 1) : 0;
    if (pe[i] < lo || pe[i] > kMaxWindow) return bc.Fail("pads_end out of range");
  }
  std::vector<Md> md;
  c = DescsOf(bc, 4, &md);
  if (!c.ok) return c;
  const bool has_bias = s.ops[2].present();
  const int nd = static_cast<int>(r) + 2;
  if (md[0].data.ndims != nd || md[3].data.ndims != nd || md[1].data.ndims != nd + (groups > 1 ? 1 : 0))
    return bc.Fail("operand ranks do not match the spatial rank and groups");
  if (!IsF32(md[0]) || !IsF32(md[1]) || !IsF32(md[3]) || (has_bias && !IsF32(md[2])))
    return bc.Fail("operands must be f32");
  const memory::dims sd = md[0].dims(), wd = md[1].dims(), dd = md[3].dims();
  const size_t off = groups > 1 ? 1 : 0;
  if (groups > 1 && wd[0] != groups) return bc.Fail("weights group dim differs from groups");
  const int64_t oc = wd[off] * groups, ic = wd[off + 1] * groups;
  if (sd[1] != ic || dd[1] != oc || sd[0] != dd[0]) return bc.Fail("channel/batch dims inconsistent");
  if (has_bias && (md[2].data.ndims != 1 || md[2].dims()[0] != oc)) return bc.Fail("bias is not [OC]");
  // Residual operands have dst's dims (the compiler fuses equal-shaped Adds only). oneDNN 2.6 takes a binary
  // post-op operand of lower rank than dst without complaint (a lifted step's 3-D residual against its 4-D dst).
  for (const PostOp& p : s.post_ops) {
    if (p.kind != PostOp::kBinary) continue;
    const Operand& o = s.ops[p.operand];
    if (o.dims.size() != dd.size() || !std::equal(o.dims.begin(), o.dims.end(), dd.begin()))
      return bc.Fail("binary post-op operand " + I2S(p.operand) + " does not have the destination's dims");
  }
  dnnl::primitive_attr attr;
  std::vector<std::pair<int, int>> args;
  c = bc.PostOps(&attr, &args);
  if (!c.ok) return c;
  ConvSpec spec;
  spec.deconv = deconv;
  spec.w.stride = strides;
  spec.w.pad_begin = pb;
  spec.w.pad_end_dnnl = pe;
  spec.w.dilation.clear();
  for (int64_t d : dil) spec.w.dilation.push_back(d + 1);
  const Md bias_md = has_bias ? md[2] : Md();
  dnnl::primitive prim;
  try {
    if (deconv) {
      auto pd = MakeConvPd<dnnl::deconvolution_forward>(spec, md[0], md[1], bias_md, md[3], attr, bc.engine());
      if (!(pd.src_desc() == md[0]) || !(pd.weights_desc() == md[1]) || !(pd.dst_desc() == md[3]) ||
          (has_bias && !(pd.bias_desc() == md[2])))
        return bc.Fail("the deconvolution chose other layouts than the step's operands");
      prim = dnnl::deconvolution_forward(pd);
    } else {
      auto pd = MakeConvPd<dnnl::convolution_forward>(spec, md[0], md[1], bias_md, md[3], attr, bc.engine());
      if (!(pd.src_desc() == md[0]) || !(pd.weights_desc() == md[1]) || !(pd.dst_desc() == md[3]) ||
          (has_bias && !(pd.bias_desc() == md[2])))
        return bc.Fail("the convolution chose other layouts than the step's operands");
      prim = dnnl::convolution_forward(pd);
    }
  } catch (const dnnl::error& e) {
    return bc.Fail(std::string("oneDNN refused the step: ") + e.what());
  }
  args.push_back({DNNL_ARG_SRC, bc.Slot(0, md[0])});
  args.push_back({DNNL_ARG_WEIGHTS, bc.Slot(1, md[1])});
  if (has_bias) args.push_back({DNNL_ARG_BIAS, bc.Slot(2, md[2])});
  args.push_back({DNNL_ARG_DST, bc.Slot(3, md[3])});
  *out = std::make_unique<PrimitiveExec>(std::move(prim), std::move(args));
  return CheckResult::Ok();
}

}  // namespace

int SplitConvTransposeBias(Graph* g, std::vector<bool>* folded) {
  int count = 0;
  folded->resize(g->nodes.size(), false);
  for (size_t i = 0; i < g->nodes.size(); ++i) {
    if ((*folded)[i]) continue;
    {
      const Node& n = g->nodes[i];
      if (!IsOnnx(n) || n.op != "ConvTranspose" || !SingleOutput(n) || n.num_inputs() != 3) continue;
    }
    const int b = g->nodes[i].inputs[2], y = g->nodes[i].outputs[0];
    if (!ConstF32(*g, b) || !StaticF32(*g, y) || g->v(y).dims.size() < 3 || g->v(b).dims.size() != 1 ||
        g->v(b).dims[0] != g->v(y).dims[1])
      continue;
    const std::vector<int64_t> ydims = g->v(y).dims;
    auto add_value = [g](Value v) {
      while (g->by_name.count(v.name)) v.name += "'";
      const int index = static_cast<int>(g->values.size());
      g->by_name[v.name] = index;
      g->values.push_back(std::move(v));
      return index;
    };
    // The bias as [1, C, 1, ...]: the same bytes.
    Value bv = g->v(b);
    bv.name += ":per_channel";
    bv.dims.assign(ydims.size(), 1);
    bv.dims[1] = ydims[1];
    bv.producer = -1;
    bv.is_graph_input = bv.is_graph_output = false;
    bv.consumers = {static_cast<int>(i) + 1};
    const int bias4 = add_value(std::move(bv));
    Value tv;
    tv.name = g->v(y).name + ":without_bias";
    tv.dtype = kF32;
    tv.has_shape = true;
    tv.dims = ydims;
    tv.producer = static_cast<int>(i);
    tv.consumers = {static_cast<int>(i) + 1};
    const int t = add_value(std::move(tv));
    // Node indices after i move up by one.
    for (Value& v : g->values) {
      if (v.producer > static_cast<int>(i)) ++v.producer;
      for (int& c : v.consumers)
        if (c > static_cast<int>(i) && &v != &g->v(bias4) && &v != &g->v(t)) ++c;
    }
    std::vector<int>& bc = g->v(b).consumers;
    bc.erase(std::find(bc.begin(), bc.end(), static_cast<int>(i)));
    Node add;
    add.name = g->nodes[i].name + ":bias";
    add.op = "Add";
    add.opset = 14;
    add.inputs = {t, bias4};
    add.outputs = {y};
    g->v(y).producer = static_cast<int>(i) + 1;
    g->nodes[i].inputs.resize(2);
    g->nodes[i].outputs = {t};
    g->nodes.insert(g->nodes.begin() + static_cast<std::ptrdiff_t>(i) + 1, std::move(add));
    folded->insert(folded->begin() + static_cast<std::ptrdiff_t>(i) + 1, false);
    ++count;
    ++i;  // past the new Add
  }
  return count;
}


bool SupportConv(const Graph& g, const Node& n, std::string* why) { return SupportConvLike(g, n, false, why); }
bool SupportConvTranspose(const Graph& g, const Node& n, std::string* why) { return SupportConvLike(g, n, true, why); }
CheckResult LowerConv(LowerContext& ctx, int node) { return LowerConvLike(ctx, node, false); }
CheckResult LowerConvTranspose(LowerContext& ctx, int node) { return LowerConvLike(ctx, node, true); }


CheckResult BuildConv(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  try {
    return BuildConvLike(bc, out, false);
  } catch (const std::exception& e) {
    return bc.Fail(e.what());
  }
}

CheckResult BuildDeconv(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  try {
    return BuildConvLike(bc, out, true);
  } catch (const std::exception& e) {
    return bc.Fail(e.what());
  }
}

}  // namespace aotcpu
}  // namespace epctx
