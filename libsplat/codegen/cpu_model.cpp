#include "libsplat/codegen/cpu_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "libsplat/device/geometry.cuh"

namespace splat {
namespace {

bool in_run(const Run& r, int64_t j) {
  int64_t d = j - r.start;
  return d >= 0 && d % r.stride == 0 && d / r.stride < r.count;
}

// One sequence of `length` tokens of a packed batch under a unit-step band (band_pass_varlen): row
// tiles of 64 rows below the length, their key tiles from band_key_tiles over `length` rows, each
// read as the box from band_box_start (moved down where it would reach past the length: its keys
// below the tile's first are the tile before's, masked); key_tile and end as walk's.
template <class KeyTile, class End>
void band_varlen_walk(const Band& b, int64_t length, KeyTile&& key_tile, End&& end) {
  if (b.dilation != 1) throw std::invalid_argument("cpu model: a packed batch's closed-form kernel is a unit-step band");
  const PlanTile none;
  std::vector<int64_t> rows(64), keys(64);
  std::vector<char> kept(64 * 64);
  for (int64_t m_first = 0; m_first < length; m_first += 64) {
    const int64_t m_last = std::min(m_first + 63, length - 1);
    const geometry::BandKeyTiles<int64_t> g = geometry::band_key_tiles<int64_t>(m_first, m_last, length, b.k_lo, b.k_hi);
    for (int r = 0; r < 64; ++r) rows[static_cast<size_t>(r)] = m_first + r < length ? m_first + r : -1;
    for (int64_t kt = g.first; kt < g.first + g.count; ++kt) {
      const int64_t u0 = g.u_start + 64 * kt, ub = geometry::band_box_start<int64_t>(u0, length);
      const bool full = kt >= g.full_begin && kt < g.full_end;
      if (full && ub != u0) throw std::logic_error("cpu model: a moved box in a full key tile");
      if (ub + 63 >= length) throw std::logic_error("cpu model: a box reads past its sequence's last key");
      for (int c = 0; c < 64; ++c) keys[static_cast<size_t>(c)] = ub + c >= 0 && ub + c < length ? ub + c : -1;
      for (int r = 0; r < 64; ++r)
        for (int c = 0; c < 64; ++c) {
          const int64_t m = m_first + r, u = ub + c;
          const bool k = m < length && u >= std::max<int64_t>(u0, 0) && u < length && u - m >= b.k_lo && u - m <= b.k_hi;
          if (full && !k && m < length)
            throw std::logic_error("band (packed batch): key tile " + std::to_string(kt) + " of rows from " +
                                   std::to_string(m_first) + " is full but row " + std::to_string(m) +
                                   " does not keep key " + std::to_string(u));
          kept[static_cast<size_t>(r) * 64 + static_cast<size_t>(c)] = k;
        }
      key_tile(none, rows, keys, kept);
    }
    end(none, rows, 0);
  }
}

// Calls key_tile(tile, rows, keys, kept) for every key tile of BC keys in the kernel's order
// (pass, tile, group, walk, key tile), end(tile, rows, pass) after each row tile and
// pass_end(pass) after each pass.
// kernels a Band: the band kernel's walk instead (band_pass): blocks phase by phase, key tiles from
// band_tile, rows masked to their band (one pass). A band with globals: first the plan's tiles of
// the first row tile (tables, split-KV), then the band from row tile 1 on, each row tile's band
// key tiles followed by its key tile of global keys outside the rows' windows (band_global_tile).
// A window plus a lattice (WindowLattice): the window's band walk, then the lattice walk
// (lattice_pass): phase by phase, every key tile of the phase for each row tile, masked at the
// rows' holes, on a fresh state (its tiles name split slot 0) merged with the window's at the end.
// length >= 0: one sequence of a packed variable-length batch (fused_pass with SPLAT_VARLEN): the
// plan's rows and walks clipped to it as the kernel clips them (rows below length; each walk's keys
// below length, walks ascending; full 64-key tiles only among those); kernels a Band:
// band_varlen_walk.
template <class KeyTile, class End, class PassEnd>
void walk(const Plan& plan, const StructureKind& kernels, KeyTile&& key_tile, End&& end, PassEnd&& pass_end,
          int64_t length = -1) {
  const int br = plan.shape.br, bc = plan.shape.bc;
  std::vector<int64_t> keys(static_cast<size_t>(bc));
  std::vector<char> kept(static_cast<size_t>(br) * static_cast<size_t>(bc));
  // One table tile: its groups' walks in key tiles of bc.
  auto table_tile = [&](const PlanPass& pass, const PlanTile& tile, size_t p) {
    std::vector<int64_t> rows = tile_rows(plan, pass, tile);
    if (length >= 0)
      for (int64_t& i : rows) i = i >= length ? -1 : i;
    for (const PlanGroup& g : tile.groups) {
      std::vector<std::vector<Run>> row_runs(static_cast<size_t>(br));
      for (int r = 0; r < br; ++r) row_runs[static_cast<size_t>(r)] = group_row_runs(plan, g, rows[static_cast<size_t>(r)]);
      for (KeyWalk w : g.walks) {
        if (length >= 0) {  // clip_walk (libsplat/device/plan.cuh)
          int64_t n = 0;
          while (n < w.count && walk_key(plan, w, n) < length) ++n;
          for (int64_t u = n; u < w.count; ++u)
            if (walk_key(plan, w, u) < length) throw std::logic_error("cpu model: a walk's keys do not ascend");
          w.count = n;
          w.full_end = std::min(w.full_end, n / 64);
        }
        for (int64_t u0 = 0; u0 < w.count; u0 += bc) {
          for (int c = 0; c < bc; ++c) {
            const int64_t u = u0 + c, j = u < w.count ? walk_key(plan, w, u) : -1;
            keys[static_cast<size_t>(c)] = (j >= 0 && j < plan.kv_len) ? j : -1;
          }
          // The kernel skips the mask in the plan's full key tiles: every key of a real row
          // must be kept there.
          const int64_t kt = u0 / bc;
          const bool full = kt >= w.full_begin && kt < w.full_end;
          for (int r = 0; r < br; ++r)
            for (int c = 0; c < bc; ++c) {
              int64_t j = keys[static_cast<size_t>(c)];
              bool k = false;
              if (j >= 0)
                for (const Run& run : row_runs[static_cast<size_t>(r)]) k = k || in_run(run, j);
              if (full && !k && rows[static_cast<size_t>(r)] >= 0)
                throw std::logic_error("plan: key tile " + std::to_string(kt) + " of a walk is marked full but row " +
                                       std::to_string(rows[static_cast<size_t>(r)]) + " does not keep key " +
                                       std::to_string(j));
              kept[static_cast<size_t>(r) * static_cast<size_t>(bc) + static_cast<size_t>(c)] = k;
            }
          key_tile(tile, rows, keys, kept);
        }
      }
    }
    end(tile, rows, p);
  };
  if (!std::holds_alternative<Unstructured>(kernels)) {
    if (br != 64 || bc != 64) throw std::invalid_argument("cpu model: the band walk has 64x64 tiles");
    if (length >= 0) {
      const Band* b = std::get_if<Band>(&kernels);
      if (b == nullptr) throw std::invalid_argument("cpu model: a packed variable-length batch's closed form is a band");
      band_varlen_walk(*b, length, key_tile, end);
      pass_end(0);
      return;
    }
    const BandWithGlobals* bg = std::get_if<BandWithGlobals>(&kernels);
    const WindowLattice* wl = std::get_if<WindowLattice>(&kernels);
    const Band& b = bg ? bg->band : wl ? wl->window : std::get<Band>(kernels);
    const PlanTile none;
    std::vector<int64_t> rows(64);
    // Key tile kt (keys u0 + c of phase ph: ph + step * u, u < n) of row tile t, kept(m, u) for row
    // m of the phase; a full tile must keep every key of every real row (the kernels skip its mask).
    auto phase_tile = [&](const PlanTile& tile, const char* what, int64_t ph, int64_t step, int64_t n, int64_t t,
                          int64_t kt, int64_t u0, bool full, auto&& keeps) {
      for (int c = 0; c < 64; ++c) {
        const int64_t u = u0 + c;
        keys[static_cast<size_t>(c)] = u >= 0 && u < n ? ph + step * u : -1;
      }
      for (int r = 0; r < 64; ++r) {
        const int64_t m = 64 * t + r;
        for (int c = 0; c < 64; ++c) {
          const int64_t u = u0 + c;
          const bool k = m < n && u >= 0 && u < n && keeps(m, u);
          if (full && !k && m < n)
            throw std::logic_error(std::string(what) + ": key tile " + std::to_string(kt) + " of row tile " + std::to_string(t) +
                                   " is full but row " + std::to_string(rows[static_cast<size_t>(r)]) +
                                   " does not keep its key " + std::to_string(u));
          kept[static_cast<size_t>(r) * 64 + static_cast<size_t>(c)] = k;
        }
      }
      key_tile(tile, rows, keys, kept);
    };
    if (bg) {
      if (plan.passes.size() != 1) throw std::invalid_argument("cpu model: a band with globals has one pass");
      for (const PlanTile& tile : plan.passes[0].tiles)
        if (tile.m_begin < 64) table_tile(plan.passes[0], tile, 0);
    }
    for (int64_t ph = 0; ph < b.dilation; ++ph)
      for (int64_t t = 0; t < b.tiles_per_phase(); ++t) {
        if (bg && band_head_tile(*bg, t)) continue;
        const BandTile bt = band_tile(b, t);
        for (int r = 0; r < 64; ++r) {
          const int64_t m = 64 * t + r;
          rows[static_cast<size_t>(r)] = m < b.rows ? ph + b.dilation * m : -1;
        }
        for (int64_t kt = bt.first; kt < bt.first + bt.count; ++kt)
          phase_tile(none, "band", ph, b.dilation, b.rows, t, kt, bt.u_start + 64 * kt,
                     kt >= bt.full_begin && kt < bt.full_end,
                     [&](int64_t m, int64_t u) { return u - m >= b.k_lo && u - m <= b.k_hi; });
        if (bg && band_global_tile(*bg, t)) {
          // Keys [0, 64) (one TMA box), each row keeping the global keys outside its window.
          for (int c = 0; c < 64; ++c) keys[static_cast<size_t>(c)] = c < b.rows ? c : -1;
          for (int r = 0; r < 64; ++r) {
            const int64_t m = 64 * t + r;
            for (int c = 0; c < 64; ++c)
              kept[static_cast<size_t>(r) * 64 + static_cast<size_t>(c)] =
                  m < b.rows && c < bg->globals && (c < m + b.k_lo || c > m + b.k_hi);
          }
          key_tile(none, rows, keys, kept);
        }
        end(none, rows, 0);
      }
    if (wl) {
      const Lattice& L = wl->lattice;
      PlanTile lat;
      lat.split_slot = 0;
      for (int64_t ph = 0; ph < L.period; ++ph)
        for (int64_t t = 0; t < L.tiles_per_phase(); ++t) {
          for (int r = 0; r < 64; ++r) {
            const int64_t m = 64 * t + r;
            rows[static_cast<size_t>(r)] = m < L.rows ? ph + L.period * m : -1;
          }
          for (int64_t kt = 0; kt < L.tiles_per_phase(); ++kt)
            phase_tile(lat, "lattice", ph, L.period, L.rows, t, kt, 64 * kt, lattice_tile_full(L, t, kt),
                       [&](int64_t m, int64_t u) { return u - m < L.hole_lo || u - m > L.hole_hi; });
          end(lat, rows, 0);
        }
    }
    pass_end(0);
    return;
  }
  for (size_t p = 0; p < plan.passes.size(); ++p) {
    for (const PlanTile& tile : plan.passes[p].tiles) table_tile(plan.passes[p], tile, p);
    pass_end(p);
  }
}

}  // namespace

std::vector<double> cpu_model_attention(const Plan& plan, int64_t d, double scale, const std::vector<double>& q,
                                        const std::vector<double>& k, const std::vector<double>& v, double headroom,
                                        bool checked_sums, const StructureKind& kernels) {
  const size_t L = static_cast<size_t>(plan.seq_len), D = static_cast<size_t>(d);
  const int br = plan.shape.br, bc = plan.shape.bc;
  const double ninf = -std::numeric_limits<double>::infinity();
  // Softmax state of a set of rows: m, l, unnormalised O. `main` is the state handed from pass to
  // pass (the kernel's workspace); split chunks have their own, merged after the pass (combine).
  struct State {
    std::vector<double> m, l, acc;
    void init(size_t n, size_t dd) {
      m.assign(n, -std::numeric_limits<double>::infinity());
      l.assign(n, 0.0);
      acc.assign(n * dd, 0.0);
    }
  };
  State main;
  main.init(L, D);
  std::vector<State> slots;
  std::vector<double> o(L * D, 0.0), s(static_cast<size_t>(bc));
  size_t cur_pass = 0;
  auto slot_state = [&](const PlanTile& t) -> State& {
    State& st = slots[static_cast<size_t>(t.split_slot)];
    if (st.m.empty()) {
      st.init(L, D);
      if (t.split_lead) st = main;  // the lead chunk continues the handed-over state
    }
    return st;
  };
  const bool band = !std::holds_alternative<Unstructured>(kernels);
  const bool band_tables = std::holds_alternative<BandWithGlobals>(kernels);  // the first row tile's split chunks
  const bool lattice = std::holds_alternative<WindowLattice>(kernels);
  if (!plan.passes.empty() && (!band || band_tables)) slots.resize(static_cast<size_t>(plan.passes[0].slots));
  if (lattice) slots.resize(1);  // the lattice's own state
  walk(
      plan, kernels,
      [&](const PlanTile& tile, const std::vector<int64_t>& rows, const std::vector<int64_t>& keys,
          const std::vector<char>& kept) {
        State& st = tile.split_slot >= 0 ? slot_state(tile) : main;
        for (int r = 0; r < br; ++r) {
          int64_t i = rows[static_cast<size_t>(r)];
          if (i < 0) continue;
          size_t ri = static_cast<size_t>(i);
          double mx = ninf;
          for (int c = 0; c < bc; ++c) {
            s[static_cast<size_t>(c)] = ninf;
            if (!kept[static_cast<size_t>(r) * static_cast<size_t>(bc) + static_cast<size_t>(c)]) continue;
            size_t j = static_cast<size_t>(keys[static_cast<size_t>(c)]);
            double dot = 0;
            for (size_t x = 0; x < D; ++x) dot += q[ri * D + x] * k[j * D + x];
            s[static_cast<size_t>(c)] = dot * scale;
            mx = std::max(mx, s[static_cast<size_t>(c)]);
          }
          // Lazy rescale: the reference stays while the tile's max exceeds it by at most headroom
          // (an empty row's -inf reference always moves to the first kept score).
          bool keep_ref = headroom > 0 && st.m[ri] != ninf && mx <= st.m[ri] + headroom;
          if (checked_sums && headroom > 0 && st.m[ri] != ninf) {
            // The wgmma engine's checked row sums: the reference stays while the sum of each
            // thread's share of the row (columns c with c % 8 / 2 == t, t < 4) is <= e^headroom,
            // and otherwise moves to the row max (the exact step).
            double part[4] = {0, 0, 0, 0};
            for (int c = 0; c < bc; ++c)
              if (s[static_cast<size_t>(c)] != ninf) part[c % 8 / 2] += std::exp(s[static_cast<size_t>(c)] - st.m[ri]);
            keep_ref = true;
            for (double x : part) keep_ref = keep_ref && x <= std::exp(headroom);
          }
          double m_new = keep_ref ? st.m[ri] : std::max(st.m[ri], mx);
          double ref = m_new == ninf ? 0.0 : m_new;
          double alpha = st.m[ri] == ninf ? 0.0 : std::exp(st.m[ri] - ref);
          st.l[ri] *= alpha;
          for (size_t x = 0; x < D; ++x) st.acc[ri * D + x] *= alpha;
          for (int c = 0; c < bc; ++c) {
            if (s[static_cast<size_t>(c)] == ninf) continue;
            double p = std::exp(s[static_cast<size_t>(c)] - ref);
            if (p > std::exp(headroom) * (1 + 1e-12))
              throw std::logic_error("lazy rescale: exp(score - reference) = " + std::to_string(p) + " exceeds e^headroom");
            st.l[ri] += p;
            size_t j = static_cast<size_t>(keys[static_cast<size_t>(c)]);
            for (size_t x = 0; x < D; ++x) st.acc[ri * D + x] += p * v[j * D + x];
          }
          st.m[ri] = m_new;
        }
      },
      [&](const PlanTile&, const std::vector<int64_t>&, size_t) {},
      [&](size_t p) {
        if (band && !band_tables) {
          if (lattice && !slots[0].m.empty()) {
            // lattice_pass's end (WgmmaEngine::merge_state): its state merged with the window's.
            const State& st = slots[0];
            for (size_t ri = 0; ri < L; ++ri) {
              const double M = std::max(main.m[ri], st.m[ri]), ref = M == ninf ? 0.0 : M;
              const double a0 = main.m[ri] == ninf ? 0.0 : std::exp(main.m[ri] - ref);
              const double a1 = st.m[ri] == ninf ? 0.0 : std::exp(st.m[ri] - ref);
              main.l[ri] = main.l[ri] * a0 + st.l[ri] * a1;
              for (size_t y = 0; y < D; ++y) main.acc[ri * D + y] = main.acc[ri * D + y] * a0 + st.acc[ri * D + y] * a1;
              main.m[ri] = M;
            }
          }
          for (size_t ri = 0; ri < L; ++ri)
            for (size_t y = 0; y < D; ++y) o[ri * D + y] = main.l[ri] > 0 ? main.acc[ri * D + y] / main.l[ri] : 0.0;
          return;
        }
        const PlanPass& pass = plan.passes[p];
        // Combine: merge the chunks of each split tile into the handed-over state.
        for (const PlanSplit& sp : pass.splits) {
          for (int64_t m = sp.m_begin; m < sp.m_end; ++m) {
            size_t ri = static_cast<size_t>(sp.phase + pass.period * m);
            double M = ninf;
            for (int x = 0; x < sp.slot_count; ++x) M = std::max(M, slots[static_cast<size_t>(sp.slot_begin + x)].m[ri]);
            double ref = M == ninf ? 0.0 : M, l = 0;
            std::vector<double> acc(D, 0.0);
            for (int x = 0; x < sp.slot_count; ++x) {
              const State& st = slots[static_cast<size_t>(sp.slot_begin + x)];
              double w = st.m[ri] == ninf ? 0.0 : std::exp(st.m[ri] - ref);
              l += st.l[ri] * w;
              for (size_t y = 0; y < D; ++y) acc[y] += st.acc[ri * D + y] * w;
            }
            main.m[ri] = M;
            main.l[ri] = l;
            for (size_t y = 0; y < D; ++y) main.acc[ri * D + y] = acc[y];
          }
        }
        cur_pass = p + 1;
        if (cur_pass < plan.passes.size()) {
          slots.assign(static_cast<size_t>(plan.passes[cur_pass].slots), State());
        } else {
          for (size_t ri = 0; ri < L; ++ri)
            for (size_t y = 0; y < D; ++y) o[ri * D + y] = main.l[ri] > 0 ? main.acc[ri * D + y] / main.l[ri] : 0.0;
        }
      });
  return o;
}

std::vector<std::vector<int64_t>> cpu_model_visits(const Plan& plan, const StructureKind& kernels, int64_t length) {
  std::vector<std::vector<int64_t>> visits(static_cast<size_t>(plan.seq_len));
  const int br = plan.shape.br, bc = plan.shape.bc;
  walk(
      plan, kernels,
      [&](const PlanTile&, const std::vector<int64_t>& rows, const std::vector<int64_t>& keys,
          const std::vector<char>& kept) {
        for (int r = 0; r < br; ++r)
          for (int c = 0; c < bc; ++c)
            if (rows[static_cast<size_t>(r)] >= 0 &&
                kept[static_cast<size_t>(r) * static_cast<size_t>(bc) + static_cast<size_t>(c)])
              visits[static_cast<size_t>(rows[static_cast<size_t>(r)])].push_back(keys[static_cast<size_t>(c)]);
      },
      [](const PlanTile&, const std::vector<int64_t>&, size_t) {}, [](size_t) {}, length);
  return visits;
}

CpuGradients cpu_model_backward(const Plan& rows, const Plan& cols, int64_t d, double scale, const std::vector<double>& q,
                                const std::vector<double>& k, const std::vector<double>& v,
                                const std::vector<double>& dout, int64_t length, bool fast) {
  const int64_t L = rows.seq_len, KV = rows.kv_len;
  if (cols.seq_len != KV || cols.kv_len != L) throw std::invalid_argument("cpu_model_backward: the plans' shapes differ");
  const auto dot = [&](const std::vector<double>& a, int64_t i, const std::vector<double>& b, int64_t j) {
    double s = 0;
    for (int64_t x = 0; x < d; ++x) s += a[static_cast<size_t>(i * d + x)] * b[static_cast<size_t>(j * d + x)];
    return s;
  };
  CpuGradients g{std::vector<double>(static_cast<size_t>(L * d)), std::vector<double>(static_cast<size_t>(KV * d)),
                 std::vector<double>(static_cast<size_t>(KV * d))};
  std::vector<double> lse(static_cast<size_t>(L), -INFINITY), delta(static_cast<size_t>(L), 0.0);
  const auto row_visits = cpu_model_visits(rows, Unstructured{}, length), col_visits = cpu_model_visits(cols, Unstructured{}, length);
  for (int64_t i = 0; i < L; ++i) {  // the dQ kernel: the forward's statistics, D and dQ over the row's visits
    const std::vector<int64_t>& js = row_visits[static_cast<size_t>(i)];
    if (js.empty()) continue;
    double mx = -INFINITY, sum = 0;
    for (int64_t j : js) mx = std::max(mx, scale * dot(q, i, k, j));
    for (int64_t j : js) sum += std::exp(scale * dot(q, i, k, j) - mx);
    lse[static_cast<size_t>(i)] = mx + std::log(sum);
    for (int64_t j : js) delta[static_cast<size_t>(i)] += std::exp(scale * dot(q, i, k, j) - lse[static_cast<size_t>(i)]) * dot(dout, i, v, j);
    for (int64_t j : js) {
      if (fast) break;  // dQ comes with dK and dV, below
      const double p = std::exp(scale * dot(q, i, k, j) - lse[static_cast<size_t>(i)]);
      const double ds = p * (dot(dout, i, v, j) - delta[static_cast<size_t>(i)]);
      for (int64_t x = 0; x < d; ++x) g.dq[static_cast<size_t>(i * d + x)] += scale * ds * k[static_cast<size_t>(j * d + x)];
    }
  }
  for (int64_t j = 0; j < KV; ++j)  // the dK/dV kernel: key j's rows in the column plan
    for (int64_t i : col_visits[static_cast<size_t>(j)]) {
      const double p = std::exp(scale * dot(q, i, k, j) - lse[static_cast<size_t>(i)]);
      const double ds = p * (dot(dout, i, v, j) - delta[static_cast<size_t>(i)]);
      for (int64_t x = 0; x < d; ++x) {
        g.dk[static_cast<size_t>(j * d + x)] += scale * ds * q[static_cast<size_t>(i * d + x)];
        g.dv[static_cast<size_t>(j * d + x)] += p * dout[static_cast<size_t>(i * d + x)];
        if (fast) g.dq[static_cast<size_t>(i * d + x)] += scale * ds * k[static_cast<size_t>(j * d + x)];
      }
    }
  return g;
}

}  // namespace splat
