// epctx_floors: the speed floors of this machine that bench/run_aotcpu_bench.sh divides steady-state times by.
// Measures, never asserts. Prints one JSON object on stdout.
//
//   epctx_floors [--threads N] [--bandwidth] [--bw-bytes B] [--ws-bytes B] [--passes P]
//                [--matmuls FILE] [--matmul "B M K N w|a [name]"]... [--map FILE]
//
// --bandwidth   multi-threaded streaming sum over a buffer of --bw-bytes (default max(1 GiB, 8 x LLC), capped at a
//               quarter of MemAvailable), first-touched by the same threads; median GB/s over --passes passes (11).
//               --ws-bytes B measures the same over a B-byte buffer (the model's working set, which may fit the LLC).
// --matmuls     one oneDNN f32 matmul per line "B M K N w|a [name]" in model order (B = batch, 1 for 2-D;
//               w = constant weights, packed once into the layout the primitive picks with format_tag::any;
//               a = both operands are activations in plain layouts). Every line gets its own weights, so one pass
//               streams the model's weight bytes like the model does. Reports the median time of the whole
//               sequence (the compute floor), total FLOPs, GFLOP/s, and per unique shape its isolated time,
//               GFLOP/s and oneDNN implementation.
// --map FILE    cost of mapping a (context binary) file: open+mmap+munmap, and mmap + reading every byte.
#include <fcntl.h>
#include <omp.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <oneapi/dnnl/dnnl.hpp>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
double MsSince(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

[[noreturn]] void Die(const std::string& msg) {
  std::fprintf(stderr, "epctx_floors: %s\n", msg.c_str());
  std::exit(2);
}

int64_t LlcBytes() {
  long v = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (v <= 0) v = sysconf(_SC_LEVEL2_CACHE_SIZE);
  return v > 0 ? v : 32 << 20;
}

int64_t MemAvailableBytes() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  int64_t kb;
  std::string unit;
  while (f >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return int64_t{4} << 30;
}

// Sum of n floats with all threads, each over its static share (the same share that first-touched it).
float ParallelSum(const float* p, int64_t n) {
  float total = 0;
#pragma omp parallel reduction(+ : total)
  {
    int t = omp_get_thread_num(), nt = omp_get_num_threads();
    int64_t lo = n * t / nt, hi = n * (t + 1) / nt;
    // 64 independent lanes (4 zmm / 8 ymm accumulators) so the add latency never limits the read rate.
    float acc[64] = {};
    int64_t i = lo;
    for (; i + 64 <= hi; i += 64)
      for (int j = 0; j < 64; ++j) acc[j] += p[i + j];
    float s = 0;
    for (; i < hi; ++i) s += p[i];
    for (float a : acc) s += a;
    total += s;
  }
  return total;
}

json Bandwidth(int64_t bytes, int passes) {
  int64_t n = bytes / sizeof(float);
  n = (n + 1023) / 1024 * 1024;
  float* p = static_cast<float*>(aligned_alloc(2 << 20, (n * sizeof(float) + (2 << 20) - 1) / (2 << 20) * (2 << 20)));
  if (!p) Die("cannot allocate " + std::to_string(bytes) + " bytes for the bandwidth buffer");
  madvise(p, n * sizeof(float), MADV_HUGEPAGE);  // fewer TLB misses: the floor is the best case
#pragma omp parallel
  {
    int t = omp_get_thread_num(), nt = omp_get_num_threads();
    for (int64_t i = n * t / nt, hi = n * (t + 1) / nt; i < hi; ++i) p[i] = 1.0f;
  }
  volatile float sink = ParallelSum(p, n);  // warm-up pass (TLB, frequency)
  std::vector<double> gbps;
  for (int i = 0; i < passes; ++i) {
    auto t0 = Clock::now();
    sink = ParallelSum(p, n);
    double ms = MsSince(t0);
    gbps.push_back(n * sizeof(float) / (ms * 1e6));
  }
  (void)sink;
  std::free(p);
  return {{"buffer_bytes", n * int64_t{sizeof(float)}}, {"passes", passes}, {"gbps_median", Median(gbps)},
          {"gbps_all", gbps}};
}

struct MatmulSpec {
  int64_t b, m, k, n;
  bool weights;  // constant B operand packed with format_tag::any
  std::string name;
  double Flops() const { return 2.0 * b * m * k * n; }
  auto Key() const { return std::make_tuple(b, m, k, n, weights); }
};

MatmulSpec ParseSpec(const std::string& line) {
  std::istringstream is(line);
  MatmulSpec s{};
  std::string kind;
  if (!(is >> s.b >> s.m >> s.k >> s.n >> kind) || (kind != "w" && kind != "a") || s.b < 1 || s.m < 1 || s.k < 1 ||
      s.n < 1)
    Die("bad matmul spec '" + line + "' (want \"B M K N w|a [name]\")");
  s.weights = kind == "w";
  is >> s.name;
  return s;
}

using dnnl::matmul;
using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

// One primitive per unique shape (as a compiled model shares primitives between equal steps).
struct Prim {
  matmul::primitive_desc pd;
  matmul prim;
  memory::desc src, wei_plain, dst;
};

Prim MakePrim(const dnnl::engine& eng, const MatmulSpec& s) {
  const bool batched = s.b > 1 || !s.weights;
  memory::dims a = batched ? memory::dims{s.b, s.m, s.k} : memory::dims{s.m, s.k};
  memory::dims w = batched ? memory::dims{s.b, s.k, s.n} : memory::dims{s.k, s.n};
  memory::dims c = batched ? memory::dims{s.b, s.m, s.n} : memory::dims{s.m, s.n};
  tag plain = batched ? tag::abc : tag::ab;
  memory::desc src(a, dt::f32, plain), dst(c, dt::f32, plain), wei_plain(w, dt::f32, plain);
  memory::desc wei(w, dt::f32, s.weights ? tag::any : plain);
  matmul::primitive_desc pd(matmul::desc(src, wei, dst), eng);
  return {pd, matmul(pd), src, wei_plain, dst};
}

json Matmuls(const std::vector<MatmulSpec>& specs, int passes) {
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, bool>, Prim> prims;
  size_t max_src = 0, max_dst = 0;
  for (const auto& s : specs) {
    auto key = s.Key();
    if (!prims.count(key)) {
      try {
        prims.emplace(key, MakePrim(eng, s));
      } catch (const dnnl::error& e) {
        Die("oneDNN matmul " + std::to_string(s.m) + "x" + std::to_string(s.k) + "x" + std::to_string(s.n) + ": " +
            e.what());
      }
    }
    const Prim& p = prims.at(key);
    max_src = std::max(max_src, p.src.get_size());
    max_dst = std::max(max_dst, p.dst.get_size());
  }
  // Activations: one src and one dst buffer shared by every step (they stay in cache, as in a model).
  memory::desc flat_src({int64_t(max_src / 4)}, dt::f32, tag::a), flat_dst({int64_t(max_dst / 4)}, dt::f32, tag::a);
  memory src_buf(flat_src, eng), dst_buf(flat_dst, eng);
  std::fill_n(static_cast<float*>(src_buf.get_data_handle()), max_src / 4, 0.5f);
  std::fill_n(static_cast<float*>(dst_buf.get_data_handle()), max_dst / 4, 0.0f);
  // Weights: distinct per step; constant ones packed once (reorder from plain), activation-B ones plain.
  struct Step {
    const Prim* p;
    memory src, wei, dst;
  };
  std::vector<Step> steps;
  int64_t weight_bytes = 0;
  for (const auto& s : specs) {
    const Prim& p = prims.at(s.Key());
    memory plain(p.wei_plain, eng);
    float* w = static_cast<float*>(plain.get_data_handle());
    for (size_t i = 0; i < p.wei_plain.get_size() / 4; ++i) w[i] = static_cast<float>((i * 2654435761u) % 1000) * 1e-4f;
    memory wei = plain;
    if (s.weights && p.pd.weights_desc() != p.wei_plain) {
      wei = memory(p.pd.weights_desc(), eng);
      dnnl::reorder(plain, wei).execute(strm, plain, wei);
      strm.wait();
    }
    if (s.weights) weight_bytes += p.pd.weights_desc().get_size();
    steps.push_back({&p, memory(p.src, eng, src_buf.get_data_handle()), wei,
                     memory(p.dst, eng, dst_buf.get_data_handle())});
  }
  auto run = [&](const Step& st) {
    st.p->prim.execute(strm, {{DNNL_ARG_SRC, st.src}, {DNNL_ARG_WEIGHTS, st.wei}, {DNNL_ARG_DST, st.dst}});
  };
  double total_flops = 0;
  for (const auto& s : specs) total_flops += s.Flops();
  for (int w = 0; w < 2; ++w) {
    for (const auto& st : steps) run(st);
    strm.wait();
  }
  std::vector<double> seq;
  for (int i = 0; i < passes; ++i) {
    auto t0 = Clock::now();
    for (const auto& st : steps) run(st);
    strm.wait();
    seq.push_back(MsSince(t0));
  }
  double seq_ms = Median(seq);

  // Each unique shape alone (its weights stay in cache): the kernel's best case.
  json shapes = json::array();
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, bool>, int> count;
  for (const auto& s : specs) count[s.Key()]++;
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, bool>, bool> done;
  for (size_t i = 0; i < specs.size(); ++i) {
    const MatmulSpec& s = specs[i];
    if (done[s.Key()]) continue;
    done[s.Key()] = true;
    for (int w = 0; w < 3; ++w) run(steps[i]);
    strm.wait();
    std::vector<double> t;
    auto start = Clock::now();
    while (t.size() < 10 || (t.size() < 200 && MsSince(start) < 300)) {
      auto t0 = Clock::now();
      run(steps[i]);
      strm.wait();
      t.push_back(MsSince(t0));
    }
    double ms = Median(t);
    shapes.push_back({{"b", s.b}, {"m", s.m}, {"k", s.k}, {"n", s.n}, {"weights", s.weights ? "packed" : "activation"},
                      {"count", count[s.Key()]}, {"first_name", s.name}, {"flops", s.Flops()}, {"ms", ms},
                      {"gflops", s.Flops() / (ms * 1e6)}, {"impl", steps[i].p->pd.impl_info_str()},
                      {"weights_layout_packed", s.weights && steps[i].p->pd.weights_desc() != steps[i].p->wei_plain}});
  }
  return {{"count", specs.size()}, {"flops", total_flops}, {"weight_bytes_packed", weight_bytes},
          {"passes", passes}, {"seq_ms_median", seq_ms}, {"seq_ms_all", seq},
          {"gflops", total_flops / (seq_ms * 1e6)}, {"shapes", shapes}};
}

json MapCost(const std::string& path, int passes) {
  std::vector<double> map_ms, read_ms;
  int64_t size = 0;
  for (int i = 0; i < passes + 1; ++i) {
    auto t0 = Clock::now();
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) Die("cannot open '" + path + "': " + std::strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size <= 0) Die("cannot stat '" + path + "' or it is empty");
    size = st.st_size;
    void* p = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) Die("cannot map '" + path + "': " + std::strerror(errno));
    double t_map = MsSince(t0);
    volatile float sink = ParallelSum(static_cast<const float*>(p), size / 4);
    (void)sink;
    munmap(p, size);
    double t_read = MsSince(t0);
    if (i > 0) map_ms.push_back(t_map), read_ms.push_back(t_read);  // pass 0 warms the page cache
  }
  return {{"file", path}, {"bytes", size}, {"map_ms_median", Median(map_ms)},
          {"map_and_read_ms_median", Median(read_ms)}, {"passes", passes}};
}

std::string IsaName(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 0, passes = 0;
  bool bandwidth = false;
  int64_t bw_bytes = 0, ws_bytes = 0;
  std::vector<MatmulSpec> specs;
  std::string map_file;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Die("option " + a + " needs a value");
      return argv[++i];
    };
    if (a == "--threads") threads = std::atoi(value().c_str());
    else if (a == "--bandwidth") bandwidth = true;
    else if (a == "--bw-bytes") bw_bytes = std::atoll(value().c_str()), bandwidth = true;
    else if (a == "--ws-bytes") ws_bytes = std::atoll(value().c_str());
    else if (a == "--passes") passes = std::atoi(value().c_str());
    else if (a == "--matmul") specs.push_back(ParseSpec(value()));
    else if (a == "--matmuls") {
      std::ifstream f(value());
      if (!f) Die("cannot read " + std::string(argv[i]));
      for (std::string line; std::getline(f, line);)
        if (!line.empty() && line[0] != '#') specs.push_back(ParseSpec(line));
    } else if (a == "--map") map_file = value();
    else if (a == "-h" || a == "--help") {
      std::printf("usage: epctx_floors [--threads N] [--bandwidth] [--bw-bytes B] [--ws-bytes B] [--passes P]\n"
                  "                    [--matmuls FILE] [--matmul \"B M K N w|a [name]\"]... [--map FILE]\n");
      return 0;
    } else Die("unknown argument '" + a + "' (see --help)");
  }
  if (threads > 0) omp_set_num_threads(threads);
  threads = omp_get_max_threads();

  const dnnl_version_t* v = dnnl_version();
  json out;
  out["threads"] = threads;
  out["llc_bytes"] = LlcBytes();
  out["onednn_version"] = std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
  out["onednn_isa"] = IsaName(dnnl::get_effective_cpu_isa());
  if (bandwidth) {
    if (bw_bytes <= 0) bw_bytes = std::min(std::max(int64_t{1} << 30, 8 * LlcBytes()), MemAvailableBytes() / 4);
    out["bandwidth"] = Bandwidth(bw_bytes, passes > 0 ? passes : 11);
  }
  if (ws_bytes > 0) out["bandwidth_ws"] = Bandwidth(ws_bytes, passes > 0 ? std::max(passes, 15) : 15);
  if (!specs.empty()) out["matmul"] = Matmuls(specs, passes > 0 ? passes : 15);
  if (!map_file.empty()) out["map"] = MapCost(map_file, passes > 0 ? passes : 7);
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
