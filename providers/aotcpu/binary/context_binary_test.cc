// The AotCpu context binary: round trip, dedup, alignment, and a hostile corpus generated here (truncations,
// bit flips, hand-crafted headers) that must always be refused with a reason, never crash.
#include "providers/aotcpu/binary/context_binary.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <thread>

namespace epctx {
namespace aotcpu {
namespace {

std::string Bytes(size_t n, unsigned char seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(seed + i * 7);
  return s;
}

ContextBinaryContents Sample() {
  ContextBinaryContents c;
  c.compat = {"0.1.0", "3.6.0", "avx512_core", {{"weights_layout", "blocked"}, {"threads", "4"}}};
  c.tensors.push_back({"w0", Bytes(4 * 6, 1), 1, {2, 3}, 0});
  c.tensors.push_back({"w1", Bytes(100, 2), 2, {100}, 7});
  c.tensors.push_back({"w0_copy", Bytes(4 * 6, 1), 1, {6}, 0});  // same bytes as w0: stored once
  c.tensors.push_back({"bias", Bytes(8 * 5, 3), 7, {5}, 0});
  c.graphs.push_back({"main", {"w0", "w1", "bias"}, "opaque-records-main"});
  c.graphs.push_back({"aux", {"w0_copy"}, ""});
  return c;
}

std::string Write(const ContextBinaryContents& c) {
  std::string f;
  CheckResult r = WriteContextBinary(c, &f);
  EXPECT_TRUE(r.ok) << r.reason;
  return f;
}

uint64_t Get64(const std::string& f, size_t at) { uint64_t v; std::memcpy(&v, f.data() + at, 8); return v; }
uint32_t Get32(const std::string& f, size_t at) { uint32_t v; std::memcpy(&v, f.data() + at, 4); return v; }
void Set64(std::string* f, size_t at, uint64_t v) { std::memcpy(&(*f)[at], &v, 8); }
void Set32(std::string* f, size_t at, uint32_t v) { std::memcpy(&(*f)[at], &v, 4); }
void Set16(std::string* f, size_t at, uint16_t v) { std::memcpy(&(*f)[at], &v, 2); }

struct Entry { uint32_t type; uint64_t offset, length; };
Entry SectionEntry(const std::string& f, uint32_t i) {
  size_t e = Get64(f, 24) + i * 32;
  return {Get32(f, e), Get64(f, e + 8), Get64(f, e + 16)};
}
size_t EntryAt(const std::string& f, uint32_t i) { return Get64(f, 24) + i * 32; }
Entry FindSection(const std::string& f, SectionType t) {
  for (uint32_t i = 0; i < Get32(f, 20); ++i)
    if (SectionEntry(f, i).type == static_cast<uint32_t>(t)) return SectionEntry(f, i);
  return {};
}

// Recomputes every checksum after a deliberate edit, so the test reaches the checks behind them.
void Reseal(std::string* f) {
  const uint32_t n = Get32(*f, 20);
  const uint64_t table = Get64(*f, 24);
  if (n <= 64 && table <= f->size() && n * 32 <= f->size() - table) {
    for (uint32_t i = 0; i < n; ++i) {
      Entry e = SectionEntry(*f, i);
      if (e.offset <= f->size() && e.length <= f->size() - e.offset)
        Set64(f, table + i * 32 + 24, ContextBinaryHash(f->data() + e.offset, e.length));
    }
    Set64(f, 48, ContextBinaryHash(f->data() + table, n * 32));
  }
  std::string header = f->substr(0, 64);
  Set64(&header, 40, 0);
  Set64(f, 40, ContextBinaryHash(header.data(), header.size()));
}

// Reseals only the table and header, leaving section checksums as edited.
void ResealTable(std::string* f) {
  Set64(f, 48, ContextBinaryHash(f->data() + Get64(*f, 24), Get32(*f, 20) * 32));
  std::string header = f->substr(0, 64);
  Set64(&header, 40, 0);
  Set64(f, 40, ContextBinaryHash(header.data(), header.size()));
}

void ExpectRefused(const std::string& f, const std::string& reason_part) {
  CheckResult r = ValidateContextBinary(f.data(), f.size());
  EXPECT_FALSE(r.ok) << "expected refusal mentioning: " << reason_part;
  EXPECT_NE(r.reason.find(reason_part), std::string::npos) << r.reason << " (wanted: " << reason_part << ")";
}

TEST(ContextBinary, RoundTrip) {
  const ContextBinaryContents in = Sample();
  const std::string f = Write(in);
  EXPECT_EQ(f.size() % 4096, 0u);
  ContextBinaryReader r;
  CheckResult ok = r.Open(f.data(), f.size());
  ASSERT_TRUE(ok.ok) << ok.reason;
  EXPECT_EQ(r.major(), 1);
  EXPECT_EQ(r.compat().epctx_version, "0.1.0");
  EXPECT_EQ(r.compat().onednn_version, "3.6.0");
  EXPECT_EQ(r.compat().isa, "avx512_core");
  EXPECT_EQ(r.compat().options, in.compat.options);
  ASSERT_EQ(r.tensors().size(), in.tensors.size());
  for (size_t i = 0; i < in.tensors.size(); ++i) {
    const TensorView& t = r.tensors()[i];
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(t.data), t.length), in.tensors[i].bytes);
    EXPECT_EQ(t.dims, in.tensors[i].dims);
    EXPECT_EQ(t.dtype, in.tensors[i].dtype);
    EXPECT_EQ(t.layout, in.tensors[i].layout);
    EXPECT_EQ(r.FindTensor(in.tensors[i].name), &t);
  }
  EXPECT_EQ(r.FindTensor("missing"), nullptr);
  ASSERT_EQ(r.graphs().size(), 2u);
  EXPECT_EQ(r.graphs()[0].name, "main");
  EXPECT_EQ(r.graphs()[0].records, "opaque-records-main");
  EXPECT_EQ(r.graphs()[0].tensor_indices, (std::vector<uint32_t>{0, 1, 3}));
  EXPECT_EQ(r.graphs()[1].name, "aux");
  EXPECT_EQ(r.graphs()[1].tensor_indices, (std::vector<uint32_t>{2}));
}

TEST(ContextBinary, EmptyContentsRoundTrip) {
  const std::string f = Write(ContextBinaryContents{});
  ContextBinaryReader r;
  ASSERT_TRUE(r.Open(f.data(), f.size()).ok);
  EXPECT_TRUE(r.tensors().empty());
  EXPECT_TRUE(r.graphs().empty());
}

TEST(ContextBinary, DedupsByContentNotByName) {
  ContextBinaryContents c;
  c.tensors.push_back({"a", Bytes(256, 9), 2, {256}, 0});
  c.tensors.push_back({"b", Bytes(256, 9), 2, {256}, 0});  // same bytes, other name: stored once
  const std::string once = Write(c);
  ContextBinaryReader r;
  ASSERT_TRUE(r.Open(once.data(), once.size()).ok);
  EXPECT_EQ(r.tensors()[0].data, r.tensors()[1].data);
  EXPECT_EQ(FindSection(once, SectionType::kWeights).length, 256u);

  ContextBinaryContents d;
  d.tensors.push_back({"a", Bytes(256, 9), 2, {256}, 0});
  d.tensors.push_back({"a", Bytes(256, 10), 2, {256}, 0});  // same name, other bytes: stored twice
  const std::string twice = Write(d);
  ASSERT_TRUE(r.Open(twice.data(), twice.size()).ok);
  EXPECT_NE(r.tensors()[0].data, r.tensors()[1].data);
  EXPECT_EQ(FindSection(twice, SectionType::kWeights).length, 256u + 256u);
}

TEST(ContextBinary, EveryTensorIs64ByteAlignedAndWeightsArePageAligned) {
  ContextBinaryContents c;
  for (int i = 0; i < 20; ++i) c.tensors.push_back({"t" + std::to_string(i), Bytes(1 + i * 13, i), 2, {1u + i * 13u}, 0});
  const std::string f = Write(c);
  ContextBinaryReader r;
  ASSERT_TRUE(r.Open(f.data(), f.size()).ok);
  EXPECT_EQ(FindSection(f, SectionType::kWeights).offset % 4096, 0u);
  for (const TensorView& t : r.tensors())
    EXPECT_EQ((t.data - reinterpret_cast<const unsigned char*>(f.data())) % 64, 0) << t.length;
}

TEST(ContextBinary, WriterRefusesBadInput) {
  ContextBinaryContents c;
  c.tensors.push_back({"a", "abc", 1, {1}, 0});  // 3 bytes for one float
  std::string f;
  EXPECT_FALSE(WriteContextBinary(c, &f).ok);
  c.tensors[0] = {"a", "abcd", 1, {1}, 0};
  c.graphs.push_back({"g", {"nope"}, ""});
  CheckResult r = WriteContextBinary(c, &f);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.reason.find("nope"), std::string::npos);
}

TEST(ContextBinary, TruncationsAreRefused) {
  const std::string f = Write(Sample());
  std::set<size_t> cuts = {0, 1, 7, 8, 63, 64, 65, f.size() - 1};
  for (uint32_t i = 0; i < 4; ++i) {
    Entry e = SectionEntry(f, i);
    for (size_t at : {e.offset, e.offset + e.length, e.offset + e.length / 2}) {
      if (at > 0) cuts.insert(at - 1);
      cuts.insert(at);
      cuts.insert(at + 1);
    }
  }
  std::mt19937 rng(42);
  for (int i = 0; i < 300; ++i) cuts.insert(rng() % f.size());
  for (size_t n : cuts) {
    if (n >= f.size()) continue;
    std::string cut = f.substr(0, n);
    CheckResult r = ValidateContextBinary(cut.data(), cut.size());
    EXPECT_FALSE(r.ok) << "truncated to " << n;
    EXPECT_FALSE(r.reason.empty());
  }
  std::string longer = f + std::string(4096, '\0');
  ExpectRefused(longer, "header says the file is");
  EXPECT_FALSE(ValidateContextBinary(nullptr, 0).ok);
}

TEST(ContextBinary, BitFlipsAreRefusedUnlessInPadding) {
  const std::string f = Write(Sample());
  std::vector<bool> covered(f.size(), false);
  for (size_t i = 0; i < 64 + 4 * 32; ++i) covered[i] = true;
  for (uint32_t i = 0; i < 4; ++i) {
    Entry e = SectionEntry(f, i);
    for (uint64_t b = e.offset; b < e.offset + e.length; ++b) covered[b] = true;
  }
  size_t refused = 0, accepted = 0;
  for (size_t pos = 0; pos < f.size(); ++pos) {
    std::string g = f;
    g[pos] = static_cast<char>(g[pos] ^ (1u << (pos % 8)));
    CheckResult r = ValidateContextBinary(g.data(), g.size());
    if (covered[pos]) {
      EXPECT_FALSE(r.ok) << "flip at " << pos;
      EXPECT_FALSE(r.reason.empty());
      ++refused;
    } else {
      EXPECT_TRUE(r.ok) << "flip in padding at " << pos << ": " << r.reason;
      ++accepted;
    }
  }
  EXPECT_GT(refused, 300u);
  EXPECT_GT(accepted, 1000u);
}

TEST(ContextBinary, HostileHeaders) {
  const std::string good = Write(Sample());
  std::string f;

  f = good; f[0] = 'X'; ExpectRefused(f, "bad magic");
  f = good; Set16(&f, 8, 2); Reseal(&f); ExpectRefused(f, "major version 2.0 is not supported (this build reads 1.x)");
  f = good; Set16(&f, 8, 0); Reseal(&f); ExpectRefused(f, "major version 0");
  f = good; Set16(&f, 10, 99); Reseal(&f);  // 1.99: newer minor is accepted
  { CheckResult r = ValidateContextBinary(f.data(), f.size()); EXPECT_TRUE(r.ok) << r.reason; }
  f = good; Set32(&f, 12, 0xFFFFFFF8u); Reseal(&f); ExpectRefused(f, "header size 4294967288 is invalid");
  f = good; Set64(&f, 56, 1); ExpectRefused(f, "header checksum mismatch");
  f = good; Set32(&f, 20, 0xFFFFFFFFu); Reseal(&f); ExpectRefused(f, "section count 4294967295 is outside [1, 64]");
  f = good; Set32(&f, 20, 65); Reseal(&f); ExpectRefused(f, "section count 65");
  f = good; Set32(&f, 20, 0); Reseal(&f); ExpectRefused(f, "section count 0");
  f = good; Set64(&f, 24, UINT64_MAX - 7); Reseal(&f); ExpectRefused(f, "section table [offset 18446744073709551608");
  f = good; Set64(&f, 24, f.size() - 32); Reseal(&f); ExpectRefused(f, "section table");
  f = good; Set64(&f, 32, UINT64_MAX); Reseal(&f); ExpectRefused(f, "header says the file is 18446744073709551615 bytes");

  // Section entries: offsets near UINT64_MAX and lengths that overflow offset + length.
  const size_t e3 = EntryAt(good, 3);
  f = good; Set64(&f, e3 + 8, UINT64_MAX - 10); Reseal(&f); ExpectRefused(f, "extends past the end of the file");
  f = good; Set64(&f, e3 + 16, UINT64_MAX - 100); Reseal(&f); ExpectRefused(f, "extends past the end of the file");
  f = good; Set64(&f, e3 + 16, f.size()); Reseal(&f);
  ExpectRefused(f, "section 3 (WEIGHTS) [offset " + std::to_string(Get64(good, e3 + 8)) + ", length " +
                       std::to_string(f.size()) + "] extends past the end of the file (" + std::to_string(f.size()) + " bytes)");
  f = good; Set64(&f, e3 + 8, Get64(good, e3 + 8) + 64); Reseal(&f); ExpectRefused(f, "is not 4096-byte aligned");
  f = good; Set64(&f, e3 + 8, 0); Reseal(&f); ExpectRefused(f, "overlaps the header");
  f = good; Set64(&f, EntryAt(good, 0) + 8, 64); Reseal(&f); ExpectRefused(f, "overlaps the section table");
  f = good; Set64(&f, EntryAt(good, 1) + 8, Get64(good, EntryAt(good, 0) + 8)); Reseal(&f); ExpectRefused(f, "overlaps section");
  f = good; Set32(&f, EntryAt(good, 1), 1); Reseal(&f); ExpectRefused(f, "duplicates section 0 (COMPAT)");
  f = good; Set64(&f, EntryAt(good, 0) + 24, 0); ResealTable(&f);
  ExpectRefused(f, "section 0 (COMPAT) [offset 192, length");
  f = good; Set32(&f, EntryAt(good, 2), 77); Reseal(&f); ExpectRefused(f, "required section TENSORS is missing");
}

TEST(ContextBinary, HostileSectionContents) {
  const std::string good = Write(Sample());
  const Entry tensors = FindSection(good, SectionType::kTensors);
  const size_t t0 = tensors.offset + 8;  // first tensor entry
  std::string f;

  f = good; Set32(&f, tensors.offset, 0xFFFFFFFFu); Reseal(&f); ExpectRefused(f, "declares 4294967295 tensors");
  f = good; Set32(&f, t0 + 16, 999); Reseal(&f); ExpectRefused(f, "unsupported dtype 999");
  f = good; Set32(&f, t0 + 20, 9); Reseal(&f); ExpectRefused(f, "rank 9");
  f = good; Set64(&f, t0 + 24, UINT64_MAX / 2); Set64(&f, t0 + 32, 4); Reseal(&f); ExpectRefused(f, "overflows 64 bits");
  f = good; Set64(&f, t0 + 24, 3); Reseal(&f); ExpectRefused(f, "not the stored length");
  f = good; Set64(&f, t0 + 88, 1); Reseal(&f); ExpectRefused(f, "not 64-byte aligned");
  f = good; Set64(&f, t0 + 88, UINT64_MAX - 63); Reseal(&f); ExpectRefused(f, "extends past the end of section 3 (WEIGHTS)");
  f = good; Set64(&f, t0 + 8, 12345); Reseal(&f); ExpectRefused(f, "content hash mismatch");

  const Entry graphs = FindSection(good, SectionType::kGraphs);
  f = good; Set32(&f, graphs.offset, 0x7FFFFFFFu); Reseal(&f); ExpectRefused(f, "graphs, more than fit");
  f = good; Set32(&f, graphs.offset + 4, 0xFFFFFFF0u); Reseal(&f); ExpectRefused(f, "graph 0 name runs past");
  const size_t refs = graphs.offset + 4 + 4 + 4;  // "main"
  f = good; Set32(&f, refs + 4, 4); Reseal(&f); ExpectRefused(f, "graph 0 references tensor 4 but the table has 4");
  f = good; Set32(&f, refs, 0x40000000u); Reseal(&f); ExpectRefused(f, "graph 0 tensor references run past");
  f = good; Set64(&f, refs + 4 + 12, UINT64_MAX); Reseal(&f); ExpectRefused(f, "op records (18446744073709551615 bytes)");

  const Entry compat = FindSection(good, SectionType::kCompat);
  f = good; Set32(&f, compat.offset, 3); Reseal(&f); ExpectRefused(f, "at least 4 strings");
  f = good; Set32(&f, compat.offset + 4, 0xFFFFFFFFu); Reseal(&f); ExpectRefused(f, "string 0 runs past");
}

TEST(ContextBinary, UnknownSectionsAreSkipped) {
  std::string f = Write(Sample());
  // Retag GRAPHS as an unknown type and append a fresh GRAPHS copy: a 5-section file a future minor might write.
  const Entry graphs = FindSection(f, SectionType::kGraphs);
  const std::string copy = f.substr(graphs.offset, graphs.length);
  const size_t old_size = f.size();
  f += copy;
  f.resize((f.size() + 4095) / 4096 * 4096, '\0');
  // Move the table to the end of the file so it can grow to 5 entries.
  std::string table = f.substr(Get64(f, 24), 4 * 32);
  const size_t table_at = f.size();
  f += table + std::string(32, '\0');
  f.resize((f.size() + 4095) / 4096 * 4096, '\0');
  Set64(&f, 24, table_at);
  Set32(&f, 20, 5);
  Set64(&f, 32, f.size());
  for (uint32_t i = 0; i < 4; ++i)
    if (Get32(f, table_at + i * 32) == static_cast<uint32_t>(SectionType::kGraphs)) Set32(&f, table_at + i * 32, 1000);
  Set32(&f, table_at + 4 * 32, static_cast<uint32_t>(SectionType::kGraphs));
  Set64(&f, table_at + 4 * 32 + 8, old_size);
  Set64(&f, table_at + 4 * 32 + 16, copy.size());
  Reseal(&f);
  ContextBinaryReader r;
  CheckResult ok = r.Open(f.data(), f.size());
  ASSERT_TRUE(ok.ok) << ok.reason;
  EXPECT_EQ(r.graphs().size(), 2u);
  EXPECT_EQ(std::string(SectionTypeName(1000)), "UNKNOWN");
}

// A binary of `count` tensors of `bytes` each (distinct contents), and one more that shares tensor 0's bytes.
std::string ManyTensors(size_t count, size_t bytes) {
  ContextBinaryContents c;
  c.compat = {"0.1.0", "3.6.0", "avx512_core", {}};
  GraphInput g{"g", {}, "r"};
  for (size_t i = 0; i < count; ++i) {
    c.tensors.push_back({"t" + std::to_string(i), Bytes(bytes, static_cast<unsigned char>(i)), 2, {bytes}, 0});
    g.tensor_names.push_back("t" + std::to_string(i));
  }
  c.tensors.push_back({"t0_again", Bytes(bytes, 0), 2, {bytes}, 0});
  c.graphs.push_back(g);
  return Write(c);
}

// Open in load mode with the weights' hashes deferred, then the hashes on `threads` background threads.
CheckResult OpenThenVerify(const std::string& f, unsigned threads) {
  ContextBinaryReader r;
  CheckResult open = r.Open(f.data(), f.size(), /*full_validation=*/false, /*verify_weights=*/false);
  if (!open.ok) return open;
  WeightVerification v;
  v.Start(r.tensors(), threads);
  CheckResult first = v.Finish();
  CheckResult again = v.Finish();
  EXPECT_EQ(first.ok, again.ok);
  EXPECT_EQ(first.reason, again.reason);
  return first;
}

TEST(WeightVerification, GivesOpensVerdictWithAnyNumberOfThreads) {
  const std::string good = ManyTensors(24, 64 * 1024);
  const Entry weights = FindSection(good, SectionType::kWeights);
  for (unsigned threads : {0u, 1u, 3u}) {
    CheckResult ok = OpenThenVerify(good, threads);
    EXPECT_TRUE(ok.ok) << threads << " threads: " << ok.reason;
  }
  // One byte flipped in tensor 5, then in tensor 0 (whose bytes tensor 24 shares), then in the last one: the same
  // refusal as Open with verify_weights, whatever the thread count.
  for (size_t tensor : {5u, 0u, 23u}) {
    std::string bad = good;
    bad[weights.offset + tensor * 64 * 1024 + 1000] ^= 0x01;
    ContextBinaryReader r;
    const CheckResult open = r.Open(bad.data(), bad.size(), /*full_validation=*/false, /*verify_weights=*/true);
    ASSERT_FALSE(open.ok);
    EXPECT_EQ(open.reason, "tensor " + std::to_string(tensor) + " [length 65536] content hash mismatch");
    for (unsigned threads : {0u, 1u, 3u}) {
      const CheckResult v = OpenThenVerify(bad, threads);
      EXPECT_FALSE(v.ok) << threads << " threads";
      EXPECT_EQ(v.reason, open.reason) << threads << " threads";
    }
  }
}

TEST(WeightVerification, NothingStartedIsOkAndAnUnfinishedCheckIsDroppedSafely) {
  WeightVerification idle;
  EXPECT_TRUE(idle.Finish().ok);
  WeightVerification empty;
  empty.Start({}, 2);
  EXPECT_TRUE(empty.Finish().ok);
  const std::string f = ManyTensors(16, 1 << 20);
  ContextBinaryReader r;
  ASSERT_TRUE(r.Open(f.data(), f.size(), false, false).ok);
  for (int i = 0; i < 20; ++i) {
    WeightVerification dropped;  // destroyed while its threads hash: they stop and are joined
    dropped.Start(r.tensors(), 2);
  }
  WeightVerification restarted;
  restarted.Start(r.tensors(), 2);
  restarted.Start(r.tensors(), 1);  // drops the first check
  EXPECT_TRUE(restarted.Finish().ok);
}

TEST(WeightVerification, BackgroundThreadsOnlyForLargeWeights) {
  const std::string small = ManyTensors(4, 4096);
  ContextBinaryReader r;
  ASSERT_TRUE(r.Open(small.data(), small.size(), false, false).ok);
  EXPECT_EQ(WeightVerification::DefaultBackgroundThreads(r.tensors()), 0u);
  const std::string large = ManyTensors(9, 1 << 20);
  ASSERT_TRUE(r.Open(large.data(), large.size(), false, false).ok);
  EXPECT_EQ(WeightVerification::DefaultBackgroundThreads(r.tensors()),
            std::max(1u, std::min(8u, std::thread::hardware_concurrency())) - 1);
}

// Writes valid seeds for the fuzzer into the build tree (the committed seeds in tests/fuzz/corpus/context_binary
// are the small hostile ones; valid files are >= 8 KiB).
TEST(ContextBinary, WritesFuzzSeeds) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(EPCTX_BINARY_DIR) / "fuzz-corpus" / "context_binary";
  fs::create_directories(dir);
  ContextBinaryContents one;
  one.tensors.push_back({"x", Bytes(16, 5), 1, {4}, 0});
  one.graphs.push_back({"g", {"x"}, "r"});
  const std::pair<const char*, std::string> seeds[] = {
      {"valid_sample.bin", Write(Sample())}, {"valid_empty.bin", Write(ContextBinaryContents{})}, {"valid_one.bin", Write(one)}};
  for (const auto& s : seeds) {
    std::ofstream(dir / s.first, std::ios::binary) << s.second;
    EXPECT_EQ(fs::file_size(dir / s.first), s.second.size());
  }
}

}  // namespace
}  // namespace aotcpu
}  // namespace epctx
