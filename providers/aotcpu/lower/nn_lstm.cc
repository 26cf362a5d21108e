// LSTM on oneDNN's lstm_forward with constant weights packed at compile time: support check, lowering, and the
// kLstm step builder.
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

// ---- LSTM ------------------------------------------------------------------------------------------------------

namespace {
// ONNX gate order is i, o, f, c; oneDNN's is i, f, c~, o: oneDNN gate g reads ONNX gate kOnnxGate[g].
constexpr int64_t kOnnxGate[4] = {0, 2, 3, 1};

struct LstmSpec {
  int64_t t = 0, n = 0, i = 0, h = 0;
  int64_t direction = 0;  // 0 forward (left to right), 1 reverse
  int x = -1, w = -1, r = -1, b = -1, h0 = -1, c0 = -1, y = -1, yh = -1, yc = -1;
};

// An LSTM oneDNN's vanilla LSTM computes exactly as ONNX defines it: one direction, default activations
// (Sigmoid, Tanh, Tanh), no clip, no input_forget coupling, no peepholes, layout 0, every sequence full length;
// constant W, R, B.
bool ResolveLstm(const Graph& g, const Node& n, LstmSpec* s, std::string* why) {
  if (!IsOnnx(n)) return Reject(why, "not an ONNX op");
  if (n.opset < 7) return Reject(why, "LSTM-1 is not supported");
  s->x = In(n, 0);
  s->w = In(n, 1);
  s->r = In(n, 2);
  s->b = In(n, 3);
  const int seq = In(n, 4);
  s->h0 = In(n, 5);
  s->c0 = In(n, 6);
  if (In(n, 7) >= 0) return Reject(why, "peephole weights (P) are not supported");
  s->y = Out(n, 0);
  s->yh = Out(n, 1);
  s->yc = Out(n, 2);
  if (n.outputs.size() > 3) return Reject(why, "too many outputs");
  if (s->y < 0) return Reject(why, "the Y output is absent");
  const std::string dir = n.Str("direction", "forward");
  if (dir == "forward") {
    s->direction = 0;
  } else if (dir == "reverse") {
    s->direction = 1;
  } else {
    return Reject(why, "direction '" + dir + "' is not supported");
  }
  if (n.Has("clip")) return Reject(why, "clip is not supported");
  if (n.Int("input_forget", 0) != 0) return Reject(why, "input_forget is not supported");
  if (n.Int("layout", 0) != 0) return Reject(why, "layout 1 is not supported");
  if (n.Has("activation_alpha") || n.Has("activation_beta")) return Reject(why, "activation parameters");
  if (n.Has("activations")) return Reject(why, "explicit activations are not supported");
  if (!StaticF32(g, s->x) || !StaticF32(g, s->y)) return Reject(why, "X and Y must be float32 with static shapes");
  const std::vector<int64_t>& xd = g.v(s->x).dims;
  if (xd.size() != 3) return Reject(why, "X must be [seq, batch, input]");
  s->t = xd[0];
  s->n = xd[1];
  s->i = xd[2];
  s->h = n.Int("hidden_size", 0);
  const float* w = ConstF32(g, s->w);
  const float* r = ConstF32(g, s->r);
  if (!w || !r) return Reject(why, "W and R must be constant float32 tensors");
  if (g.v(s->w).dims != std::vector<int64_t>{1, 4 * s->h, s->i}) return Reject(why, "W is not [1, 4*hidden, input]");
  if (g.v(s->r).dims != std::vector<int64_t>{1, 4 * s->h, s->h}) return Reject(why, "R is not [1, 4*hidden, hidden]");
  if (s->h <= 0 || s->h > (int64_t{1} << 20)) return Reject(why, "hidden_size must be given and positive");
  if (s->b >= 0 && (!ConstF32(g, s->b) || g.v(s->b).dims != std::vector<int64_t>{1, 8 * s->h}))
    return Reject(why, "B must be a constant float32 [1, 8*hidden]");
  if (seq >= 0) {
    std::vector<int64_t> lens;
    if (!g.ConstInts(seq, &lens) || static_cast<int64_t>(lens.size()) != s->n) return Reject(why, "sequence_lens");
    for (int64_t l : lens)
      if (l != s->t) return Reject(why, "sequence_lens shorter than the sequence are not supported");
  }
  const std::vector<int64_t> state = {1, s->n, s->h};
  for (int v : {s->h0, s->c0})
    if (v >= 0 && (!StaticF32(g, v) || g.v(v).dims != state)) return Reject(why, "initial_h/c must be [1, batch, hidden]");
  if (g.v(s->y).dims != std::vector<int64_t>{s->t, 1, s->n, s->h}) return Reject(why, "Y is not [seq, 1, batch, hidden]");
  for (int v : {s->yh, s->yc})
    if (v >= 0 && (!StaticF32(g, v) || g.v(v).dims != state)) return Reject(why, "Y_h/Y_c must be [1, batch, hidden]");
  return true;
}

Md LstmMd(const std::vector<int64_t>& dims, memory::format_tag tag) { return Md(dims, memory::data_type::f32, tag); }

struct LstmMds {
  Md src_layer, src_iter, src_iter_c, weights_layer, weights_iter, bias, dst_layer, dst_iter, dst_iter_c;
};

LstmMds LstmDescs(int64_t t, int64_t n, int64_t i, int64_t h, bool h0, bool c0, bool yh, bool yc) {
  using tag = memory::format_tag;
  LstmMds m;
  m.src_layer = LstmMd({t, n, i}, tag::tnc);
  if (h0) m.src_iter = LstmMd({1, 1, n, h}, tag::ldnc);
  if (c0) m.src_iter_c = LstmMd({1, 1, n, h}, tag::ldnc);
  m.weights_layer = LstmMd({1, 1, i, 4, h}, tag::ldigo);
  m.weights_iter = LstmMd({1, 1, h, 4, h}, tag::ldigo);
  m.bias = LstmMd({1, 1, 4, h}, tag::ldgo);
  m.dst_layer = LstmMd({t, n, h}, tag::tnc);
  if (yh) m.dst_iter = LstmMd({1, 1, n, h}, tag::ldnc);
  if (yc) m.dst_iter_c = LstmMd({1, 1, n, h}, tag::ldnc);
  return m;
}

dnnl::lstm_forward::primitive_desc LstmPd(const LstmMds& m, int64_t direction, dnnl::engine& engine) {
  dnnl::lstm_forward::desc d(dnnl::prop_kind::forward_inference,
                             direction ? dnnl::rnn_direction::unidirectional_right2left
                                       : dnnl::rnn_direction::unidirectional_left2right,
                             m.src_layer, m.src_iter, m.src_iter_c, m.weights_layer, m.weights_iter, m.bias,
                             m.dst_layer, m.dst_iter, m.dst_iter_c);
  return dnnl::lstm_forward::primitive_desc(d, UserScratchpad(), engine);
}
}  // namespace

bool SupportLstm(const Graph& g, const Node& n, std::string* why) {
  LstmSpec s;
  if (!ResolveLstm(g, n, &s, why)) return false;
  try {
    // One initial state without the other gets zeros for the other (oneDNN takes both or neither).
    const bool iter = s.h0 >= 0 || s.c0 >= 0;
    LstmPd(LstmDescs(s.t, s.n, s.i, s.h, iter, iter, s.yh >= 0, s.yc >= 0), s.direction, ProbeEngine());
  } catch (const dnnl::error&) {
    return Reject(why, "oneDNN refuses this LSTM");
  }
  return true;
}

CheckResult LowerLstm(LowerContext& ctx, int node) {
  const Graph& g = ctx.graph();
  LstmSpec s;
  std::string why;
  if (!ResolveLstm(g, ctx.node(node), &s, &why)) return ctx.Fail(node, why);
  const int64_t h = s.h, in = s.i;
  // Weights into oneDNN's plain ldigo: wl[k][gate][j] = W[0][onnx_gate * H + j][k] (k over the input or hidden
  // features), gates reordered; the bias is Wb + Rb per gate.
  const float* w = ConstF32(g, s.w);
  const float* r = ConstF32(g, s.r);
  const float* b = s.b >= 0 ? ConstF32(g, s.b) : nullptr;
  auto pack = [&](const float* src, int64_t k_dim) {
    std::vector<float> out(static_cast<size_t>(k_dim * 4 * h));
    for (int64_t k = 0; k < k_dim; ++k)
      for (int64_t gate = 0; gate < 4; ++gate)
        for (int64_t j = 0; j < h; ++j)
          out[static_cast<size_t>((k * 4 + gate) * h + j)] = src[(kOnnxGate[gate] * h + j) * k_dim + k];
    return std::string(reinterpret_cast<const char*>(out.data()), out.size() * sizeof(float));
  };
  std::vector<float> bias(static_cast<size_t>(4 * h), 0.f);
  if (b)
    for (int64_t gate = 0; gate < 4; ++gate)
      for (int64_t j = 0; j < h; ++j)
        bias[static_cast<size_t>(gate * h + j)] = b[kOnnxGate[gate] * h + j] + b[4 * h + kOnnxGate[gate] * h + j];
  const bool iter = s.h0 >= 0 || s.c0 >= 0;
  const LstmMds m = LstmDescs(s.t, s.n, in, h, iter, iter, s.yh >= 0, s.yc >= 0);
  Step st;
  st.kind = StepKind::kLstm;
  st.name = NodeName(ctx, node);
  Operand x = ctx.UsePlain(s.x);
  st.ops.push_back(x);
  for (int v : {s.h0, s.c0}) {
    Operand o;
    if (v >= 0) {
      o = ctx.UsePlain(v);
      o.dims = {1, 1, s.n, h};
      o.strides = {s.n * h, s.n * h, h, 1};
    } else if (iter) {  // the other initial state is given: this one is zeros (ONNX's default)
      CheckResult rc = ctx.AddWeight(NodeName(ctx, node) + (st.ops.size() == 1 ? "/initial_h" : "/initial_c") + ":zeros",
                                     std::string(static_cast<size_t>(s.n * h) * sizeof(float), '\0'), m.src_iter, &o);
      if (!rc.ok) return rc;
    }
    st.ops.push_back(o);
  }
  Operand wl, wi, bo;
  CheckResult rc = ctx.AddWeight(WeightName(ctx, node, s.w, "ldigo"), pack(w, in), m.weights_layer, &wl);
  if (!rc.ok) return rc;
  if (!(rc = ctx.AddWeight(WeightName(ctx, node, s.r, "ldigo"), pack(r, h), m.weights_iter, &wi)).ok) return rc;
  if (!(rc = ctx.AddWeight(WeightName(ctx, node, s.b, "ldgo"),
                           std::string(reinterpret_cast<const char*>(bias.data()), bias.size() * sizeof(float)),
                           m.bias, &bo)).ok)
    return rc;
  st.ops.push_back(wl);
  st.ops.push_back(wi);
  st.ops.push_back(bo);
  Operand y = ctx.DefinePlain(s.y);  // [T,1,N,H] is [T,N,H]
  y.dims = {s.t, s.n, h};
  y.strides = {s.n * h, h, 1};
  st.ops.push_back(y);
  for (int v : {s.yh, s.yc}) {
    Operand o;
    if (v >= 0) {
      o = ctx.DefinePlain(v);
      o.dims = {1, 1, s.n, h};
      o.strides = {s.n * h, s.n * h, h, 1};
    }
    st.ops.push_back(o);
  }
  st.ints = {s.direction};
  ctx.Emit(std::move(st));
  return Ok();
}

// An LSTM step on two oneDNN matmuls and a gate loop. oneDNN 2.6's f32 LSTM is its reference RNN on the jit
// sgemm, whose kernels are generated on the first call: 20-25 ms of the Silero models' first run on an AVX-512
// machine, against 0.1 ms to create a brgemm matmul (issue 14). X * W for every time step is one matmul into the
// gates buffer (bias added there); each time step adds H(t-1) * R into its rows (a sum post-op) and applies the
// gates in order i, f, c~, o (the step's ldigo layout): c = f*c + i*tanh(c~), h = o*tanh(c). The weights are
// packed once, at build, into the layouts the matmuls prefer (an owned copy: W and R of one layer).
class LstmExec : public StepExec {
 public:
  // slots: src_layer, src_iter, src_iter_c, weights_layer, weights_iter, bias, dst_layer, dst_iter, dst_iter_c
  // (-1 when absent).
  LstmExec(int64_t t, int64_t n, int64_t i, int64_t h, bool reverse, std::vector<int> slots)
      : t_(t), n_(n), i_(i), h_(h), reverse_(reverse), slots_(std::move(slots)) {}

  CheckResult Build(BuildContext& bc) {
    using tag = memory::format_tag;
    const dnnl::engine& eng = bc.engine();
    const int64_t g4 = 4 * h_;
    const Md x_md({t_ * n_, i_}, memory::data_type::f32, tag::ab), gx_md({t_ * n_, g4}, memory::data_type::f32, tag::ab);
    const Md h_md({n_, h_}, memory::data_type::f32, tag::ab), gh_md({n_, g4}, memory::data_type::f32, tag::ab);
    const Md bias_md({1, g4}, memory::data_type::f32, tag::ab);
    const Md wl_plain({i_, g4}, memory::data_type::f32, tag::ab), wi_plain({h_, g4}, memory::data_type::f32, tag::ab);
    try {
      dnnl::matmul::primitive_desc px(
          dnnl::matmul::desc(x_md, Md({i_, g4}, memory::data_type::f32, tag::any), bias_md, gx_md), UserScratchpad(),
          eng);
      dnnl::post_ops sum;
      sum.append_sum(1.f);
      dnnl::primitive_attr attr;
      attr.set_post_ops(sum);
      dnnl::matmul::primitive_desc ph(
          dnnl::matmul::desc(h_md, Md({h_, g4}, memory::data_type::f32, tag::any), gh_md), UserScratchpad(attr), eng);
      impl_ = std::string("lstm:") + px.impl_info_str();
      // The step's weights are checked to fit their buffers (BuildContext::Desc); packed here from the mapped
      // bytes. Weight slots point at fixed bytes, known at build.
      wl_ = Pack(bc, 3, wl_plain, px.weights_desc());
      wi_ = Pack(bc, 4, wi_plain, ph.weights_desc());
      if (!wl_ || !wi_) return bc.Fail("weights_layer and weights_iter (operands 3, 4) must be weights of the binary");
      mm_x_ = dnnl::matmul(px);
      mm_h_ = dnnl::matmul(ph);
      x_md_ = x_md;
      gx_md_ = gx_md;
      h_md_ = h_md;
      gh_md_ = gh_md;
      bias_md_ = bias_md;
      scratch_x_ = px.scratchpad_desc();
      scratch_h_ = ph.scratchpad_desc();
    } catch (const dnnl::error& e) {
      return bc.Fail(std::string("oneDNN refused the LSTM's matmuls: ") + e.what());
    }
    gates_bytes_ = Round64(static_cast<size_t>(t_ * n_ * g4) * sizeof(float));
    c_bytes_ = Round64(static_cast<size_t>(n_ * h_) * sizeof(float));
    return CheckResult::Ok();
  }

  size_t ScratchpadBytes() const override {
    return gates_bytes_ + c_bytes_ + std::max(scratch_x_.get_size(), scratch_h_.get_size());
  }
  std::string Impl() const override { return impl_; }

  void Run(RunContext& rc) override {
    unsigned char* scratch = static_cast<unsigned char*>(rc.scratchpad());
    float* gates = reinterpret_cast<float*>(scratch);
    float* c = reinterpret_cast<float*>(scratch + gates_bytes_);
    void* mm_scratch = scratch + gates_bytes_ + c_bytes_;
    const dnnl::engine eng = rc.stream().get_engine();
    std::unordered_map<int, dnnl::memory>& args = rc.step_args();
    if (args.empty()) {  // this context's memory objects, kept; their data handles are set below
      args[kX] = dnnl::memory(x_md_, eng, rc.ptr(slots_[0]));
      args[kWl] = wl_;
      args[kBias] = dnnl::memory(bias_md_, eng, rc.ptr(slots_[5]));
      args[kGx] = dnnl::memory(gx_md_, eng, gates);
      args[kH] = dnnl::memory(h_md_, eng, gates);
      args[kWi] = wi_;
      args[kGh] = dnnl::memory(gh_md_, eng, gates);
      args[kScratchX] = dnnl::memory(scratch_x_, eng, mm_scratch);
      args[kScratchH] = dnnl::memory(scratch_h_, eng, mm_scratch);
    }
    args[kX].set_data_handle(rc.ptr(slots_[0]));
    args[kBias].set_data_handle(rc.ptr(slots_[5]));
    mm_x_.execute(rc.stream(), {{DNNL_ARG_SRC, args[kX]}, {DNNL_ARG_WEIGHTS, args[kWl]}, {DNNL_ARG_BIAS, args[kBias]},
                                {DNNL_ARG_DST, args[kGx]}, {DNNL_ARG_SCRATCHPAD, args[kScratchX]}});
    const int64_t g4 = 4 * h_, nh = n_ * h_;
    float* y = static_cast<float*>(rc.ptr(slots_[6]));
    const float* h_prev = slots_[1] >= 0 ? static_cast<const float*>(rc.ptr(slots_[1])) : nullptr;
    const float* c_prev = slots_[2] >= 0 ? static_cast<const float*>(rc.ptr(slots_[2])) : nullptr;
    for (int64_t step = 0; step < t_; ++step) {
      const int64_t tt = reverse_ ? t_ - 1 - step : step;
      float* g = gates + tt * n_ * g4;
      if (h_prev != nullptr) {  // a zero state adds nothing
        args[kH].set_data_handle(const_cast<float*>(h_prev));
        args[kGh].set_data_handle(g);
        mm_h_.execute(rc.stream(), {{DNNL_ARG_SRC, args[kH]}, {DNNL_ARG_WEIGHTS, args[kWi]},
                                    {DNNL_ARG_DST, args[kGh]}, {DNNL_ARG_SCRATCHPAD, args[kScratchH]}});
      }
      float* yt = y + tt * nh;
      for (int64_t b = 0; b < n_; ++b) {
        const float* gb = g + b * g4;
        const float* cp = c_prev ? c_prev + b * h_ : nullptr;
        float* cb = c + b * h_;
        float* hb = yt + b * h_;
        for (int64_t j = 0; j < h_; ++j) {
          const float ig = Sigmoid(gb[j]), fg = Sigmoid(gb[h_ + j]), cg = std::tanh(gb[2 * h_ + j]),
                      og = Sigmoid(gb[3 * h_ + j]);
          const float cn = (cp ? fg * cp[j] : 0.f) + ig * cg;
          cb[j] = cn;
          hb[j] = og * std::tanh(cn);
        }
      }
      h_prev = yt;
      c_prev = c;
    }
    if (slots_[7] >= 0) std::memcpy(rc.ptr(slots_[7]), h_prev, static_cast<size_t>(nh) * sizeof(float));
    if (slots_[8] >= 0) std::memcpy(rc.ptr(slots_[8]), c_prev, static_cast<size_t>(nh) * sizeof(float));
  }

 private:
  enum : int { kX = 1, kWl, kBias, kGx, kH, kWi, kGh, kScratchX, kScratchH };
  static size_t Round64(size_t b) { return (b + 63) / 64 * 64; }
  static float Sigmoid(float v) { return 1.f / (1.f + std::exp(-v)); }

  // The weight operand `k` reordered into `want`, owned by this step.
  dnnl::memory Pack(BuildContext& bc, size_t k, const Md& plain, const Md& want) {
    const WeightRef w = bc.WeightBytes(k);
    if (w.data == nullptr || plain.get_size() > w.length) return dnnl::memory();
    owned_.emplace_back(want.get_size() / sizeof(float) + 16);
    float* dst = owned_.back().data();
    dnnl::memory from(plain, bc.engine(), const_cast<void*>(w.data)), to(want, bc.engine(), dst);
    dnnl::stream st(bc.engine());
    dnnl::reorder(from, to).execute(st, from, to);
    st.wait();
    return to;
  }

  int64_t t_, n_, i_, h_;
  bool reverse_;
  std::vector<int> slots_;
  std::deque<std::vector<float>> owned_;
  dnnl::memory wl_, wi_;
  dnnl::matmul mm_x_, mm_h_;
  Md x_md_, gx_md_, h_md_, gh_md_, bias_md_, scratch_x_, scratch_h_;
  size_t gates_bytes_ = 0, c_bytes_ = 0;
  std::string impl_;
};

CheckResult BuildLstm(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  try {
    const Step& s = bc.step();
    CheckResult c = bc.ExpectCounts(9, false, 1, 0);
    if (!c.ok) return c;
    if (!s.post_ops.empty()) return bc.Fail("LSTM takes no post-ops");
    const int64_t direction = s.ints[0];
    if (direction != 0 && direction != 1) return bc.Fail("direction must be 0 or 1");
    for (size_t k : {0u, 3u, 4u, 5u, 6u})
      if (!s.ops[k].present()) return bc.Fail("operand " + std::to_string(k) + " is required");
    for (size_t k : {7u, 8u})
      if (s.ops[k].present() && s.ops[k].buf != Buf::kArena && s.ops[k].buf != Buf::kOutput)
        return bc.Fail("its destination (operand " + std::to_string(k) + ") is not the arena or an output");
    for (const Operand& o : s.ops)
      if (o.present() && o.dtype != kF32) return bc.Fail("operands must be f32");
    const std::vector<int64_t>& sl = s.ops[0].dims;
    if (sl.size() != 3 || s.ops[4].dims.size() != 5) return bc.Fail("src_layer [T,N,I] and weights_iter [1,1,H,4,H]");
    const int64_t t = sl[0], n = sl[1], i = sl[2], h = s.ops[4].dims[4];
    for (int64_t d : {t, n, i, h})
      if (d <= 0 || d > (int64_t{1} << 24)) return bc.Fail("dims out of range");
    const LstmMds m = LstmDescs(t, n, i, h, s.ops[1].present(), s.ops[2].present(), s.ops[7].present(),
                                s.ops[8].present());
    const Md* want[9] = {&m.src_layer,    &m.src_iter, &m.src_iter_c, &m.weights_layer, &m.weights_iter,
                         &m.bias,         &m.dst_layer, &m.dst_iter,  &m.dst_iter_c};
    std::vector<Md> md;
    if (!(c = DescsOf(bc, 9, &md)).ok) return c;  // each present operand fits its buffer
    for (size_t k = 0; k < 9; ++k)
      if (s.ops[k].present() && !(md[k] == *want[k]))
        return bc.Fail("operand " + std::to_string(k) + " is not the LSTM's plain layout for its dims");
    std::vector<int> slots(9, -1);
    for (size_t k = 0; k < 9; ++k)
      if (s.ops[k].present()) slots[k] = bc.Slot(k, md[k]);
    std::unique_ptr<LstmExec> e(new LstmExec(t, n, i, h, direction != 0, slots));
    if (!(c = e->Build(bc)).ok) return c;
    *out = std::move(e);
    return CheckResult::Ok();
  } catch (const std::exception& e) {
    return bc.Fail(e.what());
  }
}

}  // namespace aotcpu
}  // namespace epctx
