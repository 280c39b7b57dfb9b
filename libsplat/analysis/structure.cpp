#include "libsplat/analysis/structure.h"

#include <algorithm>
#include <map>
#include <utility>

#include "libsplat/analysis/analysis.h"
#include "libsplat/analysis/rows.h"

namespace splat {
namespace {
int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0)) ? 1 : 0); }
}  // namespace

// ---- bands ----

std::optional<Band> find_band(const Acsr& acsr) {
  const int64_t L = acsr.seq_len;
  if (L <= 0 || acsr.kv_len != L) return std::nullopt;
  // The band's dilation and widest offsets over all rows (a row's range may be clipped at either
  // end, or be the whole phase), then every row checked against it.
  Band b;
  b.dilation = 0;
  b.k_lo = L;
  b.k_hi = -L;
  std::vector<Run> runs(static_cast<size_t>(L));
  for (int64_t i = 0; i < L; ++i) {
    const std::vector<Run> r = acsr.row(i);
    if (r.size() > 1) return std::nullopt;
    if (r.empty()) continue;
    runs[static_cast<size_t>(i)] = r[0];
    if (r[0].count > 1) {
      if (b.dilation == 0) b.dilation = r[0].stride;
      if (r[0].stride != b.dilation) return std::nullopt;
    }
  }
  if (b.dilation == 0) b.dilation = 1;
  if (L % b.dilation != 0) return std::nullopt;
  for (int64_t i = 0; i < L; ++i) {
    const Run& r = runs[static_cast<size_t>(i)];
    if (r.count == 0) continue;
    const int64_t first = r.start - i, last = r.start + (r.count - 1) * r.stride - i;
    if (first % b.dilation != 0) return std::nullopt;
    b.k_lo = std::min(b.k_lo, first / b.dilation);
    b.k_hi = std::max(b.k_hi, last / b.dilation);
  }
  if (b.k_hi < b.k_lo) return std::nullopt;
  b.rows = L / b.dilation;
  for (int64_t i = 0; i < L; ++i) {
    // k with 0 <= i + d*k < L: k in [-(i / d), (L - 1 - i) / d].
    const int64_t klo = std::max(b.k_lo, -(i / b.dilation)), khi = std::min(b.k_hi, (L - 1 - i) / b.dilation);
    const Run& r = runs[static_cast<size_t>(i)];
    if (khi < klo) {
      if (r.count != 0) return std::nullopt;
      continue;
    }
    const int64_t n = khi - klo + 1;
    if (!(r == Run{i + b.dilation * klo, n > 1 ? b.dilation : 1, n})) return std::nullopt;
  }
  return b;
}

std::optional<BandWithGlobals> find_band_with_globals(const Acsr& acsr) {
  const int64_t L = acsr.seq_len;
  if (L <= 1 || acsr.kv_len != L) return std::nullopt;
  // Each row's keys as sorted disjoint intervals (unit-stride runs only).
  auto intervals = [&](int64_t i, std::vector<std::pair<int64_t, int64_t>>& iv) {
    iv.clear();
    for (const Run& r : acsr.row(i)) {
      if (r.count <= 0) continue;
      if (r.count > 1 && r.stride != 1) return false;
      iv.emplace_back(r.start, r.start + r.count - 1);
    }
    std::sort(iv.begin(), iv.end());
    std::vector<std::pair<int64_t, int64_t>> merged;
    for (const auto& x : iv)
      if (!merged.empty() && x.first <= merged.back().second + 1) merged.back().second = std::max(merged.back().second, x.second);
      else merged.push_back(x);
    iv = merged;
    return true;
  };
  std::vector<std::pair<int64_t, int64_t>> iv;
  int64_t G = 0;
  while (G < L && G <= 64 && intervals(G, iv) && iv.size() == 1 && iv[0] == std::make_pair(int64_t{0}, L - 1)) ++G;
  if (G == 0 || G > 64 || G >= L) return std::nullopt;
  // Rows i >= G: the global keys [0, G) and one interval [a, b] beyond them (or none).
  std::vector<std::pair<int64_t, int64_t>> win(static_cast<size_t>(L), {1, 0});
  int64_t k_lo = L, k_hi = -L;
  bool lo_seen = false, hi_seen = false;
  for (int64_t i = G; i < L; ++i) {
    if (!intervals(i, iv) || iv.empty() || iv[0].first != 0 || iv[0].second < G - 1) return std::nullopt;
    std::pair<int64_t, int64_t> w{1, 0};
    if (iv[0].second >= G) w = {G, iv[0].second};
    if (iv.size() == 2) {
      if (w.first <= w.second) return std::nullopt;
      w = iv[1];
    } else if (iv.size() > 2) {
      return std::nullopt;
    }
    win[static_cast<size_t>(i)] = w;
    // Offsets from the rows whose window is not clipped by the globals or the sequence ends.
    if (w.first <= w.second && w.first > G) k_lo = std::min(k_lo, w.first - i), lo_seen = true;
    if (w.first <= w.second && w.second < L - 1) k_hi = std::max(k_hi, w.second - i), hi_seen = true;
  }
  if (!lo_seen || !hi_seen || k_hi < k_lo) return std::nullopt;
  for (int64_t i = G; i < L; ++i) {
    // The band [i + k_lo, i + k_hi] within [0, L), less the global keys.
    const int64_t a = std::max({int64_t{0}, G, i + k_lo}), b = std::min(L - 1, i + k_hi);
    const std::pair<int64_t, int64_t> want = a <= b ? std::make_pair(a, b) : std::make_pair(int64_t{1}, int64_t{0});
    const std::pair<int64_t, int64_t>& got = win[static_cast<size_t>(i)];
    const bool empty_got = got.first > got.second, empty_want = want.first > want.second;
    if (empty_got != empty_want || (!empty_got && got != want)) return std::nullopt;
  }
  return BandWithGlobals{Band{1, k_lo, k_hi, L}, G};
}

std::optional<WindowLattice> find_window_lattice(const Acsr& acsr) {
  const int64_t L = acsr.seq_len;
  if (L < 4 || acsr.kv_len != L) return std::nullopt;
  // The candidate from the middle row: its run holding key i is the window (unit step), its other
  // runs' stride the period; then every row is checked against it.
  const int64_t mid = L / 2;
  int64_t k_lo = 1, k_hi = 0, P = 0;
  for (const Run& r : acsr.row(mid)) {
    if (r.count <= 0) continue;
    const int64_t last = r.start + (r.count - 1) * r.stride;
    if (r.start <= mid && mid <= last) {
      if (r.count > 1 && r.stride != 1) return std::nullopt;
      k_lo = r.start - mid;
      k_hi = last - mid;
    } else if (r.count > 1) {
      if (P != 0 && r.stride != P) return std::nullopt;
      P = r.stride;
    }
  }
  if (k_hi < k_lo || P < 2 || L % P != 0) return std::nullopt;
  // A lattice key joined to the window's run at either end: the union is the same with it on the
  // lattice (the window's pass is then no wider than the rows' own window).
  if (k_lo < 0 && k_lo % P == 0) ++k_lo;
  if (k_hi > 0 && k_hi % P == 0) --k_hi;
  Lattice lat;
  lat.period = P;
  lat.rows = L / P;
  lat.hole_lo = -floor_div(-k_lo, P);  // ceil(k_lo / P)
  lat.hole_hi = floor_div(k_hi, P);
  const int64_t M = lat.rows;
  for (int64_t i = 0; i < L; ++i) {
    const int64_t c = i % P, m = i / P;
    const int64_t wlo = std::max<int64_t>(0, i + k_lo), whi = std::min(L - 1, i + k_hi);
    const int64_t hlo = std::max<int64_t>(0, m + lat.hole_lo), hhi = std::min(M - 1, m + lat.hole_hi);
    // The window W and the lattice outside it are disjoint (the lattice points inside W are the
    // hole's), so disjoint runs whose points lie in W or in the phase's lattice, with their total
    // count, are exactly both. A run may reach past W (the analysis can join an adjacent lattice
    // key to the window's run): its points outside W must be lattice points.
    const int64_t expect = (whi - wlo + 1) + M - std::max<int64_t>(0, hhi - hlo + 1);
    int64_t total = 0;
    const auto on_lattice = [&](int64_t a, int64_t st, int64_t j0, int64_t j1) {  // points j in [j0, j1)
      if (j1 <= j0) return true;
      const int64_t x = a + st * j0;
      return (x - c) % P == 0 && (j1 - j0 == 1 || st % P == 0);
    };
    for (const Run& r : acsr.row(i)) {
      if (r.count <= 0) continue;
      if (r.stride <= 0) return std::nullopt;
      total += r.count;
      // Points j in [ja, jb] lie in W (contiguous: the points increase).
      const int64_t ja = std::min(r.count, r.start >= wlo ? 0 : (wlo - r.start + r.stride - 1) / r.stride);
      const int64_t jb = r.start > whi ? -1 : std::min(r.count - 1, (whi - r.start) / r.stride);
      if (!on_lattice(r.start, r.stride, 0, ja) || !on_lattice(r.start, r.stride, std::max(jb + 1, ja), r.count))
        return std::nullopt;
    }
    if (total != expect) return std::nullopt;
  }
  return WindowLattice{Band{1, k_lo, k_hi, L}, lat};
}


// ---- global keys ----

namespace {

// How many rows keep each key: difference arrays per run stride (the first 8 strides met), the
// points of runs of other strides one by one. Empty when those points exceed 2^26.
std::vector<int64_t> key_counts(const Acsr& acsr) {
  const size_t kv = static_cast<size_t>(acsr.kv_len);
  std::map<int64_t, std::vector<int64_t>> diff;  // stride -> difference array (step stride)
  std::vector<int64_t> count(kv, 0);
  int64_t points = 0;
  for (int64_t i = 0; i < acsr.seq_len; ++i)
    for (const Run& r : acsr.row(i)) {
      const int64_t st = r.count > 1 ? r.stride : 1;
      auto it = diff.find(st);
      if (it == diff.end() && diff.size() < 8) it = diff.emplace(st, std::vector<int64_t>(kv + static_cast<size_t>(st), 0)).first;
      if (it == diff.end()) {
        if ((points += r.count) > (int64_t{1} << 26)) return {};
        for (int64_t k = 0; k < r.count; ++k) ++count[static_cast<size_t>(r.start + k * st)];
        continue;
      }
      it->second[static_cast<size_t>(r.start)] += 1;
      it->second[static_cast<size_t>(r.start + r.count * st)] -= 1;
    }
  for (auto& [st, d] : diff)
    for (size_t j = 0; j < kv; ++j) {
      if (j >= static_cast<size_t>(st)) d[j] += d[j - static_cast<size_t>(st)];
      count[j] += d[j];
    }
  return count;
}

// A sorted key set with, per run stride s of the ACSR, the number of its keys on each lattice up
// to j (j, j - s, ...) and the last of them: a run's keys of the set counted in O(1).
struct KeyLattices {
  std::map<int64_t, std::pair<std::vector<int32_t>, std::vector<int32_t>>> by_stride;  // stride -> (count, last)
  KeyLattices(const Acsr& acsr, const std::vector<int64_t>& keys) {
    const size_t kv = static_cast<size_t>(acsr.kv_len);
    std::vector<char> in(kv, 0);
    for (int64_t j : keys) in[static_cast<size_t>(j)] = 1;
    std::vector<int64_t> strides = {1};
    for (const Segment& sg : acsr.segments) {
      for (const AffineRun& a : sg.runs) strides.push_back(a.stride);
      for (const Run& r : sg.table) strides.push_back(r.stride);
    }
    std::sort(strides.begin(), strides.end());
    strides.erase(std::unique(strides.begin(), strides.end()), strides.end());
    for (int64_t st : strides) {
      auto& [cnt, last] = by_stride[st];
      cnt.assign(kv, 0);
      last.assign(kv, -1);
      const size_t s = static_cast<size_t>(st);
      for (size_t j = 0; j < kv; ++j) {
        cnt[j] = (in[j] ? 1 : 0) + (j >= s ? cnt[j - s] : 0);
        last[j] = in[j] ? static_cast<int32_t>(j) : j >= s ? last[j - s] : -1;
      }
    }
  }
  const std::pair<std::vector<int32_t>, std::vector<int32_t>>& of(const Run& r) const {
    return by_stride.at(r.count > 1 ? r.stride : 1);
  }
  // Keys of the set in run r, and the last of them (-1 if none).
  std::pair<int64_t, int64_t> in_run(const Run& r) const {
    const auto& [cnt, last] = of(r);
    const int64_t st = r.count > 1 ? r.stride : 1, e = r.start + (r.count - 1) * st;
    const int64_t n = cnt[static_cast<size_t>(e)] - (r.start >= st ? cnt[static_cast<size_t>(r.start - st)] : 0);
    return {n, n > 0 ? last[static_cast<size_t>(e)] : -1};
  }
};

// Whether every row keeps a prefix of the keys (sorted); the prefix lengths in out.
bool prefix_rows(const Acsr& acsr, const KeyLattices& kl, const std::vector<int64_t>& keys, std::vector<int32_t>& out) {
  out.assign(static_cast<size_t>(acsr.seq_len), 0);
  for (int64_t i = 0; i < acsr.seq_len; ++i) {
    int64_t n = 0, top = -1;
    for (const Run& r : acsr.row(i)) {
      const auto [c, t] = kl.in_run(r);
      n += c;
      top = std::max(top, t);
    }
    // The kept global keys are a prefix exactly when the last of them is the n-th key.
    if (n > 0 && keys[static_cast<size_t>(n - 1)] != top) return false;
    out[static_cast<size_t>(i)] = static_cast<int32_t>(n);
  }
  return true;
}

// The complement of the sorted keys within [lo, hi], as unit runs.
void complement_in(const std::vector<int64_t>& keys, int64_t lo, int64_t hi, std::vector<Run>& out) {
  out.clear();
  int64_t at = lo;
  for (auto it = std::lower_bound(keys.begin(), keys.end(), lo); it != keys.end() && *it <= hi; ++it) {
    if (*it > at) out.push_back({at, 1, *it - at});
    at = *it + 1;
  }
  if (at <= hi) out.push_back({at, 1, hi - at + 1});
}

// The ACSR of the rows without the keys.
Acsr residual(const Acsr& acsr, const std::vector<int64_t>& keys, const KeyLattices& kl) {
  // Each row without the global keys: intersected with their complement (rows.h: canonical runs,
  // lattices stay lattices). Where that complement has many pieces (fixed at 131k keys: 8k, 100 s
  // in all), only the runs holding global keys are intersected with the complement over their
  // own span, and the pieces joined (the same keys; the runs may be cut differently).
  std::vector<Run> buf, comp, all;
  const bool few = keys.size() <= 256;
  if (few) complement_in(keys, 0, acsr.kv_len - 1, all);
  const RowSource rows = [&](int64_t i) -> const std::vector<Run>& {
    buf.clear();
    const std::vector<Run> row = acsr.row(i);
    if (few) {
      runs_intersect(row, all, buf);
      return buf;
    }
    std::vector<Run> cut;
    for (const Run& r : row) {
      const int64_t n = kl.in_run(r).first;
      if (n == 0) buf.push_back(r);
      if (n == 0 || n == r.count) continue;
      complement_in(keys, r.start, r.start + (r.count - 1) * r.stride, comp);
      runs_intersect({r}, comp, cut);
      buf.insert(buf.end(), cut.begin(), cut.end());
    }
    runs_join(buf);  // pieces of different runs that continue each other
    return buf;
  };
  return analyze_rows(acsr.seq_len, acsr.kv_len, rows);
}

// Blocks of c keys every P keys: c from the first block, P from the first two.
std::optional<KeyBlocks> key_blocks(const Acsr& acsr, const std::vector<int64_t>& keys) {
  const int64_t n = static_cast<int64_t>(keys.size());
  const auto key = [&](int64_t u) { return keys[static_cast<size_t>(u)]; };
  int64_t c = 1;
  while (c < n && key(c) == key(0) + c) ++c;
  const int64_t P = c < n ? key(c) - key(0) : 0, g0 = key(0);
  bool ok = P > c && 64 % c == 0 && acsr.kv_len % P == 0 && g0 % P + c <= P;
  for (int64_t u = 0; ok && u < n; ++u) ok = key(u) == g0 + P * (u / c) + u % c;
  if (!ok) return std::nullopt;
  return KeyBlocks{g0, P, c};
}

// Candidates: the keys every row keeps; the keys more than two row tiles keep, where each row keeps
// a prefix of them (causal `fixed`: row i keeps the summary columns before it). Only scattered
// sets: keys in one interval are walked as well by each tile (TMA stages on sm_90a: unit-step
// walks); scattered ones (the `fixed` pattern's 8 of every 128 keys) cost each row a run per piece
// or lattice and each tile a walk per lattice.
std::vector<GlobalKeys> global_key_candidates(const Acsr& acsr, int64_t row_tile) {
  auto scattered = [](const std::vector<int64_t>& k) {
    return !k.empty() && k.back() - k.front() + 1 != static_cast<int64_t>(k.size());
  };
  const std::vector<int64_t> count = key_counts(acsr);
  std::vector<GlobalKeys> cands;
  GlobalKeys common, popular;
  for (size_t j = 0; j < count.size(); ++j) {
    if (count[j] == acsr.seq_len) common.keys.push_back(static_cast<int64_t>(j));
    if (count[j] > 2 * row_tile) popular.keys.push_back(static_cast<int64_t>(j));
  }
  if (scattered(common.keys)) cands.push_back(std::move(common));
  if (scattered(popular.keys) && (cands.empty() || popular.keys != cands[0].keys) &&
      prefix_rows(acsr, KeyLattices(acsr, popular.keys), popular.keys, popular.prefix)) {
    if (std::all_of(popular.prefix.begin(), popular.prefix.end(),
                    [&](int32_t n) { return n == static_cast<int32_t>(popular.keys.size()); }))
      popular.prefix.clear();
    cands.push_back(std::move(popular));
  }
  for (GlobalKeys& gk : cands) {
    gk.rest = residual(acsr, gk.keys, KeyLattices(acsr, gk.keys));
    gk.blocks = key_blocks(acsr, gk.keys);
  }
  return cands;
}

}  // namespace

Structure analyze_structure(const Acsr& acsr, int64_t row_tile) {
  Structure s;
  if (auto b = find_band(acsr))
    s.kind = *b;
  else if (auto g = find_band_with_globals(acsr))
    s.kind = *g;
  else if (auto w = find_window_lattice(acsr))
    s.kind = *w;
  else if (acsr.seq_len >= 2)
    s.global_keys = global_key_candidates(acsr, row_tile);
  return s;
}

}  // namespace splat
