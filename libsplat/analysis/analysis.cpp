// Problem -> ACSR. Rows are evaluated one at a time (rows.h) and grouped greedily into affine
// segments; ranges where that leaves only tiny segments are retried one phase class of rows at a
// time (dilated / strided edges), else stored as per-row tables when that is smaller.
#include "libsplat/analysis/analysis.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>

#include "libsplat/analysis/rows.h"

namespace splat {

namespace {


// Greedy builder of one affine segment over member rows r0, r0+q, r0+2q, ...
struct Builder {
  int64_t r0 = 0, q = 1;
  bool allow_den = true;
  int64_t n = 0;  // member rows so far
  Builder(int64_t first_row, int64_t row_stride, bool den) : r0(first_row), q(row_stride), allow_den(den) {}
  std::vector<Run> first;
  std::vector<int64_t> ds, dc, stride;  // per run: start/count step per member row; stride (-1 unknown)

  void restart(int64_t first_row) {  // a new segment from first_row, keeping the buffers
    r0 = first_row;
    n = 0;
  }

  bool add(const std::vector<Run>& R) {
    if (n == 0) {
      first = R;
      stride.assign(R.size(), -1);
      for (size_t k = 0; k < R.size(); ++k)
        if (R[k].count >= 2) stride[k] = R[k].stride;
      ds.assign(R.size(), 0);
      dc.assign(R.size(), 0);
      n = 1;
      return true;
    }
    if (R.size() != first.size()) return false;
    for (size_t k = 0; k < R.size(); ++k)
      if (R[k].count >= 2 && stride[k] != -1 && stride[k] != R[k].stride) return false;
    if (n == 1) {
      for (size_t k = 0; k < R.size(); ++k) {
        int64_t a = R[k].start - first[k].start, c = R[k].count - first[k].count;
        if (!allow_den && q > 1 && (a % q != 0 || c % q != 0)) return false;
      }
      for (size_t k = 0; k < R.size(); ++k) {
        ds[k] = R[k].start - first[k].start;
        dc[k] = R[k].count - first[k].count;
      }
    } else {
      for (size_t k = 0; k < R.size(); ++k)
        if (R[k].start != first[k].start + n * ds[k] || R[k].count != first[k].count + n * dc[k]) return false;
    }
    for (size_t k = 0; k < R.size(); ++k)
      if (R[k].count >= 2) stride[k] = R[k].stride;
    ++n;
    return true;
  }

  Segment make() const {
    Segment s;
    s.row_begin = r0;
    s.row_stride = q;
    s.row_end = r0 + (n - 1) * q + 1;
    for (size_t k = 0; k < first.size(); ++k) {
      AffineRun a;
      a.stride = stride[k] == -1 ? 1 : stride[k];
      if (ds[k] % q == 0 && dc[k] % q == 0) {
        a.start_slope = ds[k] / q;
        a.start_offset = first[k].start - a.start_slope * r0;
        a.count_slope = dc[k] / q;
        a.count_offset = first[k].count - a.count_slope * r0;
      } else {
        a.den = q;
        a.start_slope = ds[k];
        a.start_offset = first[k].start * q - ds[k] * r0;
        a.count_slope = dc[k];
        a.count_offset = first[k].count * q - dc[k] * r0;
      }
      s.runs.push_back(a);
    }
    return s;
  }
};

int64_t segment_bytes(const Segment& s) {
  int64_t b = 16;
  for (const AffineRun& a : s.runs) b += a.den == 1 ? 20 : 24;
  if (s.tabulated) b += static_cast<int64_t>(s.row_ptr.size()) * 4 + static_cast<int64_t>(s.table.size()) * 12;
  return b;
}

// Rows come from a RowSource (a pattern's RowEvaluator, or rows derived from another ACSR).
struct Analyzer {
  int64_t seq_len, kv_len;
  std::string file;  // where errors point (empty for derived rows)
  const AnalyzeOptions& o;
  const RowSource& row;
  int64_t held = 0;  // bytes of metadata held, checked against o.max_metadata_bytes

  Analyzer(int64_t sl, int64_t kl, std::string f, const RowSource& r, const AnalyzeOptions& op)
      : seq_len(sl), kv_len(kl), file(std::move(f)), o(op), row(r) {}

  void charge(int64_t bytes) {
    held += bytes;
    if (held > o.max_metadata_bytes)
      throw Error(file, "pattern",
                  "the analysis needs more than " + std::to_string(o.max_metadata_bytes >> 20) +
                      " MiB of row metadata (too many distinct runs per row for seq_len " + std::to_string(seq_len) + ")");
  }

  // Greedy segments over rows lo+ph, lo+ph+q, ... < hi for every phase ph < q; stops (returns
  // false) once more than `budget` segments are needed. The segments are counted first and made
  // only when they fit, so that a failed try allocates nothing.
  bool phases(int64_t lo, int64_t hi, int64_t q, size_t budget, std::vector<Segment>& out) {
    out.clear();
    for (bool make : {false, true}) {
      size_t n = 0;
      for (int64_t ph = 0; ph < q && lo + ph < hi; ++ph) {
        Builder b{lo + ph, q, o.allow_den};
        for (int64_t i = lo + ph; i < hi; i += q) {
          const std::vector<Run>& R = row(i);
          if (!b.add(R)) {
            if (make) out.push_back(b.make());
            if (++n > budget) return false;
            b.restart(i);
            b.add(R);
          }
        }
        if (make) out.push_back(b.make());
        if (++n > budget) return false;
      }
    }
    return true;
  }

  Segment table(int64_t lo, int64_t hi) {
    Segment s;
    s.row_begin = lo;
    s.row_end = hi;
    s.tabulated = true;
    s.row_ptr.reserve(static_cast<size_t>(hi - lo + 1));
    s.row_ptr.push_back(0);
    for (int64_t i = lo; i < hi; ++i) {
      const std::vector<Run>& R = row(i);
      charge(static_cast<int64_t>(R.size() * sizeof(Run) + sizeof(int64_t)));
      s.table.insert(s.table.end(), R.begin(), R.end());
      s.row_ptr.push_back(static_cast<int64_t>(s.table.size()));
    }
    return s;
  }

  Acsr run() {
    // Pass 1: greedy affine segments over consecutive rows, streaming.
    std::vector<Segment> segs;
    Builder b{0, 1, o.allow_den};
    for (int64_t i = 0; i < seq_len; ++i) {
      const std::vector<Run>& R = row(i);
      if (!b.add(R)) {
        segs.push_back(b.make());
        // What the segment holds in memory (its metadata bytes in int32, segment_bytes, are fewer).
        charge(static_cast<int64_t>(sizeof(Segment) + segs.back().runs.size() * sizeof(AffineRun)));
        b.restart(i);
        b.add(R);
      }
    }
    segs.push_back(b.make());

    // Pass 2: ranges of tiny segments (<= 2 rows): phase classes, else tables, else keep.
    std::vector<Segment> out;
    std::vector<Segment> trial, best;
    for (size_t a = 0; a < segs.size();) {
      size_t e = a;
      while (e < segs.size() && segs[e].rows() <= 2) ++e;
      if (e - a < 2) {
        out.push_back(std::move(segs[a]));
        ++a;
        continue;
      }
      const int64_t lo = segs[a].row_begin, hi = segs[e - 1].row_end;
      size_t best_n = e - a;
      bool have_best = false;
      if (o.phase_segments) {
        // Candidate row strides: the 4 smallest run strides seen here, ascending.
        std::vector<int64_t> strides;
        for (size_t k = a; k < e; ++k)
          for (const AffineRun& r : segs[k].runs) {
            if (r.stride <= 1 || 2 * r.stride > hi - lo || (strides.size() == 4 && r.stride >= strides.back())) continue;
            auto at = std::lower_bound(strides.begin(), strides.end(), r.stride);
            if (at != strides.end() && *at == r.stride) continue;
            strides.insert(at, r.stride);
            if (strides.size() > 4) strides.pop_back();
          }
        for (int64_t q : strides) {
          if (phases(lo, hi, q, best_n - 1, trial)) {
            best_n = trial.size();
            best.swap(trial);
            have_best = true;
          }
        }
      }
      if (have_best) {
        for (Segment& s : best) out.push_back(std::move(s));
      } else {
        int64_t affine_bytes = 0, runs = 0;
        for (size_t k = a; k < e; ++k) {
          affine_bytes += segment_bytes(segs[k]);
          runs += static_cast<int64_t>(segs[k].runs.size()) * segs[k].rows();  // upper bound
        }
        int64_t table_bytes = 16 + (hi - lo + 1) * 4 + runs * 12;
        if (o.tabulate && table_bytes < affine_bytes) {
          out.push_back(table(lo, hi));
        } else {
          for (size_t k = a; k < e; ++k) out.push_back(std::move(segs[k]));
        }
      }
      a = e;
    }
    std::stable_sort(out.begin(), out.end(), [](const Segment& x, const Segment& y) { return x.row_begin < y.row_begin; });
    Acsr acsr;
    acsr.seq_len = seq_len;
    acsr.kv_len = kv_len;
    acsr.segments = std::move(out);
    acsr.index();
    return acsr;
  }
};

// Runs of row i straight from the segment (no allocation beyond buf's capacity).
void row_runs(const Acsr& a, int64_t i, std::vector<Run>& buf) {
  buf.clear();
  int64_t k = a.segment_of(i);
  if (k < 0) return;
  const Segment& s = a.segments[static_cast<size_t>(k)];
  if (s.tabulated) {
    int64_t r = (i - s.row_begin) / s.row_stride;
    for (int64_t x = s.row_ptr[static_cast<size_t>(r)]; x < s.row_ptr[static_cast<size_t>(r) + 1]; ++x)
      if (s.table[static_cast<size_t>(x)].count > 0) buf.push_back(s.table[static_cast<size_t>(x)]);
  } else {
    for (const AffineRun& r : s.runs) {
      Run x = r.at(i);
      if (x.count > 0) buf.push_back(x);
    }
  }
}

// Non-empty bs x bs tiles, one row block at a time: a run of stride <= bs touches every key block
// of its span (an interval of blocks, kept as such), a run of a larger stride one block per point
// (a bitset of key blocks). At the end of a row block the intervals are merged and the bits
// outside them counted, so a dense row costs O(1), not O(kv_len / bs).
struct TileCounter {
  int64_t bs, nkb;
  WorkMeter& meter;
  std::vector<std::pair<int64_t, int64_t>> iv;  // key blocks [a, e]
  size_t merged = 0;                            // iv[0, merged) is sorted and disjoint
  std::vector<uint64_t> bits;
  std::vector<int64_t> dirty;                   // words of bits that may be non-zero
  int64_t tiles = 0;
  TileCounter(int64_t b, int64_t kv, WorkMeter& m)
      : bs(b), nkb((kv + b - 1) / b), meter(m), bits(static_cast<size_t>((nkb + 63) / 64), 0) {}
  void merge() {
    meter.add(static_cast<int64_t>(iv.size()));
    std::sort(iv.begin(), iv.end());
    size_t w = 0;
    for (const auto& x : iv) {
      if (w > 0 && x.first <= iv[w - 1].second + 1) iv[w - 1].second = std::max(iv[w - 1].second, x.second);
      else iv[w++] = x;
    }
    iv.resize(w);
    merged = w;
  }
  void mark(int64_t k) {
    uint64_t& w = bits[static_cast<size_t>(k / 64)];
    if (w == 0) dirty.push_back(k / 64);
    w |= uint64_t{1} << (k % 64);
  }
  void add(const Run& r) {
    const int64_t last = r.start + (r.count - 1) * r.stride;
    if (r.start / bs == last / bs) return mark(r.start / bs);  // one block
    if (r.count == 1 || r.stride <= bs) {
      iv.emplace_back(r.start / bs, last / bs);
      if (iv.size() > 2 * merged + 4096) merge();
      return;
    }
    meter.add(r.count);
    for (int64_t j = r.start; j <= last; j += r.stride) mark(j / bs);
  }
  void end_block() {
    merge();
    for (const auto& [a, e] : iv) tiles += e - a + 1;
    std::sort(dirty.begin(), dirty.end());
    size_t x = 0;  // first interval that may reach word w
    for (int64_t w : dirty) {
      uint64_t word = bits[static_cast<size_t>(w)];
      bits[static_cast<size_t>(w)] = 0;
      const int64_t lo = 64 * w, hi = lo + 63;
      while (x < iv.size() && iv[x].second < lo) ++x;
      for (size_t y = x; y < iv.size() && iv[y].first <= hi; ++y) {  // clear the blocks intervals hold
        const int64_t a = std::max(iv[y].first, lo) - lo, e = std::min(iv[y].second, hi) - lo;
        word &= ~(e - a == 63 ? ~uint64_t{0} : ((uint64_t{1} << (e - a + 1)) - 1) << a);
      }
      tiles += std::popcount(word);
    }
    meter.add(static_cast<int64_t>(dirty.size()));
    dirty.clear();
    iv.clear();
    merged = 0;
  }
};

// Steps one row's evaluation takes at least (besides kRowSteps): every term of a union, the first
// of an intersection, the runs of global columns, and the random draws of a row block shared by
// its rows.
double row_steps(const Term& t, const Problem& p) {
  switch (t.kind) {
    case TermKind::Union: {
      double s = 1;
      for (const Term& c : t.children) s += row_steps(c, p);
      return s;
    }
    case TermKind::Intersect: return 1 + row_steps(t.children[0], p);
    case TermKind::Global: {
      double groups = 0;
      for (size_t k = 0; k < t.tokens.size() && t.tokens[k] < p.kv_len; ++k)
        groups += k == 0 || t.tokens[k] != t.tokens[k - 1] + 1;
      return 2 + groups;
    }
    case TermKind::RandomBlocks: {
      const double nkb = std::ceil(static_cast<double>(p.kv_len) / static_cast<double>(t.block));
      const double r = std::min(static_cast<double>(t.per_row), nkb);
      if (r == nkb) return 2;  // every key block: one interval, no draws
      const double draws = nkb * std::log(nkb / (nkb - r));
      return 2 + (draws + r) / static_cast<double>(std::min(t.block, p.seq_len));
    }
    default: return 2;
  }
}

// Steps of kept() at one (i, j) (--validate): each term once, random draws for every call.
double kept_steps(const Term& t, const Problem& p) {
  double s = 1;
  for (const Term& c : t.children) s += kept_steps(c, p);
  if (t.kind == TermKind::RandomBlocks) {
    const double nkb = std::ceil(static_cast<double>(p.kv_len) / static_cast<double>(t.block));
    const double r = std::min(static_cast<double>(t.per_row), nkb);
    s += r == nkb ? nkb : nkb * std::log(nkb / (nkb - r)) + r;
  }
  return s;
}

std::string sci(double x) {
  std::ostringstream o;
  o.precision(3);
  o << x;
  return o.str();
}

// Refuses, before any work, an analysis (and --validate) that cannot fit in Limits::max_work.
void check_work(const Problem& p, const AnalyzeOptions& o) {
  const double limit = static_cast<double>(p.limits.max_work);
  const double per_row = static_cast<double>(kRowSteps) + row_steps(p.pattern, p), rows = static_cast<double>(p.seq_len);
  if (rows * per_row > limit)
    throw Error(p.file, "", "analysing the pattern needs at least " + sci(rows * per_row) + " steps (seq_len " +
                                std::to_string(p.seq_len) + " rows, " + sci(per_row) + " steps a row), more than the work limit of " +
                                std::to_string(p.limits.max_work) + " (--max-work)" + work_share_note(p.limits));
  const double cells = rows * static_cast<double>(p.kv_len) * kept_steps(p.pattern, p);
  if (o.validate && cells > limit)
    throw Error(p.file, "", "--validate evaluates the terms at all seq_len x kv_len positions: " + sci(cells) +
                                " steps, more than the work limit of " + std::to_string(p.limits.max_work) +
                                " (--max-work)" + work_share_note(p.limits));
  if (4 * p.seq_len > p.limits.max_memory / 2)
    throw_memory_limit(p.file, "the row index of the analysis (4 bytes a row)", 4 * p.seq_len, p.limits);
}

}  // namespace

Acsr analyze(const Problem& p, const AnalyzeOptions& o) {
  if (!p.head_groups.empty()) throw std::invalid_argument("analyze: per-head patterns are analysed one head group at a time");
  check_work(p, o);
  AnalyzeOptions opt = o;
  opt.max_metadata_bytes = std::min(o.max_metadata_bytes, p.limits.max_memory / 2);
  RowEvaluator ev(p);
  const RowSource rows = [&ev](int64_t i) -> const std::vector<Run>& { return ev.row(i); };
  Analyzer a(p.seq_len, p.kv_len, p.file, rows, opt);
  Acsr acsr = a.run();
  if (o.validate) validate(p, acsr);
  return acsr;
}

Acsr analyze_rows(int64_t seq_len, int64_t kv_len, const RowSource& rows, const AnalyzeOptions& o) {
  Analyzer a(seq_len, kv_len, "", rows, o);
  return a.run();
}

void validate(const Problem& p, const Acsr& a) {
  if (a.seq_len != p.seq_len || a.kv_len != p.kv_len) throw std::logic_error("ACSR: dimensions differ from the problem");
  std::vector<char> mark(static_cast<size_t>(p.kv_len));
  std::vector<Run> runs;
  for (int64_t i = 0; i < p.seq_len; ++i) {
    if (a.segment_of(i) < 0) throw std::logic_error("ACSR: row " + std::to_string(i) + " lies in no segment");
    std::fill(mark.begin(), mark.end(), 0);
    row_runs(a, i, runs);
    for (const Run& r : runs) {
      if (r.stride < 1 && r.count > 1) throw std::logic_error("ACSR: row " + std::to_string(i) + " has a run of stride < 1");
      for (int64_t k = 0; k < r.count; ++k) {
        int64_t j = r.start + k * r.stride;
        if (j < 0 || j >= p.kv_len)
          throw std::logic_error("ACSR: row " + std::to_string(i) + " holds column " + std::to_string(j) + " outside [0, kv_len)");
        if (mark[static_cast<size_t>(j)]++)
          throw std::logic_error("ACSR: row " + std::to_string(i) + " holds column " + std::to_string(j) + " twice");
      }
    }
    for (int64_t j = 0; j < p.kv_len; ++j)
      if ((mark[static_cast<size_t>(j)] != 0) != kept(p, i, j))
        throw std::logic_error("ACSR: row " + std::to_string(i) + ", column " + std::to_string(j) + ": ACSR says " +
                               (mark[static_cast<size_t>(j)] ? "kept" : "dropped") + ", the pattern says the opposite");
  }
}

AnalysisStats stats(const Problem& p, const Acsr& a) {
  AnalysisStats s;
  s.rows = p.seq_len;
  s.cols = p.kv_len;
  WorkMeter meter(p.limits, p.file, "the statistics of the mask (tiles of 64 and 128)");
  meter.rows = p.seq_len;
  TileCounter t64(64, p.kv_len, meter), t128(128, p.kv_len, meter);
  std::vector<Run> runs;
  int64_t total_runs = 0;
  for (int64_t i = 0; i < p.seq_len; ++i) {
    meter.row = i;
    row_runs(a, i, runs);
    meter.add(1 + static_cast<int64_t>(runs.size()));
    int64_t n = 0;
    for (const Run& r : runs) {
      n += r.count;
      t64.add(r);
      t128.add(r);
    }
    s.nnz += n;
    s.nnz_row_max = std::max(s.nnz_row_max, n);
    s.empty_rows += n == 0;
    s.runs_max = std::max<int64_t>(s.runs_max, static_cast<int64_t>(runs.size()));
    total_runs += static_cast<int64_t>(runs.size());
    if ((i + 1) % 64 == 0 || i + 1 == p.seq_len) t64.end_block();
    if ((i + 1) % 128 == 0 || i + 1 == p.seq_len) t128.end_block();
  }
  s.density = static_cast<double>(s.nnz) / (static_cast<double>(s.rows) * static_cast<double>(s.cols));
  s.runs_mean = static_cast<double>(total_runs) / static_cast<double>(s.rows);
  s.segments = static_cast<int64_t>(a.segments.size());
  for (const Segment& g : a.segments) {
    if (g.tabulated) {
      ++s.tabulated_segments;
      s.tabulated_rows += g.rows();
    } else {
      ++s.affine_segments;
    }
  }
  const int64_t rb64 = (p.seq_len + 63) / 64, rb128 = (p.seq_len + 127) / 128;
  const int64_t kb64 = (p.kv_len + 63) / 64, kb128 = (p.kv_len + 127) / 128;
  s.blocks64 = t64.tiles;
  s.blocks128 = t128.tiles;
  s.block_density64 = static_cast<double>(s.blocks64) / static_cast<double>(rb64 * kb64);
  s.block_density128 = static_cast<double>(s.blocks128) / static_cast<double>(rb128 * kb128);
  s.bytes_acsr = a.metadata_bytes();
  s.bytes_csr = 4 * (s.rows + 1) + 4 * s.nnz;
  s.bytes_bsr64 = 4 * (rb64 + 1) + 4 * s.blocks64;
  s.bytes_bsr128 = 4 * (rb128 + 1) + 4 * s.blocks128;
  // FlexAttention BlockMask (B = H = 1): kv_num_blocks, kv_indices, full_kv_num_blocks,
  // full_kv_indices, and the transposed q_* versions of all four, int32.
  s.bytes_blockmask128 = 4 * (2 * rb128 + 2 * kb128 + 4 * rb128 * kb128);
  return s;
}

}  // namespace splat
