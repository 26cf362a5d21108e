// epctx_generate: greedy generation on a prefill + decode model pair (tests/models/make_decoder.py) with epctx's
// public C++ API, timing every step. tests/ort/generate.js is the same loop in onnxruntime-node 1.30; the two take the
// same arguments, build the same prompt, print the same JSON and write the same --dump format
// (tests/generate/generate_matches_ort.py compares them, bench/run_generate_bench.sh times them).
//
//   epctx_generate --prefill P.onnx --decode D.onnx [--ep-lib PATH --ep NAME] [-C key=value]... [--threads N]
//                  (--prompt-len L [--seed S] | --prompt 1,2,3) --tokens T [--vocab V] [--warmup W]
//                  [--dump FILE] [--json] [--report] [--prefill-dim NAME:VALUE]...
//
// The loop: prefill runs once on the prompt (input_ids [1,L]) and gives token 0 = argmax of its last logits row
// (the first maximum on ties); then T-1 decode steps each feed the previous token (input_ids [1,1]) with past_X =
// the previous step's present_X (for every present_X output of prefill), and take argmax of the logits row.
// Generated tokens: T (T = 1 runs prefill only).
//
// The prompt without --prompt: L ids from a 64-bit LCG, written identically in generate.js:
//   state = S (default 1); for each id: state = state * 6364136223846793005 + 1442695040888963407 (mod 2^64);
//   id = (state >> 33) % V
// V (the vocabulary) is the last dimension of the models' "logits" output; --vocab V must agree with it when the
// models give it, and is needed when they do not.
//
// Timing: each step's wall time is the Run call (building the [1,1] input_ids tensor included; argmax, dump and
// the bookkeeping of the KV values excluded; the present_* Values are moved into the next step's inputs, not
// copied). --warmup W runs prefill and one decode step W times first, untimed and not dumped.
//
// JSON (one line with --json; a short summary without):
//   {"runtime":"epctx","ep":..,"threads":..,"prompt_len":L,"vocab":V,"session_creation_ms":prefill+decode,
//    "session_creation_prefill_ms":..,"session_creation_decode_ms":..,"prefill_ms":..,"decode_ms":[T-1 values],
//    "past_lens":[T-1 values: the past length each decode step was fed],"tokens":[T ids],"prompt":[L ids],
//    "peak_rss_mb":..}
// --prefill-dim seq:L pins a free dimension of the prefill session only (AddFreeDimensionOverrideByName), so an EP
// that compiles static shapes only can take prefill; decode's "past" grows every step and stays free.
// --report adds "session_reports":{"prefill":..,"decode":..}, each Session::GetSessionReport() (partitions and the EP
// of each, nodes left on the CPU EP and why).
//
// --dump FILE (little-endian): "EPCTXGEN" (8 bytes), uint32 version = 1, uint32 V, then one record per step:
//   int32 step (0 = prefill), int32 past length (0 for prefill), int64 token chosen, float32[V] logits row.
//
// Any failure (missing file, a model that is not a prefill/decode pair, vocab mismatch, bad option, a failing run)
// prints "epctx_generate: <message>" on stderr and exits 2.
#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "epctx/epctx.h"

namespace {

// A failure the tool reports and exits 2 with.
struct Fail : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Args {
  std::string prefill, decode, ep_lib, ep, dump;
  std::vector<std::pair<std::string, std::string>> configs;
  std::vector<std::pair<std::string, int64_t>> prefill_dims;
  int threads = 0;
  int64_t prompt_len = -1, tokens = -1, vocab = -1, warmup = 0;
  uint64_t seed = 1;
  std::vector<int64_t> prompt;
  bool json = false, report = false;
};

const char* kUsage =
    "usage: epctx_generate --prefill P.onnx --decode D.onnx [--ep-lib PATH --ep NAME] [-C key=value]...\n"
    "                      [--threads N] (--prompt-len L [--seed S] | --prompt 1,2,3) --tokens T [--vocab V]\n"
    "                      [--warmup W] [--dump FILE] [--json] [--report] [--prefill-dim NAME:VALUE]...\n";

int64_t ParseInt(const std::string& opt, const std::string& s, int64_t min) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno != 0 || v < min) {
    throw Fail(opt + " needs an integer >= " + std::to_string(min) + ", got '" + s + "'");
  }
  return v;
}

Args ParseArgs(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw Fail(s + " needs a value");
      return argv[++i];
    };
    if (s == "--prefill") a.prefill = next();
    else if (s == "--decode") a.decode = next();
    else if (s == "--ep-lib") a.ep_lib = next();
    else if (s == "--ep") a.ep = next();
    else if (s == "--dump") a.dump = next();
    else if (s == "--json") a.json = true;
    else if (s == "--report") a.report = true;
    else if (s == "--threads") a.threads = static_cast<int>(ParseInt(s, next(), 0));
    else if (s == "--prompt-len") a.prompt_len = ParseInt(s, next(), 1);
    else if (s == "--tokens") a.tokens = ParseInt(s, next(), 1);
    else if (s == "--vocab") a.vocab = ParseInt(s, next(), 1);
    else if (s == "--warmup") a.warmup = ParseInt(s, next(), 0);
    else if (s == "--seed") a.seed = static_cast<uint64_t>(ParseInt(s, next(), 0));
    else if (s == "--prompt") {
      const std::string list = next();
      size_t start = 0;
      while (start <= list.size()) {
        size_t comma = list.find(',', start);
        if (comma == std::string::npos) comma = list.size();
        a.prompt.push_back(ParseInt("--prompt", list.substr(start, comma - start), 0));
        start = comma + 1;
      }
    } else if (s == "--prefill-dim") {
      const std::string nv = next();
      const size_t colon = nv.rfind(':');
      if (colon == std::string::npos || colon == 0) throw Fail("--prefill-dim needs NAME:VALUE, got '" + nv + "'");
      a.prefill_dims.emplace_back(nv.substr(0, colon), ParseInt("--prefill-dim", nv.substr(colon + 1), 1));
    } else if (s == "-C") {
      const std::string kv = next();
      const size_t eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) throw Fail("-C needs key=value, got '" + kv + "'");
      a.configs.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    } else if (s == "-h" || s == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else {
      throw Fail("unknown argument '" + s + "'\n" + kUsage);
    }
  }
  if (a.prefill.empty() || a.decode.empty()) throw Fail(std::string("--prefill and --decode are required\n") + kUsage);
  if (a.tokens < 0) throw Fail(std::string("--tokens is required\n") + kUsage);
  if (a.prompt.empty() == (a.prompt_len < 0)) throw Fail("give exactly one of --prompt-len and --prompt");
  if (a.ep.empty() != a.ep_lib.empty()) throw Fail("--ep-lib and --ep go together");
  for (const std::string* p : {&a.prefill, &a.decode}) {
    struct stat st;
    if (::stat(p->c_str(), &st) != 0 || !S_ISREG(st.st_mode)) throw Fail("no such model file: '" + *p + "'");
  }
  return a;
}

std::vector<int64_t> LcgPrompt(uint64_t seed, int64_t len, int64_t vocab) {
  std::vector<int64_t> ids;
  uint64_t state = seed;
  for (int64_t i = 0; i < len; ++i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    ids.push_back(static_cast<int64_t>((state >> 33) % static_cast<uint64_t>(vocab)));
  }
  return ids;
}

int64_t Argmax(const float* row, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (row[i] > row[best]) best = i;
  }
  return best;
}

double Ms(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", v);
  return buf;
}

template <typename T, typename F>
std::string JsonList(const std::vector<T>& xs, F f) {
  std::string s = "[";
  for (size_t i = 0; i < xs.size(); ++i) s += (i ? "," : "") + f(xs[i]);
  return s + "]";
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out + "\"";
}

// What the loop needs from the two models, checked before anything runs.
struct Pair {
  int64_t vocab = -1;
  std::vector<std::string> kv;  // suffixes X of present_X (prefill outputs) = past_X (decode inputs), prefill order
};

int64_t LogitsVocab(const epctx::Session& s, const std::string& which) {
  const std::vector<std::string> outs = s.GetOutputNames();
  auto it = std::find(outs.begin(), outs.end(), "logits");
  if (it == outs.end()) throw Fail(which + " model has no 'logits' output: not a decoder made like make_decoder.py");
  const auto info = s.GetOutputTypeInfo(static_cast<size_t>(it - outs.begin())).GetTensorTypeAndShapeInfo();
  if (info.GetElementType() != epctx::ElementType::FLOAT || info.GetDimensionsCount() != 3) {
    throw Fail(which + " model's 'logits' must be float [batch, seq, vocab]");
  }
  return info.GetShape()[2];  // -1 when symbolic
}

void CheckIds(const epctx::Session& s, const std::string& which, size_t expected_inputs) {
  const std::vector<std::string> ins = s.GetInputNames();
  auto it = std::find(ins.begin(), ins.end(), "input_ids");
  if (it == ins.end()) throw Fail(which + " model has no 'input_ids' input");
  const auto info = s.GetInputTypeInfo(static_cast<size_t>(it - ins.begin())).GetTensorTypeAndShapeInfo();
  if (info.GetElementType() != epctx::ElementType::INT64 || info.GetDimensionsCount() != 2) {
    throw Fail(which + " model's 'input_ids' must be int64 [batch, seq]");
  }
  if (ins.size() != expected_inputs) {
    throw Fail(which + " model has " + std::to_string(ins.size()) + " inputs, expected " +
               std::to_string(expected_inputs) + (expected_inputs == 1 ? " (input_ids)" : " (input_ids + past_*)"));
  }
}

Pair CheckPair(const epctx::Session& prefill, const epctx::Session& decode, int64_t vocab_opt) {
  Pair p;
  for (const std::string& o : prefill.GetOutputNames()) {
    if (o.rfind("present_", 0) == 0) p.kv.push_back(o.substr(8));
  }
  if (p.kv.empty()) throw Fail("prefill model has no present_* outputs (the KV cache): is it a prefill model?");
  CheckIds(prefill, "prefill", 1);
  CheckIds(decode, "decode", 1 + p.kv.size());
  const std::vector<std::string> din = decode.GetInputNames(), dout = decode.GetOutputNames();
  for (const std::string& x : p.kv) {
    if (std::find(din.begin(), din.end(), "past_" + x) == din.end()) {
      throw Fail("decode model has no input 'past_" + x + "' for prefill's output 'present_" + x + "'");
    }
    if (std::find(dout.begin(), dout.end(), "present_" + x) == dout.end()) {
      throw Fail("decode model has no output 'present_" + x + "'");
    }
  }
  const int64_t vp = LogitsVocab(prefill, "prefill"), vd = LogitsVocab(decode, "decode");
  if (vp > 0 && vd > 0 && vp != vd) {
    throw Fail("vocab mismatch: prefill logits have " + std::to_string(vp) + " columns, decode logits " +
               std::to_string(vd));
  }
  const int64_t v = vp > 0 ? vp : vd;
  if (vocab_opt > 0 && v > 0 && vocab_opt != v) {
    throw Fail("vocab mismatch: --vocab " + std::to_string(vocab_opt) + " but the models' logits have " +
               std::to_string(v) + " columns");
  }
  p.vocab = v > 0 ? v : vocab_opt;
  if (p.vocab <= 0) throw Fail("the models' logits have a symbolic vocab dimension: give --vocab V");
  return p;
}

class Dump {
 public:
  Dump(const std::string& path, int64_t vocab) : vocab_(vocab) {
    if (path.empty()) return;
    f_ = std::fopen(path.c_str(), "wb");
    if (!f_) throw Fail("cannot write --dump file '" + path + "': " + std::strerror(errno));
    path_ = path;
    const uint32_t head[2] = {1, static_cast<uint32_t>(vocab)};
    Write("EPCTXGEN", 8);
    Write(head, sizeof head);
  }
  ~Dump() {
    if (f_) std::fclose(f_);
  }
  void Record(int32_t step, int32_t past, int64_t token, const float* row) {
    if (!f_) return;
    Write(&step, 4);
    Write(&past, 4);
    Write(&token, 8);
    Write(row, static_cast<size_t>(vocab_) * 4);
  }
  void Close() {
    if (f_ && std::fclose(f_) != 0) {
      f_ = nullptr;
      throw Fail("cannot write --dump file '" + path_ + "'");
    }
    f_ = nullptr;
  }

 private:
  void Write(const void* p, size_t n) {
    if (std::fwrite(p, 1, n, f_) != n) throw Fail("cannot write --dump file '" + path_ + "': " + std::strerror(errno));
  }
  FILE* f_ = nullptr;
  std::string path_;
  int64_t vocab_;
};

// Returns the row of logits [1, rows, V] at `row`, checking the shape.
const float* LogitsRow(const epctx::Value& logits, int64_t rows, int64_t vocab, const char* which) {
  const auto shape = logits.GetTensorTypeAndShapeInfo().GetShape();
  if (shape.size() != 3 || shape[0] != 1 || shape[1] != rows || shape[2] != vocab) {
    std::string got;
    for (int64_t d : shape) got += (got.empty() ? "" : ",") + std::to_string(d);
    throw Fail(std::string(which) + " gave logits of shape [" + got + "], expected [1," + std::to_string(rows) + "," +
               std::to_string(vocab) + "]");
  }
  return logits.GetTensorData<float>() + (rows - 1) * vocab;
}

int Main(int argc, char** argv) {
  const Args a = ParseArgs(argc, argv);
  epctx::Env env;
  std::vector<epctx::ConstEpDevice> devices;
  if (!a.ep.empty()) {
    env.RegisterExecutionProviderLibrary("generate_ep", a.ep_lib.c_str());
    std::string seen;
    for (const epctx::ConstEpDevice& d : env.GetEpDevices()) {
      const epctx::KeyValuePairs metadata = d.Device().Metadata();
      const char* virt = metadata.GetValue("is_virtual");
      if (a.ep == d.EpName() && !(virt && std::string(virt) == "1")) devices.push_back(d);
      seen += std::string(seen.empty() ? "" : ", ") + d.EpName();
    }
    if (devices.empty()) throw Fail("no device of EP '" + a.ep + "' after loading '" + a.ep_lib + "' (EPs: " + seen + ")");
  }
  epctx::SessionOptions so;
  if (a.threads > 0) so.SetIntraOpNumThreads(a.threads);
  for (const auto& [k, v] : a.configs) so.AddConfigEntry(k.c_str(), v.c_str());
  if (!devices.empty()) so.AppendExecutionProvider_V2(env, devices, epctx::KeyValuePairs());

  const auto t0 = std::chrono::steady_clock::now();
  epctx::SessionOptions prefill_so = so;
  for (const auto& [name, value] : a.prefill_dims) prefill_so.AddFreeDimensionOverrideByName(name.c_str(), value);
  epctx::Session prefill(env, a.prefill.c_str(), prefill_so);
  const auto t1 = std::chrono::steady_clock::now();
  epctx::Session decode(env, a.decode.c_str(), so);
  const auto t2 = std::chrono::steady_clock::now();

  const Pair pair = CheckPair(prefill, decode, a.vocab);
  const int64_t V = pair.vocab;
  const std::vector<int64_t> prompt = a.prompt.empty() ? LcgPrompt(a.seed, a.prompt_len, V) : a.prompt;
  for (int64_t id : prompt) {
    if (id >= V) throw Fail("--prompt id " + std::to_string(id) + " is outside the vocab (" + std::to_string(V) + ")");
  }
  const int64_t L = static_cast<int64_t>(prompt.size());

  std::vector<std::string> prefill_out = {"logits"}, decode_in = {"input_ids"}, decode_out = {"logits"};
  for (const std::string& x : pair.kv) {
    prefill_out.push_back("present_" + x);
    decode_in.push_back("past_" + x);
    decode_out.push_back("present_" + x);
  }
  std::vector<int64_t> ids_buf = prompt;
  const int64_t prompt_shape[2] = {1, L};
  const int64_t one_shape[2] = {1, 1};
  int64_t next_id = 0;

  // One prefill; returns its outputs.
  auto run_prefill = [&]() {
    std::vector<epctx::Value> in;
    in.push_back(epctx::Value::CreateTensor<int64_t>(ids_buf.data(), ids_buf.size(), prompt_shape, 2));
    return prefill.Run({"input_ids"}, in, prefill_out);
  };
  // One decode step on `kv` (moved in), token next_id; returns its outputs.
  auto run_decode = [&](std::vector<epctx::Value>& kv) {
    std::vector<epctx::Value> in;
    in.reserve(decode_in.size());
    in.push_back(epctx::Value::CreateTensor<int64_t>(&next_id, 1, one_shape, 2));
    for (auto& v : kv) in.push_back(std::move(v));
    return decode.Run(decode_in, in, decode_out);
  };
  auto take_kv = [](std::vector<epctx::Value>& out) {
    std::vector<epctx::Value> kv;
    for (size_t i = 1; i < out.size(); ++i) kv.push_back(std::move(out[i]));
    return kv;
  };

  for (int64_t w = 0; w < a.warmup; ++w) {
    std::vector<epctx::Value> out = run_prefill();
    next_id = Argmax(LogitsRow(out[0], L, V, "prefill"), V);
    std::vector<epctx::Value> kv = take_kv(out);
    run_decode(kv);
  }

  Dump dump(a.dump, V);
  std::vector<int64_t> tokens;
  std::vector<double> decode_ms;
  std::vector<int64_t> past_lens;
  auto s0 = std::chrono::steady_clock::now();
  std::vector<epctx::Value> out = run_prefill();
  const double prefill_ms = Ms(s0, std::chrono::steady_clock::now());
  const float* row = LogitsRow(out[0], L, V, "prefill");
  next_id = Argmax(row, V);
  tokens.push_back(next_id);
  dump.Record(0, 0, next_id, row);
  std::vector<epctx::Value> kv = take_kv(out);
  for (int64_t step = 1; step < a.tokens; ++step) {
    const std::vector<int64_t> kv_shape = kv[0].GetTensorTypeAndShapeInfo().GetShape();
    if (kv_shape.size() != 4) throw Fail("present_" + pair.kv[0] + " is not [batch, heads, seq, head_dim]");
    const int64_t past = kv_shape[2];
    const auto s = std::chrono::steady_clock::now();
    out = run_decode(kv);
    decode_ms.push_back(Ms(s, std::chrono::steady_clock::now()));
    past_lens.push_back(past);
    row = LogitsRow(out[0], 1, V, "decode");
    next_id = Argmax(row, V);
    tokens.push_back(next_id);
    dump.Record(static_cast<int32_t>(step), static_cast<int32_t>(past), next_id, row);
    kv = take_kv(out);
  }
  dump.Close();

  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  const double creation_ms = Ms(t0, t2);
  const std::string reports = a.report ? ",\"session_reports\":{\"prefill\":" + prefill.GetSessionReport() +
                                              ",\"decode\":" + decode.GetSessionReport() + "}"
                                        : "";
  if (a.json) {
    auto num = [](double v) { return Num(v); };
    auto integer = [](int64_t v) { return std::to_string(v); };
    std::printf(
        "{\"runtime\":\"epctx\",\"ep\":%s,\"threads\":%d,\"prompt_len\":%lld,\"vocab\":%lld,"
        "\"session_creation_ms\":%s,\"session_creation_prefill_ms\":%s,\"session_creation_decode_ms\":%s,"
        "\"prefill_ms\":%s,\"decode_ms\":%s,\"past_lens\":%s,\"tokens\":%s,\"prompt\":%s,\"peak_rss_mb\":%s%s}\n",
        JsonString(a.ep.empty() ? "CPUExecutionProvider" : a.ep).c_str(), a.threads, static_cast<long long>(L),
        static_cast<long long>(V), Num(creation_ms).c_str(), Num(Ms(t0, t1)).c_str(), Num(Ms(t1, t2)).c_str(),
        Num(prefill_ms).c_str(), JsonList(decode_ms, num).c_str(), JsonList(past_lens, integer).c_str(),
        JsonList(tokens, integer).c_str(), JsonList(prompt, integer).c_str(), Num(ru.ru_maxrss / 1024.0).c_str(),
        reports.c_str());
  } else {
    std::vector<double> sorted = decode_ms;
    std::sort(sorted.begin(), sorted.end());
    const double med = sorted.empty() ? 0 : sorted[sorted.size() / 2];
    std::printf("epctx_generate: %s, prompt %lld, %lld tokens, vocab %lld\n",
                a.ep.empty() ? "CPUExecutionProvider" : a.ep.c_str(), static_cast<long long>(L),
                static_cast<long long>(tokens.size()), static_cast<long long>(V));
    std::printf("  session creation %.2f ms, prefill %.2f ms, decode median %.3f ms/token over %zu steps\n",
                creation_ms, prefill_ms, med, decode_ms.size());
    std::printf("  tokens:");
    for (int64_t t : tokens) std::printf(" %lld", static_cast<long long>(t));
    std::printf("\n");
    if (a.report) std::printf("  prefill session: %s\n  decode session: %s\n", prefill.GetSessionReport().c_str(),
                              decode.GetSessionReport().c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Main(argc, argv);
  } catch (const Fail& e) {
    std::fprintf(stderr, "epctx_generate: %s\n", e.what());
  } catch (const epctx::Exception& e) {
    std::fprintf(stderr, "epctx_generate: %s: %s\n", epctx::ErrorCodeName(e.code()), e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "epctx_generate: %s\n", e.what());
  }
  return 2;
}
