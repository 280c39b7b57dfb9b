#pragma once
// The checked form of a rule: what every stage after `check` consumes (semantics, bound, encode,
// verify, report). The checker resolves names, fills operator defaults, computes output shapes
// and turns every declaration-level fact (non-negative maps, derived maps) into preconditions, so
// that later stages never look at syntax.
#include <gmpxx.h>

#include <compare>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tr {

struct SourceLoc {
  std::string file;
  int line = 0;
  int col = 0;
  std::string str() const { return file + ":" + std::to_string(line) + ":" + std::to_string(col); }
};

// Element types. Bool, Int and Real are mathematical (unbounded integers, exact reals, +-inf as in
// TensorRight). The others are machine types with XLA's element semantics (docs/machine-types.md):
// fixed-width two's complement integers (S8..S64 signed, U8..U64 unsigned) and IEEE-754 binary
// floats (F16 binary16, BF16 bfloat16, F32 binary32, F64 binary64). `pred` is written for Bool.
enum class DType { Bool, Int, Real, S8, S16, S32, S64, U8, U16, U32, U64, F16, BF16, F32, F64 };
const char* to_string(DType);
std::optional<DType> dtype_from_string(const std::string&);  // also "pred" (Bool)
inline bool is_fixed(DType d) { return d >= DType::S8 && d <= DType::U64; }
inline bool is_float(DType d) { return d >= DType::F16 && d <= DType::F64; }
inline bool is_machine(DType d) { return is_fixed(d) || is_float(d); }
inline bool is_signed_fixed(DType d) { return d >= DType::S8 && d <= DType::S64; }
int bit_width(DType);  // a machine type's width in bits (8..64); 0 otherwise
// A float type's exponent width and significand width (with the hidden bit), as SMT-LIB counts
// them: f16 (5, 11), bf16 (8, 8), f32 (8, 24), f64 (11, 53); (0, 0) otherwise.
int exponent_bits(DType);
int significand_bits(DType);

// An element type as written: a concrete dtype, or `T`, the rule's dtype variable.
struct EType {
  bool is_t = false;
  DType dtype = DType::Int;  // meaningful when !is_t
  DType resolve(DType t) const { return is_t ? t : dtype; }
  bool operator==(const EType&) const = default;
};

enum class Verdict { Proved, Counterexample, Vacuous, Timeout, Unknown, Unsupported };
const char* to_string(Verdict);
std::optional<Verdict> verdict_from_string(const std::string&);

// One aggregated axis of a shape: an rclass, and a label when the rclass occurs more than once.
// At rank n the key stands for n axes (key, 0) .. (key, n-1); all keys of one rclass share n.
struct AxisKey {
  int rclass = -1;    // index into Rule::rclasses
  std::string label;  // empty for the unlabelled copy
  auto operator<=>(const AxisKey&) const = default;
};

// ---- index-level expressions: sizes, attributes, conditions ------------------------------------
// Per-axis integer/boolean terms over maps and named scalars. Inside a per-axis context (a shape
// size or an attribute of key K) a Map reference means "that map on the current axis position j"
// of K's rclass; in a precondition every Map reference sits under exactly one All/Any node that
// names the rclass and quantifies j.
enum class IK {
  Int, Bool,           // literals: value (Bool: 0/1)
  Map,                 // id = map index
  Scalar,              // id = scalar index (a named scalar of Rule::scalars; int, or real when T=real)
  Add, Sub, Mul, Div, Mod,  // Div/Mod: floor division / floor modulus (x mod m in [0,|m|)); x div 0 = 0, x mod 0 = x
  Neg, Abs, Min, Max,
  Ite,                 // args: cond, then, else
  Eq, Ne, Lt, Le, Gt, Ge,
  And, Or, Not,
  All, Any,            // rclass = quantified rclass; args[0] = the per-axis body
};

struct IExpr;
using IExprP = std::shared_ptr<const IExpr>;
struct IExpr {
  IK kind = IK::Int;
  mpz_class value = 0;  // Int literal (exact, unbounded) / Bool literal (0/1)
  int id = -1;        // Map / Scalar
  int rclass = -1;    // All / Any
  std::vector<IExprP> args;
  SourceLoc loc;
};

// A per-aggregated-axis table of index expressions (sizes, start, stride, ...).
using AxisMap = std::map<AxisKey, IExprP>;

// ---- tensor expressions ---------------------------------------------------------------------------
enum class Op {
  Input,      // input tensor `input`
  Literal,    // scalar literal `lit` (empty shape)
  ScalarRef,  // named scalar `input` (index into Rule::scalars; empty shape)
  Const,      // const(v, SHAPE): args[0] is the (empty-shape) value; args[1], when present, is a
              // kept operand of the node's shape (from `pow(A, 0)`): the const is valid only where
              // it is valid and defined only where it is defined, and its value is never read
  Iota,       // iota(SHAPE, R): value = index along axes[0] (a single rclass)
  Neg, Abs, Exp, Not,
  Add, Sub, Mul, Div, Rem, Max, Min, And, Or,
  Eq, Ne, Lt, Le, Gt, Ge,
  Select,     // args: pred, on_true, on_false
  Clamp,      // args: lo, x, hi
  Broadcast,  // args[0] gets the new axes of `shape` that it does not have
  Sum,        // reduces args[0] over the keys of sum_index (key -> summation-index map id); see Reducer
  Slice,      // attrs "start", "end", "stride" (every axis of args[0], defaults filled)
  Pad,        // args: x, value; attrs "low", "high", "interior" (every axis of x, defaults 0)
  DynSlice,   // attrs "start", "size" on a subset of args[0]'s keys; other keys unchanged
  DynUpdate,  // args: x, update; attrs "start" on every key of x
  Concat,     // args: x1..xn (n >= 2) along axes[0] (a single rclass)
  Relabel,    // relabel: from-key -> to-key
  Reverse,    // reverses the keys in `axes`
  Dot,        // args: a, b; contraction over sum_index keys, batch keys in `axes`
  Conv,       // args: input, weight; see ConvAttrs
  Degenerate, // adds the keys of attrs "add" (size 1), removes the keys in `axes` (size must be 1)
};
const char* to_string(Op);

// Binary and elementwise operands either have the node's shape or are scalars (empty shape,
// splatted). Scalar literals are exact (of any size): an integer, a rational num/den, a bool, or +-inf.
// Facts the checker guarantees (check/check.cpp):
// - An elementwise node's shape is the sizes of its first non-scalar operand; the other operands
//   have the same keys, but their sizes may differ (that they are equal is a validity condition).
// - A Literal of kind Int may carry etype Real (or T): an integer literal used as a real.
// - Eq / Ne may compare Bool operands; Lt..Ge and arithmetic only numeric ones.
// - `pow(A, k)` (extension) never reaches the IR: it is desugared into Mul nodes, or into
//   Const(1, shape of A) with A kept as args[1] for k = 0 (a fold never drops an operand's
//   validity or definedness; docs/verifier.md, "Folds").
// - Broadcast's args[0] may be a scalar; Dot may have an empty sum_index (outer product); a
//   Degenerate node always has attrs["add"] (possibly empty); Conv keeps its per-spatial-key
//   attributes in attrs "stride", "low", "high", "lhs_dilation", "rhs_dilation".

// The combining operation of an Op::Sum node (extension: `reduce_max/min/prod`, XLA's Reduce
// with a max/min/multiply computation). Reducer::Sum is the core `sum`, which has exactly one
// argument. Every other reducer has args[1]: the init value, an empty-shape node of the same
// element type as args[0]; the result at an index is the fold of init with every element of the
// reduced range (the range empty: init). All three take numeric (int/real) operands, ±inf allowed;
// Prod follows `*` (inf * 0 is Unknown). This is a field rather than new Op values so that the
// other stages' switches over Op stay as they are; a stage that does not support a reducer must
// reject it explicitly (the encoder throws Unsupported for every reducer but Sum).
enum class Reducer { Sum, Max, Min, Prod };
const char* to_string(Reducer);

struct Literal {
  // NaN (extension, `nan`): float types only.
  enum class Kind { Int, Real, Bool, PosInf, NegInf, NaN } kind = Kind::Int;
  mpz_class num = 0, den = 1;  // exact, unbounded. Int: num; Real: num/den in lowest terms; Bool: num 0/1
  bool neg_zero = false;       // a zero written with a minus sign (`-0.0`): -0 in a float type
};

// conv(IN, W, ...): IN has batch + feature + spatial keys, W has feature + output-feature +
// spatial keys. out[b, o, s] = sum over f and window k of
//   padIN[b, f, s*stride + k] * padW[f, o, k]
// where padIN = pad(IN, 0, low, lhs_dilation-1, high) and padW = pad(W, 0, interior rhs_dilation-1)
// on the spatial keys. Output: batch, output-feature and spatial keys; spatial size
// (padIN - padW + stride) div stride.
struct ConvAttrs {
  std::vector<AxisKey> batch, feature, output_feature, spatial;
  // stride, low, high, lhs_dilation, rhs_dilation on every spatial key (defaults 1, 0, 0, 1, 1)
};

struct Node;
using NodeP = std::shared_ptr<const Node>;
struct Node {
  Op op = Op::Literal;
  SourceLoc loc;
  EType etype;                 // element type of the result
  AxisMap shape;               // output shape (size per key); empty for scalars
  std::vector<NodeP> args;
  int input = -1;              // Input: tensor index; ScalarRef: scalar index
  Literal lit;                 // Literal
  std::map<std::string, AxisMap> attrs;  // per-axis attributes by name (see Op)
  std::vector<AxisKey> axes;   // Iota / Concat axis, Reverse keys, Dot batch keys, Degenerate removals
  std::map<AxisKey, int> sum_index;       // Sum / Dot / Conv contraction: key -> SI map id
  Reducer reducer = Reducer::Sum;         // Sum: the combining operation (init in args[1] unless Sum)
  std::map<AxisKey, AxisKey> relabel;     // Relabel: from -> to
  std::optional<ConvAttrs> conv;          // Conv
};

// ---- declarations and the rule --------------------------------------------------------------------
struct RClassDecl {
  std::string name;
  bool single = false;  // exactly one axis (declared `single`, or inferred from concat/iota)
  SourceLoc loc;
};
struct MapDecl {
  std::string name;
  int rclass = -1;
  bool nonneg = false;
  IExprP derived;       // `map m : R = EXPR` (already also stated in Rule::pre)
  SourceLoc loc;
};
struct TensorDecl {
  std::string name;
  EType etype;
  AxisMap shape;        // sizes (>= 0 is part of the input's validity)
  SourceLoc loc;
};
struct ScalarDecl {
  std::string name;
  EType etype;
  SourceLoc loc;
};

struct Precondition {
  IExprP cond;          // Bool; map references under All/Any (see IExpr)
  SourceLoc loc;
};
struct Assumption {
  NodeP cond;           // Bool tensor over inputs, assumed true at every index of its shape
  SourceLoc loc;
};
struct Match {
  int lhs_si = -1, rhs_si = -1;  // map ids: a summation index of the lhs paired with one of the rhs
  SourceLoc loc;
};

struct Rule {
  std::string name, title;
  SourceLoc loc;
  std::vector<DType> dtypes;       // checked once per dtype; `T` resolves to each
  std::vector<RClassDecl> rclasses;
  std::vector<MapDecl> maps;
  std::vector<TensorDecl> tensors;
  std::vector<ScalarDecl> scalars;
  std::vector<Precondition> pre;   // includes nonneg and derived-map facts
  std::vector<Assumption> assume;
  std::vector<Match> match;
  NodeP lhs, rhs;
  std::optional<Verdict> expect;
  SourceLoc expect_loc;
};

}  // namespace tr
