#pragma once
// Problem descriptions for splatc (the core contract and the full reference:
// docs/splatc-patterns.md): the JSON document parsed and validated into a Problem whose pattern
// is a term tree. Everything is checked here, before anything size-dependent is allocated.
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace splat {

// Bad input: carries the file (may be empty) and the JSON path of the offending value
// ("pattern.union[1].window.left"; "" for the document itself). what() is
// "FILE: PATH: MESSAGE" (parts that are empty are left out), printed once by the app.
class Error : public std::runtime_error {
 public:
  Error(std::string file, std::string json_path, std::string message);
  const std::string& file() const { return file_; }
  const std::string& json_path() const { return path_; }
  const std::string& message() const { return message_; }

 private:
  std::string file_, path_, message_;
};

enum class DType { FP32, TF32, FP16, BF16 };
const char* dtype_name(DType);   // "fp32", "tf32", "fp16", "bf16"
std::optional<DType> dtype_from_name(const std::string& name);  // the inverse; nullopt for another name
int dtype_bytes(DType);          // storage bytes per element (tf32 is stored as fp32)

enum class TermKind {
  Window, Dilated, Strided, Fixed, Blocked, BlockWindow, Global, RandomBlocks, Affine, Coo,
  Union, Intersect
};
const char* term_name(TermKind);  // the JSON key: "window", "block_window", ...

// One pattern term. Only the fields listed for its kind are meaningful:
//   Window       left, right                 i-left <= j <= i+right
//   Dilated      left, right, dilation       j = i + k*dilation, k in [-left, right]
//   Strided      stride, offset              (i-j) mod stride == offset   (0 <= offset < stride)
//   Fixed        block, summary              i div block == j div block, or j mod block >= block-summary
//   Blocked      block                       i div block == j div block
//   BlockWindow  block, left, right          -left <= j div block - i div block <= right
//   Global       tokens (sorted, unique)     i in tokens or j in tokens
//   RandomBlocks block, per_row, seed        key blocks random_key_blocks(...) of row block i div block
//   Affine       slope, offset, stride, count  j = slope*i + offset + k*stride, k in [0, count)
//   Coo          points (sorted, unique)     exactly the listed (i, j)
//   Union        children                    any child holds
//   Intersect    children                    every child holds
// div/mod are floor-based. Columns outside [0, kv_len) are dropped.
struct Term {
  TermKind kind = TermKind::Union;
  int64_t left = 0, right = 0;
  int64_t dilation = 1;
  int64_t stride = 1, offset = 0;
  int64_t block = 1, summary = 0;
  int64_t per_row = 0;
  uint64_t seed = 0;
  int64_t slope = 0, count = 0;
  std::vector<int64_t> tokens;
  std::vector<std::pair<int64_t, int64_t>> points;
  std::vector<Term> children;
  std::string path;  // JSON path of this term ("pattern", "pattern.union[0]"), for messages
};

// Half of the smallest of: physical memory, the address-space and data limits (ulimit -v, -d) and
// the cgroup's memory.max; the default of Limits::max_memory (docs/cli.md, "splatc limits").
int64_t default_max_memory();

// Limits checked while parsing, before anything of problem size is allocated. A Problem keeps the
// limits it was read under: the analysis, the statistics and the pictures apply the same ones.
struct Limits {
  int64_t max_len = (int64_t{1} << 31) - 1;      // seq_len, kv_len: int32 indices in kernels
  int64_t max_tensor_bytes = int64_t{128} << 30; // Q, K, V, O together (one H200: ~140 GiB)
  int64_t max_points = int64_t{1} << 26;         // coo points / global tokens
  int max_depth = 64;                            // nesting of JSON arrays and objects
  int64_t max_memory = default_max_memory();     // bytes: the file, its document, terms, row buffers
  int64_t max_work = int64_t{1} << 28;           // steps of analysis, statistics, pictures, --validate
  int64_t work_shares = 1;  // per-head patterns: max_work is a head group's share, one of this many
};

// After "the work limit ... (--max-work)": "" or, for a head group, " (one head group's share, 1/G)".
std::string work_share_note(const Limits&);

// Counts steps against Limits::max_work; past it, throws Error(file, "", "WHAT needs more than N
// steps (at row R of ROWS), the work limit (--max-work)"). A step is a few nanoseconds of work:
// one term evaluated on one row, one run or point produced, one (i, j, term) of --validate, ...
class WorkMeter {
 public:
  WorkMeter(const Limits&, std::string file, std::string what);
  void add(int64_t steps) {
    used_ += steps;
    if (used_ > limit_) fail();
  }
  int64_t used() const { return used_; }
  int64_t limit() const { return limit_; }
  int64_t row = -1, rows = 0;  // where the work is, for the message (row < 0: not by rows)

 private:
  [[noreturn]] void fail() const;
  int64_t used_ = 0, limit_;
  std::string file_, what_, limit_text_;
};

// Error(file, "", "WHAT needs N MiB, more than the memory budget of M MiB (--max-memory)").
[[noreturn]] void throw_memory_limit(const std::string& file, const std::string& what, int64_t bytes,
                                     const Limits&);

// A packed variable-length batch ("varlen", docs/splatc-patterns.md): sequences of different lengths
// packed along the token axis, Q and O [total_tokens, heads, head_dim], K and V [total_tokens,
// kv_heads, head_dim], sequence b the tokens cu_seqlens[b] .. cu_seqlens[b+1]. The lengths are given
// at launch; each sequence of length L keeps the pattern's (i, j) with i, j < L, the pattern as it
// is at seq_len (the longest sequence a launch may hold). Attention never crosses sequences.
struct Varlen {
  int64_t max_total_tokens = 0;  // tokens of a packed batch, at most (sizes and 32-bit offsets)
  std::vector<int64_t> lengths;  // a batch for bench and check-gpu ("lengths"); may be empty
};

// Per-head patterns ("head_patterns", docs/splatc-patterns.md): the heads that share one pattern.
struct HeadGroup {
  Term pattern;
  std::vector<int64_t> heads;  // query heads, ascending, in [0, heads)
};

// At most this many distinct patterns in "head_patterns": each is analysed and compiled on its own.
inline constexpr int64_t kMaxHeadGroups = 64;

struct Problem {
  std::string name;              // "name" or the file stem
  int64_t seq_len = 0;           // rows (queries)
  int64_t kv_len = 0;            // columns (keys); seq_len when absent
  int64_t head_dim = 0;
  int64_t heads = 1, batch = 1;
  int64_t kv_heads = 1;          // K/V heads (grouped-query attention): divides heads; heads when absent
  int64_t q_offset = 0;          // query row i sits at position i + q_offset against the keys
  DType dtype = DType::FP32;
  double scale = 0;              // 1/sqrt(head_dim) when absent
  bool causal = false;           // mask intersected with j <= i
  Term pattern;                  // every head's pattern; unused when head_groups is not empty
  // Per-head patterns: the distinct patterns, each with its heads (groups in order of their first
  // head); empty when "pattern" serves every head (also when every entry of "head_patterns" is the
  // same). Analysis, codegen and bench take one group at a time: head_group().
  std::vector<HeadGroup> head_groups;
  // A problem of one head group (head_group()): the query heads its kernels serve, ascending; grid.y
  // runs over batch x these heads. Empty: every head.
  std::vector<int64_t> group_heads;
  int64_t group_index = 0, group_count = 1;  // a head group's place among the problem's (head_group())
  std::optional<Varlen> varlen;  // a packed variable-length batch: seq_len is its longest sequence
  std::string file;              // source file, "" when parsed from memory
  Limits limits;                 // the limits it was read under (Limits above)
};

// Values that replace the file's (splatc's --dtype and --head-dim): the scale's default follows the
// head_dim, and the size limits apply to the result. A bad head_dim is Error("", "--head-dim", ...).
struct ProblemOverrides {
  std::optional<DType> dtype;
  std::optional<int64_t> head_dim;
};

// Reads, parses and validates a problem file ("-": standard input, labelled <stdin> in messages and
// named "stdin" unless it has a name). JSON syntax errors give line:col.
Problem load_problem(const std::string& path, const Limits& = {}, const ProblemOverrides& = {});
// Parses an in-memory document; name_hint is used when "name" is absent, file only for messages.
Problem parse_problem(const nlohmann::json& doc, const std::string& name_hint,
                      const std::string& file = "", const Limits& = {});
Problem parse_problem_text(const std::string& text, const std::string& name_hint,
                           const std::string& file = "", const Limits& = {});

// Head group g of a problem with per-head patterns as a problem of its own: the group's pattern,
// group_heads its heads, the name NAME.hG (G = g), an equal share of the work limit (max_work /
// groups: all groups together stay within it), everything else the same.
Problem head_group(const Problem&, size_t g);
// The problem's head groups as problems (head_group() of each), or the problem itself when it has
// one pattern for every head.
std::vector<Problem> head_group_problems(const Problem&);
// The head group of query head h (an index of head_groups; 0 without per-head patterns). Throws
// std::out_of_range for a head not in [0, heads).
size_t head_group_of(const Problem&, int64_t h);
// The pattern of query head h (head_groups, else pattern).
const Term& head_pattern(const Problem&, int64_t h);
// Query heads the problem's kernels serve: group_heads.size(), or heads when it is empty.
int64_t served_heads(const Problem&);

// Bytes of Q, K, V and O for the problem (batch*(2*heads*seq_len + 2*kv_heads*kv_len)*head_dim*elt;
// varlen: (2*heads + 2*kv_heads)*max_total_tokens*head_dim*elt).
int64_t tensor_bytes(const Problem&);

// The key blocks chosen for row block rb by a RandomBlocks term over nkb = ceil(kv_len/block) key
// blocks: min(per_row, nkb) distinct blocks, sorted ascending (docs/splatc-patterns.md gives
// the generator: splitmix64 seeded by seed and rb, rejection of repeats).
std::vector<int64_t> random_key_blocks(const Term& t, int64_t rb, int64_t nkb);

// Ground truth: direct evaluation of the terms at query row i (position i + q_offset) and key j;
// false outside the problem's bounds. causal keeps j <= i + q_offset.
// A problem with head_groups has no single mask: throws std::logic_error (kept with a head).
bool kept(const Problem&, int64_t i, int64_t j);
// The same for query head h's pattern.
bool kept(const Problem&, int64_t h, int64_t i, int64_t j);
// One term, without causal, at position pos (in [q_offset, q_offset + seq_len)) and key j.
bool kept(const Term&, const Problem&, int64_t pos, int64_t j);

}  // namespace splat
