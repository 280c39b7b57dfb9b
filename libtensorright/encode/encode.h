#pragma once
// Symbolic evaluation of a checked rule at one rank vector into cvc5 terms (docs/verifier.md).
//
// Per rank vector every (map, axis) and every output axis is a free Int constant, every named
// scalar a constant of its sort, and every input tensor ONE uninterpreted function with one Int
// argument per axis. Each side evaluates to a tensor-level validity and, at the symbolic output
// index, an element (definedness, value). Sums are kept as summands over summation-index
// constants and compared under `match` (docs/verifier.md, "Sums").
//
// Every condition that ranges over the axes of an rclass is built by one helper (agg), which
// records it; the rank bound (bound/bound.h) walks the rank-1 query and counts these.
#include <cvc5/cvc5.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "libtensorright/base/internal_error.h"
#include "libtensorright/check/ir.h"

namespace tr::enc {

using cvc5::Term;

// " at FILE:LINE:COL" for a message about the IR node at l (empty when l has no line).
inline std::string where(const SourceLoc& l) { return l.line > 0 ? " at " + l.str() : std::string(); }

// A form this version cannot encode soundly: the verdict becomes `unsupported` with this reason.
struct Unsupported : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Term construction with constant folding (no flattening of nested And/Or: the rank bound needs
// the per-rclass conditions to stay whole terms).
class Builder {
 public:
  explicit Builder(cvc5::Solver& s);
  cvc5::Solver& s;
  cvc5::Sort Int, Real, Bool;
  Term T, F, zero;

  Term integer(int64_t v) const;
  Term real(int64_t num, int64_t den = 1) const;
  Term integer(const mpz_class& v) const;  // exact, of any size
  Term real(const mpz_class& num, const mpz_class& den = 1) const;  // den != 0
  static std::optional<int64_t> int_value(const Term& t);  // an Int literal fitting int64
  static bool is_true(const Term& t);
  static bool is_false(const Term& t);
  bool is_real(const Term& t) const { return t.getSort() == Real; }
  Term to_real(const Term& t) const;

  Term and_(std::vector<Term> xs) const;
  Term or_(std::vector<Term> xs) const;
  Term not_(const Term& a) const;
  Term implies(const Term& a, const Term& b) const;
  Term iff(const Term& a, const Term& b) const;
  Term ite(const Term& c, const Term& a, const Term& b) const;
  Term eq(Term a, Term b) const;
  Term lt(Term a, Term b) const;
  Term le(Term a, Term b) const;
  Term add(Term a, Term b) const;
  Term sub(Term a, Term b) const;
  Term mul(Term a, Term b) const;
  Term neg(const Term& a) const;
  Term abs(const Term& a) const;
  Term min(Term a, Term b) const;
  Term max(Term a, Term b) const;
  // Euclidean division/modulus (SMT-LIB), total: x div 0 = 0, x mod 0 = x.
  Term ediv(const Term& a, const Term& b) const;
  Term emod(const Term& a, const Term& b) const;
  // Floor division (x / 0 = 0) and truncated remainder (sign of the dividend, x % 0 = x).
  Term floor_div(const Term& a, const Term& b) const;
  Term trunc_rem(const Term& a, const Term& b) const;
  // Real division with x / 0 = 0; real truncated remainder x - y * trunc(x / y), x % 0 = x.
  Term real_div(const Term& a, const Term& b) const;
  Term real_rem(const Term& a, const Term& b) const;
  Term inverse(const Term& c) const;  // 1 / c, 0 for c = 0

  Term exp(const Term& x) const;      // e^x, split over sums: exp(a + b) = exp(a) * exp(b)

  // Remainders with a symbolic divisor built so far (dividend, divisor, result), and the
  // shift lemma instances over them (see builder.cpp).
  struct Rem {
    Term a, c, r;
  };
  mutable std::vector<Rem> rems;
  std::vector<Term> rem_lemmas() const;
  // Euclidean divisions with a symbolic divisor built so far (dividend, divisor, quotient), and
  // the nested-division lemma instances over them (see builder.cpp).
  struct Div {
    Term a, c, q;
  };
  mutable std::vector<Div> divs;
  std::vector<Term> nested_div_lemmas() const;

  // Int terms are kept in a polynomial normal form (builder.cpp): a sum of monomials, each an
  // int64 coefficient times a sorted product of atoms (constants, reads, ite, div, mod terms).
  // Equal polynomials give the same term, so index arithmetic that cancels folds away.
  using Mono = std::vector<Term>;
  using Poly = std::map<Mono, int64_t>;
  std::optional<Poly> poly(const Term& t) const;  // nullopt: not Int, or int64 overflow
  Term from_poly(const Poly& p) const;

  // Rewrites t under the assumption that each fact term has the given truth value (ite guards
  // and atoms equal to a fact fold). Used for the dividend of a division, which only matters
  // where the divisor is non-zero.
  Term assume(const Term& t, const std::vector<std::pair<Term, bool>>& facts) const;

 private:
  void unify(Term& a, Term& b) const;
  std::optional<Term> machine_arith(cvc5::Kind k, const std::vector<Term>& args) const;
  // The SMT-LIB div/mod of a by c for c != 0 (the caller guards c = 0), with the multiples of a
  // monomial divisor moved out: div(c*Q + R, c) = Q + div(R, c), mod(c*Q + R, c) = mod(R, c).
  Term raw_divmod(const Term& a, const Term& c, bool mod, const std::vector<std::pair<Term, bool>>& facts) const;
  std::optional<Poly> mono_times(const Mono& m, int64_t coef) const;
  std::optional<Poly> times(const Poly& a, const Poly& b) const;
  std::optional<int64_t> const_diff(const Term& a, const Term& c) const;
  mutable std::unordered_map<Term, Poly> poly_cache_;
};

// An element value: v is Bool/Int/Real. tag is null when the value is certainly finite, otherwise
// an Int term: 0 finite, 1 +inf, -1 -inf, 2 Unknown (reference §2.1).
struct Val {
  Term v;
  Term tag;
};

// One summation-index constant of a sum: axis j of SI map `map`, ranging over [0, size).
struct BoxEntry {
  int map = -1;
  int rclass = -1;
  int j = 0;
  Term si;
  Term size;
};
// One further range of a fold (reduce.cpp): the fold also combines f over this box.
struct FoldPiece {
  Val f;
  std::vector<BoxEntry> box;
  std::vector<std::pair<Term, std::vector<BoxEntry>>> defs;
};

// The sum over a box of summands f (never unrolled). defs: (cond, sub-box) pairs meaning
// "cond holds at every point of the sub-box": the definedness of the sum.
struct SumVal {
  Val f;
  std::vector<BoxEntry> box;
  std::vector<std::pair<Term, std::vector<BoxEntry>>> defs;
  // Extension (reduce.cpp, docs/verifier.md "Max, min and product reductions"): for red != Sum
  // this is the fold of `init` with f over the box (a "fold"); its unmatched SI entries carry fresh
  // constants instead of 0, and the init's definedness is in the Elem's def. For red == Sum, a
  // non-null init is an additive offset: the value is init + the sum (docs/verifier.md, "Sums
  // with an offset"); its definedness, too, is in the Elem's def.
  Reducer red = Reducer::Sum;
  Val init;
  const Node* node = nullptr;  // the reduction (its element type, for arithmetic on the init)
  // Folds only: further ranges, disjoint from box and from each other (a reduced concat axis, or
  // the fold's operation applied to two folds): the value combines init, f over box and each
  // piece's f over its box (docs/verifier.md, "Folds over several ranges").
  std::vector<FoldPiece> more;
};

// An element of a tensor at one index: defined-ness (excluding the index range, which the caller
// checks) and the value, or a sum.
struct Elem {
  Term def;
  Val val;
  std::shared_ptr<const SumVal> sum;
};

// One uninterpreted-function application (input element read) in the query.
struct Access {
  int tensor = -1;
  Term app;
  std::vector<Term> args;  // in the order of the tensor's declared keys and axes
};

// The refinement queries of one task (docs/verifier.md, "The query"):
//   shape_query = hyp ∧ ¬(∧ shape_goals)                  (tensor level: validity and shape)
//   query       = hyp ∧ lhs_access ∧ ¬(∧ shape_goals ∧ eq_goal)   (one element)
struct Query {
  Term hyp;                 // pre ∧ assumption instances ∧ validL ∧ lhs-sum definedness
  Term lhs_access;          // output index in range of the lhs ∧ lhs element defined
  std::vector<Term> shape_goals;  // parts of validR and of "shapes equal" (tensor level)
  std::vector<Term> goals;        // shape_goals, then eq_goal
  Term eq_goal;             // the element part: defR ∧ lhs = rhs (with sums: range checks)
  Term shape_query;         // null when the shape goals fold to true
  Term query;
  Term vacuity;             // hyp ∧ lhs_access
  bool has_sums = false;    // a match abstracts sums: a non-replaying model is inconclusive
  // Conjuncts of hyp that are valid formulas (instances of theorems of integer arithmetic, each over
  // one axis): true in every model, so the rank bound needs no witness for them.
  std::vector<Term> theorems;
  // Folds (reduce.cpp): extra constraints that steer a satisfiable query towards a model that
  // replays (exact folds, a dominating difference), tried in order until a model replays; only
  // for the search, never for a proof.
  std::vector<Term> cex_hints;
};

class Encoder {
 public:
  // ranks: per rclass, the number of axes (>= 1; single rclasses must be 1).
  Encoder(cvc5::Solver& s, const Rule& rule, DType dtype, std::vector<int> ranks);
  Query build();  // throws Unsupported

  Builder b;
  const Rule& rule;
  DType dtype;
  std::vector<int> ranks;

  // Symbols, for reading a model.
  std::vector<std::vector<Term>> map_consts;  // [map id][axis]
  std::vector<Term> scalar_consts;            // [scalar id]
  std::vector<Term> tensor_fns;               // [tensor id]
  std::map<AxisKey, std::vector<Term>> index; // the output index (keys of the lhs)
  std::vector<Access> accesses;               // every UF application in the query
  std::vector<bool> si_free;                  // [map id]: an SI constant that is free (matched)
  Val lhs_val, rhs_val;                       // the compared values (sums: their summands)
  Term lhs_def, rhs_def, lhs_valid, rhs_valid;

  // Per-rclass conditions built by agg(): term -> (rclass, forall?) entries.
  struct Agg {
    int rclass;
    bool forall;
  };
  std::unordered_map<Term, std::vector<Agg>> registry;
  // Every agg() call with its per-axis bodies (body(j) at index j), for the profile abstraction
  // (verify/profile.h).
  struct AggInstance {
    int rclass;
    std::vector<Term> bodies;
  };
  std::vector<AggInstance> agg_instances;
  std::unordered_map<Term, int> axis_const_rclass;  // constants tied to an axis -> rclass
  std::unordered_map<Term, int> uf_tensor;          // tensor function -> tensor id
  // exp at a float type: an uninterpreted function per type (machine_exp), of the value's sort to
  // the type's symbol sort. Its applications, for verify's exp probe.
  std::map<DType, Term> exp_fns;
  std::vector<std::pair<DType, Term>> exp_apps;

  // A condition over all (forall) or some (exists) axes of rclass r.
  template <class F>
  Term agg(int r, bool forall, F body) {
    std::vector<Term> xs;
    for (int j = 0; j < ranks[r]; ++j) xs.push_back(body(j));
    Term t = forall ? b.and_(xs) : b.or_(xs);
    if (t.getKind() != cvc5::Kind::CONST_BOOLEAN) registry[t].push_back({r, forall});
    agg_instances.push_back({r, std::move(xs)});
    return t;
  }

  using Index = std::map<AxisKey, std::vector<Term>>;
  Term size(const Node& n, const AxisKey& k, int j);
  Term iexpr(const IExpr& e, int j);  // j: the current axis (-1 outside a per-axis context)
  Term valid(const Node& n);
  Elem at(const Node& n, const Index& idx);

 private:
  Term map_const(int id, int j);
  Val literal(const Node& n);
  Val num_op(Op op, const Val& a, const Val& b, const Node& n, Term& def);
  Term cmp_op(Op op, const Val& a, const Val& b, Term& def);
  Term values_equal(const Val& a, const Val& b);
  Term in_range(const Node& n, const Index& idx);
  Term shapes_equal(const Node& a, const Node& b);
  Term same_sizes(const Node& x, const Node& n);  // x's sizes equal n's on x's keys
  void collect_sums(const Node& n, std::vector<int>& out);
  Elem at_uncached(const Node& n, const Index& idx);
  Elem operand_at(const Node& n, size_t i, const Index& idx);
  Term index_attr(const Node& n, const char* name, const AxisKey& k, int j, Term dflt);
  Elem ite_elem(const Node& n, const Term& c, const Elem& x, const Elem& y);
  Elem with_def(Elem e, const Term& d);
  Elem input_at(const Node& n, const Index& idx);
  Elem unary_at(const Node& n, const Index& idx);  // neg, abs, exp
  Elem sum_at(const Node& n, const Index& idx);    // sum (Reducer::Sum) and dot
  void machine_reduction(const Node& n);           // refuses reductions not encoded over machine types
  void no_float_sum(const Elem& e, const Node& n) const;
  Elem pad_at(const Node& n, const Index& idx);
  Elem dynupdate_at(const Node& n, const Index& idx);
  Elem concat_at(const Node& n, const Index& idx);
  Elem arith(Op op, const Node& n, const Elem& x, const Elem& y);
  Elem offset_arith(Op op, const Node& n, const Elem& x, const Elem& y);  // a sum and a plain value
  Term box_agg(const std::vector<BoxEntry>& box, bool all, const std::function<Term(const BoxEntry&)>& entry);
  Term box_cond(const std::vector<BoxEntry>& box);
  Term box_empty(const std::vector<BoxEntry>& box);
  Term box_unit(const std::vector<BoxEntry>& box);
  void collect_accesses(const Term& t, std::unordered_set<Term>& seen);
  std::vector<Term> assumption_instances();
  std::vector<Term> exp_lemmas(const std::vector<Term>& roots);
  Term sort_for(DType t) const;

  std::map<std::pair<const IExpr*, int>, Term> iexpr_cache_;
  std::unordered_map<const Node*, Term> valid_cache_;
  std::map<std::pair<const Node*, std::vector<uint64_t>>, Elem> at_cache_;
  std::map<int, std::vector<uint64_t>> sum_use_;  // SI map -> index it was used at
  std::vector<std::vector<Term>> si_consts_;
  bool inf_ = false;                              // the rule can produce infinities
  std::vector<Term> hyp_extra_;                   // lhs-sum definedness instances

  // conv.cpp: a convolution is a sum over its feature and window indices (ConvAttrs in ir.h).
  Term conv_attr(const Node& n, const char* name, const AxisKey& k, int j, int64_t dflt);
  Term conv_valid(const Node& n);
  Elem conv_at(const Node& n, const Index& idx);
  static std::vector<uint64_t> signature_of(const Index& idx);  // identifies an index (sum_use_)

  // reindex.cpp: the element a reduction n combines at the summation-index constants `full`,
  // after an exact bijective re-indexing of its range (reverse, neutral padding); may change the
  // sizes of `box` (its entries in n.sum_index order).
  Elem reduced_element(const Node& n, const Index& full, std::vector<BoxEntry>& box);

  // reduce.cpp: reduce_max/min/prod (Op::Sum with a Reducer other than Sum).
  static bool is_fold(const Elem& e) { return e.sum && e.sum->red != Reducer::Sum; }
  void check_folds();  // constructor: forms rejected before any encoding
  Elem fold_at(const Node& n, const Index& idx);
  std::vector<BoxEntry> fold_box(const Node& n, const Index& idx, Index& full);
  int concat_split_entry(const Node& n);
  void fold_concat(const Node& n, const Index& full, const std::vector<BoxEntry>& box, int entry, SumVal& s);
  void fold_flatten(const Node& n, const std::vector<BoxEntry>& box, const SumVal& in, SumVal& s);
  void fold_compare_ranges(const Elem& le, const Elem& re, const Term& in_range_l, Term& lhs_access, Term& eq_goal);
  Elem fold_arith(Op op, const Node& n, const Elem& x, const Elem& y);
  void fold_compare(const Elem& le, const Elem& re, const Term& in_range_l, Term& lhs_access, Term& eq_goal);
  std::vector<Term> fold_goals_;  // exactness conditions of nested folds (extra goals)
  std::vector<Term> fold_hints_;  // Query::cex_hints
  int fold_fresh_ = 0;            // counter for the names of fresh unmatched-index constants
  Term machine_exp(DType t, const Term& x);
};

// Sort of the element type t.
cvc5::Sort sort_of(const Builder& b, DType t);

// Machine element types (machine.cpp, docs/machine-types.md): bit-vector sorts for the fixed-width
// integers, floating-point sorts for the floats, with the operations of semantics/machine.h.
// f16 and bf16 are computed in binary32 terms (cvc5 1.0.3 decides binary32 and binary64 only): their
// symbols are bit-vectors, read through machine_value, which widens them exactly, and every rounded
// operation is rounded again to the type.
bool is_narrow_float(DType t);  // f16, bf16
cvc5::Sort machine_sort(cvc5::Solver& s, DType t);
Term machine_const(cvc5::Solver& s, DType t, uint64_t bits);
Term machine_value(const Builder& b, DType t, const Term& symbol);  // a symbol's value (f16, bf16: widened)
uint64_t machine_bits(const Term& model_value);                      // the bit pattern of a model value
uint64_t machine_bits(DType t, const Term& model_value);             // ... as the value of t it stands for
Term machine_binary(const Builder& b, DType t, Op op, const Term& a, const Term& c);  // + - * / % max min
Term machine_unary(const Builder& b, DType t, Op op, const Term& a);                 // neg, abs
Term machine_compare(const Builder& b, DType t, Op op, const Term& a, const Term& c);

}  // namespace tr::enc
