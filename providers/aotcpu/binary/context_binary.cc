#include "providers/aotcpu/binary/context_binary.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <atomic>
#include <thread>
#include <unordered_map>

#include "providers/aotcpu/binary/hash.h"

namespace epctx {
namespace aotcpu {
namespace {

// Loads go through memcpy: the input may be unaligned, and the format is little-endian like every host we build for.
static_assert(sizeof(uint64_t) == 8, "");
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "context_binary assumes a little-endian host"
#endif

// Fuzz builds skip checksum comparisons so the fuzzer can reach the structural checks behind them (the standard
// libFuzzer convention); every other check still runs.
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
constexpr bool kVerifyChecksums = false;
#else
constexpr bool kVerifyChecksums = true;
#endif

constexpr size_t kHeaderSize = 64;
constexpr size_t kHeaderChecksumOffset = 40;
constexpr size_t kSectionEntrySize = 32;
constexpr size_t kTensorEntrySize = 112;
constexpr size_t kTensorTableHeader = 8;

uint16_t Load16(const unsigned char* p) { uint16_t v; std::memcpy(&v, p, 2); return v; }
uint32_t Load32(const unsigned char* p) { uint32_t v; std::memcpy(&v, p, 4); return v; }
uint64_t Load64(const unsigned char* p) { uint64_t v; std::memcpy(&v, p, 8); return v; }
void Put16(std::string* s, uint16_t v) { s->append(reinterpret_cast<const char*>(&v), 2); }
void Put32(std::string* s, uint32_t v) { s->append(reinterpret_cast<const char*>(&v), 4); }
void Put64(std::string* s, uint64_t v) { s->append(reinterpret_cast<const char*>(&v), 8); }
void Store64(std::string* s, size_t at, uint64_t v) { std::memcpy(&(*s)[at], &v, 8); }
void PadTo(std::string* s, uint64_t alignment) { s->resize((s->size() + alignment - 1) / alignment * alignment, '\0'); }

std::string U(uint64_t v) { return std::to_string(v); }

uint64_t HeaderChecksum(const unsigned char* p, size_t header_size) {
  static const unsigned char kZero[8] = {};
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  XXH3_64bits_update(st, p, kHeaderChecksumOffset);
  XXH3_64bits_update(st, kZero, 8);
  XXH3_64bits_update(st, p + kHeaderChecksumOffset + 8, header_size - kHeaderChecksumOffset - 8);
  uint64_t h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return h;
}

// Bounds-checked reader over one section. Every Read* fails instead of reading past the end.
class Cursor {
 public:
  Cursor(const unsigned char* p, uint64_t n) : p_(p), n_(n) {}
  bool U32(uint32_t* v) { if (n_ - pos_ < 4) return false; *v = Load32(p_ + pos_); pos_ += 4; return true; }
  bool U64(uint64_t* v) { if (n_ - pos_ < 8) return false; *v = Load64(p_ + pos_); pos_ += 8; return true; }
  bool Bytes(uint64_t len, std::string_view* out) {
    if (n_ - pos_ < len) return false;
    *out = std::string_view(reinterpret_cast<const char*>(p_ + pos_), static_cast<size_t>(len));
    pos_ += len;
    return true;
  }
  uint64_t remaining() const { return n_ - pos_; }
  uint64_t pos() const { return pos_; }

 private:
  const unsigned char* p_;
  uint64_t n_;
  uint64_t pos_ = 0;
};

struct Section {
  uint32_t index, type;
  uint64_t offset, length;
};

std::string Describe(const Section& s) {
  return "section " + U(s.index) + " (" + SectionTypeName(s.type) + ") [offset " + U(s.offset) + ", length " +
         U(s.length) + "]";
}

}  // namespace

const char* SectionTypeName(uint32_t type) {
  switch (static_cast<SectionType>(type)) {
    case SectionType::kCompat: return "COMPAT";
    case SectionType::kGraphs: return "GRAPHS";
    case SectionType::kTensors: return "TENSORS";
    case SectionType::kWeights: return "WEIGHTS";
  }
  return "UNKNOWN";
}

size_t DtypeSize(uint32_t dtype) {
  // ONNX TensorProto codes: one table, not parallel switches elsewhere.
  static constexpr struct { uint32_t code; size_t size; } kTable[] = {
      {1, 4}, {2, 1}, {3, 1}, {4, 2}, {5, 2}, {6, 4}, {7, 8}, {9, 1}, {10, 2}, {11, 8}, {12, 4}, {13, 8}, {16, 2}};
  for (const auto& e : kTable) if (e.code == dtype) return e.size;
  return 0;
}

struct WeightVerification::State {
  std::vector<size_t> order;  // indices into tensors: one per distinct (data, length), largest first
  std::vector<TensorView> tensors;
  std::atomic<size_t> next{0};
  std::atomic<size_t> bad{SIZE_MAX};
  void Work() {
    for (size_t k; bad.load(std::memory_order_relaxed) == SIZE_MAX && (k = next.fetch_add(1)) < order.size();) {
      const TensorView& t = tensors[order[k]];
      if (Xxh3(t.data, t.length) != t.content_hash) {
        size_t expected = SIZE_MAX;
        bad.compare_exchange_strong(expected, order[k]);
      }
    }
  }
};

WeightVerification::WeightVerification() = default;

WeightVerification::~WeightVerification() {
  if (state_) state_->bad.store(0);  // a result nobody reads: stop early
  for (std::thread& th : threads_) th.join();
}

void WeightVerification::Start(const std::vector<TensorView>& tensors, unsigned background_threads) {
  if (state_) state_->bad.store(0);  // drops an unfinished check: its threads stop early
  for (std::thread& th : threads_) th.join();
  threads_.clear();
  result_.reset();
  state_ = std::make_unique<State>();
  State& st = *state_;
  st.tensors.reserve(tensors.size());
  for (const TensorView& t : tensors) st.tensors.push_back({t.name_hash, t.content_hash, 0, 0, {}, t.data, t.length});
  if (!kVerifyChecksums) return;  // fuzz builds: see kVerifyChecksums
  {
    std::unordered_map<const unsigned char*, uint64_t> seen;
    for (size_t i = 0; i < tensors.size(); ++i) {
      auto it = seen.find(tensors[i].data);
      if (it != seen.end() && it->second == tensors[i].length) continue;
      seen[tensors[i].data] = tensors[i].length;
      st.order.push_back(i);
    }
  }
  // Largest first, so that the threads finish together (one tensor is one hash, not divisible).
  std::stable_sort(st.order.begin(), st.order.end(),
                   [&](size_t a, size_t b) { return tensors[a].length > tensors[b].length; });
  for (unsigned w = 0; w < background_threads; ++w) {
    try {
      threads_.emplace_back([&st] { st.Work(); });
    } catch (const std::exception&) {
      break;  // fewer threads; Finish does the remaining work on the calling thread
    }
  }
}

CheckResult WeightVerification::Finish() {
  if (result_) return *result_;
  if (!state_) return *(result_ = CheckResult::Ok());
  state_->Work();
  for (std::thread& th : threads_) th.join();
  threads_.clear();
  const size_t bad = state_->bad.load();
  if (bad == SIZE_MAX) {
    result_ = CheckResult::Ok();
  } else {
    const TensorView& t = state_->tensors[bad];
    result_ = CheckResult::Fail("tensor " + U(bad) + " [length " + U(t.length) + "] content hash mismatch");
  }
  state_.reset();
  return *result_;
}

unsigned WeightVerification::DefaultBackgroundThreads(const std::vector<TensorView>& tensors) {
  uint64_t total = 0;
  for (const TensorView& t : tensors) total += t.length;
  if (total < (8u << 20)) return 0;  // starting a thread costs more than it saves
  return std::max(1u, std::min(8u, std::thread::hardware_concurrency())) - 1;
}

// Load mode's weight check without overlap: spread over the cores, the calling thread included.
static CheckResult VerifyContentHashes(const std::vector<TensorView>& tensors) {
  WeightVerification v;
  v.Start(tensors, WeightVerification::DefaultBackgroundThreads(tensors));
  return v.Finish();
}

uint64_t ContextBinaryHash(const void* data, size_t size) { return Xxh3(data, size); }

// Validates and, when `out` is non-null, fills it. The only parser: Validate and Open cannot disagree.
CheckResult ParseContextBinary(const void* data, size_t size, ContextBinaryReader* out, bool load_mode,
                               bool verify_weights) {
  const auto* p = static_cast<const unsigned char*>(data);
  if (size < kHeaderSize) return CheckResult::Fail("file is " + U(size) + " bytes, smaller than the 64-byte header");
  if (std::memcmp(p, kContextBinaryMagic, 8) != 0) return CheckResult::Fail("bad magic (not an EPCTXAOT context binary)");
  const uint16_t major = Load16(p + 8), minor = Load16(p + 10);
  if (major != kContextBinaryMajor)
    return CheckResult::Fail("format major version " + U(major) + "." + U(minor) + " is not supported (this build reads " +
                             U(kContextBinaryMajor) + ".x)");
  const uint32_t header_size = Load32(p + 12);
  const uint32_t section_count = Load32(p + 20);
  const uint64_t table_offset = Load64(p + 24);
  const uint64_t file_size = Load64(p + 32);
  const uint64_t header_checksum = Load64(p + 40);
  const uint64_t table_checksum = Load64(p + 48);
  if (header_size < kHeaderSize || header_size % 8 != 0 || header_size > size)
    return CheckResult::Fail("header size " + U(header_size) + " is invalid (must be a multiple of 8, >= 64 and <= file size " + U(size) + ")");
  if (kVerifyChecksums && HeaderChecksum(p, header_size) != header_checksum) return CheckResult::Fail("header checksum mismatch");
  if (file_size != size)
    return CheckResult::Fail("header says the file is " + U(file_size) + " bytes but it is " + U(size) + " bytes (truncated or extended)");
  if (size % kFileAlignment != 0) return CheckResult::Fail("file size " + U(size) + " is not a multiple of 4096");
  if (section_count == 0 || section_count > kMaxSections)
    return CheckResult::Fail("section count " + U(section_count) + " is outside [1, " + U(kMaxSections) + "]");
  const uint64_t table_length = uint64_t{section_count} * kSectionEntrySize;  // <= 64 * 32, no overflow
  if (table_offset < header_size || table_offset % 8 != 0 || table_offset > size || size - table_offset < table_length)
    return CheckResult::Fail("section table [offset " + U(table_offset) + ", length " + U(table_length) +
                             "] is misaligned, overlaps the header or extends past the end of the file (" + U(size) + " bytes)");
  if (kVerifyChecksums && Xxh3(p + table_offset, table_length) != table_checksum) return CheckResult::Fail("section table checksum mismatch");

  std::vector<Section> sections;
  const Section* known[5] = {};
  sections.reserve(section_count);
  for (uint32_t i = 0; i < section_count; ++i) {
    const unsigned char* e = p + table_offset + i * kSectionEntrySize;
    Section s{i, Load32(e), Load64(e + 8), Load64(e + 16)};
    const uint64_t checksum = Load64(e + 24);
    if (s.offset > size || s.length > size - s.offset)
      return CheckResult::Fail(Describe(s) + " extends past the end of the file (" + U(size) + " bytes)");
    if (s.offset < header_size) return CheckResult::Fail(Describe(s) + " overlaps the header");
    if (s.offset < table_offset + table_length && table_offset < s.offset + s.length)
      return CheckResult::Fail(Describe(s) + " overlaps the section table");
    if (s.type == static_cast<uint32_t>(SectionType::kWeights) && s.offset % kFileAlignment != 0)
      return CheckResult::Fail(Describe(s) + " is not 4096-byte aligned");
    // Load mode verifies the weights through the tensors' content hashes instead (in parallel, below).
    const bool deferred = load_mode && s.type == static_cast<uint32_t>(SectionType::kWeights);
    if (kVerifyChecksums && !deferred && Xxh3(p + s.offset, s.length) != checksum)
      return CheckResult::Fail(Describe(s) + " checksum mismatch");
    sections.push_back(s);
  }
  for (const Section& s : sections) {
    if (s.type < 1 || s.type > 4) continue;  // unknown types: bounds-checked above, otherwise skipped
    if (known[s.type]) return CheckResult::Fail(Describe(s) + " duplicates " + Describe(*known[s.type]));
    known[s.type] = &s;
  }
  std::vector<Section> sorted = sections;
  std::sort(sorted.begin(), sorted.end(), [](const Section& a, const Section& b) { return a.offset < b.offset; });
  for (size_t i = 1; i < sorted.size(); ++i)
    if (sorted[i - 1].length > 0 && sorted[i].length > 0 && sorted[i - 1].offset + sorted[i - 1].length > sorted[i].offset)
      return CheckResult::Fail(Describe(sorted[i]) + " overlaps " + Describe(sorted[i - 1]));
  for (uint32_t t = 1; t <= 4; ++t)
    if (!known[t]) return CheckResult::Fail(std::string("required section ") + SectionTypeName(t) + " is missing");
  const bool newer_minor = minor > kContextBinaryMinor;
  auto trailing = [&](const Section& s, const Cursor& c) -> CheckResult {
    if (c.remaining() != 0 && !newer_minor)
      return CheckResult::Fail(Describe(s) + " has " + U(c.remaining()) + " unexpected trailing bytes");
    return CheckResult::Ok();
  };

  // COMPAT: u32 count (>= 4), then count x {u32 length, bytes}.
  CompatInfo compat;
  {
    const Section& s = *known[1];
    Cursor c(p + s.offset, s.length);
    uint32_t n;
    if (!c.U32(&n) || n < 4) return CheckResult::Fail(Describe(s) + " must hold at least 4 strings");
    std::string_view str[4];
    for (uint32_t i = 0; i < n; ++i) {
      uint32_t len;
      std::string_view v;
      if (!c.U32(&len) || !c.Bytes(len, &v))
        return CheckResult::Fail(Describe(s) + " string " + U(i) + " runs past the end of the section");
      if (i < 4) str[i] = v;
    }
    if (auto r = trailing(s, c); !r.ok) return r;
    compat.epctx_version = std::string(str[0]);
    compat.onednn_version = std::string(str[1]);
    compat.isa = std::string(str[2]);
    std::string_view opts = str[3];
    while (!opts.empty()) {
      size_t nl = opts.find('\n');
      std::string_view line = opts.substr(0, nl);
      opts = nl == std::string_view::npos ? std::string_view() : opts.substr(nl + 1);
      size_t eq = line.find('=');
      if (eq == std::string_view::npos || eq == 0)
        return CheckResult::Fail(Describe(s) + " option line \"" + std::string(line.substr(0, 64)) + "\" is not key=value");
      compat.options.emplace_back(std::string(line.substr(0, eq)), std::string(line.substr(eq + 1)));
    }
  }

  // TENSORS: u32 count, u32 reserved, count x 112-byte entries pointing into WEIGHTS.
  const Section& weights = *known[4];
  std::vector<TensorView> tensors;
  {
    const Section& s = *known[3];
    Cursor c(p + s.offset, s.length);
    uint32_t n, reserved;
    if (!c.U32(&n) || !c.U32(&reserved)) return CheckResult::Fail(Describe(s) + " is shorter than its 8-byte count");
    if (n > c.remaining() / kTensorEntrySize)
      return CheckResult::Fail(Describe(s) + " declares " + U(n) + " tensors but has room for " + U(c.remaining() / kTensorEntrySize));
    tensors.reserve(n);
    for (uint32_t i = 0; i < n; ++i) {
      const unsigned char* e = p + s.offset + kTensorTableHeader + uint64_t{i} * kTensorEntrySize;
      TensorView t;
      t.name_hash = Load64(e);
      t.content_hash = Load64(e + 8);
      t.dtype = Load32(e + 16);
      const uint32_t rank = Load32(e + 20);
      const uint64_t offset = Load64(e + 88);
      t.length = Load64(e + 96);
      t.layout = Load32(e + 104);
      const std::string where = "tensor " + U(i) + " [offset " + U(offset) + ", length " + U(t.length) + "]";
      const size_t elem = DtypeSize(t.dtype);
      if (elem == 0) return CheckResult::Fail(where + " has unsupported dtype " + U(t.dtype));
      if (rank > kMaxTensorRank) return CheckResult::Fail(where + " has rank " + U(rank) + " > " + U(kMaxTensorRank));
      uint64_t bytes = elem;
      for (uint32_t d = 0; d < kMaxTensorRank; ++d) {
        const uint64_t dim = Load64(e + 24 + 8 * d);
        if (d >= rank) {
          if (dim != 0) return CheckResult::Fail(where + " has nonzero dim " + U(d) + " beyond its rank " + U(rank));
          continue;
        }
        t.dims.push_back(dim);
        if (dim != 0 && bytes > std::numeric_limits<uint64_t>::max() / dim)
          return CheckResult::Fail(where + ": product of dims times element size overflows 64 bits");
        bytes *= dim;
      }
      if (bytes != t.length)
        return CheckResult::Fail(where + ": dims and dtype give " + U(bytes) + " bytes, not the stored length");
      if (offset % kTensorAlignment != 0) return CheckResult::Fail(where + " is not 64-byte aligned");
      if (offset > weights.length || t.length > weights.length - offset)
        return CheckResult::Fail(where + " extends past the end of " + Describe(weights));
      t.data = p + weights.offset + offset;
      if (kVerifyChecksums && !load_mode && Xxh3(t.data, t.length) != t.content_hash)
        return CheckResult::Fail(where + " content hash mismatch");
      tensors.push_back(std::move(t));
    }
    if (kVerifyChecksums && load_mode && verify_weights) {
      CheckResult r = VerifyContentHashes(tensors);
      if (!r.ok) return r;
    }
    uint64_t used = kTensorTableHeader + uint64_t{n} * kTensorEntrySize;
    if (used != s.length && !newer_minor)
      return CheckResult::Fail(Describe(s) + " has " + U(s.length - used) + " unexpected trailing bytes");
  }

  // GRAPHS: u32 count, then count x {u32 name length, name, u32 ref count, refs (u32 tensor index), u64 record length, records}.
  std::vector<GraphView> graphs;
  {
    const Section& s = *known[2];
    Cursor c(p + s.offset, s.length);
    uint32_t n;
    if (!c.U32(&n)) return CheckResult::Fail(Describe(s) + " is shorter than its 4-byte count");
    if (n > c.remaining() / 16)  // every graph takes at least 16 bytes
      return CheckResult::Fail(Describe(s) + " declares " + U(n) + " graphs, more than fit in the section");
    graphs.reserve(n);
    for (uint32_t i = 0; i < n; ++i) {
      GraphView g;
      uint32_t name_len = 0, refs = 0;
      uint64_t rec_len = 0;
      const std::string where = Describe(s) + " graph " + U(i);
      if (!c.U32(&name_len) || !c.Bytes(name_len, &g.name)) return CheckResult::Fail(where + " name runs past the end of the section");
      if (!c.U32(&refs) || refs > c.remaining() / 4) return CheckResult::Fail(where + " tensor references run past the end of the section");
      g.tensor_indices.reserve(refs);
      for (uint32_t r = 0; r < refs; ++r) {
        uint32_t idx;
        c.U32(&idx);
        if (idx >= tensors.size())
          return CheckResult::Fail(where + " references tensor " + U(idx) + " but the table has " + U(tensors.size()));
        g.tensor_indices.push_back(idx);
      }
      if (!c.U64(&rec_len) || !c.Bytes(rec_len, &g.records))
        return CheckResult::Fail(where + " op records (" + U(rec_len) + " bytes) run past the end of the section");
      graphs.push_back(std::move(g));
    }
    if (auto r = trailing(s, c); !r.ok) return r;
  }

  if (out) {
    out->major_ = major;
    out->minor_ = minor;
    out->compat_ = std::move(compat);
    out->graphs_ = std::move(graphs);
    out->tensors_ = std::move(tensors);
  }
  return CheckResult::Ok();
}

CheckResult ValidateContextBinary(const void* data, size_t size) { return ParseContextBinary(data, size, nullptr, false, true); }

CheckResult ContextBinaryReader::Open(const void* data, size_t size, bool full_validation, bool verify_weights) {
  *this = ContextBinaryReader();
  ContextBinaryReader tmp;
  CheckResult r = ParseContextBinary(data, size, &tmp, !full_validation, verify_weights || full_validation);
  if (r.ok) *this = std::move(tmp);
  return r;
}

const TensorView* ContextBinaryReader::FindTensor(std::string_view name) const {
  const uint64_t h = XXH3_64bits(name.data(), name.size());
  for (const TensorView& t : tensors_) if (t.name_hash == h) return &t;
  return nullptr;
}

CheckResult WriteContextBinary(const ContextBinaryContents& in, std::string* out) {
  // Tensors first: dedup weights by content hash, confirmed byte-for-byte (a hash collision stores both).
  std::string weights;
  std::unordered_multimap<uint64_t, uint64_t> stored;  // content hash -> offset in weights
  std::string table;
  Put32(&table, static_cast<uint32_t>(in.tensors.size()));
  Put32(&table, 0);
  std::unordered_map<std::string, uint32_t> index_of;
  for (size_t i = 0; i < in.tensors.size(); ++i) {
    const TensorInput& t = in.tensors[i];
    const size_t elem = DtypeSize(t.dtype);
    if (elem == 0) return CheckResult::Fail("tensor " + t.name + " has unsupported dtype " + U(t.dtype));
    if (t.dims.size() > kMaxTensorRank) return CheckResult::Fail("tensor " + t.name + " has rank > 8");
    uint64_t bytes = elem;
    for (uint64_t d : t.dims) {
      if (d != 0 && bytes > std::numeric_limits<uint64_t>::max() / d) return CheckResult::Fail("tensor " + t.name + " size overflows");
      bytes *= d;
    }
    if (bytes != t.bytes.size())
      return CheckResult::Fail("tensor " + t.name + " has " + U(t.bytes.size()) + " bytes, dims and dtype need " + U(bytes));
    const uint64_t hash = Xxh3(t.bytes.data(), t.bytes.size());
    uint64_t offset = UINT64_MAX;
    auto range = stored.equal_range(hash);
    for (auto it = range.first; it != range.second; ++it)
      if (weights.compare(it->second, t.bytes.size(), t.bytes) == 0) { offset = it->second; break; }
    if (offset == UINT64_MAX) {
      PadTo(&weights, kTensorAlignment);
      offset = weights.size();
      weights += t.bytes;
      stored.emplace(hash, offset);
    }
    Put64(&table, XXH3_64bits(t.name.data(), t.name.size()));
    Put64(&table, hash);
    Put32(&table, t.dtype);
    Put32(&table, static_cast<uint32_t>(t.dims.size()));
    for (uint32_t d = 0; d < kMaxTensorRank; ++d) Put64(&table, d < t.dims.size() ? t.dims[d] : 0);
    Put64(&table, offset);
    Put64(&table, t.bytes.size());
    Put32(&table, t.layout);
    Put32(&table, 0);
    index_of.emplace(t.name, static_cast<uint32_t>(i));  // keeps the first of a name
  }

  std::string graphs;
  Put32(&graphs, static_cast<uint32_t>(in.graphs.size()));
  for (const GraphInput& g : in.graphs) {
    Put32(&graphs, static_cast<uint32_t>(g.name.size()));
    graphs += g.name;
    Put32(&graphs, static_cast<uint32_t>(g.tensor_names.size()));
    for (const std::string& n : g.tensor_names) {
      auto it = index_of.find(n);
      if (it == index_of.end()) return CheckResult::Fail("graph " + g.name + " references unknown tensor " + n);
      Put32(&graphs, it->second);
    }
    Put64(&graphs, g.records.size());
    graphs += g.records;
  }

  std::string compat;
  std::string options;
  for (const auto& kv : in.compat.options) {
    if (kv.first.empty() || kv.first.find_first_of("=\n") != std::string::npos || kv.second.find('\n') != std::string::npos)
      return CheckResult::Fail("compat option \"" + kv.first + "\" cannot be stored as a key=value line");
    options += kv.first + "=" + kv.second + "\n";
  }
  Put32(&compat, 4);
  for (const std::string* s : {&in.compat.epctx_version, &in.compat.onednn_version, &in.compat.isa, static_cast<const std::string*>(&options)}) {
    Put32(&compat, static_cast<uint32_t>(s->size()));
    compat += *s;
  }

  // Layout: header | section table | COMPAT | GRAPHS | TENSORS | pad | WEIGHTS (4096-aligned) | pad to 4096.
  std::string f;
  f.append(kContextBinaryMagic, 8);
  Put16(&f, kContextBinaryMajor);
  Put16(&f, kContextBinaryMinor);
  Put32(&f, kHeaderSize);
  Put32(&f, 0);                          // flags
  Put32(&f, 4);                          // section count
  Put64(&f, kHeaderSize);                // section table offset
  Put64(&f, 0);                          // file size, patched below
  Put64(&f, 0);                          // header checksum, patched below
  Put64(&f, 0);                          // section table checksum, patched below
  Put64(&f, 0);                          // reserved
  f.resize(kHeaderSize + 4 * kSectionEntrySize, '\0');
  const std::pair<SectionType, const std::string*> parts[] = {
      {SectionType::kCompat, &compat}, {SectionType::kGraphs, &graphs},
      {SectionType::kTensors, &table}, {SectionType::kWeights, &weights}};
  std::string entries;
  for (const auto& part : parts) {
    PadTo(&f, part.first == SectionType::kWeights ? kFileAlignment : 8);
    Put32(&entries, static_cast<uint32_t>(part.first));
    Put32(&entries, 0);
    Put64(&entries, f.size());
    Put64(&entries, part.second->size());
    Put64(&entries, Xxh3(part.second->data(), part.second->size()));
    f += *part.second;
  }
  PadTo(&f, kFileAlignment);
  std::memcpy(&f[kHeaderSize], entries.data(), entries.size());
  Store64(&f, 32, f.size());
  Store64(&f, 48, XXH3_64bits(entries.data(), entries.size()));
  Store64(&f, kHeaderChecksumOffset, HeaderChecksum(reinterpret_cast<const unsigned char*>(f.data()), kHeaderSize));
  *out = std::move(f);
  return CheckResult::Ok();
}

}  // namespace aotcpu
}  // namespace epctx
