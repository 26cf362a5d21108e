#include "providers/aotcpu/runtime/executor.h"

#include <omp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <stdexcept>
#include <thread>

#include "providers/aotcpu/lower/ops.h"
#include "providers/aotcpu/runtime/roofline.h"

namespace epctx {
namespace aotcpu {
namespace {

size_t ElementSize(uint32_t dtype) {
  switch (dtype) {
    case 1: case 6: return 4;
    case 2: case 3: case 9: return 1;
    case 10: return 2;
    case 7: return 8;
    default: return 0;
  }
}

uint64_t IoBytes(const IoInfo& io) {
  uint64_t n = ElementSize(io.dtype);
  for (int64_t d : io.dims) n *= static_cast<uint64_t>(d);
  return n;
}

// A plain byte copy for dtypes oneDNN does not move (int64, bool): dense row-major src and dst of equal size.
class CopyExec : public StepExec {
 public:
  CopyExec(int src, int dst, size_t bytes) : src_(src), dst_(dst), bytes_(bytes) {}
  void Run(RunContext& rc) override {
    if (rc.ptr(src_) != rc.ptr(dst_)) std::memmove(rc.ptr(dst_), rc.ptr(src_), bytes_);
  }

 private:
  int src_, dst_;
  size_t bytes_;
};

// Strided copy of 8-byte elements (int64 transposes/slices), rank <= kMaxRank.
class StridedCopy64Exec : public StepExec {
 public:
  StridedCopy64Exec(int src, int dst, std::vector<int64_t> dims, std::vector<int64_t> src_strides,
                    std::vector<int64_t> dst_strides)
      : src_(src), dst_(dst), dims_(std::move(dims)), ss_(std::move(src_strides)), ds_(std::move(dst_strides)) {}
  void Run(RunContext& rc) override {
    const int64_t* s = static_cast<const int64_t*>(rc.ptr(src_));
    int64_t* d = static_cast<int64_t*>(rc.ptr(dst_));
    const size_t rank = dims_.size();
    int64_t total = 1;
    for (int64_t x : dims_) total *= x;
    std::vector<int64_t> idx(rank, 0);
    for (int64_t n = 0; n < total; ++n) {
      int64_t so = 0, doff = 0;
      for (size_t k = 0; k < rank; ++k) so += idx[k] * ss_[k], doff += idx[k] * ds_[k];
      d[doff] = s[so];
      for (size_t k = rank; k-- > 0;) {
        if (++idx[k] < dims_[k]) break;
        idx[k] = 0;
      }
    }
  }

 private:
  int src_, dst_;
  std::vector<int64_t> dims_, ss_, ds_;
};

}  // namespace

dnnl::memory::data_type DnnlType(uint32_t onnx_dtype) {
  using dt = dnnl::memory::data_type;
  switch (onnx_dtype) {
    case 1: return dt::f32;
    case 6: return dt::s32;
    case 3: return dt::s8;
    case 2: case 9: return dt::u8;
    case 10: return dt::f16;  // program version 6: float16 fused inputs/outputs and Cast-to-float16 copies
    default: return dt::undef;
  }
}

dnnl::memory::desc PlainDesc(const std::vector<int64_t>& dims, uint32_t onnx_dtype) {
  dnnl::memory::dims d(dims.begin(), dims.end());
  if (d.empty()) d.push_back(1);
  dnnl::memory::dims strides(d.size(), 1);
  for (size_t i = d.size() - 1; i-- > 0;) strides[i] = strides[i + 1] * std::max<int64_t>(d[i + 1], 1);
  return dnnl::memory::desc(d, DnnlType(onnx_dtype), strides);
}

CheckResult OperandDesc(const Operand& op, dnnl::memory::desc* out) {
  *out = dnnl::memory::desc();
  if (!op.present()) return CheckResult::Ok();
  if (op.dims.size() > kMaxRank) return CheckResult::Fail("rank " + std::to_string(op.dims.size()) + " is too large");
  // int64 operands are described to oneDNN as s32 pairs is not possible; they are moved by our own loops, which use
  // the f64-sized extents computed here through a same-sized stand-in type (s32 with doubled innermost extent is not
  // used: we describe them as f32 with dims/strides doubled in the last dim).
  dnnl::memory::data_type dt = DnnlType(op.dtype);
  dnnl::memory::dims dims(op.dims.begin(), op.dims.end());
  dnnl::memory::dims strides(op.strides.begin(), op.strides.end());
  if (op.dtype == 7) {  // int64: stand-in f32 descriptor with two elements per value
    if (op.tag != 0 && op.tag != static_cast<uint32_t>(dnnl_format_tag_undef))
      return CheckResult::Fail("int64 operands must be plain or strided");
    dt = dnnl::memory::data_type::f32;
    if (dims.empty()) dims.push_back(1), strides.assign(1, 1);
    if (strides.empty()) {
      strides.assign(dims.size(), 1);
      for (size_t i = dims.size() - 1; i-- > 0;) strides[i] = strides[i + 1] * std::max<int64_t>(dims[i + 1], 1);
    }
    for (auto& s : strides) s *= 2;
    dims.push_back(2);
    strides.push_back(1);
  }
  if (dt == dnnl::memory::data_type::undef) return CheckResult::Fail("dtype " + std::to_string(op.dtype) + " is not supported");
  if (dims.empty()) dims.push_back(1), strides.assign(1, 1);
  if (dims.size() > kMaxRank) return CheckResult::Fail("rank is too large");
  for (int64_t d : dims)
    if (d <= 0) return CheckResult::Fail("zero-sized operands are not supported");
  try {
    if (op.tag == 0 || op.dtype == 7) {
      if (strides.size() != dims.size()) return CheckResult::Fail("strides do not match the rank");
      *out = dnnl::memory::desc(dims, dt, strides);
    } else {
      if (op.tag == static_cast<uint32_t>(dnnl_format_tag_any) || op.tag >= static_cast<uint32_t>(dnnl_format_tag_last))
        return CheckResult::Fail("format tag " + std::to_string(op.tag) + " is unknown to this oneDNN");
      *out = dnnl::memory::desc(dims, dt, static_cast<dnnl::memory::format_tag>(op.tag));
    }
  } catch (const dnnl::error& e) {
    return CheckResult::Fail(std::string("invalid layout: ") + e.what());
  }
  if (out->is_zero()) return CheckResult::Fail("invalid layout");
  return CheckResult::Ok();
}

size_t DescBytes(const dnnl::memory::desc& d) { return d.get_size(); }

namespace {

// The bytes operand `op`, described by `d` (OperandDesc), reaches from its offset; false for a negative stride.
bool BytesNeeded(const Operand& op, const dnnl::memory::desc& d, uint64_t* need) {
  *need = DescBytes(d);
  if (op.tag == 0 && op.strides.size() == op.dims.size() && !op.dims.empty()) {
    // A strided view needs the bytes up to its last element. oneDNN's size, max(dims[k] * strides[k]), overstates
    // that for a view that starts inside its buffer (a Slice of inner rows) and would refuse a correct step.
    uint64_t last = 0;
    bool overflow = false;
    for (size_t k = 0; k < op.dims.size(); ++k) {
      if (op.strides[k] < 0) return false;
      uint64_t term;
      overflow |= __builtin_mul_overflow(static_cast<uint64_t>(op.dims[k] - 1), static_cast<uint64_t>(op.strides[k]), &term);
      overflow |= __builtin_add_overflow(last, term, &last);
    }
    uint64_t exact;
    overflow |= __builtin_mul_overflow(last + 1, static_cast<uint64_t>(ElementSize(op.dtype)), &exact);
    if (!overflow && exact != 0 && exact < *need) *need = exact;
  }
  return true;
}

// How far into the arena the program's operands reach: the largest offset + extent of an arena operand that would
// pass BuildContext::Desc. Bounded by the operands' shapes, not by the arena size the (hostile) program declares.
uint64_t ArenaReach(const Program& p) {
  uint64_t reach = 0;
  for (const Step& s : p.steps)
    for (const Operand& op : s.ops) {
      if (op.buf != Buf::kArena || !op.present()) continue;
      dnnl::memory::desc d;
      uint64_t need = 0;
      if (!OperandDesc(op, &d).ok || !BytesNeeded(op, d, &need)) continue;
      if (op.offset > p.arena_bytes || need > p.arena_bytes - op.offset) continue;
      reach = std::max(reach, op.offset + need);
    }
  return reach;
}

// Create faults in at most this much of an arena (a program may declare any size; this bounds the work).
constexpr uint64_t kMaxPrefault = uint64_t{1} << 30;

}  // namespace

ZeroedBuffer::~ZeroedBuffer() {
  if (data_) munmap(data_, static_cast<size_t>(size_));
}

ZeroedBuffer& ZeroedBuffer::operator=(ZeroedBuffer&& other) noexcept {
  if (this != &other) {
    if (data_) munmap(data_, static_cast<size_t>(size_));
    data_ = other.data_, size_ = other.size_;
    other.data_ = nullptr, other.size_ = 0;
  }
  return *this;
}

bool ZeroedBuffer::Allocate(uint64_t bytes) {
  *this = ZeroedBuffer();
  if (bytes == 0 || bytes > (uint64_t{1} << 56)) return false;  // nothing, or more than any address space
  void* p = mmap(nullptr, static_cast<size_t>(bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return false;
  data_ = static_cast<unsigned char*>(p);  // page-aligned
  size_ = bytes;
  return true;
}

void ZeroedBuffer::Prefault(uint64_t bytes) {
  bytes = std::min(bytes, size_);
  // In 1 MiB pieces: faulting in holds the process's mmap lock, which another thread's mmap, munmap or mprotect
  // (the session's allocations, oneDNN's JIT) then waits for. No transparent huge pages: with this VM's
  // defrag=madvise, faulting in 18 MB of them took 2-38 ms (direct compaction), 4 KiB pages a steady ~3-5 ms.
  constexpr uint64_t kPiece = uint64_t{1} << 20;
  for (uint64_t at = 0; at < bytes; at += kPiece)
    madvise(data_ + at, static_cast<size_t>(std::min(kPiece, bytes - at)), MADV_POPULATE_WRITE);
}

// ---- BuildContext ----

CheckResult BuildContext::Fail(const std::string& why) const {
  return CheckResult::Fail("step " + std::to_string(step_index_) + " (" +
                           StepKindName(static_cast<uint32_t>(step_->kind)) + " '" + step_->name + "'): " + why);
}

CheckResult BuildContext::ExpectCounts(size_t ops, bool at_least, size_t ints, size_t floats) const {
  const Step& s = *step_;
  if (at_least ? s.ops.size() < ops : s.ops.size() != ops)
    return Fail("has " + std::to_string(s.ops.size()) + " operands, expected " + (at_least ? "at least " : "") +
                std::to_string(ops));
  if (s.ints.size() != ints && ints != SIZE_MAX)
    return Fail("has " + std::to_string(s.ints.size()) + " integer parameters, expected " + std::to_string(ints));
  if (s.floats.size() != floats && floats != SIZE_MAX)
    return Fail("has " + std::to_string(s.floats.size()) + " float parameters, expected " + std::to_string(floats));
  return CheckResult::Ok();
}

CheckResult BuildContext::Desc(size_t i, dnnl::memory::desc* out) {
  const Step& s = *step_;
  if (i >= s.ops.size()) return Fail("operand " + std::to_string(i) + " is missing");
  const Operand& op = s.ops[i];
  CheckResult r = OperandDesc(op, out);
  if (!r.ok) return Fail("operand " + std::to_string(i) + ": " + r.reason);
  if (!op.present()) return CheckResult::Ok();
  const Program& p = exec_->program_;
  uint64_t available = 0;
  std::string where;
  switch (op.buf) {
    case Buf::kInput:
      if (op.dtype != p.inputs[op.index].dtype) return Fail("operand " + std::to_string(i) + " reads input " +
                                                            std::to_string(op.index) + " with another dtype");
      available = IoBytes(p.inputs[op.index]);
      where = "input " + std::to_string(op.index);
      break;
    case Buf::kOutput:
      if (op.dtype != p.outputs[op.index].dtype) return Fail("operand " + std::to_string(i) + " writes output " +
                                                             std::to_string(op.index) + " with another dtype");
      available = IoBytes(p.outputs[op.index]);
      where = "output " + std::to_string(op.index);
      break;
    case Buf::kArena:
      available = p.arena_bytes;
      where = "the arena";
      break;
    case Buf::kWeight:
      available = exec_->weights_[op.index].length;
      where = "weight " + std::to_string(op.index);
      break;
    default:
      return Fail("operand " + std::to_string(i) + " has no buffer");
  }
  uint64_t need = 0;
  if (!BytesNeeded(op, *out, &need)) return Fail("operand " + std::to_string(i) + " has a negative stride");
  if (op.offset > available || need > available - op.offset)
    return Fail("operand " + std::to_string(i) + " needs " + std::to_string(need) + " bytes at offset " +
                std::to_string(op.offset) + " of " + where + ", which has " + std::to_string(available));
  if (op.buf == Buf::kWeight && (reinterpret_cast<uintptr_t>(exec_->weights_[op.index].data) + op.offset) % 4 != 0)
    return Fail("operand " + std::to_string(i) + " is misaligned");
  return CheckResult::Ok();
}

WeightRef BuildContext::WeightBytes(size_t i) const {
  if (i >= step_->ops.size()) return WeightRef();
  const Operand& op = step_->ops[i];
  if (op.buf != Buf::kWeight || op.index >= exec_->weights_.size()) return WeightRef();
  const WeightRef& w = exec_->weights_[op.index];
  if (op.offset > w.length) return WeightRef();
  return {static_cast<const unsigned char*>(w.data) + op.offset, w.length - op.offset};
}

int BuildContext::Slot(size_t i, const dnnl::memory::desc& desc) {
  const Operand& op = step_->ops[i];
  std::vector<Executor::SlotInfo>& slots = exec_->step_slots_[step_index_];  // this step's: no other thread's
  slots.push_back({op.buf, op.index, op.offset, desc});
  return static_cast<int>(slots.size() - 1);
}

CheckResult BuildContext::PostOps(dnnl::primitive_attr* attr, std::vector<std::pair<int, int>>* args) {
  dnnl::post_ops ops;
  int index = 0;
  for (const PostOp& q : step_->post_ops) {
    try {
      switch (q.kind) {
        case PostOp::kEltwise:
          ops.append_eltwise(q.scale, static_cast<dnnl::algorithm>(q.alg), q.alpha, q.beta);
          break;
        case PostOp::kSum:
          ops.append_sum(q.scale);
          break;
        case PostOp::kBinary: {
          dnnl::memory::desc d;
          CheckResult r = Desc(q.operand, &d);
          if (!r.ok) return r;
          ops.append_binary(static_cast<dnnl::algorithm>(q.alg), d);
          args->push_back({DNNL_ARG_ATTR_MULTIPLE_POST_OP(index) | DNNL_ARG_SRC_1, Slot(q.operand, d)});
          break;
        }
        default:
          return Fail("unknown post-op kind " + std::to_string(q.kind));
      }
    } catch (const dnnl::error& e) {
      return Fail(std::string("post-op ") + std::to_string(index) + ": " + e.what());
    }
    ++index;
  }
  attr->set_post_ops(ops);
  attr->set_scratchpad_mode(dnnl::scratchpad_mode::user);  // see executor.h: every built primitive
  return CheckResult::Ok();
}

dnnl::primitive_attr UserScratchpad(dnnl::primitive_attr attr) {
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

PrimitiveExec::PrimitiveExec(dnnl::primitive p, std::vector<std::pair<int, int>> args)
    : prim_(std::move(p)), args_(std::move(args)) {
  const_dnnl_primitive_desc_t pd = prim_.get_primitive_desc();
  const_dnnl_primitive_attr_t attr = nullptr;
  dnnl_scratchpad_mode_t mode = dnnl_scratchpad_mode_library;
  if (dnnl_primitive_desc_get_attr(pd, &attr) == dnnl_success &&
      dnnl_primitive_attr_get_scratchpad_mode(attr, &mode) == dnnl_success)
    user_scratchpad_ = mode == dnnl_scratchpad_mode_user;
  if (const dnnl_memory_desc_t* md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0))
    scratch_md_ = dnnl::memory::desc(*md);
  const char* impl = nullptr;
  if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl) impl_ = impl;
}

void PrimitiveExec::Run(RunContext& rc) {
  std::unordered_map<int, dnnl::memory>& args = rc.step_args();
  if (args.empty()) {  // first run on this context: the map (and the scratchpad's memory object) are kept
    args.reserve(args_.size() + 1);
    for (const auto& a : args_) args.emplace(a.first, rc.mem(a.second));
    if (user_scratchpad_ && scratch_md_.get_size() > 0)
      args.emplace(DNNL_ARG_SCRATCHPAD, dnnl::memory(scratch_md_, rc.stream().get_engine(), rc.scratchpad()));
  }
  prim_.execute(rc.stream(), args);
}

// ---- Reorder ----

CheckResult BuildReorder(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  CheckResult r = bc.ExpectCounts(2, false, 0, 0);
  if (!r.ok) return r;
  const Step& s = bc.step();
  dnnl::memory::desc src, dst;
  if (!(r = bc.Desc(0, &src)).ok || !(r = bc.Desc(1, &dst)).ok) return r;
  if (!s.ops[0].present() || !s.ops[1].present()) return bc.Fail("src and dst are required");
  if (s.ops[0].dims != s.ops[1].dims) return bc.Fail("src and dst dims differ");
  const uint32_t sd = s.ops[0].dtype, dd = s.ops[1].dtype;
  if (sd == 7 || dd == 7 || sd == 9 || dd == 9) {
    if (sd != dd) return bc.Fail("int64/bool operands cannot change dtype");
    const int a = bc.Slot(0, src), b = bc.Slot(1, dst);
    if (sd == 9) {  // bool: u8 reorder works
      try {
        out->reset(new PrimitiveExec(dnnl::reorder(dnnl::reorder::primitive_desc(bc.engine(), src, bc.engine(), dst, UserScratchpad())),
                                     {{DNNL_ARG_FROM, a}, {DNNL_ARG_TO, b}}));
      } catch (const dnnl::error& e) {
        return bc.Fail(e.what());
      }
      return CheckResult::Ok();
    }
    // int64: dense → memmove; strided → element loop (the stand-in descs carry the byte extents).
    std::vector<int64_t> dims = s.ops[0].dims;
    auto dense = [](const Operand& o) {
      if (o.strides.empty()) return true;
      int64_t expect = 1;
      for (size_t k = o.dims.size(); k-- > 0;) {
        if (o.dims[k] != 1 && o.strides[k] != expect) return false;
        expect *= o.dims[k];
      }
      return true;
    };
    int64_t numel = 1;
    for (int64_t d : dims) numel *= d;
    if (dense(s.ops[0]) && dense(s.ops[1])) {
      out->reset(new CopyExec(a, b, static_cast<size_t>(numel) * 8));
      return CheckResult::Ok();
    }
    auto strides_of = [](const Operand& o) {
      if (!o.strides.empty()) return o.strides;
      std::vector<int64_t> st(o.dims.size(), 1);
      for (size_t k = o.dims.size(); k-- > 1;) st[k - 1] = st[k] * o.dims[k];
      return st;
    };
    out->reset(new StridedCopy64Exec(a, b, dims, strides_of(s.ops[0]), strides_of(s.ops[1])));
    return CheckResult::Ok();
  }
  try {
    dnnl::reorder::primitive_desc pd(bc.engine(), src, bc.engine(), dst, UserScratchpad());
    const int a = bc.Slot(0, src), b = bc.Slot(1, dst);
    out->reset(new PrimitiveExec(dnnl::reorder(pd), {{DNNL_ARG_FROM, a}, {DNNL_ARG_TO, b}}));
  } catch (const dnnl::error& e) {
    return bc.Fail(std::string("reorder: ") + e.what());
  }
  return CheckResult::Ok();
}

// ---- Executor ----

// The operand a step writes, by kind (the builders read the others). -1 for an unknown kind.
int DstOperand(const Step& s) {
  switch (s.kind) {
    case StepKind::kReorder: case StepKind::kPool: case StepKind::kEltwise: case StepKind::kSoftmax:
    case StepKind::kReduction: case StepKind::kResample: case StepKind::kErf: case StepKind::kPad:
    case StepKind::kStridedCopy: case StepKind::kDynamicQuantize: case StepKind::kDequantize:
    case StepKind::kBilinear: case StepKind::kRoundFloat16: case StepKind::kQuantize: case StepKind::kTrilu:
      return 1;
    case StepKind::kBinary: case StepKind::kGather: case StepKind::kMaskedSoftmax: case StepKind::kMatMulInt8:
    case StepKind::kMatMulInt8Avx2:
      return 2;
    case StepKind::kConv: case StepKind::kDeconv: case StepKind::kMatMul: case StepKind::kInnerProduct:
    case StepKind::kLayerNorm: case StepKind::kConvInt8: case StepKind::kQConv: case StepKind::kConvInt8Avx2:
    case StepKind::kQConvAvx2:
      return 3;
    case StepKind::kBatchNorm:
      return 5;
    case StepKind::kLstm:  // also writes operands 7 and 8 when present; its builder checks those
      return 6;
    case StepKind::kConcat: case StepKind::kTypedEltwise:
      return static_cast<int>(s.ops.size()) - 1;
  }
  return -1;
}

// A step whose only destination has no elements (a zero-sized dim) writes nothing: it is not built, since oneDNN
// refuses zero dims in many primitives, and runs as nothing. kLstm and kDynamicQuantize also write other operands.
bool WritesNothing(const Step& s, int dst) {
  if (s.kind == StepKind::kLstm || s.kind == StepKind::kDynamicQuantize) return false;
  const Operand& d = s.ops[static_cast<size_t>(dst)];
  return d.present() && std::any_of(d.dims.begin(), d.dims.end(), [](int64_t x) { return x == 0; });
}

class NothingExec : public StepExec {
 public:
  void Run(RunContext&) override {}
};

void Executor::FinishWarm(WarmGo go) {
  {
    std::lock_guard<std::mutex> lock(warm_mu_);
    if (warm_go_ == WarmGo::kWait) warm_go_ = go;
  }
  warm_cv_.notify_all();
  if (go == WarmGo::kStop && warm_.joinable()) warm_.join();
}

Executor::~Executor() {
  FinishWarm(WarmGo::kStop);  // joins the helper thread (its arena work is dropped if it had not started)
  if (!profile_ || execs_.empty()) return;  // (no steps: Create failed)
  std::fprintf(stderr,
               "[aotcpu profile] create: %zu steps built in %.2f ms on %d threads (%.2f ms CPU in the steps, %.2f ms CPU in all); "
               "on another thread, weights faulted in %.2f ms, then %llu bytes of arena in %.2f ms (the first run waited %.2f ms "
               "for it)\n",
               execs_.size(), prof_.build_ms, prof_.build_threads, prof_.build_sum_ms, prof_.build_cpu_ms,
               prof_.weights_ms, static_cast<unsigned long long>(prof_.arena_prefaulted), prof_.arena_ms, prof_.join_ms);
  if (!prof_.first_us.empty()) {
    double sum = 0;
    for (double us : prof_.first_us) sum += us;
    std::fprintf(stderr, "[aotcpu profile] first run: set-up %.1f us, steps %.1f us\n", prof_.first_setup_us, sum);
  }
  if (profile_runs_ == 0) return;
  // Per step and per kind: the median over runs of each step's wall time (medians, so a preempted run on a busy
  // machine does not dominate); the developer's view of where a run goes.
  const size_t runs = static_cast<size_t>(profile_runs_);
  std::vector<double> median(execs_.size());
  double total = 0;
  for (size_t i = 0; i < median.size(); ++i) {
    std::vector<double> v(runs);
    for (size_t r = 0; r < runs; ++r) v[r] = profile_us_[r * median.size() + i];  // stored run after run
    std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(runs / 2), v.end());
    median[i] = v[runs / 2];
    total += median[i];
  }
  std::fprintf(stderr, "[aotcpu profile] %zu runs, sum of step medians %.1f us in %zu steps\n", runs, total,
               execs_.size());
  // The roofline: each step's achieved GFLOP/s and GB/s beside what this machine reaches (roofline.h), and the share
  // of the roofline time it runs at ("roof": 100% at the machine's limit). A step far below it is visible on any
  // model, whatever its kind.
  const MachinePeak& peak = ProbeMachine(full_threads_);
  std::fprintf(stderr,
               "[aotcpu profile] machine (%d threads, oneDNN ISA %s): f32 matmul %.0f GFLOP/s (%.0f on one thread), "
               "read %.1f GB/s from memory, %.1f GB/s from a %.0f KB cache per thread\n",
               peak.threads, peak.isa.c_str(), peak.gflops, peak.gflops_one, peak.mem_gbps, peak.cache_gbps,
               peak.cache_bytes / 1024);
  std::map<std::string, std::pair<double, int>> by_kind;
  std::vector<double> roof_us(median.size());
  double roof_total = 0;
  for (size_t i = 0; i < median.size(); ++i) {
    const Step& s = program_.steps[i];
    auto& k = by_kind[StepKindName(static_cast<uint32_t>(s.kind))];
    k.first += median[i];
    k.second += 1;
    const StepWork w = EstimateStepWork(s);
    roof_us[i] = RooflineUs(w, peak, step_threads_[i]);
    roof_total += roof_us[i];
    const double sec = std::max(median[i], 1e-3) * 1e-6;
    std::fprintf(stderr,
                 "[aotcpu profile] step %3zu %-12s %9.1f us %5.1f%%  %-16s %dt  %7.1f GFLOP/s %6.1f GB/s roof %5.1f%%  "
                 "%s\n",
                 i, StepKindName(static_cast<uint32_t>(s.kind)), median[i], 100 * median[i] / total,
                 execs_[i]->Impl().c_str(), step_threads_[i], w.flops / sec / 1e9, w.bytes / sec / 1e9,
                 100 * roof_us[i] / std::max(median[i], 1e-3), s.name.c_str());
  }
  for (const auto& k : by_kind)
    std::fprintf(stderr, "[aotcpu profile] kind %-12s x%-3d %9.1f us %5.1f%%\n", k.first.c_str(), k.second.second,
                 k.second.first, 100 * k.second.first / total);
  std::fprintf(stderr, "[aotcpu profile] roofline: the steps need %.1f us at this machine's limits, ran %.1f us (%.1f%%)\n",
               roof_total, total, 100 * roof_total / std::max(total, 1e-3));
  // The steps whose build took longest, and those whose first run exceeded their median most.
  auto top = [&](const char* what, const std::vector<double>& v, auto value) {
    std::vector<size_t> order(v.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return value(a) > value(b); });
    for (size_t k = 0; k < std::min<size_t>(5, order.size()); ++k)
      std::fprintf(stderr, "[aotcpu profile] %s: step %3zu %-12s %9.1f us  %s\n", what, order[k],
                   StepKindName(static_cast<uint32_t>(program_.steps[order[k]].kind)), value(order[k]),
                   program_.steps[order[k]].name.c_str());
  };
  top("time over roofline", median, [&](size_t i) { return median[i] - roof_us[i]; });
  top("build CPU", prof_.step_build_ms, [&](size_t i) { return 1e3 * prof_.step_build_ms[i]; });
  if (prof_.first_us.size() == median.size())
    top("first run over median", prof_.first_us, [&](size_t i) { return prof_.first_us[i] - median[i]; });
}

namespace {

// A rough single-thread time of a step, in microseconds: its multiply-adds at ~10 GMAC/s (convolutions, matrix
// products, LSTM) plus the bytes its operands hold at ~10 GB/s. Only compared with kParallelMinUs.
double EstimatedStepUs(const Step& s) {
  const StepWork w = EstimateStepWork(s);  // roofline.h
  return w.flops / 2 / 1e4 + w.bytes / 1e4;
}

// Steps estimated below EPCTX_AOTCPU_PARALLEL_MIN_US (default 20) run on the calling thread alone. An OpenMP
// fork/join costs microseconds on an idle machine but milliseconds when another process, or the hypervisor, holds a
// core (a worker descheduled at every barrier). On the AVX-512 VM (zoo, 2 threads, 3 processes each, issue 14):
// 20 halved the steady state of the small models (hey_jarvis 0.035 -> 0.017 ms, melspectrogram 0.069 -> 0.046,
// Silero v5 0.077 -> 0.053) and made their first run steady (hey_jarvis 0.3-9 ms -> 0.2 ms), within noise on the
// CNNs; 50 slowed the PaddleOCR classifier (1.04 -> 1.30 ms). (On the earlier AVX2 machine every step on every
// thread had been faster: Silero v4 0.52 vs 0.62 ms with 50.) 0 puts every step on every thread.
double ParallelMinUs() {
  static const double v = [] {
    const char* e = std::getenv("EPCTX_AOTCPU_PARALLEL_MIN_US");
    if (!e || !*e) return 20.0;
    char* end = nullptr;
    const double x = std::strtod(e, &end);
    return end && *end == '\0' && x >= 0 ? x : 20.0;
  }();
  return v;
}

// EPCTX_AOTCPU_BUILD_THREADS: the threads that build a program's steps (Executor::Create); 0 or unset: the default.
int BuildThreadsFromEnv() {
  static const int v = [] {
    const char* e = std::getenv("EPCTX_AOTCPU_BUILD_THREADS");
    if (!e || !*e) return 0;
    char* end = nullptr;
    const long x = std::strtol(e, &end, 10);
    return end && *end == '\0' && x >= 0 && x <= 1024 ? static_cast<int>(x) : 0;
  }();
  return v;
}

}  // namespace

std::string Executor::step_impl(size_t i) const { return i < execs_.size() ? execs_[i]->Impl() : std::string(); }

CheckResult Executor::Create(Program program, std::vector<WeightRef> weights, int threads,
                             std::unique_ptr<Executor>* out, int build_threads, bool warm_up) {
  std::unique_ptr<Executor> e(new Executor());
  e->program_ = std::move(program);
  e->weights_ = std::move(weights);
  e->threads_ = threads;
  const char* profile = std::getenv("EPCTX_AOTCPU_PROFILE");
  e->profile_ = profile && *profile && std::strcmp(profile, "0") != 0;
  if (e->weights_.size() != e->program_.num_weights)
    return CheckResult::Fail("the program uses " + std::to_string(e->program_.num_weights) + " weights, " +
                             std::to_string(e->weights_.size()) + " were given");
  if (threads > 0) omp_set_num_threads(threads);
  const int full = threads > 0 ? threads : omp_get_max_threads();
  e->full_threads_ = full;
  e->step_threads_.assign(e->program_.steps.size(), full);
  if (ParallelMinUs() > 0)
    for (size_t i = 0; i < e->program_.steps.size(); ++i)
      if (EstimatedStepUs(e->program_.steps[i]) < ParallelMinUs()) e->step_threads_[i] = 1;
  try {
    e->engine_ = dnnl::engine(dnnl::engine::kind::cpu, 0);
  } catch (const dnnl::error& err) {
    return CheckResult::Fail(std::string("oneDNN engine: ") + err.what());
  }
  Executor* ex = e.get();
  using Clock = std::chrono::steady_clock;
  // Off the critical path (issue 14's first run), on a helper thread: the weights' pages are faulted in while the
  // steps are built (MADV_POPULATE_READ on a mapped binary; advice, failures ignored), so the first Run does not
  // fault them. Once the steps are built, the same thread maps the first run's arena and faults it in (zeroed by
  // the kernel), as far as the steps' operands reach: the program's arena size is not
  // trusted for that (a damaged one may declare any size; a run maps it lazily, and the builders refuse operands
  // beyond it). Not during the build: faulting in holds the process's mmap lock, which every JIT kernel's mprotect
  // waits for (measured on the detector: creation 15 -> 19 ms with its 18 MB arena faulted in concurrently).
  if (warm_up) e->warm_ = std::thread([ex] {
    const auto t0 = Clock::now();
    const long page = sysconf(_SC_PAGESIZE);
    for (const WeightRef& w : ex->weights_) {
      if (w.data == nullptr || w.length == 0 || page <= 0) continue;
      const uintptr_t begin = reinterpret_cast<uintptr_t>(w.data) / static_cast<uintptr_t>(page) *
                              static_cast<uintptr_t>(page);
      const uintptr_t end = reinterpret_cast<uintptr_t>(w.data) + w.length;
      madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_READ);
    }
    ex->prof_.weights_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    {
      std::unique_lock<std::mutex> lock(ex->warm_mu_);
      ex->warm_cv_.wait(lock, [ex] { return ex->warm_go_ != WarmGo::kWait; });
      if (ex->warm_go_ == WarmGo::kStop) return;
    }
    const auto t1 = Clock::now();
    const uint64_t reach = ArenaReach(ex->program_);
    if (reach > 0 && reach <= kMaxPrefault && ex->first_arena_.Allocate(ex->program_.arena_bytes)) {
      ex->first_arena_.Prefault(reach);
      ex->prof_.arena_prefaulted = reach;
    }
    ex->prof_.arena_ms = std::chrono::duration<double, std::milli>(Clock::now() - t1).count();
  });
  // A return below without an executor destroys `e`, whose destructor stops and joins the helper thread.
  struct Joiner {
    std::vector<std::thread>& threads;
    ~Joiner() {
      for (std::thread& t : threads)
        if (t.joinable()) t.join();
    }
  };

  const size_t n = e->program_.steps.size();
  std::vector<std::unique_ptr<StepExec>> execs(n);
  std::vector<CheckResult> results(n);
  std::vector<double> build_ms(e->profile_ ? n : 0);
  e->step_slots_.assign(n, {});
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex cpu_mu;
  auto thread_cpu_ms = [] {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return 1e3 * static_cast<double>(ts.tv_sec) + 1e-6 * static_cast<double>(ts.tv_nsec);
  };
  auto work = [&] {
    const double cpu0 = e->profile_ ? thread_cpu_ms() : 0;
    for (size_t i; !failed.load() && (i = next.fetch_add(1)) < n;) {
      const double t0 = e->profile_ ? thread_cpu_ms() : 0;
      const Step& s = ex->program_.steps[i];
      BuildContext bc;
      bc.engine_ = &ex->engine_;
      bc.step_ = &s;
      bc.step_index_ = i;
      bc.exec_ = ex;
      CheckResult& r = results[i];
      StepBuilder build = FindStepBuilder(static_cast<uint32_t>(s.kind));
      // Steps write only the arena and the outputs: never an input or a (read-only, mapped) weight.
      const int dst = DstOperand(s);
      if (!build) {
        r = bc.Fail("no builder for this step kind");
      } else if (dst < 0 || static_cast<size_t>(dst) >= s.ops.size() ||
                 (s.ops[dst].buf != Buf::kArena && s.ops[dst].buf != Buf::kOutput)) {
        r = bc.Fail("its destination (operand " + std::to_string(dst) + ") is not the arena or an output");
      } else if (WritesNothing(s, dst)) {
        execs[i].reset(new NothingExec());
      } else {
        // A primitive sizes its thread partition when it is created (oneDNN's jit convolutions) and oneDNN picks
        // implementations per thread count: create it with the threads it will run with. (OpenMP's thread count
        // is per thread: this sets the building thread's.)
        omp_set_num_threads(ex->step_threads_[i]);
        try {
          r = build(bc, &execs[i]);
        } catch (const std::exception& err) {  // builders catch dnnl::error themselves; this is the last line
          r = bc.Fail(err.what());
        }
        if (r.ok && !execs[i]) r = bc.Fail("builder produced nothing");
      }
      if (!r.ok) failed.store(true);
      if (e->profile_) build_ms[i] = thread_cpu_ms() - t0;
    }
    if (e->profile_) {
      std::lock_guard<std::mutex> lock(cpu_mu);
      ex->prof_.build_cpu_ms += thread_cpu_ms() - cpu0;
    }
  };
  // Creating the primitives (oneDNN's JIT code generation) is most of a load once the binary is verified: steps
  // may be built on several threads. oneDNN's primitive creation is thread-safe; every primitive has a user-mode
  // scratchpad (executor.h), so none depends on the thread that created it (Debian's oneDNN 2.6 kept a
  // library-managed scratchpad per creating thread, which crashed parallel builds before 809d717); a builder's
  // only shared state is its step's slot list (BuildContext::Slot). Steps are claimed in order, so when one fails
  // every step before it was built: the first failure in step order is the one a serial build reports.
  // Serial by default: on the 2-vCPU VM of issue 14 a second building thread saved nothing (ppocr_v4_rec: 13.9 ms
  // building on 1 thread, 14.0 ms on 2, whose CPU time rose from 13 to 20 ms). oneDNN's JIT makes every kernel's
  // code executable with mprotect, and with the process on two CPUs each mprotect waits for a TLB shootdown IPI to
  // the other (perf: smp_call_function_many_cond under __mprotect, 6% of the load), which a VM makes expensive.
  int want = build_threads > 0 ? build_threads : BuildThreadsFromEnv();
  if (want <= 0) want = 1;
  want = std::max(1, std::min({want, kMaxBuildThreads, static_cast<int>(std::max<size_t>(n, 1))}));
  const auto build_start = Clock::now();
  std::vector<std::thread> helpers;
  Joiner helper_joiner{helpers};
  for (int t = 1; t < want; ++t) {
    try {
      helpers.emplace_back(work);
    } catch (const std::exception&) {
      break;  // fewer threads
    }
  }
  work();
  for (std::thread& t : helpers) t.join();
  omp_set_num_threads(full);
  for (size_t i = 0; i < n; ++i)
    if (!results[i].ok) return results[i];
  e->prof_.build_threads = static_cast<int>(helpers.size()) + 1;
  e->prof_.build_ms = std::chrono::duration<double, std::milli>(Clock::now() - build_start).count();
  for (double ms : build_ms) e->prof_.build_sum_ms += ms;
  e->prof_.step_build_ms = std::move(build_ms);
  // Every step's slots, step after step.
  e->slot_base_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    e->slot_base_[i] = e->slots_.size();
    e->slots_.insert(e->slots_.end(), e->step_slots_[i].begin(), e->step_slots_[i].end());
  }
  e->step_slots_.clear();
  for (const auto& x : execs) {
    e->scratch_bytes_ = std::max(e->scratch_bytes_, x->ScratchpadBytes());
    if (!x->ThreadSafe()) e->serialize_ = true;
  }
  e->execs_ = std::move(execs);
  e->FinishWarm(WarmGo::kArena);  // the helper thread faults the arena in while the session finishes
  // OpenMP starts a thread's team on its first parallel region: without this, the first run's first parallel step
  // paid for starting the workers (the melspectrogram's first step: 0.14 ms over its median, and 3-4 ms in about half
  // of the processes, waiting for the new thread to be scheduled). Sessions usually run on the thread that created
  // them; ONNX Runtime also starts its intra-op pool at session creation.
  if (std::any_of(e->step_threads_.begin(), e->step_threads_.end(), [](int t) { return t > 1; })) {
#pragma omp parallel num_threads(full)
    {
    }
  }
  *out = std::move(e);
  return CheckResult::Ok();
}

RunContext* Executor::Acquire() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& rc : pool_)
    if (!rc->busy_) {
      rc->busy_ = true;
      return rc.get();
    }
  if (warm_.joinable()) {  // the first context: wait for the helper thread's arena (under mu_: joined once)
    const auto t0 = std::chrono::steady_clock::now();
    warm_.join();
    prof_.join_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  std::unique_ptr<RunContext> rc(new RunContext());
  rc->stream_ = dnnl::stream(engine_);
  // The first context takes the arena Create faulted in; others map theirs (pages faulted by their first run).
  if (first_arena_.size() >= program_.arena_bytes && first_arena_.size() > 0)
    rc->arena_ = std::move(first_arena_);
  else if (!rc->arena_.Allocate(std::max<uint64_t>(program_.arena_bytes, 1)))
    throw std::runtime_error("cannot map an arena of " + std::to_string(program_.arena_bytes) + " bytes");
  unsigned char* base = rc->arena_.data();
  if (scratch_bytes_ > 0) {
    if (!rc->scratch_storage_.Allocate(scratch_bytes_))
      throw std::runtime_error("cannot map a scratchpad of " + std::to_string(scratch_bytes_) + " bytes");
    rc->scratch_ = rc->scratch_storage_.data();
  }
  rc->step_args_.resize(execs_.size());
  rc->mems_.reserve(slots_.size());
  rc->ptrs_.assign(slots_.size(), nullptr);
  for (size_t i = 0; i < slots_.size(); ++i) {
    const SlotInfo& s = slots_[i];
    void* p = nullptr;
    if (s.buf == Buf::kArena) p = base + s.offset;
    if (s.buf == Buf::kWeight)
      p = const_cast<unsigned char*>(static_cast<const unsigned char*>(weights_[s.index].data)) + s.offset;
    rc->mems_.emplace_back(s.desc, engine_, p);
    rc->ptrs_[i] = p;
  }
  rc->busy_ = true;
  pool_.push_back(std::move(rc));
  return pool_.back().get();
}

void Executor::Release(RunContext* rc) {
  std::lock_guard<std::mutex> lock(mu_);
  rc->busy_ = false;
  rc->error_.clear();
}

CheckResult Executor::Bind(RunContext* rc, const std::vector<const void*>& inputs,
                           const std::vector<void*>& outputs) {
  if (inputs.size() != program_.inputs.size() || outputs.size() != program_.outputs.size())
    return CheckResult::Fail("wrong number of inputs or outputs");
  for (size_t i = 0; i < slots_.size(); ++i) {
    const SlotInfo& s = slots_[i];
    unsigned char* p = nullptr;
    if (s.buf == Buf::kInput) p = const_cast<unsigned char*>(static_cast<const unsigned char*>(inputs[s.index]));
    else if (s.buf == Buf::kOutput) p = static_cast<unsigned char*>(outputs[s.index]);
    else continue;
    p += s.offset;
    rc->mems_[i].set_data_handle(p);
    rc->ptrs_[i] = p;
  }
  return CheckResult::Ok();
}

namespace {
// Runs of executors holding a primitive with a library-managed scratchpad (see executor.h) are serialized.
// A constant-initialized mutex (no heap object: the plugin may be unloaded before LeakSanitizer looks).
std::mutex g_run_serializer;
std::mutex& RunSerializer() { return g_run_serializer; }
}  // namespace

CheckResult Executor::Run(const std::vector<const void*>& inputs, const std::vector<void*>& outputs) {
  std::unique_lock<std::mutex> serialized(RunSerializer(), std::defer_lock);
  if (serialize_) serialized.lock();
  if (threads_ > 0) omp_set_num_threads(threads_);
  int current = full_threads_;
  RunContext* rc = nullptr;
  const auto setup_start = profile_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
  try {
    rc = Acquire();
  } catch (const std::exception& e) {
    return CheckResult::Fail(std::string("cannot set up a run: ") + e.what());
  }
  const double setup_us =
      profile_ ? std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - setup_start).count() : 0;
  CheckResult r = Bind(rc, inputs, outputs);
  std::vector<double> step_us(profile_ ? execs_.size() : 0);
  for (size_t i = 0; r.ok && i < execs_.size(); ++i) {
    const auto start = profile_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
    rc->step_ = i;
    rc->slot_base_ = slot_base_[i];
    if (step_threads_[i] != current) omp_set_num_threads(current = step_threads_[i]);
    try {
      execs_[i]->Run(*rc);
    } catch (const std::exception& e) {
      rc->Fail(e.what());
    }
    if (profile_) {
      rc->stream().wait();
      step_us[i] = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    }
    if (!rc->error().empty())
      r = CheckResult::Fail("step " + std::to_string(i) + " ('" + program_.steps[i].name + "'): " + rc->error());
  }
  if (r.ok) rc->stream().wait();
  if (current != full_threads_) omp_set_num_threads(full_threads_);
  if (profile_ && r.ok) {
    std::lock_guard<std::mutex> lock(mu_);
    if (profile_warm_ && profile_runs_ < 10000) {  // the first run (page faults, cold caches) is left out
      profile_us_.insert(profile_us_.end(), step_us.begin(), step_us.end());
      ++profile_runs_;
    } else if (!profile_warm_) {
      prof_.first_setup_us = setup_us;
      prof_.first_us = step_us;
    }
    profile_warm_ = true;
  }
  Release(rc);
  return r;
}

}  // namespace aotcpu
}  // namespace epctx
