// Text ops: StringNormalizer (stopword removal and case change), TfIdfVectorizer (n-gram counting with skips),
// StringSplit-20 and RegexFullMatch-20 (StringConcat-20 is a broadcasting binary op in elementwise_binary.cc).
// Case changes cover ASCII and the simple one-to-one mappings of Latin-1, Latin Extended-A, Greek and Cyrillic in
// UTF-8; other code points and invalid UTF-8 bytes pass through unchanged. The `locale` attribute is not used.
#include <algorithm>
#include <memory>
#include <regex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "providers/cpu/kernel.h"

namespace epctx {
namespace {

// ---------------------------------------------------------------------------------------------------------------
// UTF-8 case mapping.

uint32_t LowerCodePoint(uint32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c < 0x80) return c;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
  if (c == 0x130) return 'i';
  if (c == 0x178) return 0xFF;
  if ((c >= 0x100 && c <= 0x137) || (c >= 0x14A && c <= 0x177)) return (c % 2 == 0) ? c + 1 : c;
  if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c % 2 == 1) ? c + 1 : c;
  if (c >= 0x391 && c <= 0x3AB && c != 0x3A2) return c + 32;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  return c;
}

uint32_t UpperCodePoint(uint32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if (c < 0x80) return c;
  if (c >= 0xE0 && c <= 0xFE && c != 0xF7) return c - 32;
  if (c == 0xFF) return 0x178;
  if (c == 0x131) return 'I';
  if (c == 0x17F) return 'S';
  if ((c >= 0x100 && c <= 0x137) || (c >= 0x14A && c <= 0x177)) return (c % 2 == 1) ? c - 1 : c;
  if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c % 2 == 0) ? c - 1 : c;
  if (c == 0x3C2) return 0x3A3;  // final sigma
  if (c >= 0x3B1 && c <= 0x3CB) return c - 32;
  if (c >= 0x430 && c <= 0x44F) return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  return c;
}

// Decodes one well-formed UTF-8 sequence at s[i]; false for malformed, overlong or surrogate sequences.
bool DecodeUtf8(std::string_view s, size_t i, uint32_t* cp, size_t* len) {
  const unsigned char c0 = static_cast<unsigned char>(s[i]);
  size_t n;
  uint32_t v, min;
  if (c0 >= 0xC2 && c0 <= 0xDF) n = 2, v = c0 & 0x1F, min = 0x80;
  else if (c0 >= 0xE0 && c0 <= 0xEF) n = 3, v = c0 & 0x0F, min = 0x800;
  else if (c0 >= 0xF0 && c0 <= 0xF4) n = 4, v = c0 & 0x07, min = 0x10000;
  else return false;
  if (i + n > s.size()) return false;
  for (size_t k = 1; k < n; ++k) {
    const unsigned char ck = static_cast<unsigned char>(s[i + k]);
    if ((ck & 0xC0) != 0x80) return false;
    v = (v << 6) | (ck & 0x3F);
  }
  if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return false;
  *cp = v;
  *len = n;
  return true;
}

void EncodeUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string ChangeCase(std::string_view s, bool upper) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c0 = static_cast<unsigned char>(s[i]);
    if (c0 < 0x80) {
      out.push_back(static_cast<char>(upper ? UpperCodePoint(c0) : LowerCodePoint(c0)));
      ++i;
      continue;
    }
    uint32_t cp;
    size_t len;
    if (!DecodeUtf8(s, i, &cp, &len)) {
      out.push_back(s[i]);
      ++i;
      continue;
    }
    EncodeUtf8(upper ? UpperCodePoint(cp) : LowerCodePoint(cp), &out);
    i += len;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// StringNormalizer

enum class CaseAction { kNone, kLower, kUpper };

class StringNormalizerKernel final : public OpKernel {
 public:
  StringNormalizerKernel(CaseAction action, bool case_sensitive, const std::vector<std::string>& stopwords)
      : action_(action), case_sensitive_(case_sensitive) {
    for (const std::string& w : stopwords) stopwords_.insert(case_sensitive ? w : ChangeCase(w, false));
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    if (!x) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input is missing");
    if (x->dtype() != DataType::kString)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input must be a string tensor, got ", DataTypeName(x->dtype()));
    if (!(x->rank() == 1 || (x->rank() == 2 && x->dim(0) == 1)))
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input must have shape [C] or [1, C], got ",
                       ShapeToString(x->shape()));
    const std::string* in = x->data<std::string>();
    std::vector<std::string> kept;
    for (int64_t i = 0; i < x->NumElements(); ++i) {
      if (!stopwords_.empty()) {
        const bool stop = case_sensitive_ ? stopwords_.count(in[i]) > 0 : stopwords_.count(ChangeCase(in[i], false)) > 0;
        if (stop) continue;
      }
      switch (action_) {
        case CaseAction::kNone: kept.push_back(in[i]); break;
        case CaseAction::kLower: kept.push_back(ChangeCase(in[i], false)); break;
        case CaseAction::kUpper: kept.push_back(ChangeCase(in[i], true)); break;
      }
    }
    // Everything removed: one empty string, keeping the rank.
    if (kept.empty()) kept.emplace_back();
    const int64_t c = static_cast<int64_t>(kept.size());
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, DataType::kString, x->rank() == 1 ? Shape{c} : Shape{1, c}));
    std::move(kept.begin(), kept.end(), y->data<std::string>());
    return Status::OK();
  }

 private:
  CaseAction action_;
  bool case_sensitive_;
  std::unordered_set<std::string> stopwords_;  // lower-cased when !case_sensitive_
};

StatusOr<std::unique_ptr<OpKernel>> MakeStringNormalizer(const KernelInfo& info) {
  const std::string action = info.GetString("case_change_action", "NONE");
  CaseAction a;
  if (action == "NONE") a = CaseAction::kNone;
  else if (action == "LOWER") a = CaseAction::kLower;
  else if (action == "UPPER") a = CaseAction::kUpper;
  else return info.Error(ErrorCode::INVALID_GRAPH, "case_change_action '", action, "' is not NONE, LOWER or UPPER");
  return std::unique_ptr<OpKernel>(
      new StringNormalizerKernel(a, info.GetInt("is_case_sensitive", 0) != 0, info.GetStrings("stopwords")));
}

// ---------------------------------------------------------------------------------------------------------------
// TfIdfVectorizer

template <typename K>
struct GramHash {
  size_t operator()(const std::vector<K>& v) const {
    size_t h = v.size();
    for (const K& e : v) h ^= std::hash<K>{}(e) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h;
  }
};
// n-gram -> its index among the pool's n-grams.
template <typename K>
using GramMap = std::unordered_map<std::vector<K>, int64_t, GramHash<K>>;

enum class TfIdfMode { kTf, kIdf, kTfIdf };

struct TfIdfConfig {
  TfIdfMode mode = TfIdfMode::kTf;
  int64_t min_gram = 1, max_gram = 1, max_skip = 0;
  int64_t output_size = 0;
  std::vector<int64_t> ngram_indexes;
  std::vector<float> weights;  // empty = all ones
  bool strings = false;
};

class TfIdfKernel final : public OpKernel {
 public:
  TfIdfKernel(TfIdfConfig cfg, std::vector<std::string> pool_strings) : cfg_(std::move(cfg)),
                                                                         pool_strings_(std::move(pool_strings)) {}

  // Index n of the maps holds the n-grams (n = 1..max level); built once by the factory.
  std::vector<GramMap<int64_t>> int_maps;
  std::vector<GramMap<std::string_view>> str_maps;  // views into pool_strings_
  const std::vector<std::string>& pool_strings() const { return pool_strings_; }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    if (!x) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input is missing");
    if (x->rank() != 1 && x->rank() != 2)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input must be [C] or [N, C], got ", ShapeToString(x->shape()));
    const bool is_string = x->dtype() == DataType::kString;
    if (is_string != cfg_.strings || (!is_string && x->dtype() != DataType::kInt32 && x->dtype() != DataType::kInt64))
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input type ", DataTypeName(x->dtype()), " does not match ",
                       cfg_.strings ? "pool_strings (needs string)" : "pool_int64s (needs int32 or int64)");
    const int64_t rows = x->rank() == 1 ? 1 : x->dim(0);
    const int64_t cols = x->rank() == 1 ? x->dim(0) : x->dim(1);
    const Shape out_shape = x->rank() == 1 ? Shape{cfg_.output_size} : Shape{rows, cfg_.output_size};
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, DataType::kFloat, out_shape));
    float* out = y->data<float>();
    const double cost = static_cast<double>(cols * (cfg_.max_skip + 1) * cfg_.max_gram * cfg_.max_gram * 20);
    ParallelFor(ctx.num_threads(), rows, cost, [&](int64_t begin, int64_t end) {
      std::vector<int64_t> counts(cfg_.ngram_indexes.size());
      std::vector<int64_t> int_row;
      std::vector<std::string_view> str_row;
      for (int64_t r = begin; r < end; ++r) {
        std::fill(counts.begin(), counts.end(), 0);
        if (is_string) {
          const std::string* in = x->data<std::string>() + r * cols;
          str_row.assign(in, in + cols);
          CountRow(str_row, str_maps, counts.data());
        } else {
          int_row.resize(static_cast<size_t>(cols));
          if (x->dtype() == DataType::kInt32) {
            const int32_t* in = x->data<int32_t>() + r * cols;
            for (int64_t c = 0; c < cols; ++c) int_row[c] = in[c];
          } else {
            std::copy_n(x->data<int64_t>() + r * cols, cols, int_row.begin());
          }
          CountRow(int_row, int_maps, counts.data());
        }
        float* dst = out + r * cfg_.output_size;
        for (size_t i = 0; i < counts.size(); ++i) {
          if (counts[i] == 0) continue;
          const float w = cfg_.weights.empty() ? 1.f : cfg_.weights[i];
          float v = static_cast<float>(counts[i]);
          if (cfg_.mode == TfIdfMode::kIdf) v = w;
          else if (cfg_.mode == TfIdfMode::kTfIdf) v *= w;
          dst[cfg_.ngram_indexes[i]] += v;
        }
      }
    });
    return Status::OK();
  }

 private:
  // Counts the pool n-grams found in `row`: unigrams once per position, longer grams once per (start, skip).
  template <typename K>
  void CountRow(const std::vector<K>& row, const std::vector<GramMap<K>>& maps, int64_t* counts) const {
    const int64_t cols = static_cast<int64_t>(row.size());
    const int64_t max_n = std::min<int64_t>(cfg_.max_gram, static_cast<int64_t>(maps.size()) - 1);
    std::vector<K> key;
    for (int64_t start = 0; start < cols; ++start) {
      if (cfg_.min_gram <= 1 && max_n >= 1 && !maps[1].empty()) {
        key.assign(1, row[start]);
        auto it = maps[1].find(key);
        if (it != maps[1].end()) ++counts[it->second];
      }
      for (int64_t skip = 0; skip <= cfg_.max_skip; ++skip) {
        const int64_t step = skip + 1;
        if (start + step >= cols) break;  // no 2-gram fits at this or any larger skip
        for (int64_t n = std::max<int64_t>(2, cfg_.min_gram); n <= max_n; ++n) {
          if (start + (n - 1) * step >= cols) break;
          if (maps[n].empty()) continue;
          key.clear();
          for (int64_t k = 0; k < n; ++k) key.push_back(row[start + k * step]);
          auto it = maps[n].find(key);
          if (it != maps[n].end()) ++counts[it->second];
        }
      }
    }
  }

  TfIdfConfig cfg_;
  std::vector<std::string> pool_strings_;
};

StatusOr<std::unique_ptr<OpKernel>> MakeTfIdf(const KernelInfo& info) {
  TfIdfConfig cfg;
  ASSIGN_OR_RETURN(cfg.min_gram, info.RequireInt("min_gram_length"));
  ASSIGN_OR_RETURN(cfg.max_gram, info.RequireInt("max_gram_length"));
  ASSIGN_OR_RETURN(cfg.max_skip, info.RequireInt("max_skip_count"));
  if (cfg.min_gram < 1 || cfg.max_gram < cfg.min_gram)
    return info.Error(ErrorCode::INVALID_GRAPH, "gram lengths must satisfy 1 <= min_gram_length (", cfg.min_gram,
                      ") <= max_gram_length (", cfg.max_gram, ")");
  if (cfg.max_skip < 0)
    return info.Error(ErrorCode::INVALID_GRAPH, "max_skip_count must be >= 0, got ", cfg.max_skip);
  const std::string mode = info.GetString("mode", "");
  if (mode == "TF") cfg.mode = TfIdfMode::kTf;
  else if (mode == "IDF") cfg.mode = TfIdfMode::kIdf;
  else if (mode == "TFIDF") cfg.mode = TfIdfMode::kTfIdf;
  else return info.Error(ErrorCode::INVALID_GRAPH, "mode '", mode, "' is not TF, IDF or TFIDF");

  const std::vector<int64_t> pool_ints = info.GetInts("pool_int64s");
  std::vector<std::string> pool_strings = info.GetStrings("pool_strings");
  const bool has_ints = info.HasAttr("pool_int64s"), has_strings = info.HasAttr("pool_strings");
  if (has_ints == has_strings)
    return info.Error(ErrorCode::INVALID_GRAPH, "exactly one of pool_int64s and pool_strings must be set");
  cfg.strings = has_strings;
  const int64_t pool_size = static_cast<int64_t>(has_strings ? pool_strings.size() : pool_ints.size());
  const std::vector<int64_t> counts = info.GetInts("ngram_counts");
  cfg.ngram_indexes = info.GetInts("ngram_indexes");
  cfg.weights = info.GetFloats("weights");

  // Walk the pool level by level (level l holds (l+1)-grams) and number its n-grams in order.
  std::vector<std::pair<int64_t, int64_t>> grams;  // (pool offset, n)
  for (size_t l = 0; l < counts.size(); ++l) {
    const int64_t n = static_cast<int64_t>(l) + 1;
    const int64_t begin = counts[l];
    const int64_t end = l + 1 < counts.size() ? counts[l + 1] : pool_size;
    if (begin < 0 || begin > end || end > pool_size)
      return info.Error(ErrorCode::INVALID_GRAPH, "ngram_counts[", l, "] = ", begin,
                        " is not a non-decreasing offset into the pool of ", pool_size, " items");
    if ((end - begin) % n != 0)
      return info.Error(ErrorCode::INVALID_GRAPH, "the ", n, "-gram section of the pool has ", end - begin,
                        " items, not a multiple of ", n);
    for (int64_t o = begin; o < end; o += n) grams.emplace_back(o, n);
  }
  if (grams.size() != cfg.ngram_indexes.size())
    return info.Error(ErrorCode::INVALID_GRAPH, "ngram_indexes has ", cfg.ngram_indexes.size(),
                      " entries but the pool holds ", grams.size(), " n-grams");
  if (!cfg.weights.empty() && cfg.weights.size() != cfg.ngram_indexes.size())
    return info.Error(ErrorCode::INVALID_GRAPH, "weights has ", cfg.weights.size(), " entries, expected ",
                      cfg.ngram_indexes.size());
  for (int64_t v : cfg.ngram_indexes) {
    if (v < 0 || v >= (int64_t{1} << 40))
      return info.Error(ErrorCode::INVALID_GRAPH, "ngram_indexes value ", v, " is out of range");
    cfg.output_size = std::max(cfg.output_size, v + 1);
  }

  const size_t levels = counts.size() + 1;
  auto kernel = std::make_unique<TfIdfKernel>(cfg, std::move(pool_strings));
  if (has_strings) kernel->str_maps.resize(levels);
  else kernel->int_maps.resize(levels);
  const std::vector<std::string>& strs = kernel->pool_strings();
  for (size_t i = 0; i < grams.size(); ++i) {
    const auto [offset, n] = grams[i];
    if (has_strings) {
      std::vector<std::string_view> key(strs.begin() + offset, strs.begin() + offset + n);
      kernel->str_maps[n].emplace(std::move(key), static_cast<int64_t>(i));
    } else {
      std::vector<int64_t> key(pool_ints.begin() + offset, pool_ints.begin() + offset + n);
      kernel->int_maps[n].emplace(std::move(key), static_cast<int64_t>(i));
    }
  }
  return std::unique_ptr<OpKernel>(std::move(kernel));
}

// StringSplit-20, as ONNX Runtime 1.30 runs it: Python's str.split per element, except that an empty string has no
// substrings and an empty delimiter splits at runs of spaces only (leading and trailing ones ignored); maxsplit
// bounds the number of splits. Y is X's shape plus the largest piece count,
// padded with empty strings; Z holds each element's count.
StatusOr<std::unique_ptr<OpKernel>> MakeStringSplit(const KernelInfo& info) {
  const std::string delim = info.GetString("delimiter", "");
  const bool has_max = info.HasAttr("maxsplit");
  const int64_t maxsplit = info.GetInt("maxsplit", -1);
  return LambdaKernel([=](KernelContext& ctx) -> Status {
    const Tensor* x = ctx.Input(0);
    if (!x || x->dtype() != DataType::kString)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input X must be a string tensor");
    const int64_t n = x->NumElements();
    const std::string* xs = x->data<std::string>();
    const bool limited = has_max && maxsplit >= 0;
    std::vector<std::vector<std::string>> parts(static_cast<size_t>(n));
    size_t widest = 0;
    for (int64_t i = 0; i < n; ++i) {
      const std::string& s = xs[i];
      std::vector<std::string>& out = parts[i];
      int64_t splits = 0;
      if (s.empty()) {
        // An empty string has no substrings (ONNX Runtime 1.30), whatever the delimiter.
      } else if (delim.empty()) {
        size_t p = 0;
        auto ws = [](char c) { return c == ' '; };  // as ONNX Runtime 1.30: spaces only, not tabs or newlines
        while (p < s.size()) {
          while (p < s.size() && ws(s[p])) ++p;
          if (p >= s.size()) break;
          if (limited && splits >= maxsplit) {
            size_t e = s.size();
            while (e > p && ws(s[e - 1])) --e;
            out.push_back(s.substr(p, e - p));
            break;
          }
          size_t q = p;
          while (q < s.size() && !ws(s[q])) ++q;
          out.push_back(s.substr(p, q - p));
          ++splits;
          p = q;
        }
      } else {
        size_t p = 0;
        for (;;) {
          const size_t q = (limited && splits >= maxsplit) ? std::string::npos : s.find(delim, p);
          if (q == std::string::npos) {
            out.push_back(s.substr(p));
            break;
          }
          out.push_back(s.substr(p, q - p));
          ++splits;
          p = q + delim.size();
        }
      }
      widest = std::max(widest, out.size());
    }
    Shape ys = x->shape();
    ys.push_back(static_cast<int64_t>(widest));
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, DataType::kString, ys));
    ASSIGN_OR_RETURN(Tensor * z, ctx.Output(1, DataType::kInt64, x->shape()));
    std::string* yp = y->data<std::string>();
    int64_t* zp = z->data<int64_t>();
    for (int64_t i = 0; i < n; ++i) {
      zp[i] = static_cast<int64_t>(parts[i].size());
      for (size_t k = 0; k < parts[i].size(); ++k) yp[i * widest + k] = std::move(parts[i][k]);
    }
    return Status::OK();
  })(info);
}

// RegexFullMatch-20: whether each string matches `pattern` in full. ONNX names RE2 syntax; this kernel uses
// std::regex (ECMAScript), which agrees with RE2 on the common subset; a pattern it cannot parse is refused at
// session creation (NOT_IMPLEMENTED naming the pattern).
StatusOr<std::unique_ptr<OpKernel>> MakeRegexFullMatch(const KernelInfo& info) {
  const std::string pattern = info.GetString("pattern", "");
  std::shared_ptr<const std::regex> re;
  try {
    re = std::make_shared<std::regex>(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    return info.Error(ErrorCode::NOT_IMPLEMENTED, "pattern '", pattern, "' is not supported: ", e.what());
  }
  return LambdaKernel([re](KernelContext& ctx) -> Status {
    const Tensor* x = ctx.Input(0);
    if (!x || x->dtype() != DataType::kString)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input X must be a string tensor");
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, DataType::kBool, x->shape()));
    const std::string* xs = x->data<std::string>();
    // std::regex reports resource exhaustion by throwing; it becomes a Status here (no exception leaves).
    try {
      for (int64_t i = 0; i < x->NumElements(); ++i) y->data<bool>()[i] = std::regex_match(xs[i], *re);
    } catch (const std::regex_error& e) {
      return ctx.Error(ErrorCode::RUNTIME_EXCEPTION, "matching failed: ", e.what());
    }
    return Status::OK();
  })(info);
}

}  // namespace

void RegisterExtraTextKernels(KernelRegistry& r) {
  r.Register("", "StringSplit", MakeStringSplit, 20);
  r.Register("", "RegexFullMatch", MakeRegexFullMatch, 20);
  r.Register("", "StringNormalizer", MakeStringNormalizer);
  r.Register("", "TfIdfVectorizer", MakeTfIdf);
}

}  // namespace epctx
