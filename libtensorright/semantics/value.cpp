// Element values and their arithmetic (reference §2.1, TensorRight's TensorNum).
#include <cmath>

#include "libtensorright/semantics/machine.h"
#include "libtensorright/semantics/semantics.h"
#include "libtensorright/semantics/value_ops.h"

namespace tr {

Value Value::boolean(bool v) {
  Value x;
  x.kind = Kind::Bool;
  x.b = v;
  return x;
}
Value Value::integer(BigInt v) {
  Value x;
  x.kind = Kind::Int;
  x.i = std::move(v);
  return x;
}
Value Value::real(Rational v) {
  Value x;
  x.kind = Kind::Real;
  x.r = v;
  return x;
}
Value Value::pos_inf() {
  Value x;
  x.kind = Kind::PosInf;
  return x;
}
Value Value::neg_inf() {
  Value x;
  x.kind = Kind::NegInf;
  return x;
}
Value Value::unknown() {
  Value x;
  x.kind = Kind::Unknown;
  return x;
}
Value Value::machine(DType t, uint64_t bits) {
  Value x;
  x.kind = Kind::Machine;
  x.mt = t;
  x.bits = bits & mach::mask(t);
  return x;
}
Value Value::zero(DType t) {
  if (is_machine(t)) return machine(t, 0);
  switch (t) {
    case DType::Bool: return boolean(false);
    case DType::Real: return real(Rational(0));
    default: return integer(0);
  }
}

std::string Value::str() const {
  std::string s = inexact ? "~" : "";
  switch (kind) {
    case Kind::Bool: return s + (b ? "true" : "false");
    case Kind::Int: return s + i.get_str();
    case Kind::Real: return s + r.str();
    case Kind::PosInf: return s + "inf";
    case Kind::NegInf: return s + "-inf";
    case Kind::Unknown: return s + "unknown";
    case Kind::Machine: return s + mach::str(mt, bits);
  }
  return "?";
}

bool values_equal(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.kind == K::Unknown || b.kind == K::Unknown) return false;
  if (a.kind == K::Machine || b.kind == K::Machine)
    return a.kind == b.kind && a.mt == b.mt && mach::same(a.mt, a.bits, b.bits);
  if (a.is_num() && b.is_num()) return vops::to_rat(a) == vops::to_rat(b);
  if (a.kind != b.kind) return false;
  if (a.kind == K::Bool) return a.b == b.b;
  return true;  // the same infinity
}

namespace vops {

using K = Value::Kind;

Rational to_rat(const Value& v) { return v.kind == K::Int ? Rational(v.i) : v.r; }

namespace {
Value tag(Value v, const Value& a, const Value& b) {
  v.inexact = a.inexact || b.inexact;
  return v;
}
Value tag(Value v, const Value& a) {
  v.inexact = a.inexact;
  return v;
}
int inf_sign(const Value& v) { return v.kind == K::PosInf ? 1 : -1; }
Value inf_of(int sign) { return sign > 0 ? Value::pos_inf() : Value::neg_inf(); }
int num_sign(const Value& v) {
  return v.kind == K::Int ? sgn(v.i) : v.r.sign();
}
void need_num(const Value& v, const char* op) {
  if (!v.is_num() && !v.is_inf() && v.kind != K::Unknown)
    throw EvalError(std::string(op) + " on a non-numeric value " + v.str());
}
// Both operands of a binary machine operation: machine values of one type (or neither).
bool machine2(const Value& a, const Value& b, const char* op) {
  if (a.kind != K::Machine && b.kind != K::Machine) return false;
  if (a.kind != b.kind || a.mt != b.mt) throw EvalError(std::string(op) + " on " + a.str() + " and " + b.str() + " of different types");
  return true;
}
Value mach2(const Value& a, const Value& b, uint64_t (*f)(DType, uint64_t, uint64_t)) {
  Value v = Value::machine(a.mt, f(a.mt, a.bits, b.bits));
  v.inexact = a.inexact || b.inexact;
  return v;
}
Value mach1(const Value& a, uint64_t (*f)(DType, uint64_t)) {
  Value v = Value::machine(a.mt, f(a.mt, a.bits));
  v.inexact = a.inexact;
  return v;
}
}  // namespace

Value add(const Value& a, const Value& b) {
  if (machine2(a, b, "+")) return mach2(a, b, &mach::add);
  need_num(a, "+");
  need_num(b, "+");
  if (a.kind == K::Unknown || b.kind == K::Unknown) return tag(Value::unknown(), a, b);
  if (a.is_inf() && b.is_inf())
    return tag(a.kind == b.kind ? a : Value::unknown(), a, b);  // inf + -inf is Unknown
  if (a.is_inf()) return tag(a, a, b);
  if (b.is_inf()) return tag(b, a, b);
  if (a.kind == K::Int && b.kind == K::Int) return tag(Value::integer(a.i + b.i), a, b);
  return tag(Value::real(to_rat(a) + to_rat(b)), a, b);
}

// Unlike TensorRight (whose negate keeps an infinity unchanged), neg flips the sign of an infinity.
Value neg(const Value& a) {
  if (a.kind == K::Machine) return mach1(a, &mach::neg);
  need_num(a, "-");
  switch (a.kind) {
    case K::Int: return tag(Value::integer(-a.i), a);
    case K::Real: return tag(Value::real(-a.r), a);
    case K::PosInf: return tag(Value::neg_inf(), a);
    case K::NegInf: return tag(Value::pos_inf(), a);
    default: return a;
  }
}

Value sub(const Value& a, const Value& b) {
  if (machine2(a, b, "-")) return mach2(a, b, &mach::sub);
  return add(a, neg(b));
}

Value mul(const Value& a, const Value& b) {
  if (machine2(a, b, "*")) return mach2(a, b, &mach::mul);
  need_num(a, "*");
  need_num(b, "*");
  if (a.kind == K::Unknown || b.kind == K::Unknown) return tag(Value::unknown(), a, b);
  if (a.is_inf() && b.is_inf()) return tag(inf_of(inf_sign(a) * inf_sign(b)), a, b);
  if (a.is_inf() || b.is_inf()) {
    const Value& inf = a.is_inf() ? a : b;
    const Value& fin = a.is_inf() ? b : a;
    int s = num_sign(fin);
    return tag(s == 0 ? Value::unknown() : inf_of(inf_sign(inf) * s), a, b);  // inf * 0: Unknown
  }
  if (a.kind == K::Int && b.kind == K::Int) return tag(Value::integer(a.i * b.i), a, b);
  return tag(Value::real(to_rat(a) * to_rat(b)), a, b);
}

// Int: floor division, x / 0 = 0; Real: exact, x / 0 = 0. Any infinity gives Unknown (as in
// TensorRight, which over-approximates division with infinities).
Value div(const Value& a, const Value& b) {
  if (machine2(a, b, "/")) return mach2(a, b, &mach::div);
  need_num(a, "/");
  need_num(b, "/");
  if (!a.is_num() || !b.is_num()) return tag(Value::unknown(), a, b);
  if (a.kind == K::Int && b.kind == K::Int)
    return tag(Value::integer(b.i == 0 ? BigInt(0) : floor_div(a.i, b.i)), a, b);
  Rational d = to_rat(b);
  return tag(Value::real(d.sign() == 0 ? Rational(0) : to_rat(a) / d), a, b);
}

// Truncated remainder (sign of the dividend), x % 0 = x; on reals x - y * trunc(x / y).
Value rem(const Value& a, const Value& b) {
  if (machine2(a, b, "%")) return mach2(a, b, &mach::rem);
  need_num(a, "%");
  need_num(b, "%");
  if (!a.is_num() || !b.is_num()) return tag(Value::unknown(), a, b);
  if (a.kind == K::Int && b.kind == K::Int) {
    if (b.i == 0) return tag(a, a, b);
    return tag(Value::integer(trunc_rem(a.i, b.i)), a, b);
  }
  Rational x = to_rat(a), y = to_rat(b);
  if (y.sign() == 0) return tag(Value::real(x), a, b);
  Rational q = x / y;
  return tag(Value::real(x - y * Rational(q.trunc())), a, b);
}

std::optional<int> compare(const Value& a, const Value& b) {
  if (machine2(a, b, "a comparison")) return mach::compare(a.mt, a.bits, b.bits);
  if (a.kind == K::Unknown || b.kind == K::Unknown) return std::nullopt;
  if (a.kind == K::Bool || b.kind == K::Bool) {
    if (a.kind != b.kind) throw EvalError("comparing a bool with a number");
    return a.b == b.b ? 0 : (a.b ? 1 : -1);
  }
  auto rank = [](const Value& v) { return v.kind == K::NegInf ? -1 : v.kind == K::PosInf ? 1 : 0; };
  int ra = rank(a), rb = rank(b);
  if (ra != rb) return ra < rb ? -1 : 1;
  if (ra != 0) return 0;
  Rational x = to_rat(a), y = to_rat(b);
  return x < y ? -1 : y < x ? 1 : 0;
}

Value max(const Value& a, const Value& b) {
  if (machine2(a, b, "max")) return mach2(a, b, &mach::max);
  need_num(a, "max");
  need_num(b, "max");
  auto c = compare(a, b);
  if (!c) return tag(Value::unknown(), a, b);
  return tag(*c >= 0 ? a : b, a, b);
}

Value min(const Value& a, const Value& b) {
  if (machine2(a, b, "min")) return mach2(a, b, &mach::min);
  need_num(a, "min");
  need_num(b, "min");
  auto c = compare(a, b);
  if (!c) return tag(Value::unknown(), a, b);
  return tag(*c <= 0 ? a : b, a, b);
}

Value abs(const Value& a) {
  if (a.kind == K::Machine) return mach1(a, &mach::abs);
  need_num(a, "abs");
  if (a.is_inf()) return tag(Value::pos_inf(), a);
  if (a.kind == K::Int) return tag(Value::integer(a.i < 0 ? BigInt(-a.i) : a.i), a);
  if (a.kind == K::Real) return tag(Value::real(a.r.sign() < 0 ? -a.r : a.r), a);
  return a;
}

// exp(-inf) = 0 and exp(0) = 1 exactly; other finite arguments are approximated (inexact).
Value exp(const Value& a) {
  if (a.kind == K::Int) throw EvalError("exp on int is not defined");
  if (a.kind == K::Machine) {  // libm's exp, rounded: inexact, like the real exp
    if (!is_float(a.mt)) throw EvalError("exp on " + std::string(to_string(a.mt)) + " is not defined");
    if (mach::is_nan(a.mt, a.bits)) return a;
    if (mach::is_inf(a.mt, a.bits)) return mach::sign_bit(a.mt, a.bits) ? Value::machine(a.mt, 0) : a;
    double e = std::exp(mach::float_value(a.mt, a.bits).to_double());
    Value v = Value::machine(a.mt, std::isinf(e) ? mach::inf_bits(a.mt, false) : mach::round_to(a.mt, mach::exact(e)));
    v.inexact = !mach::is_zero(a.mt, a.bits);
    return v;
  }
  need_num(a, "exp");
  if (a.kind == K::NegInf) return tag(Value::real(Rational(0)), a);
  if (a.kind != K::Real) return a;  // +inf, Unknown
  if (a.r.sign() == 0) return tag(Value::real(Rational(1)), a);
  Value v = Value::real(Rational::approximate(std::exp(a.r.to_double())));
  v.inexact = true;
  return v;
}

}  // namespace vops
}  // namespace tr
