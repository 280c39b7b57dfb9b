#include "libsplat/codegen/plan.h"

#include "libsplat/analysis/analysis.h"
#include "libsplat/analysis/columns.h"
#include "libsplat/analysis/rows.h"
#include "libsplat/device/geometry.cuh"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <tuple>

namespace splat {
namespace {

constexpr int kMaxPasses = 4;


// den > 1 only where the numerators are not all multiples of it; dividing out a common den makes
// equal closed forms compare equal across segments.
AffineRun normalise(AffineRun r) {
  if (r.den > 1 && r.start_slope % r.den == 0 && r.start_offset % r.den == 0 &&
      r.count_slope % r.den == 0 && r.count_offset % r.den == 0) {
    r.start_slope /= r.den;
    r.start_offset /= r.den;
    r.count_slope /= r.den;
    r.count_offset /= r.den;
    r.den = 1;
  }
  if (r.den < 1) throw std::invalid_argument("ACSR run with den < 1");
  return r;
}

int64_t abs64(int64_t x) { return x < 0 ? -x : x; }

// Smallest row period P (a multiple of the item's row stride) over which the run start moves by
// a multiple of the run stride, so that rows i and i+P share the key lattice.
int64_t preferred_period(const PlanItem& it) {
  if (it.tabulated || it.run.stride <= 1) return it.row_stride;
  // start(i + row_stride) - start(i) = start_slope*row_stride/den (exact: den divides row_stride
  // in phase segments, den == 1 elsewhere).
  int64_t step = it.run.start_slope * it.row_stride / it.run.den;
  int64_t st = it.run.stride;
  int64_t q = st / std::gcd(st, abs64(step) % st);
  return it.row_stride * q;
}

void check_int32(int64_t v, const char* what) {
  if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
    throw std::invalid_argument(std::string("plan value out of int32 range: ") + what);
}

// Items from segments, merging affine families with equal closed forms whose rows together form
// one progression.
std::vector<PlanItem> build_items(const Acsr& acsr) {
  std::vector<PlanItem> items;
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>, std::vector<size_t>> by_form;
  for (size_t s = 0; s < acsr.segments.size(); ++s) {
    const Segment& seg = acsr.segments[s];
    if (seg.rows() == 0) continue;
    if (seg.row_stride < 1) throw std::invalid_argument("ACSR segment with row_stride < 1");
    if (seg.tabulated) {
      PlanItem it;
      it.row_begin = seg.row_begin;
      it.row_end = seg.row_end;
      it.row_stride = seg.row_stride;
      it.tabulated = true;
      it.segment = static_cast<int>(s);
      items.push_back(it);
      continue;
    }
    for (size_t r = 0; r < seg.runs.size(); ++r) {
      PlanItem it;
      it.row_begin = seg.row_begin;
      it.row_end = seg.row_begin + (seg.rows() - 1) * seg.row_stride + 1;
      it.row_stride = seg.row_stride;
      it.run = normalise(seg.runs[r]);
      if (it.run.stride < 1) throw std::invalid_argument("ACSR run with stride < 1");
      it.segment = static_cast<int>(s);
      it.run_index = static_cast<int>(r);
      const AffineRun& a = it.run;
      by_form[{a.start_slope, a.start_offset, a.stride, a.count_slope, a.count_offset, a.den}].push_back(
          items.size());
      items.push_back(it);
    }
  }
  std::vector<bool> drop(items.size(), false);
  for (auto& [form, idx] : by_form) {
    if (idx.size() < 2) continue;
    int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min(), n = 0;
    int64_t g = 0;
    for (size_t k : idx) {
      const PlanItem& it = items[k];
      lo = std::min(lo, it.row_begin);
      hi = std::max(hi, it.row_end - 1);
      n += (it.row_end - it.row_begin + it.row_stride - 1) / it.row_stride;
    }
    for (size_t k : idx) {
      const PlanItem& it = items[k];
      g = std::gcd(g, it.row_begin - lo);
      if (it.row_end - it.row_begin > 1) g = std::gcd(g, it.row_stride);
    }
    if (g == 0) g = 1;
    // Segments partition the rows, so the union is the progression lo + g*m iff it has as many
    // rows as that progression.
    if ((hi - lo) / g + 1 != n) continue;
    PlanItem& first = items[idx.front()];
    first.row_begin = lo;
    first.row_end = hi + 1;
    first.row_stride = g;
    first.merged = static_cast<int>(idx.size());
    for (size_t k = 1; k < idx.size(); ++k) drop[idx[k]] = true;
  }
  std::vector<PlanItem> out;
  for (size_t k = 0; k < items.size(); ++k)
    if (!drop[k]) out.push_back(items[k]);
  return out;
}

}  // namespace

void append_table_rows(const Segment& seg, std::vector<int32_t>& table, int64_t& row_ptr, int64_t& runs) {
  if (static_cast<int64_t>(seg.row_ptr.size()) != seg.rows() + 1)
    throw std::invalid_argument("tabulated ACSR segment with a row_ptr of the wrong size");
  row_ptr = static_cast<int64_t>(table.size());
  for (int64_t p : seg.row_ptr) {
    check_int32(p, "row_ptr");
    table.push_back(static_cast<int32_t>(p));
  }
  runs = static_cast<int64_t>(table.size());
  for (const Run& r : seg.table) {
    check_int32(r.start, "run start");
    check_int32(r.stride, "run stride");
    check_int32(r.count, "run count");
    table.push_back(static_cast<int32_t>(r.start));
    table.push_back(static_cast<int32_t>(r.stride));
    table.push_back(static_cast<int32_t>(r.count));
  }
  check_int32(static_cast<int64_t>(table.size()), "table size");
}

namespace {

// Walks covering a set of runs: one lattice when all runs share stride and phase, else stride 1;
// intervals merged where that does not add key tiles.
std::vector<KeyWalk> walks_for(const std::vector<Run>& runs, int bc) {
  std::vector<KeyWalk> out;
  if (runs.empty()) return out;
  int64_t st = runs.front().stride, phase = ((runs.front().start % st) + st) % st;
  bool lattice = st > 1;
  for (const Run& r : runs)
    if (r.stride != st || ((r.start % st) + st) % st != phase) lattice = false;
  if (!lattice) st = 1, phase = 0;
  std::vector<std::pair<int64_t, int64_t>> iv;  // [lo, hi) in walk units
  for (const Run& r : runs) {
    int64_t lo, hi;
    if (lattice) {
      lo = (r.start - phase) / st;
      hi = lo + r.count;
    } else {
      lo = r.start;
      hi = r.start + (r.count - 1) * r.stride + 1;
    }
    iv.push_back({lo, hi});
  }
  std::sort(iv.begin(), iv.end());
  auto tiles = [bc](int64_t n) { return (n + bc - 1) / bc; };
  std::vector<std::pair<int64_t, int64_t>> merged;
  for (auto& x : iv) {
    if (!merged.empty()) {
      auto& m = merged.back();
      if (x.first <= m.second) {
        m.second = std::max(m.second, x.second);
        continue;
      }
      if (tiles(std::max(m.second, x.second) - m.first) <= tiles(m.second - m.first) + tiles(x.second - x.first)) {
        m.second = std::max(m.second, x.second);
        continue;
      }
    }
    merged.push_back(x);
  }
  for (auto& m : merged) out.push_back({phase + m.first * st, st, m.second - m.first});
  return out;
}

// Cuts tiles with many more key tiles than the average into chunks of about the average (at
// least 4 key tiles), so that a few global rows do not become the critical path; and when the
// pass has too few blocks to fill the GPU (TileShape::batch_heads), every tile into chunks of
// the size that gives about kFillBlocks blocks.
void split_heavy_tiles(PlanPass& pass, const TileShape& shape) {
  const int bc = shape.bc;
  int64_t total = 0, n = 0;
  for (const PlanTile& t : pass.tiles)
    if (t.key_tiles > 0) total += t.key_tiles, ++n;
  if (n == 0) return;
  const int64_t mean = (total + n - 1) / n;
  int64_t chunk = std::max<int64_t>(4, mean);
  int64_t threshold = std::max<int64_t>(8, 2 * mean);
  if (shape.batch_heads > 0 && n * shape.batch_heads < kFillBlocks) {
    const int64_t chunks = (kFillBlocks + shape.batch_heads - 1) / shape.batch_heads;
    chunk = std::max<int64_t>(kFillMinChunk, (total + chunks - 1) / chunks);
    threshold = chunk;
  }
  std::vector<PlanTile> out;
  for (PlanTile& t : pass.tiles) {
    if (t.key_tiles <= threshold) {
      out.push_back(std::move(t));
      continue;
    }
    PlanSplit sp;
    sp.phase = t.phase;
    sp.m_begin = t.m_begin;
    sp.m_end = t.m_end;
    sp.slot_begin = pass.slots;
    // Walk the tile's (group, walk, key tile) sequence and cut every `chunk` key tiles.
    PlanTile cur;
    auto flush = [&]() {
      if (cur.key_tiles == 0) return;
      cur.phase = t.phase;
      cur.m_begin = t.m_begin;
      cur.m_end = t.m_end;
      cur.split_slot = pass.slots++;
      cur.split_lead = sp.slot_count == 0;
      ++sp.slot_count;
      std::erase_if(cur.groups, [](const PlanGroup& g) { return g.walks.empty(); });
      out.push_back(std::move(cur));
      cur = PlanTile();
    };
    for (const PlanGroup& g : t.groups) {
      for (const KeyWalk& w : g.walks) {
        for (int64_t u0 = 0; u0 < w.count;) {
          if (cur.groups.empty() || cur.groups.back().items != g.items || cur.groups.back().tabulated != g.tabulated ||
              cur.groups.back().all_rows != g.all_rows) {
            PlanGroup ng;
            ng.tabulated = g.tabulated;
            ng.all_rows = g.all_rows;
            ng.items = g.items;
            cur.groups.push_back(std::move(ng));
          }
          int64_t room = (chunk - cur.key_tiles) * bc;
          int64_t take = std::min(room, w.count - u0);
          KeyWalk part;
          part.base = w.base + u0 * w.step;
          part.step = w.step;
          part.count = take;
          part.indexed = w.indexed;
          cur.groups.back().walks.push_back(part);
          cur.key_tiles += (take + bc - 1) / bc;
          u0 += take;
          if (cur.key_tiles >= chunk) flush();
        }
      }
    }
    flush();
    pass.splits.push_back(sp);
  }
  pass.tiles = std::move(out);
}



// The items of an affine group split by the key lattice (start mod stride) of their runs on the
// tile's rows; an item whose rows start on different lattices stays in a mixed group.
std::vector<PlanGroup> split_by_lattice(const Plan& plan, const PlanGroup& g, const std::vector<int64_t>& rows) {
  std::map<int64_t, PlanGroup> by;
  for (int k : g.items) {
    const PlanItem& it = plan.items[static_cast<size_t>(k)];
    int64_t res = -2;
    for (int64_t i : rows) {
      Run r;
      if (i < 0 || !item_run(it, i, r)) continue;
      const int64_t x = ((r.start % r.stride) + r.stride) % r.stride;
      res = res == -2 ? x : (res == x ? res : -1);
    }
    by[res].items.push_back(k);
  }
  std::vector<PlanGroup> out;
  for (auto& [res, grp] : by) out.push_back(std::move(grp));
  return out;
}

int64_t group_key_tiles(const Plan& plan, const std::vector<PlanGroup>& groups, const std::vector<int64_t>& rows,
                        int bc) {
  int64_t n = 0;
  for (const PlanGroup& g : groups) {
    std::vector<Run> runs;
    for (int64_t i : rows) {
      std::vector<Run> rr = group_row_runs(plan, g, i);
      runs.insert(runs.end(), rr.begin(), rr.end());
    }
    for (const KeyWalk& w : walks_for(runs, bc)) n += (w.count + bc - 1) / bc;
  }
  return n;
}

}  // namespace

bool item_run(const PlanItem& it, int64_t i, Run& out) {
  if (it.tabulated || !it.has_row(i)) return false;
  int64_t start = (it.run.start_slope * i + it.run.start_offset) / it.run.den;
  int64_t count = (it.run.count_slope * i + it.run.count_offset) / it.run.den;
  if (count <= 0) return false;
  out = {start, it.run.stride, count};
  return true;
}

std::vector<Run> tab_row_runs(const Plan& plan, const PlanItem& it, int64_t i) {
  std::vector<Run> out;
  if (!it.tabulated || !it.has_row(i)) return out;
  int64_t m = (i - it.row_begin) / it.row_stride;
  int64_t b = plan.table[static_cast<size_t>(it.tab_row_ptr + m)];
  int64_t e = plan.table[static_cast<size_t>(it.tab_row_ptr + m + 1)];
  for (int64_t k = b; k < e; ++k) {
    size_t w = static_cast<size_t>(it.tab_runs + 3 * k);
    if (plan.table[w + 2] > 0) out.push_back({plan.table[w], plan.table[w + 1], plan.table[w + 2]});
  }
  return out;
}

int64_t global_prefix(const Plan& plan, int64_t i) {
  if (!plan.global_keys || i < 0) return 0;
  const PlanGlobalKeys& g = *plan.global_keys;
  return g.prefix_table < 0 ? g.count : plan.table.at(static_cast<size_t>(g.prefix_table + i));
}

int64_t walk_key(const Plan& plan, const KeyWalk& w, int64_t u) {
  return w.indexed ? plan.table.at(static_cast<size_t>(w.base + u)) : w.base + u * w.step;
}

std::vector<Run> group_row_runs(const Plan& plan, const PlanGroup& g, int64_t i) {
  std::vector<Run> out;
  if (i < 0) return out;
  if (g.all_rows) {
    const PlanGlobalKeys& gk = *plan.global_keys;
    if (gk.prefix_table < 0) return gk.runs;
    std::vector<int64_t> keys(plan.table.begin() + gk.table, plan.table.begin() + gk.table + global_prefix(plan, i));
    runs_from_points(keys, out);
    return out;
  }
  for (int k : g.items) {
    const PlanItem& it = plan.items[static_cast<size_t>(k)];
    if (it.tabulated) {
      for (const Run& r : tab_row_runs(plan, it, i)) out.push_back(r);
    } else {
      Run r;
      if (item_run(it, i, r)) out.push_back(r);
    }
  }
  return out;
}

std::vector<int64_t> tile_rows(const Plan& plan, const PlanPass& pass, const PlanTile& tile) {
  std::vector<int64_t> rows(static_cast<size_t>(plan.shape.br), -1);
  for (int r = 0; r < plan.shape.br; ++r) {
    int64_t m = tile.m_begin + r;
    if (m < tile.m_end) rows[static_cast<size_t>(r)] = tile.phase + pass.period * m;
  }
  return rows;
}

namespace {

// Run r keeps every key base + u*step, u in [u0, u0 + n).
bool run_covers(const Run& r, int64_t base, int64_t step, int64_t u0, int64_t n) {
  if (r.count <= 0 || step % r.stride != 0) return false;
  const int64_t first = base + u0 * step, last = first + (n - 1) * step;
  return (first - r.start) % r.stride == 0 && first >= r.start && last <= r.start + (r.count - 1) * r.stride;
}

// Sets each walk's full key-tile interval (KeyWalk::full_begin/end) and modular flag. Padding rows
// (past the phase class) have no runs and do not count: their output is never written.
void mark_full_tiles(const Plan& plan, const PlanPass& pass, PlanTile& tile) {
  const int64_t bc = plan.shape.bc;
  const std::vector<int64_t> rows = tile_rows(plan, pass, tile);
  for (PlanGroup& g : tile.groups) {
    if (g.all_rows) {  // each row keeps the walk's keys up to its prefix of the global keys
      int64_t lo = std::numeric_limits<int64_t>::max();
      for (int64_t i : rows)
        if (i >= 0) lo = std::min(lo, global_prefix(plan, i));
      for (KeyWalk& w : g.walks) {
        const int64_t u0 = w.base - plan.global_keys->table;  // a split chunk's first key
        w.modular = false;
        w.full_begin = 0;
        w.full_end = std::clamp<int64_t>((lo - u0) / bc, 0, w.count / bc);
      }
      continue;
    }
    std::vector<std::vector<Run>> runs;
    for (int64_t i : rows)
      if (i >= 0) runs.push_back(group_row_runs(plan, g, i));
    for (KeyWalk& w : g.walks) {
      w.modular = false;
      for (const std::vector<Run>& rr : runs)
        for (const Run& run : rr) w.modular = w.modular || (w.step == 1 && run.stride > 1);
      w.full_begin = w.full_end = 0;
      int64_t best = 0, cur_begin = 0;
      const int64_t tiles = w.count / bc;  // a tile past the walk's end is never full
      for (int64_t t = 0; t <= tiles; ++t) {
        bool full = t < tiles && !runs.empty();
        for (size_t r = 0; full && r < runs.size(); ++r)
          full = std::any_of(runs[r].begin(), runs[r].end(),
                             [&](const Run& run) { return run_covers(run, w.base, w.step, t * bc, bc); });
        if (!full) {
          if (t - cur_begin > best) best = t - cur_begin, w.full_begin = cur_begin, w.full_end = t;
          cur_begin = t + 1;
        }
      }
    }
  }
}

}  // namespace

bool pass_unmasked(const PlanPass& pass, int64_t bc) {
  // Plan tiles are 64 keys (KeyWalk::full_begin/end); a 128-key tile is full when both of its are.
  for (const PlanTile& t : pass.tiles)
    for (const PlanGroup& g : t.groups)
      for (const KeyWalk& w : g.walks)
        if (w.count > 0 && (w.modular || w.count % bc != 0 || w.full_begin != 0 || w.full_end * 64 != w.count))
          return false;
  return !pass.tiles.empty();
}

namespace {

// The plan of an ACSR; with global keys (acsr's rows are the pattern's without them), one more
// group in every tile of the first pass walks them from the table.
Plan build_plan(const Acsr& acsr, const TileShape& shape, const GlobalKeys* gkeys) {
  Plan plan;
  plan.seq_len = acsr.seq_len;
  plan.kv_len = acsr.kv_len;
  plan.shape = shape;
  check_int32(acsr.seq_len, "seq_len");
  check_int32(acsr.kv_len, "kv_len");
  plan.items = build_items(acsr);
  for (PlanItem& it : plan.items) {
    it.period = preferred_period(it);
    if (it.tabulated)
      append_table_rows(acsr.segments[static_cast<size_t>(it.segment)], plan.table, it.tab_row_ptr, it.tab_runs);
  }
  if (gkeys) {
    PlanGlobalKeys& g = plan.global_keys.emplace();
    g.table = static_cast<int64_t>(plan.table.size());
    g.count = static_cast<int64_t>(gkeys->keys.size());
    for (int64_t j : gkeys->keys) plan.table.push_back(static_cast<int32_t>(j));  // j < kv_len (int32)
    if (!gkeys->prefix.empty()) {
      g.prefix_table = static_cast<int64_t>(plan.table.size());
      plan.table.insert(plan.table.end(), gkeys->prefix.begin(), gkeys->prefix.end());
    }
    runs_from_points(gkeys->keys, g.runs);
    g.blocks = gkeys->blocks;
  }
  // Passes: one per distinct period; too many periods fall back to one natural-order pass.
  std::vector<int64_t> periods;
  for (const PlanItem& it : plan.items) periods.push_back(it.period);
  std::sort(periods.begin(), periods.end());
  periods.erase(std::unique(periods.begin(), periods.end()), periods.end());
  if (periods.empty()) periods.push_back(1);
  if (static_cast<int>(periods.size()) > kMaxPasses) {
    periods.assign(1, 1);
    for (PlanItem& it : plan.items) it.period = 1;
  }
  const int br = shape.br, bc = shape.bc;
  for (int64_t period : periods) {
    PlanPass pass;
    pass.period = period;
    std::vector<int> members;
    for (size_t k = 0; k < plan.items.size(); ++k)
      if (plan.items[k].period == period) members.push_back(static_cast<int>(k));
    const int64_t phases = std::min(period, plan.seq_len);
    for (int64_t c = 0; c < phases; ++c) {
      const int64_t M = (plan.seq_len - c + period - 1) / period;
      for (int64_t m0 = 0; m0 < M; m0 += br) {
        PlanTile tile;
        tile.phase = c;
        tile.m_begin = m0;
        tile.m_end = std::min(M, m0 + br);
        const int64_t first = c + period * m0, last = c + period * (tile.m_end - 1);
        std::vector<int64_t> rows = tile_rows(plan, pass, tile);
        int64_t valid = tile.m_end - tile.m_begin;
        // Items with a row here, grouped by run stride (tabulated items alone).
        std::map<int64_t, PlanGroup> affine;
        std::vector<PlanGroup> tab;
        for (int k : members) {
          const PlanItem& it = plan.items[static_cast<size_t>(k)];
          if (it.row_end <= first || it.row_begin > last) continue;
          bool any = false;
          for (int64_t i : rows) any = any || (i >= 0 && it.has_row(i));
          if (!any) continue;
          if (it.tabulated) {
            PlanGroup g;
            g.tabulated = true;
            g.items.push_back(k);
            tab.push_back(g);
          } else {
            affine[it.run.stride].items.push_back(k);
          }
        }
        for (auto& [stride, g] : affine) {
          if (stride == 1) {
            tile.groups.push_back(std::move(g));
            continue;
          }
          // Runs of one stride on several key lattices (e.g. the `fixed` pattern's summary
          // columns: 8 residues mod 128) would be walked with step 1 and modular masks over their
          // whole span; one group per lattice gathers only kept keys. Split when that needs no
          // more key tiles.
          std::vector<PlanGroup> split = split_by_lattice(plan, g, rows);
          if (split.size() > 1 && group_key_tiles(plan, split, rows, bc) <= group_key_tiles(plan, {g}, rows, bc)) {
            for (PlanGroup& x : split) tile.groups.push_back(std::move(x));
          } else {
            tile.groups.push_back(std::move(g));
          }
        }
        for (PlanGroup& g : tab) tile.groups.push_back(std::move(g));
        for (PlanGroup& g : tile.groups) {
          std::vector<Run> runs;
          for (int64_t i : rows) {
            std::vector<Run> rr = group_row_runs(plan, g, i);
            if (!g.tabulated) pass.max_runs = std::max(pass.max_runs, static_cast<int>(rr.size()));
            runs.insert(runs.end(), rr.begin(), rr.end());
          }
          g.walks = walks_for(runs, bc);
          for (const KeyWalk& w : g.walks) {
            int64_t kt = (w.count + bc - 1) / bc;
            tile.key_tiles += kt;
            plan.key_slots += kt * bc * valid;
          }
        }
        std::erase_if(tile.groups, [](const PlanGroup& g) { return g.walks.empty(); });
        int64_t gcount = 0;  // global keys some row of the tile keeps
        if (gkeys && plan.passes.empty())
          for (int64_t i : rows)
            if (i >= 0) gcount = std::max(gcount, global_prefix(plan, i));
        if (gcount > 0) {
          PlanGroup g;
          g.all_rows = true;
          KeyWalk w;
          w.base = plan.global_keys->table;
          w.count = gcount;
          w.indexed = true;
          g.walks.push_back(w);
          const int64_t kt = (w.count + bc - 1) / bc;
          tile.key_tiles += kt;
          plan.key_slots += kt * bc * valid;
          tile.groups.push_back(std::move(g));
        }
        pass.tiles.push_back(std::move(tile));
      }
    }
    if (shape.split) split_heavy_tiles(pass, shape);
    for (PlanTile& tile : pass.tiles) mark_full_tiles(plan, pass, tile);
    // Longest tiles first, so that heavy tiles (global rows) do not finish last.
    std::stable_sort(pass.tiles.begin(), pass.tiles.end(),
                     [](const PlanTile& a, const PlanTile& b) { return a.key_tiles > b.key_tiles; });
    check_int32(static_cast<int64_t>(pass.tiles.size()), "tiles per pass");
    plan.passes.push_back(std::move(pass));
  }
  check_int32(static_cast<int64_t>(plan.table.size()), "table size");
  plan.nnz = acsr.nnz();
  return plan;
}

// The plan with the global keys gk factored out of the ACSR's rows.
Plan factored_plan(const Acsr& acsr, const TileShape& shape, const GlobalKeys& gk) {
  Plan plan = build_plan(gk.rest, shape, &gk);
  plan.nnz = acsr.nnz();
  return plan;
}

int most_runs(const Plan& x) {
  int r = 0;
  for (const PlanPass& ps : x.passes) r = std::max(r, ps.max_runs);
  return r;
}

}  // namespace

int64_t decode_group(const Problem& p) {
  if (p.varlen || !p.group_heads.empty() || p.kv_heads <= 0 || p.heads % p.kv_heads != 0) return 0;
  const int64_t g = p.heads / p.kv_heads, chunk = 16 / static_cast<int64_t>(dtype_bytes(p.dtype));
  const bool fits = p.seq_len * g <= kDecodeMaxPairs && p.head_dim <= 256 && p.head_dim % chunk == 0 &&
                    p.seq_len * g * p.head_dim <= 1024;
  return fits ? g : 0;
}

bool decode_engine(const Problem& p, int decode_tuning) {
  if (decode_tuning == 0 || decode_group(p) == 0) return false;
  return decode_tuning == 1 || p.dtype == DType::FP32 || p.dtype == DType::TF32;
}

TileShape plan_shape(const Problem& p, const Structure& structure, bool decode) {
  TileShape shape;
  // No split-KV for a packed variable-length batch: its sequences' lengths are known at launch only.
  shape.split = !p.varlen;
  if (std::holds_alternative<Unstructured>(structure.kind) && !p.varlen)
    shape.batch_heads = p.batch * (decode ? p.kv_heads : served_heads(p));
  return shape;
}

Plan make_plan(const Acsr& acsr, const Structure& structure, const TileShape& shape) {
  if ((shape.br != 64 && shape.br != 128) || shape.bc != 64) throw std::invalid_argument("tile shape must be 64x64 or 128x64");
  Plan best = build_plan(acsr, shape, nullptr);
  // Kept where it visits a fifth fewer keys, or no more keys (5% slack) with at most half the runs
  // per row (fixed-16k: 8 -> 1). A walk of a few global keys costs each row tile a key tile, an
  // indexed load and a mask: H200, a window 200/200 with 2 global tokens (tests/gpu/window-d96-*,
  // 5% fewer keys, 3 -> 2 runs) ran 13-20% slower factored.
  for (const GlobalKeys& gk : structure.global_keys) {
    Plan f = factored_plan(acsr, shape, gk);
    const bool fewer_runs = 2 * most_runs(f) <= most_runs(best) && f.key_slots * 20 <= best.key_slots * 21;
    if (fewer_runs || f.key_slots * 5 <= best.key_slots * 4) best = std::move(f);
  }
  return best;
}

// The closed-form kernels' tiles: geometry.cuh's functions, which band_pass and lattice_pass use too.
bool lattice_tile_full(const Lattice& lat, int64_t t, int64_t k) {
  const int64_t m_first = 64 * t, m_last = std::min(64 * t + 63, lat.rows - 1);
  return geometry::lattice_key_tile_full<int64_t>(64 * k, m_first, m_last, lat.rows, lat.hole_lo, lat.hole_hi);
}

bool band_global_tile(const BandWithGlobals& bg, int64_t t) {
  const Band& band = bg.band;
  const int64_t m_first = 64 * t, m_last = std::min(64 * t + 63, band.rows - 1);
  return geometry::band_global_key_tile<int64_t>(m_first, m_last, band.k_lo, band.k_hi, bg.globals);
}

BandTile band_tile(const Band& band, int64_t t) {
  const int64_t m_first = 64 * t, m_last = std::min(64 * t + 63, band.rows - 1);
  const geometry::BandKeyTiles<int64_t> g = geometry::band_key_tiles<int64_t>(m_first, m_last, band.rows, band.k_lo, band.k_hi);
  BandTile bt;
  bt.u_start = g.u_start;
  if (g.count == 0) return bt;  // no key: no tiles
  bt.first = g.first;
  bt.count = g.count;
  // The full tiles among the walked ones.
  bt.full_begin = std::max(g.full_begin, bt.first);
  bt.full_end = std::min(g.full_end, bt.first + bt.count);
  if (bt.full_end < bt.full_begin) bt.full_end = bt.full_begin;
  return bt;
}

std::string describe(const Plan& plan, const StructureKind& structure) {
  std::ostringstream o;
  o << "tile " << plan.shape.br << "x" << plan.shape.bc << ", " << plan.items.size() << " items, "
    << plan.passes.size() << " pass(es), tile fill " << plan.tile_fill() << "\n";
  const auto band_line = [&](const Band& b, int64_t globals) {
    o << "  band: keys i + " << b.dilation << "*k, " << b.k_lo << " <= k <= " << b.k_hi
      << (globals > 0 ? ", and " + std::to_string(globals) + " global tokens (rows and keys)" : std::string()) << "\n";
  };
  if (const Band* b = std::get_if<Band>(&structure)) band_line(*b, 0);
  if (const BandWithGlobals* bg = std::get_if<BandWithGlobals>(&structure)) band_line(bg->band, bg->globals);
  if (const WindowLattice* wl = std::get_if<WindowLattice>(&structure)) {
    const Lattice& L = wl->lattice;
    o << "  window plus lattice: keys i + k, " << wl->window.k_lo << " <= k <= " << wl->window.k_hi << ", and i mod "
      << L.period << " + " << L.period << "*u outside them (lattice points u - i / " << L.period << " in [" << L.hole_lo
      << ", " << L.hole_hi << "] are the window's)\n";
  }
  if (const PlanGlobalKeys* g = plan.global_keys ? &*plan.global_keys : nullptr)
    o << "  global keys: " << g->count << (g->prefix_table < 0 ? " keys every row keeps (" : " keys of which each row keeps a prefix (")
      << g->runs.size() << " runs), factored out of the items and walked by every tile of pass 0 from the table (word "
      << g->table << ")"
      << (g->blocks ? "; blocks of " + std::to_string(g->blocks->width) + " keys every " + std::to_string(g->blocks->period) +
                          " from key " + std::to_string(g->blocks->first)
                    : std::string())
      << "\n";
  const size_t shown = 24;
  for (size_t k = 0; k < plan.items.size() && k < shown; ++k) {
    const PlanItem& it = plan.items[k];
    o << "  item " << k << ": rows [" << it.row_begin << ", " << it.row_end << ") step " << it.row_stride;
    if (it.tabulated) {
      o << ", tabulated (segment " << it.segment << ")";
    } else {
      const AffineRun& a = it.run;
      o << ", keys start (" << a.start_slope << "*i + " << a.start_offset << ")/" << a.den << ", stride "
        << a.stride << ", count (" << a.count_slope << "*i + " << a.count_offset << ")/" << a.den
        << " (segment " << it.segment << " run " << it.run_index;
      if (it.merged > 1) o << ", merged from " << it.merged << " segments";
      o << ")";
    }
    o << ", period " << it.period << "\n";
  }
  if (plan.items.size() > shown) o << "  ... " << plan.items.size() - shown << " more items (tables below)\n";
  for (size_t p = 0; p < plan.passes.size(); ++p) {
    const PlanPass& pass = plan.passes[p];
    int64_t kt = 0, lattice = 0, walks = 0;
    for (const PlanTile& t : pass.tiles) {
      kt += t.key_tiles;
      for (const PlanGroup& g : t.groups)
        for (const KeyWalk& w : g.walks) {
          ++walks;
          lattice += w.step > 1;
        }
    }
    o << "  pass " << p << ": rows grouped by i mod " << pass.period << ", " << pass.tiles.size() << " row tiles, "
      << kt << " key tiles, " << walks << " walks (" << lattice << " gathered with stride > 1), up to "
      << pass.max_runs << " runs per row and group";
    if (!pass.splits.empty())
      o << ", " << pass.splits.size() << " heavy tile(s) split into " << pass.slots << " chunks (split-KV)";
    o << "\n";
  }
  return o.str();
}

// Each row tile with the forward's split-KV chunks (heavy tiles: global rows, and in the column plan
// global keys' columns; too few blocks to fill the GPU): the backward kernels write each chunk's
// partial sums to a slot of their own and add them in slot order (no atomics).
BackwardPlans backward_plans(const Problem& p, const Acsr& acsr) {
  TileShape shape;
  // No split tiles in a packed batch (plan_shape): its sequences' lengths are known at launch only.
  shape.split = !p.varlen;
  shape.batch_heads = p.varlen ? 0 : p.batch * p.heads;
  BackwardPlans b;
  b.rows = make_plan(acsr, analyze_structure(acsr), shape);
  b.columns = column_acsr(acsr, p.limits, p.file);
  b.cols = make_plan(b.columns, analyze_structure(b.columns), shape);
  return b;
}

}  // namespace splat
