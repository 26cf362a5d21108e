#include "providers/aotcpu/runtime/program.h"

#include <oneapi/dnnl/dnnl_types.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "providers/aotcpu/binary/record_io.h"

namespace epctx {
namespace aotcpu {
namespace {

constexpr char kMagic[8] = {'A', 'O', 'T', 'P', 'R', 'G', '1', '\0'};
constexpr uint32_t kMaxIo = 4096;
constexpr uint32_t kMaxSteps = 1u << 20;
constexpr uint32_t kMaxName = 1u << 16;
constexpr uint32_t kMaxKind = 33;
// The newest step kind of each program version (index = version).
constexpr uint32_t kMaxKindOfVersion[] = {0, 16, 17, 20, 20, 20, 29, 30, 31, 33};
static_assert(sizeof(kMaxKindOfVersion) / sizeof(kMaxKindOfVersion[0]) == kProgramVersion + 1);

using record_io::Reader;
using record_io::Writer;

void WriteIo(Writer& w, const std::vector<IoInfo>& io) {
  w.U32(static_cast<uint32_t>(io.size()));
  for (const IoInfo& x : io) {
    w.Str(x.name);
    w.U32(x.dtype);
    w.I64s(x.dims);
  }
}

// Float parameters are finite, except the bounds of a clip: ONNX Clip (opset 11+) without min or max clips at -inf or
// +inf, and oneDNN's clip takes them as they are. NaN is never a parameter.
bool IsClipAlg(int64_t alg) { return alg == dnnl_eltwise_clip || alg == dnnl_eltwise_clip_v2; }
bool FloatParamOk(float f, bool may_be_infinite) { return std::isfinite(f) || (may_be_infinite && std::isinf(f)); }

bool KnownDtype(uint32_t d) { return d == 1 || d == 2 || d == 3 || d == 6 || d == 7 || d == 9 || d == 10; }

CheckResult ReadIo(Reader& r, const char* what, std::vector<IoInfo>* io) {
  uint32_t n = 0;
  if (!r.U32(&n) || n > kMaxIo) return CheckResult::Fail(std::string("bad ") + what + " count");
  io->resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    IoInfo& x = (*io)[i];
    if (!r.Str(&x.name, kMaxName) || !r.U32(&x.dtype) || !r.I64s(&x.dims, kMaxRank))
      return CheckResult::Fail(std::string(what) + " " + std::to_string(i) + " is truncated");
    if (!KnownDtype(x.dtype))
      return CheckResult::Fail(std::string(what) + " '" + x.name + "' has unsupported dtype " + std::to_string(x.dtype));
    for (int64_t d : x.dims)
      if (d < 0 || d > (int64_t{1} << 40))
        return CheckResult::Fail(std::string(what) + " '" + x.name + "' has dimension " + std::to_string(d));
  }
  return CheckResult::Ok();
}

// A binary step with a comparison algorithm (dnnl_binary_ge .. dnnl_binary_ne): program version 3.
bool IsVersion3Compare(const Step& s) {
  return s.kind == StepKind::kBinary && !s.ints.empty() && s.ints[0] >= dnnl_binary_ge && s.ints[0] <= dnnl_binary_ne;
}

// A batch normalization with a post-op (oneDNN's fused ReLU): program version 4.
bool IsVersion4BatchNormRelu(const Step& s) { return s.kind == StepKind::kBatchNorm && !s.post_ops.empty(); }

// The mish algorithm (a kEltwise step or an eltwise post-op) or kPad's wrap mode: program version 5.
bool IsVersion5(const Step& s) {
  if (s.kind == StepKind::kEltwise && !s.ints.empty() && s.ints[0] == dnnl_eltwise_mish) return true;
  if (s.kind == StepKind::kPad && !s.ints.empty() && s.ints[0] == kPadWrap) return true;
  for (const PostOp& q : s.post_ops)
    if (q.kind == PostOp::kEltwise && q.alg == dnnl_eltwise_mish) return true;
  return false;
}

// Float16 operands or fused inputs/outputs (float16 graphs, ir/float16.h): program version 6.
bool IsVersion6(const Program& p) {
  for (const std::vector<IoInfo>* io : {&p.inputs, &p.outputs})
    for (const IoInfo& x : *io)
      if (x.dtype == 10) return true;
  for (const Step& s : p.steps)
    for (const Operand& o : s.ops)
      if (o.present() && o.dtype == 10) return true;
  return false;
}

}  // namespace

const char* StepKindName(uint32_t kind) {
  static const char* const kNames[] = {"unknown", "Reorder",  "Conv",      "Deconv",    "MatMul", "Pool",
                                       "Eltwise", "Binary",   "Softmax",   "LayerNorm", "Reduction",
                                       "Concat",  "Resample", "Gather",    "Erf",       "InnerProduct",
                                       "BatchNorm", "MaskedSoftmax", "Pad", "Lstm", "StridedCopy",
                                       "DynamicQuantize", "Dequantize", "MatMulInt8", "ConvInt8", "Bilinear", "RoundFloat16",
                                       "Quantize", "QConv", "MatMulInt8Avx2", "ConvInt8Avx2",
                                       "QConvAvx2", "TypedEltwise", "Trilu"};
  return kind <= kMaxKind ? kNames[kind] : "unknown";
}

std::string SerializeProgram(const Program& p) {
  Writer w;
  w.Raw(kMagic, 8);
  uint32_t version = 1;
  for (const Step& s : p.steps) {
    while (static_cast<uint32_t>(s.kind) > kMaxKindOfVersion[version] && version < kProgramVersion) ++version;
    if (IsVersion3Compare(s)) version = std::max<uint32_t>(version, 3);
    if (IsVersion4BatchNormRelu(s)) version = std::max<uint32_t>(version, 4);
    if (IsVersion5(s)) version = std::max<uint32_t>(version, 5);
  }
  if (IsVersion6(p)) version = std::max<uint32_t>(version, 6);
  w.U32(version);
  WriteIo(w, p.inputs);
  WriteIo(w, p.outputs);
  w.U64(p.arena_bytes);
  w.U32(p.num_weights);
  w.U32(static_cast<uint32_t>(p.steps.size()));
  for (const Step& s : p.steps) {
    w.U32(static_cast<uint32_t>(s.kind));
    w.Str(s.name);
    w.U32(static_cast<uint32_t>(s.ops.size()));
    for (const Operand& o : s.ops) {
      w.U32(static_cast<uint32_t>(o.buf));
      w.U32(o.index);
      w.U64(o.offset);
      w.U32(o.dtype);
      w.U32(o.tag);
      w.I64s(o.dims);
      w.I64s(o.strides);
    }
    w.I64s(s.ints);
    w.U32(static_cast<uint32_t>(s.floats.size()));
    for (float f : s.floats) w.F32(f);
    w.U32(static_cast<uint32_t>(s.post_ops.size()));
    for (const PostOp& q : s.post_ops) {
      w.U32(q.kind);
      w.U32(q.alg);
      w.F32(q.alpha);
      w.F32(q.beta);
      w.F32(q.scale);
      w.U32(q.operand);
    }
  }
  return std::move(w.out);
}

CheckResult ParseProgram(std::string_view records, uint32_t num_weights_available, Program* p) {
  *p = Program();
  Reader r(records);
  char magic[8];
  if (!r.Raw(magic, 8) || std::memcmp(magic, kMagic, 8) != 0)
    return CheckResult::Fail("graph records do not start with the program magic");
  uint32_t version = 0;
  if (!r.U32(&version)) return CheckResult::Fail("graph records are truncated");
  if (version < 1 || version > kProgramVersion)
    return CheckResult::Fail("program version " + std::to_string(version) + " is not supported (this build reads 1 to " +
                             std::to_string(kProgramVersion) + ")");
  CheckResult c = ReadIo(r, "input", &p->inputs);
  if (!c.ok) return c;
  if (!(c = ReadIo(r, "output", &p->outputs)).ok) return c;
  uint32_t steps = 0;
  if (!r.U64(&p->arena_bytes) || !r.U32(&p->num_weights) || !r.U32(&steps))
    return CheckResult::Fail("graph records are truncated");
  if (p->arena_bytes > (uint64_t{1} << 40))
    return CheckResult::Fail("arena size " + std::to_string(p->arena_bytes) + " bytes is beyond the 1 TiB limit");
  if (p->num_weights != num_weights_available)
    return CheckResult::Fail("the program uses " + std::to_string(p->num_weights) + " weights but its graph lists " +
                             std::to_string(num_weights_available));
  if (steps > kMaxSteps) return CheckResult::Fail("step count " + std::to_string(steps) + " is beyond the limit");
  if (static_cast<uint64_t>(steps) * 24 > records.size()) return CheckResult::Fail("step count exceeds the records");
  p->steps.resize(steps);
  for (uint32_t i = 0; i < steps; ++i) {
    Step& s = p->steps[i];
    const std::string where = "step " + std::to_string(i);
    uint32_t kind = 0, nops = 0;
    if (!r.U32(&kind) || !r.Str(&s.name, kMaxName) || !r.U32(&nops)) return CheckResult::Fail(where + " is truncated");
    if (kind == 0 || kind > kMaxKind) return CheckResult::Fail(where + " has unknown kind " + std::to_string(kind));
    if (kind > kMaxKindOfVersion[version])
      return CheckResult::Fail(where + " has kind " + std::to_string(kind) + " (" + StepKindName(kind) +
                               "), which program version " + std::to_string(version) + " does not have");
    s.kind = static_cast<StepKind>(kind);
    if (nops > kMaxStepOperands)
      return CheckResult::Fail(where + " has " + std::to_string(nops) + " operands (limit " +
                               std::to_string(kMaxStepOperands) + ")");
    s.ops.resize(nops);
    for (uint32_t k = 0; k < nops; ++k) {
      Operand& o = s.ops[k];
      uint32_t buf = 0;
      if (!r.U32(&buf) || !r.U32(&o.index) || !r.U64(&o.offset) || !r.U32(&o.dtype) || !r.U32(&o.tag) ||
          !r.I64s(&o.dims, kMaxRank) || !r.I64s(&o.strides, kMaxRank))
        return CheckResult::Fail(where + " operand " + std::to_string(k) + " is truncated");
      const std::string which = where + " (" + s.name + ") operand " + std::to_string(k);
      if (buf > static_cast<uint32_t>(Buf::kWeight)) return CheckResult::Fail(which + " has unknown buffer kind");
      o.buf = static_cast<Buf>(buf);
      if (o.buf == Buf::kNone) continue;
      if (!KnownDtype(o.dtype)) return CheckResult::Fail(which + " has unsupported dtype " + std::to_string(o.dtype));
      if (o.tag == 0 && o.strides.size() != o.dims.size())
        return CheckResult::Fail(which + " has " + std::to_string(o.strides.size()) + " strides for rank " +
                                 std::to_string(o.dims.size()));
      for (int64_t d : o.dims)
        if (d < 0 || d > (int64_t{1} << 40)) return CheckResult::Fail(which + " has dimension " + std::to_string(d));
      for (int64_t st : o.strides)
        if (st < 0 || st > (int64_t{1} << 40)) return CheckResult::Fail(which + " has stride " + std::to_string(st));
      if (o.buf == Buf::kInput && o.index >= p->inputs.size())
        return CheckResult::Fail(which + " names input " + std::to_string(o.index) + " of " +
                                 std::to_string(p->inputs.size()));
      if (o.buf == Buf::kOutput && o.index >= p->outputs.size())
        return CheckResult::Fail(which + " names output " + std::to_string(o.index) + " of " +
                                 std::to_string(p->outputs.size()));
      if (o.buf == Buf::kWeight && o.index >= p->num_weights)
        return CheckResult::Fail(which + " names weight " + std::to_string(o.index) + " of " +
                                 std::to_string(p->num_weights));
      if (o.buf == Buf::kArena && o.index != 0) return CheckResult::Fail(which + " names arena " + std::to_string(o.index));
    }
    if (!r.I64s(&s.ints, kMaxStepParams)) return CheckResult::Fail(where + " parameters are truncated");
    if (version < 3 && IsVersion3Compare(s))
      return CheckResult::Fail(where + " is a comparison, which program version " + std::to_string(version) +
                               " does not have");
    uint32_t nf = 0;
    if (!r.U32(&nf) || nf > kMaxStepParams) return CheckResult::Fail(where + " float parameters are truncated");
    s.floats.resize(nf);
    for (uint32_t k = 0; k < nf; ++k) {
      if (!r.F32(&s.floats[k])) return CheckResult::Fail(where + " float parameters are truncated");
      if (!FloatParamOk(s.floats[k], s.kind == StepKind::kEltwise && !s.ints.empty() && IsClipAlg(s.ints[0])))
        return CheckResult::Fail(where + " has a non-finite float parameter");
    }
    uint32_t npo = 0;
    if (!r.U32(&npo) || npo > 16) return CheckResult::Fail(where + " post-op count is bad");
    s.post_ops.resize(npo);
    for (uint32_t k = 0; k < npo; ++k) {
      PostOp& q = s.post_ops[k];
      if (!r.U32(&q.kind) || !r.U32(&q.alg) || !r.F32(&q.alpha) || !r.F32(&q.beta) || !r.F32(&q.scale) ||
          !r.U32(&q.operand))
        return CheckResult::Fail(where + " post-op " + std::to_string(k) + " is truncated");
      if (q.kind < PostOp::kEltwise || q.kind > PostOp::kBinary)
        return CheckResult::Fail(where + " post-op " + std::to_string(k) + " has unknown kind");
      const bool clip = q.kind == PostOp::kEltwise && IsClipAlg(q.alg);
      if (!FloatParamOk(q.alpha, clip) || !FloatParamOk(q.beta, clip) || !std::isfinite(q.scale))
        return CheckResult::Fail(where + " post-op " + std::to_string(k) + " has a non-finite parameter");
      if (q.kind == PostOp::kBinary && (q.operand >= s.ops.size() || !s.ops[q.operand].present()))
        return CheckResult::Fail(where + " post-op " + std::to_string(k) + " names operand " +
                                 std::to_string(q.operand));
    }
    if (version < 4 && IsVersion4BatchNormRelu(s))
      return CheckResult::Fail(where + " is a batch normalization with a post-op, which program version " +
                               std::to_string(version) + " does not have");
    if (version < 5 && IsVersion5(s))
      return CheckResult::Fail(where + " uses mish or a wrap pad, which program version " + std::to_string(version) +
                               " does not have");
  }
  if (!r.done())
    return CheckResult::Fail("graph records have " + std::to_string(records.size() - r.pos()) +
                             " trailing bytes");
  if (version < 6 && IsVersion6(*p))
    return CheckResult::Fail("the program has float16 operands, which program version " + std::to_string(version) +
                             " does not have");
  return CheckResult::Ok();
}

std::string DescribeStep(const Step& s) {
  std::string out = StepKindName(static_cast<uint32_t>(s.kind));
  out += " '" + s.name + "'";
  static const char* const kBuf[] = {"-", "in", "out", "arena", "w"};
  for (const Operand& o : s.ops) {
    out += " ";
    if (!o.present()) {
      out += "-";
      continue;
    }
    out += kBuf[static_cast<uint32_t>(o.buf)];
    out += o.buf == Buf::kArena ? "@" + std::to_string(o.offset) : std::to_string(o.index);
    out += "[";
    for (size_t i = 0; i < o.dims.size(); ++i) out += (i ? "x" : "") + std::to_string(o.dims[i]);
    out += "]";
    if (o.tag) out += "#" + std::to_string(o.tag);
  }
  if (!s.post_ops.empty()) out += " +" + std::to_string(s.post_ops.size()) + " post-ops";
  return out;
}

}  // namespace aotcpu
}  // namespace epctx
