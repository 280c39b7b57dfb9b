#pragma once
// Structure recognition: the shapes of an ACSR that the code generator has closed-form kernels for,
// as typed results computed once from the ACSR (each checked row by row). The plan (codegen/plan.h)
// tiles the ACSR and the kernel selection (codegen/select.h) reads these to pick a kernel family.
//
//   Band            every row i keeps exactly {i + dilation*k : k_lo <= k <= k_hi} within [0, kv_len)
//                   (windows, one-sided and causal windows, dilated windows)
//   BandWithGlobals a unit-step band plus global tokens [0, globals): rows [0, globals) keep every
//                   key, every other row its band and the global keys (Longformer)
//   WindowLattice   a unit-step window plus every key of the row's phase lattice outside it
//                   (strided patterns)
//   Unstructured    none of these; then the global-key candidates (keys every row keeps, or a prefix
//                   of) that the plan may factor out of the rows (the `fixed` pattern's summary
//                   columns)
#include <cstdint>
#include <optional>
#include <variant>
#include <vector>

#include "libsplat/analysis/acsr.h"

namespace splat {

// A band: row i keeps keys {i + dilation*k : k_lo <= k <= k_hi} that lie in [0, kv_len), with
// kv_len == seq_len a multiple of the dilation. Rows of phase c are c + dilation*m and keys of phase
// c are c + dilation*u (m, u < rows).
struct Band {
  int64_t dilation = 1, k_lo = 0, k_hi = 0;
  int64_t rows = 0;  // rows (and keys) per phase: seq_len / dilation
  int64_t tiles_per_phase() const { return (rows + 63) / 64; }  // row tiles of 64 rows per phase
  bool operator==(const Band&) const = default;
};

// A unit-step band with global tokens: tokens [0, globals) (1..64) are kept by every row as keys,
// rows [0, globals) keep every key, every other row keeps exactly its band and the global keys.
struct BandWithGlobals {
  Band band;  // dilation 1
  int64_t globals = 0;
};

// The lattice part of a window plus a key lattice: row i = c + period*m keeps every key
// c + period*u (u < rows) outside its window; the window meets it at u - m in [hole_lo, hole_hi]
// (ceil(k_lo / period), floor(k_hi / period); empty when hole_lo > hole_hi).
struct Lattice {
  int64_t period = 0, rows = 0;  // rows (and keys) per phase: seq_len / period
  int64_t hole_lo = 0, hole_hi = -1;
  int64_t tiles_per_phase() const { return (rows + 63) / 64; }
};

// A window plus a key lattice: every row i keeps its window {i + k : k_lo <= k <= k_hi} within
// [0, kv_len) (a unit-step Band) and the lattice outside it; kv_len == seq_len a multiple of period.
struct WindowLattice {
  Band window;
  Lattice lattice;
};

struct Unstructured {};

using StructureKind = std::variant<Unstructured, Band, BandWithGlobals, WindowLattice>;

// Global keys in blocks: key u is first + period*(u / width) + u % width (`fixed`: 120 + 128*b + t,
// t < 8), width dividing 64, period dividing kv_len (the wgmma kernel loads 64 of them by one TMA box).
struct KeyBlocks {
  int64_t first = 0, period = 0, width = 0;
};

// Scattered keys that every row keeps (prefix empty), or of which row i keeps the first prefix[i]
// (causal `fixed`: the summary columns before the row), with the ACSR of the rows without them.
struct GlobalKeys {
  std::vector<int64_t> keys;     // sorted, distinct
  std::vector<int32_t> prefix;   // per row; empty: every row keeps every key
  std::optional<KeyBlocks> blocks;
  Acsr rest;                     // the rows less these keys
};

struct Structure {
  StructureKind kind;
  // Unstructured only: candidate global-key sets (the keys every row keeps; the keys more than two
  // row tiles keep, of which each row keeps a prefix), each with its residual ACSR. The plan keeps
  // the one that saves the most key tiles, if any pays.
  std::vector<GlobalKeys> global_keys;
};

// row_tile: rows per tile of the kernels (the threshold of the popular-keys candidate).
Structure analyze_structure(const Acsr& acsr, int64_t row_tile = 64);

std::optional<Band> find_band(const Acsr& acsr);
std::optional<BandWithGlobals> find_band_with_globals(const Acsr& acsr);
std::optional<WindowLattice> find_window_lattice(const Acsr& acsr);

}  // namespace splat
