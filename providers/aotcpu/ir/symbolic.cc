#include "providers/aotcpu/ir/symbolic.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <set>

namespace epctx {
namespace aotcpu {
namespace {

constexpr size_t kMaxElems = 64;   // larger integer tensors are data, not shape values
constexpr size_t kMaxRank = 64;

bool AddOv(int64_t a, int64_t b, int64_t* r) { return __builtin_add_overflow(a, b, r); }
bool SubOv(int64_t a, int64_t b, int64_t* r) { return __builtin_sub_overflow(a, b, r); }
bool MulOv(int64_t a, int64_t b, int64_t* r) { return __builtin_mul_overflow(a, b, r); }

int64_t FloorDivI(int64_t a, int64_t b) {  // b != 0, not (INT64_MIN, -1)
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t CeilDivI(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) == (b < 0))) ++q;
  return q;
}

// One binary op on constants; false (with why) when it cannot be evaluated.
bool Apply(DimOp op, int64_t x, int64_t y, int64_t* r, std::string* why) {
  switch (op) {
    case DimOp::kAdd: if (AddOv(x, y, r)) return *why = "int64 overflow in +", false; return true;
    case DimOp::kSub: if (SubOv(x, y, r)) return *why = "int64 overflow in -", false; return true;
    case DimOp::kMul: if (MulOv(x, y, r)) return *why = "int64 overflow in *", false; return true;
    case DimOp::kFloorDiv:
    case DimOp::kCeilDiv:
      if (y == 0) return *why = "division by zero", false;
      if (x == std::numeric_limits<int64_t>::min() && y == -1) return *why = "int64 overflow in /", false;
      *r = op == DimOp::kFloorDiv ? FloorDivI(x, y) : CeilDivI(x, y);
      return true;
    case DimOp::kMin: *r = std::min(x, y); return true;
    case DimOp::kMax: *r = std::max(x, y); return true;
    case DimOp::kBcast:
      if (x == y || y == 1) *r = x;
      else if (x == 1) *r = y;
      else return *why = "dims " + std::to_string(x) + " and " + std::to_string(y) + " do not broadcast", false;
      return true;
    default:
      return *why = "bad expression", false;
  }
}

const char* OpName(DimOp op) {
  switch (op) {
    case DimOp::kAdd: return " + ";
    case DimOp::kSub: return " - ";
    case DimOp::kMul: return " * ";
    case DimOp::kFloorDiv: return " // ";
    case DimOp::kCeilDiv: return "ceildiv";
    case DimOp::kMin: return "min";
    case DimOp::kMax: return "max";
    case DimOp::kBcast: return "bcast";
    default: return "?";
  }
}

}  // namespace

// ---- DimTable ---------------------------------------------------------------------------------------------------

DimTable::DimTable() {}

DimId DimTable::Make(DimOp op, int64_t c, DimId a, DimId b) {
  const auto key = std::make_tuple(static_cast<int>(op), c, a, b);
  auto it = interned_.find(key);
  if (it != interned_.end()) return it->second;
  DimNode n;
  n.op = op;
  n.c = c;
  n.a = a;
  n.b = b;
  const DimId id = static_cast<DimId>(nodes_.size());
  nodes_.push_back(n);
  interned_.emplace(key, id);
  return id;
}

DimId DimTable::Const(int64_t c) { return Make(DimOp::kConst, c, kNoDim, kNoDim); }

DimId DimTable::Sym(const std::string& name) {
  auto it = std::find(symbols_.begin(), symbols_.end(), name);
  int64_t index = it - symbols_.begin();
  if (it == symbols_.end()) symbols_.push_back(name);
  return Make(DimOp::kSym, index, kNoDim, kNoDim);
}

bool DimTable::IsConst(DimId id, int64_t* c) const {
  if (id < 0 || static_cast<size_t>(id) >= nodes_.size() || node(id).op != DimOp::kConst) return false;
  if (c) *c = node(id).c;
  return true;
}

const std::string& DimTable::SymbolName(DimId id) const {
  static const std::string none;
  if (id < 0 || static_cast<size_t>(id) >= nodes_.size() || node(id).op != DimOp::kSym) return none;
  return symbols_[static_cast<size_t>(node(id).c)];
}

DimId DimTable::Comm(DimOp op, DimId a, DimId b) {
  // Constant second; otherwise the smaller id first.
  if (IsConst(a) && !IsConst(b)) std::swap(a, b);
  else if (!IsConst(a) && !IsConst(b) && b < a) std::swap(a, b);
  return Make(op, 0, a, b);
}

DimId DimTable::Add(DimId a, DimId b) {
  int64_t x = 0, y = 0, r = 0;
  const bool ca = IsConst(a, &x), cb = IsConst(b, &y);
  if (ca && cb && !AddOv(x, y, &r)) return Const(r);
  if (ca && x == 0) return b;
  if (cb && y == 0) return a;
  if (ca && !cb) std::swap(a, b), std::swap(x, y);
  const bool c2 = IsConst(b, &y);
  // (u + c1) + c2 -> u + (c1 + c2); (u + c) + v -> (u + v) + c: constants gather at the top.
  if (c2 && node(a).op == DimOp::kAdd && IsConst(node(a).b, &x) && !AddOv(x, y, &r))
    return Add(node(a).a, Const(r));
  if (!c2) {
    if (node(a).op == DimOp::kAdd && IsConst(node(a).b, &x)) return Add(Add(node(a).a, b), node(a).b);
    if (node(b).op == DimOp::kAdd && IsConst(node(b).b, &y)) return Add(Add(a, node(b).a), node(b).b);
  }
  return Comm(DimOp::kAdd, a, b);
}

DimId DimTable::Sub(DimId a, DimId b) {
  int64_t x = 0, y = 0, r = 0;
  if (a == b) return Const(0);
  const bool ca = IsConst(a, &x), cb = IsConst(b, &y);
  if (ca && cb && !SubOv(x, y, &r)) return Const(r);
  if (cb && y != std::numeric_limits<int64_t>::min()) return Add(a, Const(-y));
  if (node(a).op == DimOp::kAdd) {  // (u + v) - u -> v
    if (node(a).a == b) return node(a).b;
    if (node(a).b == b) return node(a).a;
  }
  // (u + c1) - (v + c2) -> (u - v) + (c1 - c2); (u + c) - v -> (u - v) + c; u - (v + c) -> (u - v) - c
  const bool ka = node(a).op == DimOp::kAdd && IsConst(node(a).b, &x);
  const bool kb = node(b).op == DimOp::kAdd && IsConst(node(b).b, &y);
  if (ka && kb && !SubOv(x, y, &r)) return Add(Sub(node(a).a, node(b).a), Const(r));
  if (ka && !kb) return Add(Sub(node(a).a, b), node(a).b);
  if (kb && !ka && y != std::numeric_limits<int64_t>::min()) return Add(Sub(a, node(b).a), Const(-y));
  return Make(DimOp::kSub, 0, a, b);
}

DimId DimTable::Mul(DimId a, DimId b) {
  int64_t x = 0, y = 0, r = 0;
  const bool ca = IsConst(a, &x), cb = IsConst(b, &y);
  if (ca && cb && !MulOv(x, y, &r)) return Const(r);
  if (ca && !cb) std::swap(a, b), std::swap(x, y);
  if (IsConst(b, &y)) {
    if (y == 1) return a;
    if (y == 0 && !IsConst(a)) return Const(0);
    if (node(a).op == DimOp::kMul && IsConst(node(a).b, &x) && !MulOv(x, y, &r)) return Mul(node(a).a, Const(r));
  } else {
    if (node(a).op == DimOp::kMul && IsConst(node(a).b, &x)) return Mul(Mul(node(a).a, b), node(a).b);
    if (node(b).op == DimOp::kMul && IsConst(node(b).b, &y)) return Mul(Mul(a, node(b).a), node(b).b);
  }
  return Comm(DimOp::kMul, a, b);
}

DimId DimTable::FloorDiv(DimId a, DimId b) { return Div(DimOp::kFloorDiv, a, b); }
DimId DimTable::CeilDiv(DimId a, DimId b) { return Div(DimOp::kCeilDiv, a, b); }

DimId DimTable::Div(DimOp op, DimId a, DimId b) {
  int64_t x = 0, y = 0, r = 0;
  std::string why;
  const bool ca = IsConst(a, &x), cb = IsConst(b, &y);
  if (ca && cb && Apply(op, x, y, &r, &why)) return Const(r);
  if (cb && y == 1) return a;
  // (u * c1) // c2 -> u * (c1 / c2) when c2 divides c1 (c2 > 0); the same for the ceiling.
  if (cb && y > 0 && node(a).op == DimOp::kMul && IsConst(node(a).b, &x) && x % y == 0)
    return Mul(node(a).a, Const(x / y));
  return Make(op, 0, a, b);
}

DimId DimTable::Min(DimId a, DimId b) {
  int64_t x, y;
  if (a == b) return a;
  if (IsConst(a, &x) && IsConst(b, &y)) return Const(std::min(x, y));
  // min(u + c1, u + c2) and min(u, u + c) with constants.
  return Comm(DimOp::kMin, a, b);
}

DimId DimTable::Max(DimId a, DimId b) {
  int64_t x, y;
  if (a == b) return a;
  if (IsConst(a, &x) && IsConst(b, &y)) return Const(std::max(x, y));
  // max(u, 0) of a non-negative u.
  if (IsConst(b, &y) && y == 0 && NonNegative(a)) return a;
  if (IsConst(a, &x) && x == 0 && NonNegative(b)) return b;
  return Comm(DimOp::kMax, a, b);
}

DimId DimTable::Bcast(DimId a, DimId b) {
  int64_t x, y;
  if (a == b) return a;
  const bool ca = IsConst(a, &x), cb = IsConst(b, &y);
  if (cb && y == 1) return a;
  if (ca && x == 1) return b;
  return Comm(DimOp::kBcast, a, b);  // constants that do not broadcast stay: evaluating them fails with the reason
}

bool DimTable::NonNegative(DimId id) const {
  if (id < 0 || static_cast<size_t>(id) >= nodes_.size()) return false;
  // Children have smaller ids; a short iterative walk with a depth cap keeps hostile chains cheap.
  std::vector<DimId> stack{id};
  size_t visits = 0;
  while (!stack.empty()) {
    if (++visits > 4096) return false;
    const DimNode& n = node(stack.back());
    stack.pop_back();
    switch (n.op) {
      case DimOp::kConst:
        if (n.c < 0) return false;
        break;
      case DimOp::kSym:
        break;
      case DimOp::kAdd: case DimOp::kMul: case DimOp::kFloorDiv: case DimOp::kCeilDiv: case DimOp::kMin:
      case DimOp::kBcast:
        stack.push_back(n.a);
        stack.push_back(n.b);
        break;
      case DimOp::kMax: {
        int64_t c;
        if (IsConst(n.b, &c) && c >= 0) break;  // max(u, c >= 0)
        stack.push_back(n.a);
        stack.push_back(n.b);
        break;
      }
      default:
        return false;  // kSub
    }
  }
  return true;
}

namespace {

using I128 = __int128;
constexpr int64_t kBig = int64_t{1} << 62;  // |bound| >= kBig: unbounded

int64_t Clamp(I128 x) { return x >= kBig ? kBig : x <= -kBig ? -kBig : static_cast<int64_t>(x); }
bool Inf(int64_t x) { return x >= kBig || x <= -kBig; }
// a op b on bounds, where an unbounded operand gives an unbounded result of the right sign.
int64_t BMul(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  if (Inf(a) || Inf(b)) return (a > 0) == (b > 0) ? kBig : -kBig;
  return Clamp(static_cast<I128>(a) * b);
}
int64_t BDiv(int64_t a, int64_t b, bool ceil) {  // b != 0
  if (Inf(a)) return Inf(b) ? ((a > 0) == (b > 0) ? kBig : -kBig) : ((a > 0) == (b > 0) ? kBig : -kBig);
  if (Inf(b)) return a == 0 ? 0 : ceil ? ((a > 0) == (b > 0) ? 1 : 0) : ((a > 0) == (b > 0) ? 0 : -1);
  return ceil ? CeilDivI(a, b) : FloorDivI(a, b);
}

}  // namespace

void DimTable::SetRange(const std::string& symbol, int64_t lo, int64_t hi) {
  ranges_[symbol] = {lo, hi};
  bounds_.clear();
}

void DimTable::MarkDim(DimId id) {
  if (id < 0 || static_cast<size_t>(id) >= nodes_.size()) return;
  if (marked_.size() < nodes_.size()) marked_.resize(nodes_.size(), false);
  if (marked_[static_cast<size_t>(id)]) return;
  marked_[static_cast<size_t>(id)] = true;
  if (bounds_.size() > static_cast<size_t>(id)) bounds_.resize(static_cast<size_t>(id));
}

void DimTable::Bounds(DimId id, int64_t* lo, int64_t* hi) const {
  *lo = -kBig, *hi = kBig;
  if (id < 0 || static_cast<size_t>(id) >= nodes_.size()) return;
  // Children have smaller ids: fill the cache in id order up to `id`.
  for (size_t i = bounds_.size(); i <= static_cast<size_t>(id); ++i) {
    const DimNode& n = nodes_[i];
    int64_t l = -kBig, h = kBig;
    auto child = [&](DimId c) { return bounds_[static_cast<size_t>(c)]; };
    switch (n.op) {
      case DimOp::kConst:
        l = h = n.c;
        break;
      case DimOp::kSym: {
        l = 1;  // a dim is at least 1
        auto r = ranges_.find(symbols_[static_cast<size_t>(n.c)]);
        if (r != ranges_.end()) l = r->second.first, h = std::min(r->second.second, kBig);
        break;
      }
      case DimOp::kAdd: case DimOp::kSub: {
        const auto [al, ah] = child(n.a);
        const auto [bl, bh] = child(n.b);
        const bool add = n.op == DimOp::kAdd;
        const int64_t x = add ? bl : -bh, y = add ? bh : -bl;  // the second operand's contribution
        l = Inf(al) || Inf(x) ? (al <= -kBig || x <= -kBig ? -kBig : kBig) : Clamp(static_cast<I128>(al) + x);
        h = Inf(ah) || Inf(y) ? (ah >= kBig || y >= kBig ? kBig : -kBig) : Clamp(static_cast<I128>(ah) + y);
        break;
      }
      case DimOp::kMul: {
        const auto [al, ah] = child(n.a);
        const auto [bl, bh] = child(n.b);
        const int64_t c[4] = {BMul(al, bl), BMul(al, bh), BMul(ah, bl), BMul(ah, bh)};
        l = *std::min_element(c, c + 4), h = *std::max_element(c, c + 4);
        break;
      }
      case DimOp::kFloorDiv: case DimOp::kCeilDiv: {
        const auto [al, ah] = child(n.a);
        const auto [bl, bh] = child(n.b);
        if (bl > 0 || bh < 0) {  // the divisor's sign is known: the extremes are at the corners
          const bool ceil = n.op == DimOp::kCeilDiv;
          const int64_t c[4] = {BDiv(al, bl, ceil), BDiv(al, bh, ceil), BDiv(ah, bl, ceil), BDiv(ah, bh, ceil)};
          l = *std::min_element(c, c + 4), h = *std::max_element(c, c + 4);
        }
        break;
      }
      case DimOp::kMin: case DimOp::kMax: {
        const auto [al, ah] = child(n.a);
        const auto [bl, bh] = child(n.b);
        const bool mn = n.op == DimOp::kMin;
        l = mn ? std::min(al, bl) : std::max(al, bl);
        h = mn ? std::min(ah, bh) : std::max(ah, bh);
        break;
      }
      case DimOp::kBcast: {  // one of the two
        const auto [al, ah] = child(n.a);
        const auto [bl, bh] = child(n.b);
        l = std::min(al, bl), h = std::max(ah, bh);
        break;
      }
    }
    if (i < marked_.size() && marked_[i] && h >= 1) l = std::max<int64_t>(l, 1);  // a tensor's dim is at least 1
    if (l > h) l = -kBig, h = kBig;  // contradictory assumptions: claim nothing
    bounds_.emplace_back(l, h);
  }
  *lo = bounds_[static_cast<size_t>(id)].first;
  *hi = bounds_[static_cast<size_t>(id)].second;
}

DimId DimTable::ExactDiv(DimId num, DimId den) {
  // Flattens a product into its constant and its other factors (sorted ids).
  auto flatten = [&](DimId x, int64_t* c, std::vector<DimId>* f) {
    *c = 1;
    std::vector<DimId> stack{x};
    while (!stack.empty()) {
      if (f->size() > 64) return false;
      const DimId t = stack.back();
      stack.pop_back();
      int64_t k;
      if (IsConst(t, &k)) {
        if (MulOv(*c, k, c)) return false;
      } else if (node(t).op == DimOp::kMul) {
        stack.push_back(node(t).a);
        stack.push_back(node(t).b);
      } else {
        f->push_back(t);
      }
    }
    std::sort(f->begin(), f->end());
    return true;
  };
  int64_t cn = 1, cd = 1;
  std::vector<DimId> fn, fd;
  if (!flatten(num, &cn, &fn) || !flatten(den, &cd, &fd) || cd == 0 || cn % cd != 0) return kNoDim;
  std::vector<DimId> rest;
  size_t j = 0;
  for (DimId f : fn) {
    if (j < fd.size() && fd[j] == f) {
      ++j;
      continue;
    }
    rest.push_back(f);
  }
  if (j != fd.size()) return kNoDim;  // a factor of den is not in num
  DimId r = Const(cn / cd);
  for (DimId f : rest) r = Mul(r, f);
  return r;
}

std::string DimTable::Str(DimId id) const {
  if (id < 0 || static_cast<size_t>(id) >= nodes_.size()) return "?";
  std::string out;
  // Recursive with a depth cap; output cut at ~300 characters.
  struct P {
    const DimTable& t;
    std::string& s;
    void Go(DimId i, int depth) {
      if (s.size() > 300) return;
      if (depth > 24) {
        s += "...";
        return;
      }
      const DimNode& n = t.node(i);
      if (n.op == DimOp::kConst) {
        s += std::to_string(n.c);
      } else if (n.op == DimOp::kSym) {
        s += t.symbols_[static_cast<size_t>(n.c)];
      } else if (n.op == DimOp::kAdd || n.op == DimOp::kSub || n.op == DimOp::kMul || n.op == DimOp::kFloorDiv) {
        s += "(";
        Go(n.a, depth + 1);
        s += OpName(n.op);
        Go(n.b, depth + 1);
        s += ")";
      } else {
        s += OpName(n.op);
        s += "(";
        Go(n.a, depth + 1);
        s += ", ";
        Go(n.b, depth + 1);
        s += ")";
      }
    }
  } p{*this, out};
  p.Go(id, 0);
  if (out.size() > 300) out = out.substr(0, 300) + "...";
  if (out.size() > 2 && out.front() == '(' && out.back() == ')') {
    // Drop the outermost parentheses when they enclose the whole expression.
    int depth = 0;
    bool whole = true;
    for (size_t i = 0; i + 1 < out.size(); ++i) {
      depth += out[i] == '(' ? 1 : out[i] == ')' ? -1 : 0;
      if (depth == 0) whole = false;
    }
    if (whole) out = out.substr(1, out.size() - 2);
  }
  return out;
}

void DimTable::EvalAll(const std::map<std::string, int64_t>& binding, std::vector<int64_t>* values,
                       std::vector<bool>* ok, std::vector<std::string>* err) const {
  values->assign(nodes_.size(), 0);
  ok->assign(nodes_.size(), false);
  err->assign(nodes_.size(), std::string());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const DimNode& n = nodes_[i];
    if (n.op == DimOp::kConst) {
      (*values)[i] = n.c;
      (*ok)[i] = true;
    } else if (n.op == DimOp::kSym) {
      const std::string& name = symbols_[static_cast<size_t>(n.c)];
      auto it = binding.find(name);
      if (it == binding.end()) {
        (*err)[i] = "symbol '" + name + "' is not bound";
      } else if (it->second < 0) {
        (*err)[i] = "symbol '" + name + "' is bound to " + std::to_string(it->second) + " (a dim must be >= 0)";
      } else {
        (*values)[i] = it->second;
        (*ok)[i] = true;
      }
    } else {
      const size_t a = static_cast<size_t>(n.a), b = static_cast<size_t>(n.b);
      if (!(*ok)[a] || !(*ok)[b]) {
        (*err)[i] = !(*ok)[a] ? (*err)[a] : (*err)[b];
        continue;
      }
      std::string why;
      if (Apply(n.op, (*values)[a], (*values)[b], &(*values)[i], &why))
        (*ok)[i] = true;
      else
        (*err)[i] = why + " in " + Str(static_cast<DimId>(i));
    }
  }
}

std::vector<DimId> DimTable::Plan(const std::vector<DimId>& ids) const {
  std::vector<char> need(nodes_.size(), 0);
  for (DimId id : ids)
    if (id >= 0 && static_cast<size_t>(id) < nodes_.size()) need[static_cast<size_t>(id)] = 1;
  for (size_t i = nodes_.size(); i-- > 0;) {
    if (!need[i]) continue;
    const DimNode& n = nodes_[i];
    if (n.op != DimOp::kConst && n.op != DimOp::kSym) need[static_cast<size_t>(n.a)] = need[static_cast<size_t>(n.b)] = 1;
  }
  std::vector<DimId> plan;
  for (size_t i = 0; i < need.size(); ++i)
    if (need[i]) plan.push_back(static_cast<DimId>(i));
  return plan;
}

bool DimTable::EvalPlan(const std::vector<DimId>& plan, const std::vector<int64_t>& symbol_values, int64_t* values,
                        std::string* why) const {
  for (DimId id : plan) {
    const DimNode& n = nodes_[static_cast<size_t>(id)];
    int64_t& r = values[id];
    if (n.op == DimOp::kConst) {
      r = n.c;
    } else if (n.op == DimOp::kSym) {
      const size_t k = static_cast<size_t>(n.c);
      if (k >= symbol_values.size()) return *why = "symbol '" + symbols_[k] + "' is not bound", false;
      r = symbol_values[k];
      if (r < 0) return *why = "symbol '" + symbols_[k] + "' is bound to " + std::to_string(r) + " (a dim must be >= 0)", false;
    } else if (!Apply(n.op, values[n.a], values[n.b], &r, why)) {
      *why += " in " + Str(id);
      return false;
    }
  }
  return true;
}

bool DimTable::Eval(DimId id, const std::map<std::string, int64_t>& binding, int64_t* out, std::string* why) const {
  if (id < 0 || static_cast<size_t>(id) >= nodes_.size()) return *why = "no expression", false;
  // Only the sub-DAG below id: mark it, then evaluate marked ids in increasing order.
  std::vector<char> need(static_cast<size_t>(id) + 1, 0);
  need[static_cast<size_t>(id)] = 1;
  for (size_t i = static_cast<size_t>(id) + 1; i-- > 0;) {
    if (!need[i]) continue;
    const DimNode& n = nodes_[i];
    if (n.op != DimOp::kConst && n.op != DimOp::kSym) need[static_cast<size_t>(n.a)] = need[static_cast<size_t>(n.b)] = 1;
  }
  std::vector<int64_t> v(need.size(), 0);
  std::vector<std::string> err(need.size());
  std::vector<char> ok(need.size(), 0);
  for (size_t i = 0; i < need.size(); ++i) {
    if (!need[i]) continue;
    const DimNode& n = nodes_[i];
    if (n.op == DimOp::kConst) {
      v[i] = n.c;
      ok[i] = 1;
    } else if (n.op == DimOp::kSym) {
      const std::string& name = symbols_[static_cast<size_t>(n.c)];
      auto it = binding.find(name);
      if (it == binding.end()) err[i] = "symbol '" + name + "' is not bound";
      else if (it->second < 0) err[i] = "symbol '" + name + "' is bound to " + std::to_string(it->second) + " (a dim must be >= 0)";
      else v[i] = it->second, ok[i] = 1;
    } else {
      const size_t a = static_cast<size_t>(n.a), b = static_cast<size_t>(n.b);
      if (!ok[a] || !ok[b]) {
        err[i] = !ok[a] ? err[a] : err[b];
      } else {
        std::string w;
        if (Apply(n.op, v[a], v[b], &v[i], &w)) ok[i] = 1;
        else err[i] = w + " in " + Str(static_cast<DimId>(i));
      }
    }
  }
  if (!ok[static_cast<size_t>(id)]) return *why = err[static_cast<size_t>(id)], false;
  *out = v[static_cast<size_t>(id)];
  return true;
}

bool DimTable::EvalDim(DimId id, const std::map<std::string, int64_t>& binding, int64_t* out,
                       std::string* why) const {
  if (!Eval(id, binding, out, why)) return false;
  if (*out < 0) return *why = Str(id) + " = " + std::to_string(*out) + " is negative", false;
  return true;
}

// ---- inference ----------------------------------------------------------------------------------------------------

namespace {

class Infer {
 public:
  Infer(const Graph& g, SymbolicShapes* s) : g_(g), s_(*s), t_(s->table) {}

  bool Run();
  void set_runtime(bool runtime) { runtime_ = runtime; }

 private:
  using Dims = std::vector<DimId>;
  const Graph& g_;
  SymbolicShapes& s_;
  DimTable& t_;
  int node_ = -1;
  std::string why_;

  // ---- helpers ----
  bool Fail(const std::string& why) {
    if (why_.empty()) why_ = why;
    return false;
  }
  const SymValue* In(const Node& n, size_t i) const {
    if (i >= n.inputs.size() || n.inputs[i] < 0) return nullptr;
    return &s_.values[static_cast<size_t>(n.inputs[i])];
  }
  bool Present(const Node& n, size_t i) const { return i < n.inputs.size() && n.inputs[i] >= 0; }
  // Dims of input i, failing (with a reason) when it is absent or unknown.
  bool InDims(const Node& n, size_t i, Dims* d) {
    const SymValue* v = In(n, i);
    if (!v) return Fail("input " + std::to_string(i) + " is absent");
    if (!v->known) return Fail("the shape of input '" + g_.v(n.inputs[i]).name + "' is unknown");
    *d = v->dims;
    return true;
  }
  // Elements of input i as expressions (a shape value or an integer constant).
  bool InElems(const Node& n, size_t i, Dims* e, const char* what) {
    const SymValue* v = In(n, i);
    if (v && !v->has_elems && runtime_ && DataElems(n.inputs[i], e)) return true;
    if (!v || !v->has_elems)
      return Fail(std::string(what) + " (input " + std::to_string(i) + ") is neither constant nor computed from shapes");
    *e = v->elems;
    return true;
  }
  // Elements of input i as constants.
  bool InConsts(const Node& n, size_t i, std::vector<int64_t>* c, const char* what) {
    Dims e;
    if (!InElems(n, i, &e, what)) return false;
    c->clear();
    for (DimId d : e) {
      int64_t x;
      if (!t_.IsConst(d, &x)) return Fail(std::string(what) + " is not constant");
      c->push_back(x);
    }
    return true;
  }
  bool NormAxis(int64_t a, size_t rank, size_t* out) {
    const int64_t r = static_cast<int64_t>(rank);
    if (a < -r || a >= r) return Fail("axis " + std::to_string(a) + " out of range for rank " + std::to_string(rank));
    *out = static_cast<size_t>(a < 0 ? a + r : a);
    return true;
  }
  void Check(DimId a, DimId b, const std::string& what) {
    if (a == b) return;
    int64_t x, y;
    if (t_.IsConst(a, &x) && t_.IsConst(b, &y) && x == y) return;
    SymCheck c;
    c.node = node_;
    c.a = a;
    c.b = b;
    c.what = what;
    s_.checks.push_back(c);
  }
  // True when `x` >= `min` for every binding (NonNegative for min 0), or under the bounds (DimTable::Bounds: dims >= 1,
  // shape_ranges), then with a check that it holds: a binding where it does not is refused by Bind.
  bool AtLeast(DimId x, int64_t min, const std::string& what) {
    int64_t c;
    if (t_.IsConst(x, &c)) return c >= min;
    if (min == 0 && t_.NonNegative(x)) return true;
    int64_t lo, hi;
    t_.Bounds(x, &lo, &hi);
    if (lo < min) return false;
    Check(t_.Max(x, t_.Const(min)), x, what + " is at least " + std::to_string(min));
    return true;
  }
  // Provably different constants: an inconsistency now, not at Bind.
  bool ConstMismatch(DimId a, DimId b) const {
    int64_t x, y;
    return t_.IsConst(a, &x) && t_.IsConst(b, &y) && x != y;
  }
  DimId Prod(const Dims& d, size_t from, size_t to) {
    DimId p = t_.Const(1);
    for (size_t i = from; i < to && i < d.size(); ++i) p = t_.Mul(p, d[i]);
    return p;
  }
  bool ConstNumel(const Dims& d, size_t* n) {
    int64_t total = 1;
    for (DimId x : d) {
      int64_t c;
      if (!t_.IsConst(x, &c) || c < 0 || MulOv(total, c, &total)) return false;
    }
    *n = static_cast<size_t>(total);
    return true;
  }
  SymValue& Out(const Node& n, size_t i) { return s_.values[static_cast<size_t>(n.outputs[i])]; }
  bool HasOut(const Node& n, size_t i) const { return i < n.outputs.size() && n.outputs[i] >= 0; }
  // Output 0 of a Squeeze/Reshape with dims `out`: a shape value (rank <= 1) keeps its elements.
  bool SetReshaped(const Node& n, const Dims& out) {
    const SymValue* x = In(n, 0);
    if (x->has_elems && out.size() <= 1) {
      SetElems(n, 0, x->elems, out.empty());
      Out(n, 0).dims = out;
      return true;
    }
    return SetDims(n, 0, out);
  }
  bool SetDims(const Node& n, size_t i, Dims d) {
    if (!HasOut(n, i)) return true;
    if (d.size() > kMaxRank) return Fail("rank above " + std::to_string(kMaxRank));
    SymValue& o = Out(n, i);
    o.known = true;
    o.dims = std::move(d);
    return true;
  }
  // Sets output i as a shape value with elements `e` and dims (scalar when `scalar`).
  bool SetElems(const Node& n, size_t i, Dims e, bool scalar) {
    if (!HasOut(n, i)) return true;
    const Value& v = g_.v(n.outputs[i]);
    if (v.dtype != 0 && v.dtype != kI64 && v.dtype != kI32 && v.dtype != kBool) return SetDims(n, i, scalar ? Dims{} : Dims{t_.Const(static_cast<int64_t>(e.size()))});
    SymValue& o = Out(n, i);
    o.known = true;
    o.dims = scalar ? Dims{} : Dims{t_.Const(static_cast<int64_t>(e.size()))};
    if (e.size() <= kMaxElems) {
      o.has_elems = true;
      o.elems = std::move(e);
    }
    return true;
  }
  bool IsShapeValue(const Node& n, size_t i) const {
    const SymValue* v = In(n, i);
    return v && v->has_elems;
  }
  // Broadcast of several shapes (numpy).
  bool Broadcast(const std::vector<Dims>& shapes, Dims* out) {
    size_t rank = 0;
    for (const Dims& s : shapes) rank = std::max(rank, s.size());
    out->assign(rank, t_.Const(1));
    for (const Dims& s : shapes) {
      const size_t off = rank - s.size();
      for (size_t i = 0; i < s.size(); ++i) {
        DimId& o = (*out)[off + i];
        int64_t x, y;
        if (t_.IsConst(o, &x) && t_.IsConst(s[i], &y) && x != y && x != 1 && y != 1)
          return Fail("dims " + std::to_string(x) + " and " + std::to_string(y) + " do not broadcast");
        o = t_.Bcast(o, s[i]);
      }
    }
    return true;
  }
  const Value& OutValue(const Node& n, size_t i) const { return g_.v(n.outputs[i]); }

  // ---- rules ----
  bool Node1(const Node& n);
  bool Elementwise(const Node& n);
  bool ShapeArith(const Node& n);
  bool ShapeSelect(const Node& n);
  bool ShapeOp(const Node& n);
  bool Constant(const Node& n);
  bool Gather(const Node& n);
  bool Slice(const Node& n);
  bool Concat(const Node& n);
  bool SqueezeOp(const Node& n, bool unsqueeze);
  bool Reshape(const Node& n);
  bool Flatten(const Node& n);
  bool Transpose(const Node& n);
  bool MatMul(const Node& n);
  bool Gemm(const Node& n);
  bool LayerNorm(const Node& n);
  bool Range(const Node& n);
  bool Expand(const Node& n);
  bool Tile(const Node& n);
  bool ConstantOfShape(const Node& n);
  bool Quantize(const Node& n);
  bool ConvPool(const Node& n);
  bool GlobalPool(const Node& n);
  bool Reduce(const Node& n);
  bool Split(const Node& n);
  bool Pad(const Node& n);
  bool Resize(const Node& n);
  // Issue 27 item 3: ops whose output sizes or values depend on data.
  bool runtime_ = false;                 // InferSymbolicRuntime: data-dependent sizes become run-time symbols
  std::map<int, Dims> data_elems_;       // value -> its elements as run-time symbols (DataElems)
  bool DataElems(int vi, Dims* e);
  DimId RuntimeSym(const std::string& name, int node, int value, size_t elem);
  bool DataDependent(const Node& n);
  bool RangeRuntime(const Node& n);
  bool PadRuntime(const Node& n);
  bool PadDims(const Node& n, const Dims& d, const Dims& pads, std::vector<int64_t> axes);
  bool SliceRuntime(const Node& n);
  bool ReshapeRuntime(const Node& n);

  void InitValue(int vi);
  void Agree(const Node& n);
};

void Infer::InitValue(int vi) {
  const Value& v = g_.v(vi);
  SymValue& s = s_.values[static_cast<size_t>(vi)];
  if (v.is_initializer || (v.is_const() && v.producer < 0)) {
    if (!v.has_shape || v.dims.size() > kMaxRank) return;
    s.known = true;
    for (int64_t d : v.dims) s.dims.push_back(t_.Const(d));
    std::vector<int64_t> ints;
    if (v.dims.size() <= 1 && (v.dtype == kI64 || v.dtype == kI32) && v.numel() >= 0 &&
        static_cast<size_t>(v.numel()) <= kMaxElems && g_.ConstInts(vi, &ints)) {
      s.has_elems = true;
      for (int64_t x : ints) s.elems.push_back(t_.Const(x));
    }
    return;
  }
  if (v.is_graph_input || v.producer < 0) {
    if (!v.is_graph_input) return;  // no producer and no input: unknown
    if (v.dims.size() > kMaxRank) return;
    if (!v.has_shape && v.dims.empty()) {
      // Rank unknown (IR keeps dims empty) unless has_shape: a scalar input has has_shape with no dims.
      return;
    }
    s.known = true;
    for (size_t i = 0; i < v.dims.size(); ++i) {
      if (v.dims[i] >= 0) {
        s.dims.push_back(t_.Const(v.dims[i]));
        continue;
      }
      std::string name = i < v.dim_symbols.size() ? v.dim_symbols[i] : "";
      if (name.empty()) name = v.name + ":" + std::to_string(i);
      s.dims.push_back(t_.Sym(name));
      if (std::find(s_.symbols.begin(), s_.symbols.end(), name) == s_.symbols.end()) s_.symbols.push_back(name);
    }
  }
}

// The runtime's static dims of the outputs must agree with the inferred ones: a different rank or constant makes the
// output unknown; a symbolic expression where the runtime has a number becomes a check.
void Infer::Agree(const Node& n) {
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    if (n.outputs[i] < 0) continue;
    SymValue& o = Out(n, i);
    if (!o.known) continue;
    const Value& v = OutValue(n, i);
    const bool rank_known = v.has_shape || !v.dims.empty();
    if (!rank_known) continue;
    if (v.dims.size() != o.dims.size()) {
      Fail("output '" + v.name + "': inferred rank " + std::to_string(o.dims.size()) + " but the runtime says " +
           std::to_string(v.dims.size()));
      o = SymValue();
      continue;
    }
    for (size_t d = 0; d < v.dims.size(); ++d) {
      if (v.dims[d] < 0) continue;
      int64_t c;
      if (t_.IsConst(o.dims[d], &c)) {
        if (c != v.dims[d]) {
          Fail("output '" + v.name + "' dim " + std::to_string(d) + ": inferred " + std::to_string(c) +
               " but the runtime says " + std::to_string(v.dims[d]));
          o = SymValue();
          break;
        }
      } else {
        Check(o.dims[d], t_.Const(v.dims[d]), "output '" + v.name + "' dim " + std::to_string(d) +
                                                   " (the runtime says " + std::to_string(v.dims[d]) + ")");
      }
    }
  }
}

bool Infer::Run() {
  s_.values.assign(g_.values.size(), SymValue());
  s_.why.assign(g_.nodes.size(), std::string());
  for (size_t i = 0; i < g_.values.size(); ++i) InitValue(static_cast<int>(i));
  for (const SymValue& v : s_.values)
    for (DimId d : v.dims) t_.MarkDim(d);
  bool all = true;
  for (size_t ni = 0; ni < g_.nodes.size(); ++ni) {
    const Node& n = g_.nodes[ni];
    node_ = static_cast<int>(ni);
    why_.clear();
    const size_t checks = s_.checks.size();
    bool ok = Node1(n);
    if (ok) {
      Agree(n);
      ok = why_.empty();
    }
    bool missing = false;
    for (size_t i = 0; i < n.outputs.size(); ++i)
      if (n.outputs[i] >= 0 && !Out(n, i).known) missing = true;
    if (ok && !missing)
      for (size_t i = 0; i < n.outputs.size(); ++i)
        if (n.outputs[i] >= 0)
          for (DimId d : Out(n, i).dims) t_.MarkDim(d);
    if (!ok || missing) {
      // Nothing half-known: every output of a failed node is unknown, its checks dropped.
      for (size_t i = 0; i < n.outputs.size(); ++i)
        if (n.outputs[i] >= 0) Out(n, i) = SymValue();
      s_.checks.resize(checks);
      s_.why[ni] = why_.empty() ? "no shape for an output" : why_;
      all = false;
    }
  }
  for (size_t i = 0; i < g_.values.size(); ++i) {
    const Value& v = g_.values[i];
    if (!s_.values[i].known && (v.producer >= 0 || !v.consumers.empty())) all = false;
  }
  std::sort(s_.symbols.begin(), s_.symbols.end());
  return all;
}

bool OneOf(const std::string& op, std::initializer_list<const char*> ops) {
  for (const char* o : ops)
    if (op == o) return true;
  return false;
}

bool Infer::Node1(const Node& n) {
  if (!n.domain.empty() && n.domain != "ai.onnx") return Fail("domain " + n.domain + " has no shape rules");
  if (n.has_subgraphs) return Fail("has subgraphs");
  const std::string& op = n.op;
  if (op == "Shape" || op == "Size") return ShapeOp(n);
  if (op == "Constant") return Constant(n);
  if (OneOf(op, {"Relu", "LeakyRelu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Exp", "Log", "Sqrt", "Abs",
                 "Neg", "Erf", "Elu", "Selu", "Softplus", "Softsign", "Clip", "Identity", "Softmax", "LogSoftmax",
                 "Not", "Reciprocal", "Floor", "Ceil", "Round", "Sign", "Sin", "Cos", "Gelu", "Dropout",
                 "BatchNormalization", "InstanceNormalization", "LpNormalization", "Cast", "Hardmax"})) {
    Dims d;
    if (!InDims(n, 0, &d)) return false;
    const SymValue* x = In(n, 0);
    if (x->has_elems && (op == "Identity" || op == "Cast" || op == "Neg")) {
      const uint32_t to = op == "Cast" ? static_cast<uint32_t>(n.Int("to", 0)) : g_.v(n.inputs[0]).dtype;
      if (to == kI64 || to == kI32) {
        Dims e = x->elems;
        if (op == "Neg")
          for (DimId& z : e) z = t_.Sub(t_.Const(0), z);
        SetElems(n, 0, e, d.empty());
        Out(n, 0).dims = d;
        for (size_t i = 1; i < n.outputs.size(); ++i)
          if (HasOut(n, i)) return Fail("extra output");
        return true;
      }
    }
    if (op == "BatchNormalization" && n.outputs.size() > 1)
      for (size_t i = 1; i < n.outputs.size(); ++i)
        if (HasOut(n, i)) return Fail("training-mode outputs");
    if (op == "Dropout" && HasOut(n, 1)) SetDims(n, 1, d);
    return SetDims(n, 0, d);
  }
  if (OneOf(op, {"Add", "Sub", "Mul", "Div", "Pow", "Mod", "And", "Or", "Xor", "Where", "Equal", "Less", "Greater",
                 "LessOrEqual", "GreaterOrEqual", "Max", "Min", "Sum", "Mean", "PRelu"}))
    return Elementwise(n);
  if (OneOf(op, {"QuantizeLinear", "DequantizeLinear", "Trilu"})) {  // the output has input 0's shape
    Dims d;
    if (!InDims(n, 0, &d)) return false;
    return SetDims(n, 0, d);
  }
  if (op == "DynamicQuantizeLinear") {  // y like x, scalar scale and zero point
    Dims d;
    if (!InDims(n, 0, &d)) return false;
    SetDims(n, 1, {});
    SetDims(n, 2, {});
    return SetDims(n, 0, d);
  }
  if (op == "MatMulInteger") return MatMul(n);
  if (op == "Gather") return Gather(n);
  if (op == "Slice") {
    const size_t checks = s_.checks.size();
    if (Slice(n)) return true;
    if (!runtime_ || n.opset < 10) return false;
    s_.checks.resize(checks);
    return SliceRuntime(n);
  }
  if (op == "Concat") return Concat(n);
  if (op == "Squeeze") return SqueezeOp(n, false);
  if (op == "Unsqueeze") return SqueezeOp(n, true);
  if (op == "Reshape") {
    const size_t checks = s_.checks.size();
    if (Reshape(n)) return true;
    if (!runtime_ || n.opset < 5) return false;
    s_.checks.resize(checks);
    return ReshapeRuntime(n);
  }
  if (op == "Flatten") return Flatten(n);
  if (op == "Transpose") return Transpose(n);
  if (op == "MatMul") return MatMul(n);
  if (op == "Gemm") return Gemm(n);
  if (op == "LayerNormalization") return LayerNorm(n);
  if (op == "Range")
    return runtime_ && !(IsShapeValue(n, 0) && IsShapeValue(n, 1) && IsShapeValue(n, 2)) ? RangeRuntime(n) : Range(n);
  if (OneOf(op, {"NonZero", "CumSum", "ScatterND", "GatherND", "GatherElements", "RandomNormalLike",
                 "RandomUniformLike"}))
    return DataDependent(n);
  if (op == "Expand") return Expand(n);
  if (op == "Tile") return Tile(n);
  if (op == "ConstantOfShape") return ConstantOfShape(n);
  if (OneOf(op, {"Conv", "ConvTranspose", "MaxPool", "AveragePool"})) return ConvPool(n);
  if (OneOf(op, {"LSTM", "GRU", "RNN"})) {
    // X [seq, batch, input] (layout 1: [batch, seq, input]); Y [seq, dirs, batch, hidden] (layout 1: [batch, seq,
    // dirs, hidden]); Y_h and Y_c [dirs, batch, hidden] (layout 1: [batch, dirs, hidden]).
    Dims x;
    if (!InDims(n, 0, &x)) return false;
    if (x.size() != 3) return Fail("recurrent input of rank " + std::to_string(x.size()));
    const int64_t hidden = n.Int("hidden_size", 0);
    if (hidden <= 0) return Fail("hidden_size missing");
    const DimId dirs = t_.Const(n.Str("direction", "forward") == "bidirectional" ? 2 : 1);
    const bool batch_first = n.Int("layout", 0) == 1;
    const DimId seq = batch_first ? x[1] : x[0], batch = batch_first ? x[0] : x[1], h = t_.Const(hidden);
    if (!SetDims(n, 0, batch_first ? Dims{batch, seq, dirs, h} : Dims{seq, dirs, batch, h})) return false;
    for (size_t i = 1; i < 3; ++i)
      if (!SetDims(n, i, batch_first ? Dims{batch, dirs, h} : Dims{dirs, batch, h})) return false;
    return true;
  }
  if (op == "GlobalAveragePool" || op == "GlobalMaxPool") return GlobalPool(n);
  if (OneOf(op, {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2"})) return Reduce(n);
  if (op == "Split") return Split(n);
  if (op == "Pad") return Pad(n);
  if (op == "Resize") return Resize(n);
  if (OneOf(op, {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"})) return Quantize(n);
  if (op == "MatMulInteger") return MatMul(n);
  if (op == "ConvInteger") return ConvPool(n);
  return Fail("no symbolic shape rule for " + op);
}

bool Infer::ShapeOp(const Node& n) {
  Dims d;
  if (!InDims(n, 0, &d)) return false;
  if (n.op == "Size") return SetElems(n, 0, {Prod(d, 0, d.size())}, true);
  const int64_t r = static_cast<int64_t>(d.size());
  int64_t start = n.Int("start", 0), end = n.Int("end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::min(std::max<int64_t>(start, 0), r);
  end = std::min(std::max<int64_t>(end, 0), r);
  Dims e;
  for (int64_t i = start; i < end; ++i) e.push_back(d[static_cast<size_t>(i)]);
  return SetElems(n, 0, e, false);
}

bool Infer::Constant(const Node& n) {
  if (!HasOut(n, 0)) return true;
  const Value& v = OutValue(n, 0);
  if (v.is_const() && v.has_shape) {  // the runtime gave its data
    SymValue& o = Out(n, 0);
    o.known = true;
    for (int64_t d : v.dims) o.dims.push_back(t_.Const(d));
    std::vector<int64_t> ints;
    if (v.dims.size() <= 1 && static_cast<size_t>(std::max<int64_t>(v.numel(), 0)) <= kMaxElems &&
        g_.ConstInts(n.outputs[0], &ints)) {
      o.has_elems = true;
      for (int64_t x : ints) o.elems.push_back(t_.Const(x));
    }
    return true;
  }
  if (n.Has("value_int")) return SetElems(n, 0, {t_.Const(n.Int("value_int", 0))}, true);
  if (n.Has("value_ints")) {
    Dims e;
    for (int64_t x : n.Ints("value_ints")) e.push_back(t_.Const(x));
    return SetElems(n, 0, e, false);
  }
  if (n.Has("value_float")) return SetDims(n, 0, {});
  if (n.Has("value_floats")) {
    auto it = n.attrs.find("value_floats");
    return SetDims(n, 0, {t_.Const(static_cast<int64_t>(it->second.floats.size()))});
  }
  auto it = n.attrs.find("value");
  if (it == n.attrs.end() || it->second.type != EPCTX_ATTR_TENSOR) return Fail("Constant without a readable value");
  const Attr& a = it->second;
  if (a.ints.size() > kMaxRank) return Fail("rank too large");
  Dims d;
  int64_t numel = 1;
  for (int64_t x : a.ints) {
    if (x < 0 || MulOv(numel, x, &numel)) return Fail("bad Constant dims");
    d.push_back(t_.Const(x));
  }
  if ((a.i == kI64 || a.i == kI32) && a.ints.size() <= 1 && static_cast<size_t>(numel) <= kMaxElems) {
    const size_t es = a.i == kI64 ? 8 : 4;
    if (a.s.size() != static_cast<size_t>(numel) * es) return Fail("Constant data size differs from its dims");
    Dims e;
    for (int64_t i = 0; i < numel; ++i) {
      int64_t x = 0;
      if (es == 8) {
        std::memcpy(&x, a.s.data() + 8 * i, 8);
      } else {
        int32_t y;
        std::memcpy(&y, a.s.data() + 4 * i, 4);
        x = y;
      }
      e.push_back(t_.Const(x));
    }
    SetElems(n, 0, e, a.ints.empty());
    return true;
  }
  return SetDims(n, 0, d);
}

// Arithmetic on shape values: elementwise with broadcast of 0-D/1-D element lists.
bool Infer::ShapeArith(const Node& n) {
  const std::string& op = n.op;
  const size_t count = static_cast<size_t>(n.num_inputs());
  std::vector<Dims> elems(count);
  size_t len = 1;
  bool any_1d = false;
  for (size_t i = 0; i < count; ++i) {
    const SymValue* v = In(n, i);
    elems[i] = v->elems;
    if (!v->dims.empty()) any_1d = true;
    if (elems[i].size() != 1) {
      if (len != 1 && len != elems[i].size()) return Fail("shape values of different lengths");
      len = elems[i].size();
    }
  }
  // Output dims follow the data rule below (broadcast of ranks 0/1).
  Dims out(len);
  for (size_t k = 0; k < len; ++k) {
    auto at = [&](size_t i) { return elems[i].size() == 1 ? elems[i][0] : elems[i][k]; };
    DimId r = at(0);
    for (size_t i = 1; i < count; ++i) {
      const DimId b = at(i);
      if (op == "Add" || op == "Sum") r = t_.Add(r, b);
      else if (op == "Sub") r = t_.Sub(r, b);
      else if (op == "Mul") r = t_.Mul(r, b);
      else if (op == "Max") r = t_.Max(r, b);
      else if (op == "Min") r = t_.Min(r, b);
      else if (op == "Div") {
        // Integer Div truncates toward zero: floor only for non-negative operands. A divisor whose factors divide
        // the dividend's ((n * w * 120) / (n * 120), a Reshape target computed from a Shape) gives the rest exactly,
        // for any signs, when it is not 0.
        int64_t c;
        if (t_.IsConst(b, &c) && c == 0) return Fail("integer division by zero");
        if (!t_.IsConst(b) && t_.NonNegative(b)) {
          const DimId q = t_.ExactDiv(r, b);
          if (q != kNoDim && AtLeast(b, 1, "the divisor of an integer Div (" + t_.Str(b) + ")")) {
            r = q;
            continue;
          }
        }
        if (!AtLeast(r, 0, "the dividend of an integer Div (" + t_.Str(r) + ")") ||
            !AtLeast(b, 1, "the divisor of an integer Div (" + t_.Str(b) + ")"))
          return Fail("integer Div of operands of unknown sign (" + t_.Str(r) + " / " + t_.Str(b) + ")");
        r = t_.FloorDiv(r, b);
      } else {
        return Fail(op + " on shape values");
      }
    }
    out[k] = r;
  }
  return SetElems(n, 0, out, !any_1d);
}

bool Infer::Elementwise(const Node& n) {
  const std::string& op = n.op;
  const bool variadic = OneOf(op, {"Max", "Min", "Sum", "Mean"});
  if (n.opset < (variadic ? 8 : 7) && op != "Where") return Fail("legacy broadcast rules (opset " + std::to_string(n.opset) + ")");
  const size_t count = static_cast<size_t>(n.num_inputs());
  if (count == 0) return Fail("no inputs");
  std::vector<Dims> shapes;
  bool shape_values = OneOf(op, {"Add", "Sub", "Mul", "Div", "Max", "Min", "Sum"});
  for (size_t i = 0; i < count; ++i) {
    Dims d;
    if (!InDims(n, i, &d)) return false;
    shapes.push_back(d);
    if (!IsShapeValue(n, i) || d.size() > 1) shape_values = false;
  }
  if (ShapeSelect(n)) return true;
  if (shape_values && HasOut(n, 0) && (OutValue(n, 0).dtype == kI64 || OutValue(n, 0).dtype == kI32 ||
                                       OutValue(n, 0).dtype == 0)) {
    const std::string before = why_;
    const size_t checks = s_.checks.size();
    if (ShapeArith(n)) return true;
    why_ = before;  // fall back to dims only, without the checks the attempt added
    s_.checks.resize(checks);
  }
  Dims out;
  if (!Broadcast(shapes, &out)) return false;
  return SetDims(n, 0, out);
}

// Equal and Where on shape values (an exporter's `Where(Equal(shape, -1), 1, shape)` before Expand or Reshape): Equal
// gives constant booleans where each pair is provably equal or provably different (different under the bounds adds
// the check that they are), Where picks by constant booleans. False (no fact, no reason) when it cannot.
bool Infer::ShapeSelect(const Node& n) {
  if ((n.op != "Equal" && n.op != "Where") || !HasOut(n, 0)) return false;
  const size_t count = n.op == "Equal" ? 2 : 3;
  if (static_cast<size_t>(n.num_inputs()) != count) return false;
  size_t len = 1;
  bool any_1d = false;
  for (size_t i = 0; i < count; ++i) {
    const SymValue* v = In(n, i);
    if (!v || !v->known || !v->has_elems || v->dims.size() > 1) return false;
    any_1d |= !v->dims.empty();
    if (v->elems.size() != 1) {
      if (len != 1 && len != v->elems.size()) return false;
      len = v->elems.size();
    }
  }
  auto at = [&](size_t i, size_t k) { const Dims& e = In(n, i)->elems; return e.size() == 1 ? e[0] : e[k]; };
  const size_t checks = s_.checks.size();
  Dims out(len);
  for (size_t k = 0; k < len; ++k) {
    if (n.op == "Equal") {
      const DimId a = at(0, k), b = at(1, k);
      int64_t x, y;
      const bool ca = t_.IsConst(a, &x), cb = t_.IsConst(b, &y);
      bool equal;
      if (a == b) equal = true;
      else if (ca && cb) equal = x == y;
      else if ((ca && x < 0 && t_.NonNegative(b)) || (cb && y < 0 && t_.NonNegative(a))) equal = false;
      else if (AtLeast(t_.Sub(a, b), 1, "Equal operands differ: " + t_.Str(a) + " - " + t_.Str(b)) ||
               AtLeast(t_.Sub(b, a), 1, "Equal operands differ: " + t_.Str(b) + " - " + t_.Str(a)))
        equal = false;
      else {
        s_.checks.resize(checks);
        return false;
      }
      out[k] = t_.Const(equal ? 1 : 0);
    } else {
      int64_t c;
      if (!t_.IsConst(at(0, k), &c)) {
        s_.checks.resize(checks);
        return false;
      }
      out[k] = c ? at(1, k) : at(2, k);
    }
  }
  return SetElems(n, 0, out, !any_1d);
}

bool Infer::Gather(const Node& n) {
  Dims data, idx;
  if (!InDims(n, 0, &data) || !InDims(n, 1, &idx)) return false;
  size_t axis;
  if (!NormAxis(n.Int("axis", 0), data.size(), &axis)) return false;
  if (IsShapeValue(n, 0) && data.size() == 1 && IsShapeValue(n, 1) && idx.size() <= 1) {
    std::vector<int64_t> ind;
    if (InConsts(n, 1, &ind, "Gather indices")) {
      const Dims& e = In(n, 0)->elems;
      const int64_t len = static_cast<int64_t>(e.size());
      Dims out;
      for (int64_t i : ind) {
        if (i < -len || i >= len) return Fail("Gather index " + std::to_string(i) + " out of range");
        out.push_back(e[static_cast<size_t>(i < 0 ? i + len : i)]);
      }
      return SetElems(n, 0, out, idx.empty());
    }
    why_.clear();
  }
  Dims out(data.begin(), data.begin() + static_cast<std::ptrdiff_t>(axis));
  out.insert(out.end(), idx.begin(), idx.end());
  out.insert(out.end(), data.begin() + static_cast<std::ptrdiff_t>(axis) + 1, data.end());
  return SetDims(n, 0, out);
}

bool Infer::Slice(const Node& n) {
  Dims data;
  if (!InDims(n, 0, &data)) return false;
  Dims starts, ends;
  std::vector<int64_t> axes, steps;
  if (n.opset < 10) {
    for (int64_t x : n.Ints("starts")) starts.push_back(t_.Const(x));
    for (int64_t x : n.Ints("ends")) ends.push_back(t_.Const(x));
    axes = n.Ints("axes");
  } else {
    if (!InElems(n, 1, &starts, "Slice starts") || !InElems(n, 2, &ends, "Slice ends")) return false;
    if (Present(n, 3) && !InConsts(n, 3, &axes, "Slice axes")) return false;
    if (Present(n, 4) && !InConsts(n, 4, &steps, "Slice steps")) return false;
  }
  if (starts.size() != ends.size()) return Fail("Slice starts and ends differ in length");
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size()) return Fail("Slice parameter lengths differ");
  Dims out = data;
  std::vector<bool> seen(data.size(), false);
  // Per axis: [begin, end) with step, clamped as ONNX says; for a shape value also the selected elements.
  std::vector<std::pair<int64_t, int64_t>> const_ranges(data.size(), {-1, -1});
  for (size_t k = 0; k < starts.size(); ++k) {
    size_t ax;
    if (!NormAxis(axes[k], data.size(), &ax)) return false;
    if (seen[ax]) return Fail("Slice axis repeated");
    seen[ax] = true;
    const int64_t step = steps[k];
    if (step == 0) return Fail("Slice step 0");
    const DimId dim = data[ax];
    int64_t sc = 0, ec = 0, dc = 0;
    const bool s_const = t_.IsConst(starts[k], &sc), e_const = t_.IsConst(ends[k], &ec);
    const bool d_const = t_.IsConst(dim, &dc);
    if (s_const && e_const && d_const) {
      int64_t s = sc, e = ec;
      if (s < 0) s += dc;
      if (e < 0) e += dc;
      int64_t len;
      if (step > 0) {
        s = std::min(std::max<int64_t>(s, 0), dc);
        e = std::min(std::max<int64_t>(e, 0), dc);
        len = e > s ? (e - s + step - 1) / step : 0;
      } else {
        s = std::min(std::max<int64_t>(s, 0), dc - 1);
        e = std::min(std::max<int64_t>(e, -1), dc - 1);
        len = s > e ? (s - e + (-step) - 1) / (-step) : 0;
      }
      out[ax] = t_.Const(len);
      const_ranges[ax] = {s, step};
      continue;
    }
    if (step < 0 && s_const && e_const) {
      // A reversal of a free dim (x[..., ::-1], a reflection pad's mirrored edge): ONNX clamps start into
      // [0, dim - 1] and end into [-1, dim - 1]; dim 0 gives -1 and -1, an empty result.
      const DimId last = t_.Sub(dim, t_.Const(1));
      auto bound = [&](int64_t c, int64_t lo) {
        if (c < -(int64_t{1} << 62)) return t_.Const(lo);  // INT64_MIN-style "past the beginning"
        DimId x = c < 0 ? t_.Add(dim, t_.Const(c)) : t_.Const(c);
        return t_.Min(t_.Max(x, t_.Const(lo)), last);
      };
      const DimId s = bound(sc, 0), e = bound(ec, -1);
      out[ax] = t_.Max(t_.CeilDiv(t_.Sub(s, e), t_.Const(-step)), t_.Const(0));
      continue;
    }
    if (step < 0) return Fail("Slice with a negative step and a symbolic start, end or dim");
    // Normalised start/end: constants may be negative (count from the end); symbolic ones must be provably >= 0.
    auto norm = [&](DimId x, bool is_const, int64_t c, DimId* r) {
      if (is_const) {
        if (c < 0) {
          if (c < -(int64_t{1} << 62)) *r = t_.Const(0);
          else *r = t_.Max(t_.Add(dim, t_.Const(c)), t_.Const(0));
        } else {
          *r = t_.Min(t_.Const(c), dim);
        }
        if (c >= (int64_t{1} << 62)) *r = dim;  // INT64_MAX-style "to the end"
        return true;
      }
      if (!AtLeast(x, 0, "Slice start/end")) return Fail("Slice start/end of unknown sign (" + t_.Str(x) + ")");
      *r = t_.Min(x, dim);
      return true;
    };
    DimId s, e;
    if (!norm(starts[k], s_const, sc, &s) || !norm(ends[k], e_const, ec, &e)) return false;
    out[ax] = t_.Max(t_.CeilDiv(t_.Sub(e, s), t_.Const(step)), t_.Const(0));
  }
  if (IsShapeValue(n, 0) && data.size() == 1) {
    if (const_ranges[0].first >= 0 || !seen[0]) {
      int64_t len;
      if (t_.IsConst(out[0], &len)) {
        const Dims& e = In(n, 0)->elems;
        Dims r;
        const int64_t s = seen[0] ? const_ranges[0].first : 0, step = seen[0] ? const_ranges[0].second : 1;
        for (int64_t i = 0; i < len; ++i) {
          const int64_t at = s + i * step;
          if (at < 0 || at >= static_cast<int64_t>(e.size())) return Fail("Slice of a shape value out of range");
          r.push_back(e[static_cast<size_t>(at)]);
        }
        return SetElems(n, 0, r, false);
      }
    }
  }
  return SetDims(n, 0, out);
}

bool Infer::Concat(const Node& n) {
  const size_t count = static_cast<size_t>(n.num_inputs());
  if (count == 0) return Fail("no inputs");
  std::vector<Dims> ins(count);
  bool elems = true;
  for (size_t i = 0; i < count; ++i) {
    if (!InDims(n, i, &ins[i])) return false;
    if (!IsShapeValue(n, i) || ins[i].size() != 1) elems = false;
  }
  const size_t rank = ins[0].size();
  size_t axis;
  if (!NormAxis(n.Int("axis", 0), rank, &axis)) return false;
  Dims out = ins[0];
  for (size_t i = 1; i < count; ++i) {
    if (ins[i].size() != rank) return Fail("Concat inputs of different ranks");
    out[axis] = t_.Add(out[axis], ins[i][axis]);
    for (size_t d = 0; d < rank; ++d) {
      if (d == axis) continue;
      if (ConstMismatch(ins[i][d], out[d]))
        return Fail("Concat input " + std::to_string(i) + " dim " + std::to_string(d) + " differs");
      Check(ins[i][d], out[d], "Concat input " + std::to_string(i) + " dim " + std::to_string(d) + " equal to input 0's");
    }
  }
  if (elems) {
    Dims e;
    for (size_t i = 0; i < count; ++i) e.insert(e.end(), In(n, i)->elems.begin(), In(n, i)->elems.end());
    return SetElems(n, 0, e, false);
  }
  return SetDims(n, 0, out);
}

bool Infer::SqueezeOp(const Node& n, bool unsqueeze) {
  Dims d;
  if (!InDims(n, 0, &d)) return false;
  std::vector<int64_t> axes;
  if (n.opset >= 13) {
    if (Present(n, 1) && !InConsts(n, 1, &axes, "axes")) return false;
  } else {
    axes = n.Ints("axes");
  }
  Dims out;
  if (unsqueeze) {
    if (axes.empty()) return Fail("Unsqueeze without axes");
    const size_t rank = d.size() + axes.size();
    if (rank > kMaxRank) return Fail("rank too large");
    std::vector<bool> ins(rank, false);
    for (int64_t a : axes) {
      size_t ax;
      if (!NormAxis(a, rank, &ax)) return false;
      if (ins[ax]) return Fail("Unsqueeze axis repeated");
      ins[ax] = true;
    }
    size_t k = 0;
    for (size_t i = 0; i < rank; ++i) out.push_back(ins[i] ? t_.Const(1) : d[k++]);
  } else {
    std::vector<bool> drop(d.size(), false);
    if (axes.empty()) {
      for (size_t i = 0; i < d.size(); ++i) {
        int64_t c;
        if (!t_.IsConst(d[i], &c)) return Fail("Squeeze without axes of a symbolic dim");
        drop[i] = c == 1;
      }
    }
    for (int64_t a : axes) {
      size_t ax;
      if (!NormAxis(a, d.size(), &ax)) return false;
      int64_t c;
      if (t_.IsConst(d[ax], &c) && c != 1) return Fail("Squeeze of dim " + std::to_string(ax) + " = " + std::to_string(c));
      Check(d[ax], t_.Const(1), "squeezed dim " + std::to_string(ax) + " is 1");
      drop[ax] = true;
    }
    for (size_t i = 0; i < d.size(); ++i)
      if (!drop[i]) out.push_back(d[i]);
  }
  return SetReshaped(n, out);
}

bool Infer::Reshape(const Node& n) {
  Dims d, target;
  if (!InDims(n, 0, &d)) return false;
  if (n.opset < 5) {
    for (int64_t x : n.Ints("shape")) target.push_back(t_.Const(x));
  } else if (!InElems(n, 1, &target, "Reshape shape")) {
    return false;
  }
  if (target.size() > kMaxRank) return Fail("rank too large");
  const bool allowzero = n.Int("allowzero", 0) != 0;
  Dims out(target.size());
  int infer = -1;
  for (size_t i = 0; i < target.size(); ++i) {
    int64_t c;
    const bool is_const = t_.IsConst(target[i], &c);
    if (is_const && c == -1) {
      if (infer >= 0) return Fail("Reshape with two -1");
      infer = static_cast<int>(i);
      continue;
    }
    if (is_const && c == 0 && !allowzero) {
      if (i >= d.size()) return Fail("Reshape 0 beyond the input rank");
      out[i] = d[i];
      continue;
    }
    if (is_const && c < -1) return Fail("Reshape dim " + std::to_string(c));
    bool checked = false;  // target[i] >= 1 is checked
    if (!is_const && !t_.NonNegative(target[i])) {
      if (!AtLeast(target[i], 1, "Reshape target dim " + std::to_string(i)))
        return Fail("Reshape target dim " + std::to_string(i) + " may be -1 or 0 (" + t_.Str(target[i]) + ")");
      checked = true;
    }
    if (!is_const && !checked && !allowzero && !(i < d.size() && target[i] == d[i])) {
      // A computed 0 would copy the input dim: only accept expressions that cannot be 0... or accept and check.
      Check(t_.Max(target[i], t_.Const(1)), target[i], "Reshape target dim " + std::to_string(i) + " is not 0");
    }
    out[i] = target[i];
  }
  const DimId total = Prod(d, 0, d.size());
  if (infer >= 0) {
    DimId others = t_.Const(1);
    for (size_t i = 0; i < out.size(); ++i)
      if (static_cast<int>(i) != infer) others = t_.Mul(others, out[i]);
    out[static_cast<size_t>(infer)] = t_.FloorDiv(total, others);
  }
  const DimId count = Prod(out, 0, out.size());
  if (ConstMismatch(count, total)) return Fail("Reshape changes the element count");
  Check(count, total, "Reshape element count (" + t_.Str(total) + " elements into " + t_.Str(count) + ")");
  return SetReshaped(n, out);
}

bool Infer::Flatten(const Node& n) {
  Dims d;
  if (!InDims(n, 0, &d)) return false;
  int64_t a = n.Int("axis", 1);
  const int64_t r = static_cast<int64_t>(d.size());
  if (a < -r || a > r) return Fail("Flatten axis out of range");
  if (a < 0) a += r;
  return SetDims(n, 0, {Prod(d, 0, static_cast<size_t>(a)), Prod(d, static_cast<size_t>(a), d.size())});
}

bool Infer::Transpose(const Node& n) {
  Dims d;
  if (!InDims(n, 0, &d)) return false;
  std::vector<int64_t> perm = n.Ints("perm");
  if (perm.empty())
    for (size_t i = d.size(); i-- > 0;) perm.push_back(static_cast<int64_t>(i));
  if (perm.size() != d.size()) return Fail("perm length differs from the rank");
  std::vector<bool> seen(d.size(), false);
  Dims out;
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(d.size()) || seen[static_cast<size_t>(p)]) return Fail("bad perm");
    seen[static_cast<size_t>(p)] = true;
    out.push_back(d[static_cast<size_t>(p)]);
  }
  return SetDims(n, 0, out);
}

bool Infer::MatMul(const Node& n) {
  Dims a, b;
  if (!InDims(n, 0, &a) || !InDims(n, 1, &b)) return false;
  if (a.empty() || b.empty()) return Fail("MatMul of a scalar");
  const bool a1 = a.size() == 1, b1 = b.size() == 1;
  if (a1) a.insert(a.begin(), t_.Const(1));
  if (b1) b.push_back(t_.Const(1));
  const DimId ka = a.back(), kb = b[b.size() - 2];
  if (ConstMismatch(ka, kb)) return Fail("MatMul inner dims differ");
  Check(ka, kb, "MatMul inner dims equal");
  Dims ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2), batch;
  if (!Broadcast({ba, bb}, &batch)) return false;
  if (!a1) batch.push_back(a[a.size() - 2]);
  if (!b1) batch.push_back(b.back());
  return SetDims(n, 0, batch);
}

bool Infer::Gemm(const Node& n) {
  Dims a, b;
  if (!InDims(n, 0, &a) || !InDims(n, 1, &b)) return false;
  if (a.size() != 2 || b.size() != 2) return Fail("Gemm operands are not 2-D");
  const bool ta = n.Int("transA", 0) != 0, tb = n.Int("transB", 0) != 0;
  const DimId k1 = a[ta ? 0 : 1], k2 = b[tb ? 1 : 0];
  if (ConstMismatch(k1, k2)) return Fail("Gemm inner dims differ");
  Check(k1, k2, "Gemm inner dims equal");
  Dims out{a[ta ? 1 : 0], b[tb ? 0 : 1]};
  if (Present(n, 2)) {
    Dims c, bc;
    if (!InDims(n, 2, &c)) return false;
    if (c.size() > 2 || !Broadcast({out, c}, &bc)) return Fail("Gemm C does not broadcast");
    for (size_t i = 0; i < 2; ++i) Check(bc[i], out[i], "Gemm C broadcasts to the output");
  }
  return SetDims(n, 0, out);
}

bool Infer::LayerNorm(const Node& n) {
  Dims d;
  if (!InDims(n, 0, &d)) return false;
  size_t axis;
  if (!NormAxis(n.Int("axis", -1), d.size(), &axis)) return false;
  Dims stats(d.begin(), d.begin() + static_cast<std::ptrdiff_t>(axis));
  stats.resize(d.size(), t_.Const(1));
  SetDims(n, 0, d);
  SetDims(n, 1, stats);
  return SetDims(n, 2, stats);
}

bool Infer::Range(const Node& n) {
  Dims s, l, dl;
  if (!InElems(n, 0, &s, "Range start") || !InElems(n, 1, &l, "Range limit") || !InElems(n, 2, &dl, "Range delta"))
    return false;
  if (s.size() != 1 || l.size() != 1 || dl.size() != 1) return Fail("Range operands are not scalars");
  const uint32_t dt = g_.v(n.inputs[0]).dtype;
  if (dt != kI64 && dt != kI32) return Fail("Range of non-integer type");
  int64_t delta;
  if (!t_.IsConst(dl[0], &delta)) return Fail("Range delta is not constant");
  if (delta == 0) return Fail("Range delta 0");
  DimId len = delta > 0 ? t_.CeilDiv(t_.Sub(l[0], s[0]), t_.Const(delta))
                        : t_.CeilDiv(t_.Sub(s[0], l[0]), t_.Const(-delta));
  len = t_.Max(len, t_.Const(0));
  int64_t c;
  if (t_.IsConst(len, &c) && c >= 0 && static_cast<size_t>(c) <= kMaxElems) {
    Dims e;
    for (int64_t i = 0; i < c; ++i) e.push_back(t_.Add(s[0], t_.Const(i * delta)));
    return SetElems(n, 0, e, false);
  }
  return SetDims(n, 0, {len});
}

bool Infer::Expand(const Node& n) {
  Dims d, shape;
  if (!InDims(n, 0, &d) || !InElems(n, 1, &shape, "Expand shape")) return false;
  for (DimId x : shape)
    if (!AtLeast(x, 0, "Expand shape element")) return Fail("Expand shape element of unknown sign (" + t_.Str(x) + ")");
  Dims out;
  if (!Broadcast({d, shape}, &out)) return false;
  return SetDims(n, 0, out);
}

bool Infer::Tile(const Node& n) {
  Dims d, reps;
  if (!InDims(n, 0, &d) || !InElems(n, 1, &reps, "Tile repeats")) return false;
  if (reps.size() != d.size()) return Fail("Tile repeats length differs from the rank");
  Dims out;
  for (size_t i = 0; i < d.size(); ++i) {
    if (!AtLeast(reps[i], 0, "Tile repeat")) return Fail("Tile repeat of unknown sign");
    out.push_back(t_.Mul(d[i], reps[i]));
  }
  return SetDims(n, 0, out);
}

// QuantizeLinear / DequantizeLinear: the input's dims (the scale and zero point broadcast along one axis or are
// scalars). DynamicQuantizeLinear: the input's dims, then a scalar scale and zero point.
bool Infer::Quantize(const Node& n) {
  Dims d;
  if (!InDims(n, 0, &d)) return false;
  if (n.op == "DynamicQuantizeLinear") {
    for (size_t i = 1; i < 3 && i < n.outputs.size(); ++i)
      if (HasOut(n, i) && !SetDims(n, i, {})) return false;
  } else {
    for (size_t i = 1; i < n.outputs.size(); ++i)
      if (HasOut(n, i)) return Fail("extra output");
  }
  return SetDims(n, 0, d);
}

bool Infer::ConstantOfShape(const Node& n) {
  Dims shape;
  if (!InElems(n, 0, &shape, "ConstantOfShape shape")) return false;
  for (DimId x : shape)
    if (!AtLeast(x, 0, "ConstantOfShape dim")) return Fail("ConstantOfShape dim of unknown sign (" + t_.Str(x) + ")");
  return SetDims(n, 0, shape);
}

bool Infer::ConvPool(const Node& n) {
  const std::string& op = n.op;
  const bool conv = op == "Conv" || op == "ConvTranspose" || op == "ConvInteger", transpose = op == "ConvTranspose";
  Dims x, w;
  if (!InDims(n, 0, &x)) return false;
  if (x.size() < 3) return Fail("input rank below 3");
  const size_t sp = x.size() - 2;
  std::vector<int64_t> kernel = n.Ints("kernel_shape");
  const int64_t group = n.Int("group", 1);
  if (conv) {
    if (!InDims(n, 1, &w)) return false;
    if (w.size() != x.size()) return Fail("weight rank differs from the input's");
    if (kernel.empty()) {
      for (size_t i = 0; i < sp; ++i) {
        int64_t k;
        if (!t_.IsConst(w[2 + i], &k)) return Fail("symbolic kernel size");
        kernel.push_back(k);
      }
    }
    if (group <= 0) return Fail("group <= 0");
  }
  if (kernel.size() != sp) return Fail("kernel_shape length differs from the spatial rank");
  std::vector<int64_t> strides = n.Ints("strides"), dil = n.Ints("dilations"), pads = n.Ints("pads");
  if (strides.empty()) strides.assign(sp, 1);
  if (dil.empty()) dil.assign(sp, 1);
  const std::string auto_pad = n.Str("auto_pad", "NOTSET");
  if (pads.empty()) pads.assign(2 * sp, 0);
  if (strides.size() != sp || dil.size() != sp || pads.size() != 2 * sp) return Fail("attribute lengths differ");
  if (n.Int("ceil_mode", 0) != 0) return Fail("ceil_mode is not modelled");
  if (op == "MaxPool" && HasOut(n, 1)) return Fail("MaxPool indices output");
  Dims out{x[0]};
  if (conv) {
    Check(x[1], transpose ? w[0] : t_.Mul(w[1], t_.Const(group)), "input channels match the weight");
    out.push_back(transpose ? t_.Mul(w[1], t_.Const(group)) : w[0]);
  } else {
    out.push_back(x[1]);
  }
  std::vector<int64_t> out_pad = n.Ints("output_padding"), out_shape = n.Ints("output_shape");
  if (out_pad.empty()) out_pad.assign(sp, 0);
  if (out_pad.size() != sp) return Fail("output_padding length differs");
  for (size_t i = 0; i < sp; ++i) {
    const int64_t s = strides[i], dl = dil[i], k = kernel[i];
    if (s <= 0 || dl <= 0 || k <= 0) return Fail("stride, dilation or kernel <= 0");
    if (k > (int64_t{1} << 40) || dl > (int64_t{1} << 20)) return Fail("kernel too large");
    const int64_t eff = (k - 1) * dl + 1;
    const DimId in = x[2 + i];
    DimId o;
    if (transpose) {
      if (!out_shape.empty()) {
        if (out_shape.size() != sp) return Fail("output_shape length differs");
        o = t_.Const(out_shape[i]);
      } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
        o = t_.Mul(in, t_.Const(s));
      } else {
        const int64_t pad = auto_pad == "VALID" ? 0 : pads[i] + pads[i + sp];
        o = t_.Add(t_.Mul(t_.Sub(in, t_.Const(1)), t_.Const(s)), t_.Const(out_pad[i] + eff - pad));
      }
    } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      o = t_.CeilDiv(in, t_.Const(s));
    } else if (auto_pad == "VALID") {
      o = t_.Add(t_.FloorDiv(t_.Sub(in, t_.Const(eff)), t_.Const(s)), t_.Const(1));
    } else if (auto_pad == "NOTSET") {
      o = t_.Add(t_.FloorDiv(t_.Add(in, t_.Const(pads[i] + pads[i + sp] - eff)), t_.Const(s)), t_.Const(1));
    } else {
      return Fail("auto_pad " + auto_pad);
    }
    int64_t c;
    if (t_.IsConst(o, &c) && c < 0) return Fail("negative output size");
    Check(t_.Max(o, t_.Const(0)), o, "output spatial dim " + std::to_string(i) + " >= 0");
    out.push_back(o);
  }
  return SetDims(n, 0, out);
}

bool Infer::GlobalPool(const Node& n) {
  Dims d;
  if (!InDims(n, 0, &d)) return false;
  if (d.size() < 3) return Fail("input rank below 3");
  for (size_t i = 2; i < d.size(); ++i) d[i] = t_.Const(1);
  return SetDims(n, 0, d);
}

bool Infer::Reduce(const Node& n) {
  Dims d;
  if (!InDims(n, 0, &d)) return false;
  std::vector<int64_t> axes;
  const bool axes_input = n.op == "ReduceSum" ? n.opset >= 13 : n.opset >= 18;
  if (axes_input) {
    if (Present(n, 1) && !InConsts(n, 1, &axes, "axes")) return false;
  } else {
    axes = n.Ints("axes");
  }
  const bool keep = n.Int("keepdims", 1) != 0;
  std::vector<bool> red(d.size(), false);
  if (axes.empty()) {
    if (axes_input && n.Int("noop_with_empty_axes", 0) != 0) return SetDims(n, 0, d);
    red.assign(d.size(), true);
  }
  for (int64_t a : axes) {
    size_t ax;
    if (!NormAxis(a, d.size(), &ax)) return false;
    red[ax] = true;
  }
  Dims out;
  for (size_t i = 0; i < d.size(); ++i) {
    if (!red[i]) out.push_back(d[i]);
    else if (keep) out.push_back(t_.Const(1));
  }
  return SetDims(n, 0, out);
}

bool Infer::Split(const Node& n) {
  Dims d;
  if (!InDims(n, 0, &d)) return false;
  size_t axis;
  if (!NormAxis(n.Int("axis", 0), d.size(), &axis)) return false;
  std::vector<int64_t> split;
  if (n.opset >= 13) {
    if (Present(n, 1) && !InConsts(n, 1, &split, "split")) return false;
  } else {
    split = n.Ints("split");
  }
  const size_t outs = n.outputs.size();
  if (outs == 0) return Fail("no outputs");
  Dims parts;
  if (!split.empty()) {
    if (split.size() != outs) return Fail("split length differs from the number of outputs");
    DimId sum = t_.Const(0);
    for (int64_t x : split) {
      if (x < 0) return Fail("negative split");
      parts.push_back(t_.Const(x));
      sum = t_.Add(sum, parts.back());
    }
    if (ConstMismatch(sum, d[axis])) return Fail("split sums to a different size");
    Check(sum, d[axis], "split sums to dim " + std::to_string(axis));
  } else {
    const int64_t k = static_cast<int64_t>(outs);
    if (n.opset >= 18 && n.Has("num_outputs")) {
      // Opset 18: ceil-sized parts, the last one smaller.
      const DimId part = t_.CeilDiv(d[axis], t_.Const(k));
      for (int64_t i = 0; i + 1 < k; ++i) parts.push_back(part);
      parts.push_back(t_.Sub(d[axis], t_.Mul(part, t_.Const(k - 1))));
      Check(t_.Max(parts.back(), t_.Const(0)), parts.back(), "last split part >= 0");
    } else {
      const DimId part = t_.FloorDiv(d[axis], t_.Const(k));
      int64_t c;
      if (t_.IsConst(d[axis], &c) && c % k != 0) return Fail("dim not divisible by the number of outputs");
      Check(t_.Mul(part, t_.Const(k)), d[axis], "dim " + std::to_string(axis) + " divisible by " + std::to_string(k));
      parts.assign(outs, part);
    }
  }
  for (size_t i = 0; i < outs; ++i) {
    Dims o = d;
    o[axis] = parts[i];
    SetDims(n, i, o);
  }
  return true;
}

bool Infer::Pad(const Node& n) {
  Dims d;
  if (!InDims(n, 0, &d)) return false;
  std::vector<int64_t> pads, axes;
  if (n.opset < 11) {
    pads = n.Ints("pads");
  } else {
    if (!InConsts(n, 1, &pads, "pads")) return runtime_ && PadRuntime(n);
    if (Present(n, 3) && !InConsts(n, 3, &axes, "Pad axes")) return false;
  }
  Dims p;
  for (int64_t x : pads) p.push_back(t_.Const(x));
  return PadDims(n, d, p, axes);
}

// Pad's output: each padded dim of `d` plus its begin and end pads (expressions), checked >= 0.
bool Infer::PadDims(const Node& n, const Dims& d, const Dims& pads, std::vector<int64_t> axes) {
  if (axes.empty())
    for (size_t i = 0; i < d.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (pads.size() != 2 * axes.size()) return Fail("pads length differs");
  Dims out = d;
  for (size_t k = 0; k < axes.size(); ++k) {
    size_t ax;
    if (!NormAxis(axes[k], d.size(), &ax)) return false;
    out[ax] = t_.Add(t_.Add(d[ax], pads[k]), pads[k + axes.size()]);
    Check(t_.Max(out[ax], t_.Const(0)), out[ax], "padded dim " + std::to_string(ax) + " >= 0");
  }
  return SetDims(n, 0, out);
}

bool Infer::Resize(const Node& n) {
  Dims d;
  if (!InDims(n, 0, &d)) return false;
  if (n.opset < 11) return Fail("Resize before opset 11");
  if (n.Has("axes")) return Fail("Resize with axes");
  if (n.Str("keep_aspect_ratio_policy", "stretch") != "stretch") return Fail("keep_aspect_ratio_policy");
  if (Present(n, 3)) {
    Dims sizes;
    if (!InElems(n, 3, &sizes, "Resize sizes")) return false;
    if (!sizes.empty()) {
      if (sizes.size() != d.size()) return Fail("sizes length differs from the rank");
      // Fixed output sizes of a free dim: the scale, output / input, changes with the input's size, and whether the
      // lowering's rounding matches ONNX's with it (nearest modes) too (difftest --dynamic, seed 20261211).
      for (size_t i = 0; i < d.size(); ++i)
        if (!t_.IsConst(d[i]) && t_.IsConst(sizes[i]))
          return Fail("a resize of a free dim to a fixed size (its scale depends on the input's size)");
      return SetDims(n, 0, sizes);
    }
  }
  const int si = 2;
  if (!Present(n, si)) return Fail("Resize without scales or sizes");
  const int vi = n.inputs[si];
  const Value& sv = g_.v(vi);
  if (!sv.is_const() || sv.dtype != kF32 || !sv.has_shape) return Fail("Resize scales not constant");
  const int64_t count = sv.numel();
  if (count != static_cast<int64_t>(d.size())) return Fail("scales length differs from the rank");
  Dims out;
  for (int64_t i = 0; i < count; ++i) {
    float sc;
    std::memcpy(&sc, static_cast<const char*>(sv.data) + 4 * i, 4);
    if (!(sc > 0) || !std::isfinite(sc)) return Fail("bad scale");
    const DimId in = d[static_cast<size_t>(i)];
    int64_t c;
    if (t_.IsConst(in, &c)) {
      const double v = std::floor(static_cast<double>(c) * static_cast<double>(sc));
      if (v > 4e18) return Fail("scaled dim too large");
      out.push_back(t_.Const(static_cast<int64_t>(v)));
    } else if (sc >= 1 && sc <= 65536 && std::floor(sc) == sc) {
      out.push_back(t_.Mul(in, t_.Const(static_cast<int64_t>(sc))));
    } else if (sc < 1) {
      // A downscale of a free dim: floor(in * scale) / in equals the scale only for some sizes, and the lowering
      // (oneDNN resamples by output / input) takes only those; at the others the shape would fail to compile at run
      // time (difftest --dynamic, seed 20261210 models 3598/9583). Left on the CPU EP.
      return Fail("a downscale of a free dim (its output / input ratio depends on the size)");
    } else {
      return Fail("a non-integer scale of a symbolic dim");
    }
  }
  return SetDims(n, 0, out);
}


DimId Infer::RuntimeSym(const std::string& name, int node, int value, size_t elem) {
  for (const RuntimeSymbol& r : s_.runtime)
    if (r.name == name) return t_.Sym(name);
  RuntimeSymbol r;
  r.name = name;
  r.node = node;
  r.value = value;
  r.elem = elem;
  s_.runtime.push_back(std::move(r));
  return t_.Sym(name);
}

// An integer tensor of constant length read as sizes, that no rule computes from shapes: its elements become run-time
// symbols bound from its data once its producer has run. A negative element then fails the run (a symbol is a dim).
bool Infer::DataElems(int vi, Dims* e) {
  if (auto it = data_elems_.find(vi); it != data_elems_.end()) return *e = it->second, true;
  const Value& v = g_.v(vi);
  const SymValue& sv = s_.values[static_cast<size_t>(vi)];
  if ((v.dtype != kI64 && v.dtype != kI32) || !sv.known || sv.dims.size() > 1) return false;
  if (v.producer < 0 && !v.is_graph_input) return false;
  size_t count = 1;
  if (!ConstNumel(sv.dims, &count)) {
    // The runtime's static length (Agree made it a check).
    if (!v.has_shape || v.dims.size() != sv.dims.size() || (v.dims.size() == 1 && v.dims[0] < 0)) return false;
    count = v.dims.empty() ? 1 : static_cast<size_t>(v.dims[0]);
  }
  if (count > kMaxElems) return false;
  Dims elems;
  for (size_t k = 0; k < count; ++k)
    elems.push_back(RuntimeSym("data:" + v.name + (sv.dims.empty() ? "" : "[" + std::to_string(k) + "]"), -1, vi, k));
  data_elems_[vi] = elems;
  *e = std::move(elems);
  return true;
}

bool Infer::DataDependent(const Node& n) {
  const std::string& op = n.op;
  Dims d;
  if (!InDims(n, 0, &d)) return false;
  if (op == "CumSum" || op == "ScatterND" || op == "RandomNormalLike" || op == "RandomUniformLike")
    return SetDims(n, 0, d);
  if (op == "GatherElements") {
    Dims idx;
    if (!InDims(n, 1, &idx)) return false;
    if (idx.size() != d.size()) return Fail("GatherElements indices rank differs from the data's");
    return SetDims(n, 0, idx);
  }
  if (op == "GatherND") {
    Dims idx;
    if (!InDims(n, 1, &idx)) return false;
    const int64_t b = n.Int("batch_dims", 0);
    int64_t m;
    if (idx.empty() || !t_.IsConst(idx.back(), &m)) return Fail("GatherND index length is not constant");
    if (b < 0 || m < 1 || b + m > static_cast<int64_t>(d.size()) || b >= static_cast<int64_t>(idx.size()))
      return Fail("GatherND index length " + std::to_string(m) + " with batch_dims " + std::to_string(b) +
                  " does not fit data of rank " + std::to_string(d.size()));
    for (int64_t i = 0; i < b; ++i) Check(idx[static_cast<size_t>(i)], d[static_cast<size_t>(i)], "GatherND batch dim");
    Dims out(idx.begin(), idx.end() - 1);
    out.insert(out.end(), d.begin() + b + m, d.end());
    return SetDims(n, 0, out);
  }
  // NonZero: [rank, count], the count known only when it runs.
  if (!runtime_) return Fail("NonZero's output size depends on data");
  return SetDims(n, 0, {t_.Const(static_cast<int64_t>(d.size())), RuntimeSym("nonzero:" + n.name, node_, -1, 0)});
}

// Range whose bounds are computed from data (or whose delta is not constant): a length bound when it runs.
bool Infer::RangeRuntime(const Node& n) {
  for (size_t i = 0; i < 3; ++i) {
    const SymValue* v = In(n, i);
    if (!v || !v->known || !v->dims.empty()) return Fail("Range operand " + std::to_string(i) + " is not a scalar");
  }
  return SetDims(n, 0, {RuntimeSym("range:" + n.name, node_, -1, 0)});
}

// Slice whose starts/ends no rule can place: each sliced axis' length a run-time symbol its sizer computes from the
// input dims and the starts/ends data (the axes must be constant).
bool Infer::SliceRuntime(const Node& n) {
  why_.clear();
  Dims d;
  if (!InDims(n, 0, &d)) return false;
  const SymValue* st = In(n, 1);
  const SymValue* en = In(n, 2);
  if (!st || !en || !st->known || !en->known || st->dims.size() != 1) return Fail("Slice starts are not a 1-D tensor");
  int64_t count;
  if (!t_.IsConst(st->dims[0], &count)) return Fail("Slice starts of unknown length");
  std::vector<int64_t> axes;
  if (Present(n, 3)) {
    if (!InConsts(n, 3, &axes, "Slice axes")) return false;
  } else {
    for (int64_t i = 0; i < count; ++i) axes.push_back(i);
  }
  if (static_cast<int64_t>(axes.size()) != count) return Fail("Slice axes and starts differ in length");
  Dims out = d;
  for (size_t k = 0; k < axes.size(); ++k) {
    size_t ax;
    if (!NormAxis(axes[k], d.size(), &ax)) return false;
    out[ax] = RuntimeSym("slice:" + n.name + "[" + std::to_string(ax) + "]", node_, -1, ax);
  }
  return SetDims(n, 0, out);
}

// Reshape whose target no rule can resolve (a dim that may be 0 or -1): constant positive dims stay, the others are
// run-time symbols its sizer resolves from the target data and the input dims.
bool Infer::ReshapeRuntime(const Node& n) {
  why_.clear();
  Dims d, target;
  if (!InDims(n, 0, &d) || !InElems(n, 1, &target, "Reshape shape")) return false;
  if (target.size() > kMaxRank) return Fail("rank too large");
  Dims out(target.size());
  for (size_t i = 0; i < target.size(); ++i) {
    int64_t c;
    if (t_.IsConst(target[i], &c) && c > 0) out[i] = target[i];
    else out[i] = RuntimeSym("reshape:" + n.name + "[" + std::to_string(i) + "]", node_, -1, i);
  }
  if (HasOut(n, 0) && target.size() <= 1 && In(n, 0)->has_elems) return Fail("Reshape of a shape value");
  return SetDims(n, 0, out);
}

// Pad whose pads are computed (from shapes or, at run time, from data): each padded dim as an expression.
bool Infer::PadRuntime(const Node& n) {
  why_.clear();
  Dims d, pads;
  std::vector<int64_t> axes;
  if (!InDims(n, 0, &d) || !InElems(n, 1, &pads, "pads")) return false;
  if (Present(n, 3) && !InConsts(n, 3, &axes, "Pad axes")) return false;
  return PadDims(n, d, pads, axes);
}

}  // namespace

bool InferSymbolic(const Graph& g, SymbolicShapes* out, const SymbolRanges& ranges) {
  *out = SymbolicShapes();
  for (const auto& [sym, r] : ranges) out->table.SetRange(sym, r.first, r.second);
  Infer inf(g, out);
  return inf.Run();
}

bool InferSymbolicRuntime(const Graph& g, SymbolicShapes* out, const SymbolRanges& ranges) {
  *out = SymbolicShapes();
  for (const auto& [sym, r] : ranges) out->table.SetRange(sym, r.first, r.second);
  Infer inf(g, out);
  inf.set_runtime(true);
  return inf.Run();
}

bool Bind(const Graph& g, const SymbolicShapes& s, const std::map<std::string, int64_t>& symbols, Graph* out,
          std::string* why) {
  if (s.values.size() != g.values.size() || s.why.size() != g.nodes.size()) {
    *why = "the symbolic shapes were inferred for another graph";
    return false;
  }
  std::vector<int64_t> val;
  std::vector<bool> ok;
  std::vector<std::string> err;
  s.table.EvalAll(symbols, &val, &ok, &err);
  auto where = [&](int node) {
    if (node < 0) return std::string("graph input");
    const Node& n = g.nodes[static_cast<size_t>(node)];
    return "node '" + n.name + "' (" + n.op + ")";
  };
  auto producer = [&](size_t vi) {
    const Value& v = g.values[vi];
    return v.producer >= 0 ? where(v.producer) + " output '" + v.name + "'" : "value '" + v.name + "'";
  };
  for (const SymCheck& c : s.checks) {
    const size_t a = static_cast<size_t>(c.a), b = static_cast<size_t>(c.b);
    if (!ok[a] || !ok[b]) {
      *why = where(c.node) + ": " + c.what + ": " + (!ok[a] ? err[a] : err[b]);
      return false;
    }
    if (val[a] != val[b]) {
      *why = where(c.node) + ": " + c.what + " fails: " + s.table.Str(c.a) + " = " + std::to_string(val[a]) +
             " but " + s.table.Str(c.b) + " = " + std::to_string(val[b]);
      return false;
    }
  }
  Graph r = g;
  for (size_t vi = 0; vi < g.values.size(); ++vi) {
    const SymValue& sv = s.values[vi];
    if (!sv.known) continue;
    Value& v = r.values[vi];
    std::vector<int64_t> dims(sv.dims.size());
    for (size_t d = 0; d < sv.dims.size(); ++d) {
      const size_t id = static_cast<size_t>(sv.dims[d]);
      if (!ok[id]) {
        *why = producer(vi) + " dim " + std::to_string(d) + " (" + s.table.Str(sv.dims[d]) + "): " + err[id];
        return false;
      }
      if (val[id] < 0) {
        *why = producer(vi) + " dim " + std::to_string(d) + " (" + s.table.Str(sv.dims[d]) + ") = " +
               std::to_string(val[id]) + " is negative";
        return false;
      }
      dims[d] = val[id];
    }
    // Element count within int64 (a huge binding must not overflow later size computations).
    int64_t numel = 1;
    for (int64_t d : dims)
      if (MulOv(numel, d, &numel)) {
        *why = producer(vi) + ": element count overflows with dims " + DimsText(dims);
        return false;
      }
    if (g.values[vi].is_const() && g.values[vi].dims != dims) {
      *why = producer(vi) + ": constant with dims " + DimsText(g.values[vi].dims) + " bound to " + DimsText(dims);
      return false;
    }
    v.dims = dims;
    v.has_shape = true;
    v.dim_symbols.clear();
    if (sv.has_elems && !v.is_const()) {
      const uint32_t dtype = v.dtype == kI32 ? kI32 : v.dtype == kBool ? kBool : kI64;
      auto bytes = std::make_shared<std::string>(sv.elems.size() * (dtype == kI64 ? 8 : dtype == kI32 ? 4 : 1), '\0');
      for (size_t k = 0; k < sv.elems.size(); ++k) {
        const size_t id = static_cast<size_t>(sv.elems[k]);
        if (!ok[id]) {
          *why = producer(vi) + " element " + std::to_string(k) + " (" + s.table.Str(sv.elems[k]) + "): " + err[id];
          return false;
        }
        if (dtype == kI64) {
          std::memcpy(&(*bytes)[8 * k], &val[id], 8);
        } else if (dtype == kBool) {
          (*bytes)[k] = val[id] != 0 ? 1 : 0;
        } else {
          if (val[id] < std::numeric_limits<int32_t>::min() || val[id] > std::numeric_limits<int32_t>::max()) {
            *why = producer(vi) + " element " + std::to_string(k) + " = " + std::to_string(val[id]) +
                   " does not fit int32";
            return false;
          }
          const int32_t x = static_cast<int32_t>(val[id]);
          std::memcpy(&(*bytes)[4 * k], &x, 4);
        }
      }
      v.dtype = dtype;
      v.folded = bytes;
      v.data = v.folded->data();
    }
  }
  *out = std::move(r);
  return true;
}

}  // namespace aotcpu
}  // namespace epctx
