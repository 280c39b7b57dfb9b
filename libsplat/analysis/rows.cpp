// Per-row evaluation of pattern terms as runs (arithmetic progressions), and exact union /
// intersection of run lists. Progressions of different strides are combined per "elementary
// interval" (a column range in which the same runs are active) as residue classes: modulo the
// lcm of the strides when that is small, else by enumerating the points of that interval only.
#include "libsplat/analysis/rows.h"

#include <algorithm>
#include <numeric>
#include <unordered_map>

namespace splat {

namespace {

__extension__ typedef __int128 i128;

int64_t fdiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }
int64_t fmod(int64_t a, int64_t b) { return a - fdiv(a, b) * b; }
int64_t cdiv(int64_t a, int64_t b) { return -fdiv(-a, b); }
int64_t last(const Run& r) { return r.start + (r.count - 1) * r.stride; }
int64_t stride_of(const Run& r) { return r.count <= 1 ? 1 : r.stride; }

// lcm modulus above which residue bitsets are not used (points are enumerated instead).
constexpr int64_t kMaxPeriod = 4096;

struct Class {
  int64_t r, m;  // j == r (mod m), 0 <= r < m
};

// Sorts runs by start and joins runs that continue each other (across elementary intervals):
// the result is canonical in the sense of rows.h.
void finish(std::vector<Run>& v) {
  std::sort(v.begin(), v.end(), [](const Run& a, const Run& b) { return a.start < b.start; });
  std::vector<Run> out;
  out.reserve(v.size());
  std::unordered_map<int64_t, size_t> next;    // expected next column -> run in out
  std::unordered_map<int64_t, size_t> single;  // column of a count-1 run -> run in out
  auto expected = [](const Run& r) { return r.count == 1 ? r.start + 1 : last(r) + r.stride; };
  for (Run y : v) {
    if (y.count <= 0) continue;
    if (y.count == 1) y.stride = 1;
    bool merged = false;
    if (auto it = next.find(y.start); it != next.end()) {
      Run& x = out[it->second];
      if (expected(x) == y.start) {
        int64_t s = stride_of(x);
        if (y.count == 1 || y.stride == s) {
          next.erase(it);
          x.stride = s;
          x.count += y.count;
          next[expected(x)] = static_cast<size_t>(&x - out.data());
          merged = true;
        }
      }
    }
    if (!merged && y.count >= 2) {
      if (auto it = single.find(y.start - y.stride); it != single.end()) {
        Run& x = out[it->second];
        if (x.count == 1 && x.start == y.start - y.stride) {
          single.erase(it);
          next.erase(x.start + 1);
          x.stride = y.stride;
          x.count = y.count + 1;
          next[expected(x)] = static_cast<size_t>(&x - out.data());
          merged = true;
        }
      }
    }
    if (!merged) {
      out.push_back(y);
      next[expected(y)] = out.size() - 1;
      if (y.count == 1) single[y.start] = out.size() - 1;
    }
  }
  for (Run& r : out)
    if (r.count == 1) r.stride = 1;
  v.swap(out);
}

void enumerate(int64_t lo, int64_t hi, const std::vector<Class>& cls, std::vector<Run>& out) {
  std::vector<int64_t> pts;
  for (const Class& c : cls)
    for (int64_t j = lo + fmod(c.r - lo, c.m); j <= hi; j += c.m) pts.push_back(j);
  std::sort(pts.begin(), pts.end());
  pts.erase(std::unique(pts.begin(), pts.end()), pts.end());
  std::vector<Run> tmp;
  runs_from_points(pts, tmp);
  out.insert(out.end(), tmp.begin(), tmp.end());
}

// Appends runs for {j in [lo, hi] : j == c.r (mod c.m) for some c}; not yet canonical (finish()).
void emit_classes(int64_t lo, int64_t hi, std::vector<Class>& cls, std::vector<Run>& out) {
  if (cls.empty() || lo > hi) return;
  for (Class& c : cls) {
    c.r = fmod(c.r, c.m);
    if (c.m == 1) {
      out.push_back({lo, 1, hi - lo + 1});
      return;
    }
  }
  std::sort(cls.begin(), cls.end(), [](const Class& a, const Class& b) { return a.m != b.m ? a.m < b.m : a.r < b.r; });
  // Drop classes implied by a coarser one (r' mod m' with m' | m and r == r' mod m').
  std::vector<Class> keep;
  for (const Class& c : cls) {
    bool implied = false;
    for (const Class& k : keep) implied = implied || (c.m % k.m == 0 && c.r % k.m == k.r);
    if (!implied) keep.push_back(c);
  }
  auto one = [&](const Class& c) {
    int64_t first = lo + fmod(c.r - lo, c.m);
    if (first <= hi) out.push_back({first, c.m, (hi - first) / c.m + 1});
  };
  if (keep.size() == 1) return one(keep[0]);
  int64_t period = 1;
  for (const Class& c : keep) {
    period = std::lcm(period, c.m);
    if (period > kMaxPeriod || period > hi - lo + 1) return enumerate(lo, hi, keep, out);
  }
  std::vector<char> bits(static_cast<size_t>(period), 0);
  for (const Class& c : keep)
    for (int64_t x = c.r; x < period; x += c.m) bits[static_cast<size_t>(x)] = 1;
  // Smallest period d of the residue pattern (d divides period).
  int64_t d = period;
  for (int64_t q = 1; q < period; ++q) {
    if (period % q) continue;
    bool ok = true;
    for (int64_t x = 0; x < period && ok; ++x) ok = bits[static_cast<size_t>(x)] == bits[static_cast<size_t>((x + q) % period)];
    if (ok) { d = q; break; }
  }
  std::vector<int64_t> res;
  for (int64_t x = 0; x < d; ++x)
    if (bits[static_cast<size_t>(x)]) res.push_back(x);
  if (static_cast<int64_t>(res.size()) == d) {
    out.push_back({lo, 1, hi - lo + 1});
    return;
  }
  // Either one progression of stride d per residue, or stride-1 intervals per group of
  // consecutive residues per period, whichever gives fewer runs.
  int64_t groups = 0;
  for (size_t k = 0; k < res.size(); ++k) groups += (k == 0 || res[k] != res[k - 1] + 1);
  if (groups * ((hi - lo + 1) / d + 2) < static_cast<int64_t>(res.size())) {
    for (int64_t base = lo - fmod(lo, d); base <= hi; base += d) {
      for (size_t k = 0; k < res.size();) {
        size_t e = k;
        while (e + 1 < res.size() && res[e + 1] == res[e] + 1) ++e;
        int64_t a = std::max(lo, base + res[k]), b = std::min(hi, base + res[e]);
        if (a <= b) out.push_back({a, 1, b - a + 1});
        k = e + 1;
      }
    }
  } else {
    // Cover the residues with as few disjoint classes as possible, coarsest first: every class
    // r mod m (m | d) whose residues mod d are all in the set and none taken yet.
    std::vector<char> taken(static_cast<size_t>(d), 0);
    for (int64_t m = 1; m <= d; ++m) {
      if (d % m) continue;
      for (int64_t r = 0; r < m; ++r) {
        bool ok = true;
        for (int64_t x = r; x < d && ok; x += m) ok = bits[static_cast<size_t>(x)] && !taken[static_cast<size_t>(x)];
        if (!ok) continue;
        for (int64_t x = r; x < d; x += m) taken[static_cast<size_t>(x)] = 1;
        one({r, m});
      }
    }
  }
}

// x == r1 (mod m1) and x == r2 (mod m2) -> one class mod lcm, or none.
bool crt(Class a, Class b, Class& out) {
  int64_t g = std::gcd(a.m, b.m);
  if (fmod(b.r - a.r, g) != 0) return false;
  // Solve a.r + a.m*k == b.r (mod b.m): k == ((b.r-a.r)/g) * inv(a.m/g) (mod b.m/g).
  int64_t mg = b.m / g;
  int64_t x0 = 0, x1 = 1, r0 = mg, r1 = fmod(a.m / g, mg);  // extended Euclid for inv(a.m/g) mod mg
  if (mg == 1) {
    out = {fmod(a.r, a.m), a.m};
    return true;
  }
  while (r1 != 0) {
    int64_t q = r0 / r1;
    std::swap(r0, r1);
    r1 -= q * r0;
    std::swap(x0, x1);
    x1 -= q * x0;
  }
  int64_t inv = fmod(x0, mg);
  int64_t k = static_cast<int64_t>(static_cast<i128>(fmod((b.r - a.r) / g, mg)) * inv % mg);
  int64_t l = a.m / g * b.m;
  out = {static_cast<int64_t>(fmod(static_cast<int64_t>((static_cast<i128>(a.m) * k + a.r) % l), l)), l};
  return true;
}

bool all_unit(const std::vector<Run>& v) {
  for (const Run& r : v)
    if (r.count > 1 && r.stride != 1) return false;
  return true;
}

enum class Op { Union, Intersect };

void combine(const std::vector<Run>& a, const std::vector<Run>& b, Op op, std::vector<Run>& out) {
  out.clear();
  // Elementary intervals: boundaries at every run's first column and one past its last.
  std::vector<int64_t> cuts;
  cuts.reserve(2 * (a.size() + b.size()));
  for (const auto* v : {&a, &b})
    for (const Run& r : *v) {
      cuts.push_back(r.start);
      cuts.push_back(last(r) + 1);
    }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  // Runs sorted by start; sweep with active lists.
  size_t ia = 0, ib = 0;
  std::vector<const Run*> act_a, act_b;
  std::vector<Class> cls;
  for (size_t k = 0; k + 1 < cuts.size(); ++k) {
    int64_t lo = cuts[k], hi = cuts[k + 1] - 1;
    while (ia < a.size() && a[ia].start <= lo) act_a.push_back(&a[ia++]);
    while (ib < b.size() && b[ib].start <= lo) act_b.push_back(&b[ib++]);
    std::erase_if(act_a, [&](const Run* r) { return last(*r) < lo; });
    std::erase_if(act_b, [&](const Run* r) { return last(*r) < lo; });
    cls.clear();
    if (op == Op::Union) {
      for (const auto* act : {&act_a, &act_b})
        for (const Run* r : *act) cls.push_back({fmod(r->start, stride_of(*r)), stride_of(*r)});
    } else {
      for (const Run* x : act_a)
        for (const Run* y : act_b) {
          Class c;
          if (crt({fmod(x->start, stride_of(*x)), stride_of(*x)}, {fmod(y->start, stride_of(*y)), stride_of(*y)}, c))
            cls.push_back(c);
        }
    }
    emit_classes(lo, hi, cls, out);
  }
  finish(out);
}

}  // namespace

void runs_join(std::vector<Run>& runs) { finish(runs); }

void runs_from_points(const std::vector<int64_t>& cols, std::vector<Run>& out) {
  out.clear();
  for (size_t k = 0; k < cols.size();) {
    if (k + 1 == cols.size()) {
      out.push_back({cols[k], 1, 1});
      break;
    }
    int64_t s = cols[k + 1] - cols[k];
    size_t e = k + 1;
    while (e + 1 < cols.size() && cols[e + 1] - cols[e] == s) ++e;
    out.push_back({cols[k], s, static_cast<int64_t>(e - k + 1)});
    k = e + 1;
  }
}

void runs_union(const std::vector<Run>& a, const std::vector<Run>& b, std::vector<Run>& out) {
  if (a.empty() || b.empty()) {
    out = a.empty() ? b : a;
    return;
  }
  if (all_unit(a) && all_unit(b)) {
    // Fast path: intervals only.
    out.clear();
    size_t x = 0, y = 0;
    while (x < a.size() || y < b.size()) {
      const Run& r = (y >= b.size() || (x < a.size() && a[x].start <= b[y].start)) ? a[x++] : b[y++];
      int64_t e = r.start + r.count;  // one past the end
      if (!out.empty() && r.start <= out.back().start + out.back().count) {
        Run& o = out.back();
        o.count = std::max(o.start + o.count, e) - o.start;
        o.stride = 1;
      } else {
        out.push_back({r.start, 1, r.count});
      }
    }
    return;
  }
  combine(a, b, Op::Union, out);
}

void runs_intersect(const std::vector<Run>& a, const std::vector<Run>& b, std::vector<Run>& out) {
  out.clear();
  if (a.empty() || b.empty()) return;
  if (all_unit(a) && all_unit(b)) {
    size_t x = 0, y = 0;
    while (x < a.size() && y < b.size()) {
      int64_t lo = std::max(a[x].start, b[y].start);
      int64_t ea = a[x].start + a[x].count, eb = b[y].start + b[y].count;
      int64_t hi = std::min(ea, eb);
      if (lo < hi) out.push_back({lo, 1, hi - lo});
      (ea < eb ? x : y)++;
    }
    return;
  }
  combine(a, b, Op::Intersect, out);
}

// ---------------------------------------------------------------------------------------------

struct RowEvaluator::Impl {
  struct Node {
    const Term* t = nullptr;
    std::vector<Node> kids;
    std::vector<Run> buf, tmp;
    std::vector<Run> fixed_runs;        // Global: token columns; Fixed: summary columns
    int64_t cached_rb = -1;             // RandomBlocks: row block of buf
    std::vector<int64_t> rows_begin;    // Coo: not used (binary search on points)
  };
  const Problem& p;
  Node root;
  std::vector<Run> out, clip;
  std::vector<int64_t> pts;

  explicit Impl(const Problem& pr) : p(pr) { build(root, pr.pattern); }

  void build(Node& n, const Term& t) {
    n.t = &t;
    if (t.kind == TermKind::Global) {
      std::vector<int64_t> cols;
      for (int64_t tok : t.tokens)
        if (tok < p.kv_len) cols.push_back(tok);
      // Consecutive tokens form intervals; other tokens are single columns.
      n.fixed_runs.clear();
      for (size_t k = 0; k < cols.size();) {
        size_t e = k;
        while (e + 1 < cols.size() && cols[e + 1] == cols[e] + 1) ++e;
        n.fixed_runs.push_back({cols[k], 1, static_cast<int64_t>(e - k + 1)});
        k = e + 1;
      }
    } else if (t.kind == TermKind::Fixed && t.summary > 0) {
      std::vector<Class> cls;
      for (int64_t r = t.block - t.summary; r < t.block; ++r) cls.push_back({r, t.block});
      emit_classes(0, p.kv_len - 1, cls, n.fixed_runs);
      finish(n.fixed_runs);
    }
    n.kids.resize(t.children.size());
    for (size_t k = 0; k < t.children.size(); ++k) build(n.kids[k], t.children[k]);
  }

  void interval(std::vector<Run>& v, int64_t a, int64_t b) {  // [a, b] clipped
    v.clear();
    a = std::max<int64_t>(a, 0);
    b = std::min<int64_t>(b, p.kv_len - 1);
    if (a <= b) v.push_back({a, 1, b - a + 1});
  }

  void progression(std::vector<Run>& v, int64_t start, int64_t stride, int64_t count) {  // clipped
    v.clear();
    int64_t klo = std::max<int64_t>(0, cdiv(-start, stride));
    int64_t khi = std::min<int64_t>(count - 1, fdiv(p.kv_len - 1 - start, stride));
    if (klo <= khi) v.push_back({start + klo * stride, khi > klo ? stride : 1, khi - klo + 1});
  }

  void eval(Node& n, int64_t i) {
    const Term& t = *n.t;
    std::vector<Run>& v = n.buf;
    switch (t.kind) {
      case TermKind::Window: interval(v, i - t.left, i + t.right); break;
      case TermKind::Dilated:
        progression(v, i - t.left * t.dilation, t.dilation, t.left + t.right + 1);
        break;
      case TermKind::Strided: {
        int64_t s = fmod(i - t.offset, t.stride);
        progression(v, s, t.stride, cdiv(p.kv_len - s, t.stride));
        break;
      }
      case TermKind::Blocked: {
        int64_t b0 = fdiv(i, t.block) * t.block;
        interval(v, b0, b0 + t.block - 1);
        break;
      }
      case TermKind::BlockWindow: {
        int64_t bi = fdiv(i, t.block);
        interval(v, (bi - t.left) * t.block, (bi + t.right + 1) * t.block - 1);
        break;
      }
      case TermKind::Fixed: {
        int64_t b0 = fdiv(i, t.block) * t.block;
        interval(n.tmp, b0, b0 + t.block - 1);
        runs_union(n.tmp, n.fixed_runs, v);
        break;
      }
      case TermKind::Global:
        if (std::binary_search(t.tokens.begin(), t.tokens.end(), i)) interval(v, 0, p.kv_len - 1);
        else v = n.fixed_runs;
        break;
      case TermKind::RandomBlocks: {
        int64_t rb = fdiv(i, t.block);
        if (rb != n.cached_rb) {
          n.cached_rb = rb;
          v.clear();
          for (int64_t kb : random_key_blocks(t, rb, cdiv(p.kv_len, t.block))) {
            int64_t a = kb * t.block, e = std::min(p.kv_len, a + t.block);
            if (!v.empty() && v.back().start + v.back().count == a) v.back().count += e - a;
            else v.push_back({a, 1, e - a});
          }
        }
        break;
      }
      case TermKind::Affine: progression(v, t.slope * i + t.offset, t.stride, t.count); break;
      case TermKind::Coo: {
        auto lo = std::lower_bound(t.points.begin(), t.points.end(), std::make_pair(i, int64_t{-1}));
        pts.clear();
        for (auto it = lo; it != t.points.end() && it->first == i; ++it) pts.push_back(it->second);
        runs_from_points(pts, v);
        break;
      }
      case TermKind::Union:
      case TermKind::Intersect: {
        eval(n.kids[0], i);
        v = n.kids[0].buf;
        for (size_t k = 1; k < n.kids.size(); ++k) {
          if (t.kind == TermKind::Intersect && v.empty()) break;
          eval(n.kids[k], i);
          if (t.kind == TermKind::Union) runs_union(v, n.kids[k].buf, n.tmp);
          else runs_intersect(v, n.kids[k].buf, n.tmp);
          v.swap(n.tmp);
        }
        break;
      }
    }
  }

  const std::vector<Run>& row(int64_t i) {
    eval(root, i);
    out = root.buf;
    if (p.causal) {
      // Keep j <= i: cut every run at column i.
      size_t w = 0;
      for (Run r : out) {
        if (r.start > i) continue;
        int64_t c = std::min(r.count, (i - r.start) / r.stride + 1);
        r.count = c;
        if (c == 1) r.stride = 1;
        out[w++] = r;
      }
      out.resize(w);
    }
    return out;
  }
};

RowEvaluator::RowEvaluator(const Problem& p) : impl_(std::make_unique<Impl>(p)) {}
RowEvaluator::~RowEvaluator() = default;
const std::vector<Run>& RowEvaluator::row(int64_t i) { return impl_->row(i); }

}  // namespace splat
