// Per-row evaluation of pattern terms as runs (arithmetic progressions), and exact union /
// intersection of run lists. Progressions of different strides are combined per "elementary
// interval" (a column range in which the same runs are active) as residue classes: modulo the
// lcm of the strides when that is small, else by enumerating the points of that interval only.
#include "libsplat/analysis/rows.h"

#include <algorithm>
#include <bit>
#include <cmath>
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

// Work and memory of row evaluation: steps count against Limits::max_work (WorkMeter), and the
// bytes of the run lists and point buffers made for one row against half of Limits::max_memory.
// Without a meter (the public set operations) nothing is counted.
struct Budget {
  WorkMeter* work = nullptr;
  const Problem* p = nullptr;
  int64_t row_bytes = 0;
  void steps(int64_t n) {
    if (work) work->add(n);
  }
  void bytes(int64_t n) {
    if (!p) return;
    row_bytes += n;
    if (row_bytes > p->limits.max_memory / 2)
      throw_memory_limit(p->file, "evaluating row " + std::to_string(work ? work->row : 0) + " of the pattern",
                         row_bytes, p->limits);
  }
  void runs(const std::vector<Run>& v) {
    steps(static_cast<int64_t>(v.size()));
    bytes(static_cast<int64_t>(v.size() * sizeof(Run)));
  }
};

Budget& unmetered() {
  static thread_local Budget b;
  return b;
}

struct Class {
  int64_t r, m;  // j == r (mod m), 0 <= r < m
};

// Sorts runs by start and joins runs that continue each other (across elementary intervals):
// the result is canonical in the sense of rows.h.
void finish(std::vector<Run>& v, Budget& B) {
  B.runs(v);
  B.steps(8 * static_cast<int64_t>(v.size()));  // a sort and two hash maps: about 80 ns a run
  std::sort(v.begin(), v.end(), [](const Run& a, const Run& b) { return a.start < b.start; });
  std::vector<Run> out;
  out.reserve(v.size());
  std::unordered_map<int64_t, size_t> next;    // expected next column -> run in out
  std::unordered_map<int64_t, size_t> single;  // column of a count-1 run -> run in out
  next.reserve(v.size());
  single.reserve(v.size());
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

void enumerate(int64_t lo, int64_t hi, const std::vector<Class>& cls, std::vector<Run>& out, Budget& B) {
  int64_t n = 0;  // points, counted before they are made
  for (const Class& c : cls) {
    const int64_t first = lo + fmod(c.r - lo, c.m);
    if (first <= hi) n += (hi - first) / c.m + 1;
    B.steps(1);
  }
  B.steps(4 * n);
  B.bytes(n * static_cast<int64_t>(sizeof(int64_t) + sizeof(Run)));
  std::vector<int64_t> pts;
  pts.reserve(static_cast<size_t>(n));
  const int64_t len = hi - lo + 1;
  if (len / 64 <= n) {  // dense: a bitset over [lo, hi] gives the points in order, no sort
    B.bytes(len / 8);
    std::vector<uint64_t> bits(static_cast<size_t>(len / 64 + 1), 0);
    for (const Class& c : cls)
      for (int64_t j = lo + fmod(c.r - lo, c.m); j <= hi; j += c.m)
        bits[static_cast<size_t>((j - lo) / 64)] |= uint64_t{1} << ((j - lo) % 64);
    for (size_t w = 0; w < bits.size(); ++w)
      for (uint64_t x = bits[w]; x != 0; x &= x - 1)
        pts.push_back(lo + static_cast<int64_t>(64 * w) + std::countr_zero(x));
  } else {
    for (const Class& c : cls)
      for (int64_t j = lo + fmod(c.r - lo, c.m); j <= hi; j += c.m) pts.push_back(j);
    std::sort(pts.begin(), pts.end());
    pts.erase(std::unique(pts.begin(), pts.end()), pts.end());
  }
  std::vector<Run> tmp;
  runs_from_points(pts, tmp);
  out.insert(out.end(), tmp.begin(), tmp.end());
}

// Appends runs for {j in [lo, hi] : j == c.r (mod c.m) for some c}; not yet canonical (finish()).
void emit_classes(int64_t lo, int64_t hi, std::vector<Class>& cls, std::vector<Run>& out, Budget& B) {
  if (cls.empty() || lo > hi) return;
  B.steps(static_cast<int64_t>(cls.size()));
  for (Class& c : cls) {
    c.r = fmod(c.r, c.m);
    if (c.m == 1) {
      out.push_back({lo, 1, hi - lo + 1});
      return;
    }
  }
  std::sort(cls.begin(), cls.end(), [](const Class& a, const Class& b) { return a.m != b.m ? a.m < b.m : a.r < b.r; });
  // Drop classes implied by a coarser one (r' mod m' with m' | m and r == r' mod m'). keep stays
  // sorted by (m, r): each candidate is looked up once per distinct modulus kept so far.
  thread_local std::vector<Class> keep;  // scratch, reused: this runs once per elementary interval
  thread_local std::vector<int64_t> moduli;
  keep.clear();
  moduli.clear();
  const auto before = [](const Class& a, const Class& b) { return a.m != b.m ? a.m < b.m : a.r < b.r; };
  for (const Class& c : cls) {
    bool implied = false;
    B.steps(static_cast<int64_t>(moduli.size()) + 1);
    for (size_t x = 0; x < moduli.size() && !implied; ++x)
      implied = c.m % moduli[x] == 0 && std::binary_search(keep.begin(), keep.end(), Class{c.r % moduli[x], moduli[x]}, before);
    if (implied) continue;
    if (moduli.empty() || moduli.back() != c.m) moduli.push_back(c.m);
    keep.push_back(c);
  }
  auto one = [&](const Class& c) {
    int64_t first = lo + fmod(c.r - lo, c.m);
    if (first <= hi) out.push_back({first, c.m, (hi - first) / c.m + 1});
  };
  if (keep.size() == 1) return one(keep[0]);
  int64_t period = 1;
  for (const Class& c : keep) {
    period = std::lcm(period, c.m);
    if (period > kMaxPeriod || period > hi - lo + 1) return enumerate(lo, hi, keep, out, B);
  }
  B.steps(period);
  thread_local std::vector<char> bits;
  bits.assign(static_cast<size_t>(period), 0);
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
  thread_local std::vector<int64_t> res;
  res.clear();
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

void combine(const std::vector<Run>& a, const std::vector<Run>& b, Op op, std::vector<Run>& out, Budget& B) {
  out.clear();
  B.steps(static_cast<int64_t>(2 * (a.size() + b.size())));
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
    B.steps(static_cast<int64_t>(act_a.size() + act_b.size()) + 8);
    std::erase_if(act_a, [&](const Run* r) { return last(*r) < lo; });
    std::erase_if(act_b, [&](const Run* r) { return last(*r) < lo; });
    cls.clear();
    if (op == Op::Union) {
      for (const auto* act : {&act_a, &act_b})
        for (const Run* r : *act) cls.push_back({fmod(r->start, stride_of(*r)), stride_of(*r)});
    } else {
      B.steps(static_cast<int64_t>(act_a.size() * act_b.size()));
      for (const Run* x : act_a)
        for (const Run* y : act_b) {
          Class c;
          if (crt({fmod(x->start, stride_of(*x)), stride_of(*x)}, {fmod(y->start, stride_of(*y)), stride_of(*y)}, c))
            cls.push_back(c);
        }
    }
    emit_classes(lo, hi, cls, out, B);
  }
  finish(out, B);
}

void union_of(const std::vector<Run>& a, const std::vector<Run>& b, std::vector<Run>& out, Budget& B);
void intersection_of(const std::vector<Run>& a, const std::vector<Run>& b, std::vector<Run>& out, Budget& B);

}  // namespace

void runs_join(std::vector<Run>& runs) { finish(runs, unmetered()); }

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
  union_of(a, b, out, unmetered());
}

void runs_intersect(const std::vector<Run>& a, const std::vector<Run>& b, std::vector<Run>& out) {
  intersection_of(a, b, out, unmetered());
}

namespace {

void union_of(const std::vector<Run>& a, const std::vector<Run>& b, std::vector<Run>& out, Budget& B) {
  B.steps(static_cast<int64_t>(a.size() + b.size()) + 1);
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
    B.runs(out);
    return;
  }
  combine(a, b, Op::Union, out, B);
}

void intersection_of(const std::vector<Run>& a, const std::vector<Run>& b, std::vector<Run>& out, Budget& B) {
  B.steps(static_cast<int64_t>(a.size() + b.size()) + 1);
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
    B.runs(out);
    return;
  }
  combine(a, b, Op::Intersect, out, B);
}

}  // namespace

// ---------------------------------------------------------------------------------------------

struct RowEvaluator::Impl {
  struct Node {
    const Term* t = nullptr;
    std::vector<Node> kids;
    std::vector<Run> buf, tmp;
    std::vector<Run> fixed_runs;        // Global: token columns; Fixed: summary columns
    int64_t cached_rb = -1;             // RandomBlocks: row block of buf
    int64_t draws = 0;                  // RandomBlocks: expected draws of one row block (steps)
    std::vector<std::vector<Run>> parts;  // Union/Intersect of many terms: pairwise reduction
  };
  const Problem& p;
  WorkMeter meter;
  Budget budget;
  int64_t base_bytes = 0;
  Node root;
  std::vector<Run> out, clip;
  std::vector<int64_t> pts;

  explicit Impl(const Problem& pr) : p(pr), meter(pr.limits, pr.file, "evaluating the pattern's rows") {
    budget.work = &meter;
    budget.p = &pr;
    build(root, pr.pattern);
    base_bytes = budget.row_bytes;  // the terms' constant runs, held for every row
  }

  // Runs of the summary columns j mod block >= block - summary over [0, kv_len), as the
  // residue classes give them (emit_classes), but without listing the points of large blocks.
  void fixed_columns(const Term& t, std::vector<Run>& v) {
    if (t.block <= kMaxPeriod && t.block <= p.kv_len) {
      std::vector<Class> cls;
      for (int64_t r = t.block - t.summary; r < t.block; ++r) cls.push_back({r, t.block});
      emit_classes(0, p.kv_len - 1, cls, v, budget);
    } else {
      // What enumerating the points and runs_from_points give: one interval per block, or, with
      // one summary column per block, one progression of stride block.
      const int64_t nb = cdiv(p.kv_len, t.block);
      budget.steps(t.summary == 1 ? 1 : nb);
      budget.bytes((t.summary == 1 ? 1 : nb) * static_cast<int64_t>(sizeof(Run)));
      const int64_t first = t.block - t.summary;
      if (first >= p.kv_len) return;
      if (t.summary == 1) {
        const int64_t n = (p.kv_len - 1 - first) / t.block + 1;
        v.push_back({first, n > 1 ? t.block : 1, n});
      } else {
        for (int64_t b0 = 0; b0 + first < p.kv_len; b0 += t.block)
          v.push_back({b0 + first, 1, std::min(t.summary, p.kv_len - b0 - first)});
      }
    }
    finish(v, budget);
  }

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
      budget.runs(n.fixed_runs);
    } else if (t.kind == TermKind::Fixed && t.summary > 0) {
      fixed_columns(t, n.fixed_runs);
    } else if (t.kind == TermKind::RandomBlocks) {
      // Draws until per_row distinct blocks of nkb: nkb * (H(nkb) - H(nkb - r)) expected, about
      // nkb * ln(nkb / (nkb - r)); all blocks (r == nkb) are listed without drawing.
      const int64_t nkb = cdiv(p.kv_len, t.block), r = std::min(t.per_row, nkb);
      const double d = r == nkb ? static_cast<double>(nkb)
                                : static_cast<double>(nkb) * std::log(static_cast<double>(nkb) / static_cast<double>(nkb - r));
      n.draws = static_cast<int64_t>(std::min(d, 1e15)) + 2 * r;
    }
    n.kids.resize(t.children.size());
    for (size_t k = 0; k < t.children.size(); ++k) build(n.kids[k], t.children[k]);
  }

  void interval(std::vector<Run>& v, i128 a, i128 b) {  // [a, b] clipped
    v.clear();
    a = std::max<i128>(a, 0);
    b = std::min<i128>(b, p.kv_len - 1);
    if (a <= b) v.push_back({static_cast<int64_t>(a), 1, static_cast<int64_t>(b - a + 1)});
  }

  // {start + k*stride : 0 <= k < count} clipped; start may lie far outside int64 products' reach.
  void progression(std::vector<Run>& v, i128 start, int64_t stride, int64_t count) {
    v.clear();
    auto fd = [](i128 x, i128 m) { return x / m - ((x % m != 0) && ((x < 0) != (m < 0))); };
    const i128 klo = std::max<i128>(0, -fd(start, stride));
    const i128 khi = std::min<i128>(count - 1, fd(p.kv_len - 1 - start, stride));
    if (klo <= khi)
      v.push_back({static_cast<int64_t>(start + klo * stride), khi > klo ? stride : 1, static_cast<int64_t>(khi - klo + 1)});
  }

  // Union or intersection of the children: folded left to right (as the results' runs have
  // always been cut) for a few children; for many, unit intervals are merged after one sort
  // (union) and other lists reduced pairwise, so that the work grows as n log n, not n^2.
  void combine_kids(Node& n, int64_t i) {
    const Term& t = *n.t;
    const bool uni = t.kind == TermKind::Union;
    std::vector<Run>& v = n.buf;
    if (n.kids.size() <= 16) {
      eval(n.kids[0], i);
      v = n.kids[0].buf;
      for (size_t k = 1; k < n.kids.size(); ++k) {
        if (!uni && v.empty()) break;
        eval(n.kids[k], i);
        if (uni) union_of(v, n.kids[k].buf, n.tmp, budget);
        else intersection_of(v, n.kids[k].buf, n.tmp, budget);
        v.swap(n.tmp);
      }
      return;
    }
    bool unit = true;
    size_t total = 0;
    for (Node& k : n.kids) {
      eval(k, i);
      if (!uni && k.buf.empty()) {
        v.clear();
        return;
      }
      unit = unit && all_unit(k.buf);
      total += k.buf.size();
    }
    budget.steps(static_cast<int64_t>(total));
    budget.bytes(static_cast<int64_t>(total * sizeof(Run)));
    if (uni && unit) {
      n.tmp.clear();
      for (const Node& k : n.kids) n.tmp.insert(n.tmp.end(), k.buf.begin(), k.buf.end());
      std::sort(n.tmp.begin(), n.tmp.end(), [](const Run& x, const Run& y) { return x.start < y.start; });
      v.clear();
      for (const Run& r : n.tmp) {  // as union_of's fast path: overlapping or touching intervals join
        if (!v.empty() && r.start <= v.back().start + v.back().count) v.back().count = std::max(v.back().start + v.back().count, r.start + r.count) - v.back().start;
        else v.push_back({r.start, 1, r.count});
      }
      budget.runs(v);
      return;
    }
    n.parts.resize(n.kids.size());
    for (size_t k = 0; k < n.kids.size(); ++k) n.parts[k] = n.kids[k].buf;
    for (size_t m = n.parts.size(); m > 1; m = (m + 1) / 2) {
      for (size_t k = 0; k + 1 < m; k += 2) {
        if (uni) union_of(n.parts[k], n.parts[k + 1], n.tmp, budget);
        else intersection_of(n.parts[k], n.parts[k + 1], n.tmp, budget);
        n.parts[k / 2].swap(n.tmp);
      }
      if (m % 2) n.parts[m / 2].swap(n.parts[m - 1]);
    }
    v.swap(n.parts[0]);
  }

  void eval(Node& n, int64_t i) {
    const Term& t = *n.t;
    std::vector<Run>& v = n.buf;
    budget.steps(1);
    switch (t.kind) {
      case TermKind::Window: interval(v, static_cast<i128>(i) - t.left, static_cast<i128>(i) + t.right); break;
      case TermKind::Dilated:
        progression(v, static_cast<i128>(i) - static_cast<i128>(t.left) * t.dilation, t.dilation, t.left + t.right + 1);
        break;
      case TermKind::Strided: {
        int64_t s = fmod(i - t.offset, t.stride);
        progression(v, s, t.stride, cdiv(p.kv_len - s, t.stride));
        break;
      }
      case TermKind::Blocked: {
        i128 b0 = static_cast<i128>(fdiv(i, t.block)) * t.block;
        interval(v, b0, b0 + t.block - 1);
        break;
      }
      case TermKind::BlockWindow: {
        i128 bi = fdiv(i, t.block);
        interval(v, (bi - t.left) * t.block, (bi + t.right + 1) * t.block - 1);
        break;
      }
      case TermKind::Fixed: {
        i128 b0 = static_cast<i128>(fdiv(i, t.block)) * t.block;
        interval(n.tmp, b0, b0 + t.block - 1);
        union_of(n.tmp, n.fixed_runs, v, budget);
        break;
      }
      case TermKind::Global:
        if (std::binary_search(t.tokens.begin(), t.tokens.end(), i)) interval(v, 0, p.kv_len - 1);
        else v = n.fixed_runs;
        break;
      case TermKind::RandomBlocks: {
        int64_t rb = fdiv(i, t.block);
        if (t.per_row >= cdiv(p.kv_len, t.block)) {  // every key block
          interval(v, 0, p.kv_len - 1);
        } else if (rb != n.cached_rb) {
          n.cached_rb = rb;
          v.clear();
          budget.steps(n.draws);
          budget.bytes(std::min(t.per_row, cdiv(p.kv_len, t.block)) * static_cast<int64_t>(sizeof(int64_t) + sizeof(Run)));
          for (int64_t kb : random_key_blocks(t, rb, cdiv(p.kv_len, t.block))) {
            int64_t a = kb * t.block, e = std::min(p.kv_len, a + t.block);
            if (!v.empty() && v.back().start + v.back().count == a) v.back().count += e - a;
            else v.push_back({a, 1, e - a});
          }
        }
        break;
      }
      case TermKind::Affine: progression(v, static_cast<i128>(t.slope) * i + t.offset, t.stride, t.count); break;
      case TermKind::Coo: {
        auto lo = std::lower_bound(t.points.begin(), t.points.end(), std::make_pair(i, int64_t{-1}));
        pts.clear();
        for (auto it = lo; it != t.points.end() && it->first == i; ++it) pts.push_back(it->second);
        runs_from_points(pts, v);
        break;
      }
      case TermKind::Union:
      case TermKind::Intersect: combine_kids(n, i); break;
    }
    budget.runs(v);
  }

  const std::vector<Run>& row(int64_t i) {
    meter.row = i;
    meter.rows = p.seq_len;
    budget.row_bytes = base_bytes;
    budget.steps(kRowSteps);
    const int64_t pos = i + p.q_offset;  // the terms see the row's position
    eval(root, pos);
    out = root.buf;
    if (p.causal) {
      // Keep j <= pos: cut every run at column pos.
      size_t w = 0;
      for (Run r : out) {
        if (r.start > pos) continue;
        int64_t c = std::min(r.count, (pos - r.start) / r.stride + 1);
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
