// The decode engine's device code (decode_pass, libsplat/device/decode_driver.cuh) and the split-KV
// combine (fused_combine) run on the CPU as SIMT threads (simt/splat/common.cuh: a std::thread per
// CUDA thread, barriers for __syncthreads, __syncwarp and the shuffles) over the tables codegen
// makes for the problem (`--tune decode=1`), every block of the launch grid in turn; O and each
// row's log-sum-exp against float64 attention over the ACSR. This checks the kernel's indexing
// (heads of a group, tiles per block, split slots), masks and merges without a GPU; the GPU runs
// the same code (scripts/check-gpu's decode selection).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "libsplat/analysis/analysis.h"
#include "libsplat/codegen/codegen.h"
#include "libsplat/codegen/device_tables.h"
#include "libsplat/pattern/pattern.h"

#include "splat/common.cuh"  // the SIMT stand-in (tests/device/simt)
#include "splat/decode_driver.cuh"
#include "splat/combine.cuh"

TEST_SUITE_BEGIN("cpu-model");

namespace {

struct Tables {
  std::vector<Item> items;
  std::vector<TileD> tiles;
  std::vector<GroupD> groups;
  std::vector<WalkD> walks;
  std::vector<int> group_items, group_rbeg, group_pmax;
  std::vector<SplitD> splits;
};

std::vector<int> ints(const std::vector<int64_t>& xs) {
  std::vector<int> out(xs.begin(), xs.end());
  if (out.empty()) out.push_back(0);
  return out;
}

Tables load_tables(const splat::Plan& plan) {
  Tables t;
  for (const splat::ItemRow& r : splat::item_rows(plan))
    t.items.push_back({r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], (int)r[9], r[10], r[11]});
  const splat::PassTables pt = splat::pass_tables(plan, plan.passes.at(0));
  for (const splat::TileRow& r : pt.tiles) {
    TileD d;
    int* f = &d.phase;  // TileD is 15 ints in order
    for (size_t x = 0; x < r.size(); ++x) f[x] = (int)r[x];
    t.tiles.push_back(d);
  }
  for (const splat::GroupRow& r : pt.groups) t.groups.push_back({(int)r[0], (int)r[1], (int)r[2], (int)r[3], (int)r[4]});
  for (const splat::WalkRow& r : pt.walks) t.walks.push_back({(int)r[0], (int)r[1], (int)r[2], (int)r[3], (int)r[4], (int)r[5]});
  if (t.groups.empty()) t.groups.push_back({0, 0, 0, 0, 0});
  if (t.walks.empty()) t.walks.push_back({0, 1, 0, 0, 0, 0});
  t.group_items = ints(pt.group_items);
  t.group_rbeg = ints(pt.group_row_begin);
  t.group_pmax = ints(pt.group_row_end_max);
  for (const splat::SplitRow& r : pt.splits) t.splits.push_back({(int)r[0], (int)r[1], (int)r[2], (int)r[3], (int)r[4]});
  return t;
}

// Float64 attention of one query head's rows over the ACSR (K/V head kvh), and each row's natural
// log-sum-exp (-inf for a row that keeps no key).
template <class T>
void reference(const splat::Problem& p, const splat::Acsr& acsr, const std::vector<T>& q, const std::vector<T>& k,
               const std::vector<T>& v, int64_t qh, int64_t kvh, std::vector<double>& o, std::vector<double>& lse) {
  const int64_t d = p.head_dim;
  for (int64_t i = 0; i < p.seq_len; ++i) {
    std::vector<std::pair<int64_t, double>> s;
    for (const splat::Run& r : acsr.row(i))
      for (int64_t c = 0; c < r.count; ++c) {
        const int64_t j = r.start + c * r.stride;
        double dot = 0;
        for (int64_t x = 0; x < d; ++x) dot += (double)to_f(q[(qh * p.seq_len + i) * d + x]) * to_f(k[(kvh * p.kv_len + j) * d + x]);
        s.push_back({j, dot * p.scale});
      }
    double mx = -std::numeric_limits<double>::infinity(), sum = 0;
    for (const auto& e : s) mx = std::max(mx, e.second);
    for (const auto& e : s) sum += std::exp(e.second - mx);
    lse[qh * p.seq_len + i] = s.empty() ? -std::numeric_limits<double>::infinity() : mx + std::log(sum);
    for (int64_t x = 0; x < d; ++x) {
      double acc = 0;
      for (const auto& e : s) acc += std::exp(e.second - mx) / sum * to_f(v[(kvh * p.kv_len + e.first) * d + x]);
      o[(qh * p.seq_len + i) * d + x] = acc;
    }
  }
}

template <class T> std::vector<T> random_tensor(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<T> out(n);
  for (T& x : out) x = from_f<T>(u(rng));
  return out;
}

// decode_pass with the template arguments the emitter writes for the problem (checked against the
// plan first), then fused_combine when the plan has split chunks; O within tol of float64 (relative
// to the head's largest output), the log-sum-exp within 1e-4.
template <class T, int SEQ, int KV, int HD, int PERIOD, int R, int NSLOTS, int G, int GTAB, int GROWS, int BPT>
void check_decode(const std::string& doc, double tol) {
  const splat::Problem p = splat::parse_problem_text(doc, "simt");
  splat::CodegenOptions co;
  co.arch = "sm_90a";
  co.pipeline = false;
  co.tuning = splat::parse_tuning("decode=1");
  const splat::Acsr acsr = splat::analyze(p);
  const splat::GeneratedModule m = splat::generate(p, acsr, co);
  REQUIRE(m.engine == "decode");
  const splat::PlanPass& pass = m.plan.passes.at(0);
  REQUIRE(p.seq_len == SEQ);
  REQUIRE(p.kv_len == KV);
  REQUIRE(p.head_dim == HD);
  REQUIRE(pass.period == PERIOD);
  REQUIRE(pass.max_runs == R);
  REQUIRE(pass.slots == NSLOTS);
  REQUIRE(p.heads / p.kv_heads == G);
  REQUIRE((m.plan.global_keys ? m.plan.global_keys->table : -1) == GTAB);
  REQUIRE((m.plan.global_keys ? m.plan.global_keys->prefix_table : -1) == GROWS);
  REQUIRE(m.fused.size() == (NSLOTS > 0 ? 2u : 1u));
  if (NSLOTS > 0) REQUIRE(m.fused[1].grid_x == (int64_t)pass.splits.size() * BPT);
  REQUIRE(m.fused[0].block == 32 * splat::geometry::decode_warps(HD, (int)sizeof(T)));
  simt_kv_group = G;
  const Tables t = load_tables(m.plan);
  const int64_t nbh = p.batch * p.heads;
  std::mt19937 rng(1234);
  const std::vector<T> q = random_tensor<T>((size_t)(nbh * SEQ * HD), rng);
  const std::vector<T> k = random_tensor<T>((size_t)(p.batch * p.kv_heads * KV * HD), rng);
  const std::vector<T> v = random_tensor<T>((size_t)(p.batch * p.kv_heads * KV * HD), rng);
  std::vector<T> o((size_t)(nbh * SEQ * HD), from_f<T>(std::nanf("")));
  std::vector<float> lse((size_t)(nbh * SEQ), std::nanf(""));
  std::vector<float> ws((size_t)std::max<int64_t>(1, nbh * m.workspace_floats_per_bh), std::nanf(""));
  const int* table = m.table.empty() ? nullptr : m.table.data();
  const float scale_log2 = (float)(p.scale * 1.4426950408889634);
  simt_grid((unsigned)m.fused[0].grid_x, (unsigned)nbh, (unsigned)m.fused[0].block, (size_t)m.fused[0].smem_dynamic, [&] {
    decode_pass<T, SEQ, KV, HD, PERIOD, R, NSLOTS, G, splat::geometry::decode_warps(HD, (int)sizeof(T)), GTAB, GROWS>(
        DecodeTables{t.items.data(), t.tiles.data(), (int)t.tiles.size(), t.groups.data(), t.walks.data(), t.group_items.data(),
                     t.group_rbeg.data(), t.group_pmax.data()},
        scale_log2, q.data(), k.data(), v.data(), o.data(), ws.data(),
        lse.data(), table);
  });
  if constexpr (NSLOTS > 0)
    simt_grid((unsigned)m.fused[1].grid_x, (unsigned)nbh, (unsigned)m.fused[1].block, 0, [&] {
      fused_combine<T, SEQ, HD, PERIOD, NSLOTS, true, 2, 4, false, BPT>(t.splits.data(), o.data(), ws.data(), lse.data());
    });
  std::vector<double> ro((size_t)(nbh * SEQ * HD)), rl((size_t)(nbh * SEQ));
  for (int64_t bh = 0; bh < nbh; ++bh) reference(p, acsr, q, k, v, bh, bh / G, ro, rl);
  for (int64_t bh = 0; bh < nbh; ++bh) {
    CAPTURE(bh);
    double top = 0, err = 0, lerr = 0;
    for (int64_t x = bh * SEQ * HD; x < (bh + 1) * SEQ * HD; ++x) top = std::max(top, std::fabs(ro[(size_t)x]));
    for (int64_t x = bh * SEQ * HD; x < (bh + 1) * SEQ * HD; ++x)
      err = std::max(err, std::fabs((double)to_f(o[(size_t)x]) - ro[(size_t)x]));  // NaN (an unwritten poison) fails below
    for (int64_t i = bh * SEQ; i < (bh + 1) * SEQ; ++i)
      lerr = std::max(lerr, std::isinf(rl[(size_t)i]) ? (std::isinf(lse[(size_t)i]) ? 0.0 : 1.0) : std::fabs(lse[(size_t)i] - rl[(size_t)i]));
    CHECK(err <= tol * (top > 0 ? top : 1.0));
    CHECK(lerr <= 1e-4);
  }
}

}  // namespace

TEST_CASE("decode engine on the CPU (SIMT): one row, 4 query heads over 2 K/V heads, window and global tokens, bf16") {
  check_decode<bf16_t, 1, 3000, 64, 1, 3, 5, 2, -1, -1, 1>(
      R"({"seq_len": 1, "kv_len": 3000, "q_offset": 2999, "head_dim": 64, "heads": 4, "kv_heads": 2, "batch": 2,
          "dtype": "bf16", "causal": true, "pattern": {"union": [{"window": {"left": 1000, "right": 0}},
          {"global": {"tokens": [0, 1, 2, 3, 1500]}}]}})",
      1e-2);
}

TEST_CASE("decode engine on the CPU (SIMT): fp32 at head_dim 36 (column pairs past head_dim), one head per K/V head") {
  check_decode<float, 1, 2500, 36, 1, 1, 8, 1, -1, -1, 1>(
      R"({"seq_len": 1, "kv_len": 2500, "q_offset": 2499, "head_dim": 36, "heads": 3, "batch": 1, "dtype": "fp32",
          "causal": true, "pattern": {"window": {"left": 1800, "right": 0}}})",
      1e-5);
}

TEST_CASE("decode engine on the CPU (SIMT): 5 rows x 3 query heads, random blocks and global tokens, fp16") {
  check_decode<f16_t, 5, 3001, 48, 1, 1, 4, 3, 0, -1, 3>(
      R"({"seq_len": 5, "kv_len": 3001, "q_offset": 2996, "head_dim": 48, "heads": 6, "kv_heads": 2, "batch": 2,
          "dtype": "fp16", "causal": true, "pattern": {"union": [{"window": {"left": 700, "right": 0}},
          {"global": {"tokens": [0, 1, 2, 3, 2000]}}, {"random_blocks": {"block": 64, "per_row": 2, "seed": 7}}]}})",
      5e-3);
}

TEST_CASE("decode engine on the CPU (SIMT): 16 rows of a dilated window (rows by phase), bf16") {
  check_decode<bf16_t, 16, 3000, 64, 3, 1, 12, 1, -1, -1, 3>(
      R"({"seq_len": 16, "kv_len": 3000, "q_offset": 2984, "head_dim": 64, "heads": 2, "batch": 1, "dtype": "bf16",
          "causal": true, "pattern": {"dilated": {"left": 1500, "right": 0, "dilation": 3}}})",
      1e-2);
}

TEST_CASE("decode engine on the CPU (SIMT): the plan's global keys, each row a prefix of them (causal fixed), bf16") {
  check_decode<bf16_t, 8, 4000, 32, 1, 1, 2, 2, 0, -1, 4>(
      R"({"seq_len": 8, "kv_len": 4000, "q_offset": 3992, "head_dim": 32, "heads": 4, "kv_heads": 2, "batch": 1,
          "dtype": "bf16", "causal": true, "pattern": {"fixed": {"block": 48, "summary": 5}}})",
      1e-2);
}

TEST_CASE("decode engine on the CPU (SIMT): scattered keys from the table (coo: a tabulated segment), 3 rows, fp32") {
  // Row 0: every 29th key; row 1: a block of 64 and every 13th key; row 2: every 7th key from 2000 on.
  std::string coo;
  const auto add = [&](int i, int j) { coo += (coo.empty() ? "" : ", ") + std::string("[") + std::to_string(i) + ", " + std::to_string(j) + "]"; };
  for (int j = 3; j < 2600; j += 29) add(0, j);
  for (int j = 0; j < 2600; j += 13)
    if (j < 100 || j >= 164) add(1, j);
  for (int j = 100; j < 164; ++j) add(1, j);
  for (int j = 2000; j < 2600; j += 7) add(2, j);
  check_decode<float, 3, 2600, 64, 1, 1, 11, 1, -1, -1, 2>(
      R"({"seq_len": 3, "kv_len": 2600, "head_dim": 64, "heads": 2, "batch": 1, "dtype": "fp32", "pattern": {"coo": [)" + coo +
          "]}}",
      1e-5);
}
