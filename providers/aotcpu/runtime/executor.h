// Runs a Program: builds one oneDNN primitive (or a small loop) per step, checks every operand's extent against
// its buffer before anything runs, and executes the steps in order over a per-run arena.
//
// Concurrency: Run may be called from many threads at once. Each concurrent run takes its own RunContext (arena,
// scratchpad, oneDNN memory objects) from a pool; primitives are shared. oneDNN as Debian builds it (OpenMP,
// DNNL_ENABLE_CONCURRENT_EXEC off) makes a primitive with a library-managed scratchpad use its creating thread's
// global buffer, so every primitive is created with a user-mode scratchpad (UserScratchpad) and gets the
// RunContext's; an executor holding a primitive built otherwise serializes its runs process-wide instead.
#ifndef EPCTX_PROVIDERS_AOTCPU_RUNTIME_EXECUTOR_H_
#define EPCTX_PROVIDERS_AOTCPU_RUNTIME_EXECUTOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "providers/aotcpu/runtime/program.h"

namespace epctx {
namespace aotcpu {

// A weight tensor as the executor sees it: bytes that outlive the executor (mapped binary or owned buffer).
struct WeightRef {
  const void* data = nullptr;
  uint64_t length = 0;
};

// Zero-filled anonymous memory (mmap), for arenas and scratchpads: pages cost nothing until touched, and are
// zeroed once, by the kernel. Not copyable; not thread-safe.
class ZeroedBuffer {
 public:
  ZeroedBuffer() = default;
  ~ZeroedBuffer();
  ZeroedBuffer(const ZeroedBuffer&) = delete;
  ZeroedBuffer& operator=(const ZeroedBuffer&) = delete;
  ZeroedBuffer& operator=(ZeroedBuffer&& other) noexcept;  // takes other's mapping (other ends empty)
  // Maps `bytes` (> 0), page-aligned; false (and empty) when the system refuses. Drops what was mapped before.
  bool Allocate(uint64_t bytes);
  // Faults in the first `bytes` (at most size()) for writing: advice to the kernel, whose refusal only leaves the
  // pages to the first run.
  void Prefault(uint64_t bytes);
  unsigned char* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  unsigned char* data_ = nullptr;
  uint64_t size_ = 0;
};

// Per-run state handed to step execution.
class RunContext {
 public:
  dnnl::stream& stream() { return stream_; }
  // The running step's memory slots (BuildContext::Slot numbers them from 0 in every step).
  dnnl::memory& mem(int slot) { return mems_[slot_base_ + static_cast<size_t>(slot)]; }
  void* ptr(int slot) { return ptrs_[slot_base_ + static_cast<size_t>(slot)]; }
  // Fails the run with a message (used by loop steps that validate data, e.g. Gather indices).
  void Fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
  }
  const std::string& error() const { return error_; }
  void* scratchpad() { return scratch_; }
  // The running step's oneDNN argument map, kept from run to run (its memory objects are this context's slots, whose
  // data handles Bind updates): empty the first time, for the step to fill.
  std::unordered_map<int, dnnl::memory>& step_args() { return step_args_[step_]; }

 private:
  friend class Executor;
  std::vector<std::unordered_map<int, dnnl::memory>> step_args_;
  size_t step_ = 0;
  size_t slot_base_ = 0;  // the running step's first slot in mems_ / ptrs_
  dnnl::stream stream_;
  std::vector<dnnl::memory> mems_;
  std::vector<void*> ptrs_;
  ZeroedBuffer arena_;
  ZeroedBuffer scratch_storage_;
  void* scratch_ = nullptr;  // 64-byte aligned, Executor::scratch_bytes_ long
  std::string error_;
  bool busy_ = false;
};

// One executable step.
class StepExec {
 public:
  virtual ~StepExec() = default;
  virtual void Run(RunContext& rc) = 0;
  // Bytes of scratchpad the step needs from its RunContext. ThreadSafe is false for a primitive whose scratchpad
  // oneDNN manages (unsafe to run on two threads at once).
  virtual size_t ScratchpadBytes() const { return 0; }
  virtual bool ThreadSafe() const { return true; }
  // The oneDNN implementation running the step ("jit:avx2", "ref:any", ...); "own" for the executor's own loops.
  virtual std::string Impl() const { return "own"; }
};

// Sets the attribute's scratchpad mode to user: every primitive the executor builds must go through this.
dnnl::primitive_attr UserScratchpad(dnnl::primitive_attr attr = dnnl::primitive_attr());

// What a step builder gets: the engine and a way to turn operands into checked memory descriptors and slots.
class BuildContext {
 public:
  dnnl::engine& engine() { return *engine_; }
  const Step& step() const { return *step_; }
  // The memory descriptor of operand `i` of the step; fails when the layout is malformed or the operand's bytes
  // do not fit its buffer (arena size, weight length, I/O tensor size). Absent operands give an empty desc.
  CheckResult Desc(size_t i, dnnl::memory::desc* out);
  // A memory slot for operand `i` (created per RunContext, pointing at the operand's bytes for that run); the
  // descriptor used is `desc` (normally the one from Desc, or the primitive's own, which must have equal size).
  // Slots are numbered per step, from 0, in the order the builder asks for them: RunContext::mem / ptr take these
  // numbers while the step runs, so a step builds the same way on whichever thread and in whichever order.
  int Slot(size_t i, const dnnl::memory::desc& desc);
  // The bytes of weight operand `i` from its offset on (a step that repacks a weight at build); empty unless
  // operand `i` is a weight. Call after Desc(i) succeeded (which checks its extent).
  WeightRef WeightBytes(size_t i) const;
  // Fails with "step <n> (<kind> '<name>'): <why>".
  CheckResult Fail(const std::string& why) const;
  // Expect exactly `n` operands (or at least `n` when at_least), `ints` and `floats` counts.
  CheckResult ExpectCounts(size_t ops, bool at_least, size_t ints, size_t floats) const;
  // Builds oneDNN post-op attributes from step().post_ops, registering slots for binary operands into `args`.
  CheckResult PostOps(dnnl::primitive_attr* attr, std::vector<std::pair<int, int>>* args);

 private:
  friend class Executor;
  dnnl::engine* engine_ = nullptr;
  const Step* step_ = nullptr;
  size_t step_index_ = 0;
  class Executor* exec_ = nullptr;
};

// Builds the executable form of one step kind. Registered in ops_registry.cc.
using StepBuilder = CheckResult (*)(BuildContext& bc, std::unique_ptr<StepExec>* out);
StepBuilder FindStepBuilder(uint32_t kind);  // nullptr for an unknown kind

// A oneDNN primitive with its argument slots: the common StepExec.
class PrimitiveExec : public StepExec {
 public:
  PrimitiveExec(dnnl::primitive p, std::vector<std::pair<int, int>> args);  // (DNNL_ARG_*, slot)
  void Run(RunContext& rc) override;
  size_t ScratchpadBytes() const override { return scratch_md_.get_size(); }
  bool ThreadSafe() const override { return user_scratchpad_; }
  std::string Impl() const override { return impl_; }

 private:
  dnnl::primitive prim_;
  std::vector<std::pair<int, int>> args_;
  dnnl::memory::desc scratch_md_;
  bool user_scratchpad_ = false;
  std::string impl_;
};

class Executor {
 public:
  // Builds every step. `weights` has program.num_weights entries. `threads` = intra-op threads (0 = default).
  // `build_threads`: threads that build the steps (create their oneDNN primitives, most of a load), the calling
  // thread included; 0 = the default, EPCTX_AOTCPU_BUILD_THREADS when set, else 1 (executor.cc says why), at most
  // kMaxBuildThreads and one per step. Steps are claimed in order and every step is created with the OpenMP
  // thread count it runs with, on whichever thread, so the executor is the same for any count; on failure the
  // error is the first failing step's in step order, as a serial build reports it (the steps after it may or may
  // not have been tried). Thread-safe: creating executors on several threads at once is fine.
  // `warm_up` false skips the helper thread that faults in the weights and the first arena (below): for weights
  // already resident, such as the ones a dynamic partition's earlier shapes use (dynamic.h), its page-table walk
  // only delays the first run.
  static CheckResult Create(Program program, std::vector<WeightRef> weights, int threads,
                            std::unique_ptr<Executor>* out, int build_threads = 0, bool warm_up = true);
  static constexpr int kMaxBuildThreads = 8;
  ~Executor();

  const Program& program() const { return program_; }
  // True when some step's primitive manages its own scratchpad, so runs are serialized process-wide.
  bool serialized() const { return serialize_; }
  // The implementation step `i` runs ("brgconv:avx512_core", "ref:any", "own" for the executor's loops).
  std::string step_impl(size_t i) const;
  // Runs once. inputs/outputs are in the program's I/O order with exactly its dims (the caller checks shapes).
  CheckResult Run(const std::vector<const void*>& inputs, const std::vector<void*>& outputs);

 private:
  friend class BuildContext;
  struct SlotInfo {
    Buf buf;
    uint32_t index;
    uint64_t offset;
    dnnl::memory::desc desc;
  };
  Executor() = default;
  RunContext* Acquire();
  void Release(RunContext* rc);
  CheckResult Bind(RunContext* rc, const std::vector<const void*>& inputs, const std::vector<void*>& outputs);

  Program program_;
  std::vector<WeightRef> weights_;
  int threads_ = 0;
  int full_threads_ = 1;            // the session's intra-op threads (or OpenMP's default)
  std::vector<int> step_threads_;   // per step: 1 for small steps (EstimatedStepUs), else full_threads_
  size_t scratch_bytes_ = 0;  // the largest step scratchpad; one buffer per RunContext (steps run in order)
  bool serialize_ = false;    // some step is not ThreadSafe: runs take the process-wide lock
  dnnl::engine engine_;
  std::vector<std::unique_ptr<StepExec>> execs_;
  std::vector<std::vector<SlotInfo>> step_slots_;  // while building: each step's slots (its builder's thread only)
  std::vector<SlotInfo> slots_;                    // every step's slots, step after step
  std::vector<size_t> slot_base_;                  // per step: its first slot in slots_
  // The helper thread Create starts: it faults in the weights while the steps are built, then (once they are, so
  // that its page faults do not hold up the JIT's mprotect calls) maps the first RunContext's arena and faults it
  // in, up to the extent the steps' operands reach, while the session finishes its creation. The first Acquire
  // joins it and takes first_arena_; the destructor joins it.
  std::thread warm_;
  std::mutex warm_mu_;
  std::condition_variable warm_cv_;
  enum class WarmGo { kWait, kArena, kStop } warm_go_ = WarmGo::kWait;  // under warm_mu_
  ZeroedBuffer first_arena_;
  void FinishWarm(WarmGo go);  // tells the helper thread what to do after the weights and joins it (kStop, or
                               // kArena from Acquire) or lets it run on (kArena from Create)
  std::mutex mu_;
  std::vector<std::unique_ptr<RunContext>> pool_;
  // EPCTX_AOTCPU_PROFILE=1: wall time of every step of the runs after the first, run after run (under mu_); the
  // destructor prints each step's median to stderr, with what Create and the first run spent (Profile below).
  bool profile_ = false;
  std::vector<double> profile_us_;
  uint64_t profile_runs_ = 0;
  bool profile_warm_ = false;
  struct Profile {
    int build_threads = 1;
    double build_ms = 0;       // Create's wall time from the first step claimed to the last built
    double build_sum_ms = 0;   // the steps' build CPU times added up (over every building thread)
    double build_cpu_ms = 0;   // CPU time of the building threads while they built
    double weights_ms = 0;     // the helper thread faulting the weights in (MADV_POPULATE_READ)
    double arena_ms = 0;       // then mapping and faulting in the first arena
    uint64_t arena_prefaulted = 0;  // bytes of the first arena faulted in by that thread
    double join_ms = 0;        // the first Acquire waiting for that thread
    double first_setup_us = 0;  // the first run's RunContext (arena, scratchpad, memory objects)
    std::vector<double> first_us;  // the first run, per step
    std::vector<double> step_build_ms;  // per step: CPU time of its build
  } prof_;
};

// Extent in bytes of a memory descriptor (oneDNN's get_size).
size_t DescBytes(const dnnl::memory::desc& d);

}  // namespace aotcpu
}  // namespace epctx

#endif  // EPCTX_PROVIDERS_AOTCPU_RUNTIME_EXECUTOR_H_
