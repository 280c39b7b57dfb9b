#pragma once
// The concrete evaluator: the ground truth for the meaning of a checked rule
// (reference/tensorright.md §2.1-2.3, spec/trverify-language.md). Given concrete ranks, map values,
// scalars and input elements it computes each side's shape, its validity and its elements.
//
// "Undefined" is a value of the evaluator, not an exception: an expression whose operator
// conditions fail, or an access outside the shape, yields a Point with defined == false and a
// reason. Exceptions are reserved for malformed input (EvalError: an IR the checker should have
// rejected, an instance missing a map) and for values that must become machine numbers and do not
// fit (EvalOverflow: a size, index or attribute beyond int64, an exp beyond double). Int and Real
// element values are exact and unbounded (rational.h).
//
// Differences from TensorRight, on purpose:
//  * neg(+inf) = -inf (TensorRight's neg keeps an infinity unchanged, which looks like a bug);
//  * a sum over an empty range is 0 (TensorRight's summand encoding makes such rules vacuous);
//  * reduce_max/min/prod (an extension) fold their init value with every element: an empty range
//    gives the init; the product follows `*` (inf * 0 is Unknown);
//  * dynslice/dynupdate never clamp the start (the contract; TensorRight's code clamps).
//
// Element rules (TensorRight's TensorNum): x / y and x % y with an infinite or Unknown operand are
// Unknown; max/min with Unknown are Unknown; a comparison (==, <, ...) with Unknown makes the access
// undefined; exp(-inf) = 0, exp(+inf) = +inf; `select` accesses only the chosen branch, `pad` and
// `concat` only the operand the index falls in; every other operator accesses all its operands.
//
// Conditions the contract leaves implicit, as implemented here (the encoder must agree):
//  * every operand of a node must be defined at the tensor level;
//  * elementwise operands of equal key sets must have equal sizes (scalars are splatted);
//  * conv: stride > 0, lhs/rhs dilation >= 1, padded input size >= 0, feature sizes equal, and the
//    output spatial size (padIN - padW + stride) div stride >= 0;
//  * degenerate: removed axes have size 1, added axes are given size 1;
//  * dot: the common (contracted and batch) axes have equal sizes in both operands;
//  * concat: all non-concat axes have equal sizes; iota/concat axes have exactly one axis;
//  * an assumption constrains only the indices where it is defined (reference §2.3).
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "libtensorright/base/internal_error.h"
#include "libtensorright/check/ir.h"
#include "libtensorright/semantics/rational.h"

namespace tr {

// An IR or instance the evaluator cannot interpret (the message names the node's location): the
// checker and the encoder guarantee neither happens, so it is an internal error (exit 3).
struct EvalError : InternalError {
  using InternalError::InternalError;
};

// One element value. Int and Real are exact; +-inf and Unknown follow TensorRight's TensorNum
// (inf + -inf and inf * 0 are Unknown). `inexact` marks values that depend on an approximated exp.
// Machine: a value of a machine type (fixed-width integer or IEEE float, machine.h), its bit
// pattern `bits` of type `mt`; infinities and NaN of floats are Machine values, never PosInf or
// Unknown.
struct Value {
  enum class Kind { Bool, Int, Real, PosInf, NegInf, Unknown, Machine };
  Kind kind = Kind::Int;
  bool b = false;    // Bool
  BigInt i = 0;      // Int
  Rational r;        // Real
  DType mt = DType::Bool;  // Machine: the type
  uint64_t bits = 0;       // Machine: the bit pattern
  bool inexact = false;

  static Value boolean(bool v);
  static Value integer(BigInt v);
  static Value real(Rational v);
  static Value pos_inf();
  static Value neg_inf();
  static Value unknown();
  static Value machine(DType t, uint64_t bits);
  static Value zero(DType t);  // false, 0, 0/1 or the machine zero (+0.0): an unset input element

  bool is_num() const { return kind == Kind::Int || kind == Kind::Real; }
  bool is_inf() const { return kind == Kind::PosInf || kind == Kind::NegInf; }
  bool is_machine_float() const { return kind == Kind::Machine && is_float(mt); }
  // "true", "-3", "7/2", "inf", "-inf", "unknown"; machine floats "-0.0 (0x8000)" ("~" prefix if inexact)
  std::string str() const;
};

// The final comparison lhs[i] == rhs[i] of a rule (reference §2.1): same kind and same value;
// Unknown equals nothing, not even Unknown. Int 3 and Real 3 are equal. Machine values are equal
// when their bits are (so +0.0 != -0.0), and any two NaNs are equal (docs/machine-types.md).
bool values_equal(const Value& a, const Value& b);

// Per aggregated axis, one entry per axis of its rclass (axis j of key K is (K, j)).
using AxisValues = std::map<AxisKey, std::vector<int64_t>>;
using Index = AxisValues;  // a multi-index
using Shape = AxisValues;  // sizes

// Input elements by multi-index (over the tensor's declared keys). Elements that are not listed
// are Value::zero of the tensor's dtype: a counterexample lists only the elements it involves.
struct TensorData {
  std::map<Index, Value> elems;
};

struct Instance {
  DType dtype = DType::Int;            // what `T` means
  std::map<int, int> rank;             // rclass -> number of axes (>= 1 in verification; 0 allowed)
  std::map<int, std::vector<int64_t>> maps;  // map id -> one value per axis of its rclass
  std::map<int, Value> scalars;        // scalar id -> value
  std::map<int, TensorData> inputs;    // tensor id -> elements
};

// Why `rule` has no meaning at dtype t, or nullopt. The checker types a rule once for all its
// dtypes; at one of them a literal may have no value (nan outside the float types, inf in an
// integer type, an integer literal outside a fixed-width type's range), or a scalar of a machine
// type may appear in a condition (conditions are over mathematical numbers). The verdict for such
// a dtype is `unsupported` with this reason.
std::optional<std::string> dtype_problem(const Rule& rule, DType t);

// Checks that the instance gives every rclass a rank, every map a value per axis and every scalar
// a value (throws EvalError naming what is missing).
void check_instance_complete(const Rule&, const Instance&);

// The value of an index expression. Outside All/Any a Map reference needs `axis` (the position j
// within the map's rclass); inside All/Any the quantifier supplies it.
Value eval_iexpr(const IExpr&, const Instance&, std::optional<int> axis = std::nullopt);

// All preconditions hold (All/Any quantify over the rclass's axes; All over zero axes is true, Any
// false) and every assumption is true wherever it is defined (reference §2.3: TensorRight's
// tensorAssumption treats an undefined access as satisfying the assumption).
bool preconditions_hold(const Rule&, const Instance&);

// The value of one tensor expression at one index.
struct Point {
  bool defined = false;
  std::optional<Value> value;  // set iff defined
  std::string why;             // when undefined: which condition failed, with the node's location
};

class Evaluator;

// A tensor expression under an instance: its shape and tensor-level validity computed eagerly,
// elements lazily. Holds references to the Rule and Instance: keep both alive while using it.
struct Evaluated {
  bool defined = false;  // every operator's tensor-level condition holds (sizes, attributes)
  std::string why;       // when !defined
  Shape shape;           // meaningful when defined
  // The element at `idx` (keys and ranks as in `shape`): undefined if the tensor is undefined, idx
  // is out of range, or a nested access or elementwise condition fails.
  Point at(const Index& idx) const;
  // Every index of `shape` in row-major order over (key, axis) (none when a size is 0).
  std::vector<Index> indices() const;

  std::shared_ptr<Evaluator> ev;
  NodeP node;
};

Evaluated eval(const Rule&, const NodeP&, const Instance&);

// Refinement, in two parts (docs/verifier.md, "The query"):
//  * tensor level: wherever the left side is valid, the right side is valid and has the same
//    shape, also when the left side has no elements (XLA replaces an instruction only by one of
//    the same shape);
//  * at one index: wherever the left side is defined, the right side is defined and equal
//    (reference §3.5).
// check_at checks the tensor level and then the index `idx` (which may be outside the shape when
// the tensor level fails: a shape counterexample needs no index).
struct SideCheck {
  bool holds = true;
  std::string reason;  // when !holds: "right side undefined: ...", "shapes differ", "values differ"
  Point lhs, rhs;
  bool lhs_valid = false;   // the left side is valid at the tensor level
  bool tensor_level = false;  // !holds because of validity or shape, not of one element
  bool inexact = false;  // a value involved an approximated exp: treat a failure as inconclusive
  // The instance refutes the rule: it fails where the left side is valid (tensor level) or
  // defined (at the index), and no approximated value is involved.
  bool refutes() const { return !holds && !inexact && (tensor_level || lhs.defined); }
};
SideCheck check_at(const Rule&, const Instance&, const Index& idx);

// The whole-instance check: preconditions hold, and refinement holds at every index of the left
// side's shape. `failing` is the first index where it does not.
struct InstanceCheck {
  bool pre = false;          // preconditions (and assumptions) hold
  bool lhs_defined = false;  // left side tensor-level valid
  bool holds = true;         // refinement at every index (true when !pre)
  std::optional<Index> failing;
  SideCheck at;              // the check at `failing`
};
InstanceCheck check_instance(const Rule&, const Instance&);

// ---- random testing -----------------------------------------------------------------------------
struct RandomConfig {
  int max_rank = 2;        // ranks drawn from 1..max_rank (single rclasses: 1)
  int64_t map_lo = -2, map_hi = 4;  // free map values (non-negative maps: 0..map_hi)
  int64_t value_lo = -3, value_hi = 3;  // int elements/scalars; reals are these over 1..3
  int attempts = 200;      // draws until the preconditions hold
  int64_t max_elements = 4096;  // skip instances whose input tensors would be bigger
  int64_t max_checked = 256;    // random_test: skip instances whose left side has more elements
};

// A random instance of `rule` at dtype `t` satisfying the preconditions (derived maps computed from
// their definitions), or nullopt if none was found within cfg.attempts draws.
std::optional<Instance> random_instance(const Rule&, DType t, std::mt19937_64& rng,
                                        const RandomConfig& cfg = {});

// Random testing of a rule over all its dtypes: per dtype, random instances until `trials` of them
// have a defined left side (at most 20 * trials draws; instances whose sizes or indices leave int64
// are skipped). Stops at the first instance where refinement fails,
// unless the failure involves an approximated real exp (counted in `inexact`; at float types exp is
// libm's rounded, a fixed function, and a failure through it counts).
struct RandomTestResult {
  int instances = 0;     // instances drawn that satisfy the preconditions
  int lhs_defined = 0;   // ... on which the left side is defined
  int inexact = 0;       // failures set aside because they depend on an approximated exp
  std::optional<Instance> failing;
  InstanceCheck check;   // the failing check
};
RandomTestResult random_test(const Rule&, int trials, uint64_t seed, const RandomConfig& cfg = {});

// For an instance that refutes the rule at idx (check_at(...).refutes()): replaces each machine
// value of its scalars and input elements by the simplest of ±0, ±1, ±2, 0.5, ±inf, NaN, the type's
// extremes and smallest subnormal (integers: 0, ±1, ±2, MIN, MAX) that keeps it refuting, when
// that is simpler than the value it has. Counterexamples read better, and stay replayed.
void shrink_machine_values(const Rule& rule, Instance& inst, const Index& idx);

// Human-readable instance: ranks, maps, scalars, and the input elements.
std::string describe(const Rule&, const Instance&);
std::string to_string(const Index&, const Rule&);

}  // namespace tr
