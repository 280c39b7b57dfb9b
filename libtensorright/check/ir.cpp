#include "libtensorright/check/ir.h"

namespace tr {

const char* to_string(DType d) {
  switch (d) {
    case DType::Bool: return "bool";
    case DType::Int: return "int";
    case DType::Real: return "real";
    case DType::S8: return "s8";
    case DType::S16: return "s16";
    case DType::S32: return "s32";
    case DType::S64: return "s64";
    case DType::U8: return "u8";
    case DType::U16: return "u16";
    case DType::U32: return "u32";
    case DType::U64: return "u64";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::F32: return "f32";
    case DType::F64: return "f64";
  }
  return "?";
}

std::optional<DType> dtype_from_string(const std::string& s) {
  if (s == "pred") return DType::Bool;
  for (int i = 0; i <= static_cast<int>(DType::F64); ++i)
    if (s == to_string(static_cast<DType>(i))) return static_cast<DType>(i);
  return std::nullopt;
}

int bit_width(DType d) {
  switch (d) {
    case DType::S8: case DType::U8: return 8;
    case DType::S16: case DType::U16: case DType::F16: case DType::BF16: return 16;
    case DType::S32: case DType::U32: case DType::F32: return 32;
    case DType::S64: case DType::U64: case DType::F64: return 64;
    default: return 0;
  }
}

int exponent_bits(DType d) {
  switch (d) {
    case DType::F16: return 5;
    case DType::BF16: case DType::F32: return 8;
    case DType::F64: return 11;
    default: return 0;
  }
}

int significand_bits(DType d) {
  switch (d) {
    case DType::F16: return 11;
    case DType::BF16: return 8;
    case DType::F32: return 24;
    case DType::F64: return 53;
    default: return 0;
  }
}

const char* to_string(Verdict v) {
  switch (v) {
    case Verdict::Proved: return "proved";
    case Verdict::Counterexample: return "counterexample";
    case Verdict::Vacuous: return "vacuous";
    case Verdict::Timeout: return "timeout";
    case Verdict::Unknown: return "unknown";
    case Verdict::Unsupported: return "unsupported";
  }
  return "?";
}

std::optional<Verdict> verdict_from_string(const std::string& s) {
  for (Verdict v : {Verdict::Proved, Verdict::Counterexample, Verdict::Vacuous, Verdict::Timeout,
                    Verdict::Unknown, Verdict::Unsupported})
    if (s == to_string(v)) return v;
  return std::nullopt;
}

const char* to_string(Reducer r) {
  switch (r) {
    case Reducer::Sum: return "sum";
    case Reducer::Max: return "reduce_max";
    case Reducer::Min: return "reduce_min";
    case Reducer::Prod: return "reduce_prod";
  }
  return "?";
}

const char* to_string(Op op) {
  switch (op) {
    case Op::Input: return "input";
    case Op::Literal: return "literal";
    case Op::ScalarRef: return "scalar";
    case Op::Const: return "const";
    case Op::Iota: return "iota";
    case Op::Neg: return "neg";
    case Op::Abs: return "abs";
    case Op::Exp: return "exp";
    case Op::Not: return "not";
    case Op::Add: return "add";
    case Op::Sub: return "sub";
    case Op::Mul: return "mul";
    case Op::Div: return "div";
    case Op::Rem: return "rem";
    case Op::Max: return "max";
    case Op::Min: return "min";
    case Op::And: return "and";
    case Op::Or: return "or";
    case Op::Eq: return "eq";
    case Op::Ne: return "ne";
    case Op::Lt: return "lt";
    case Op::Le: return "le";
    case Op::Gt: return "gt";
    case Op::Ge: return "ge";
    case Op::Select: return "select";
    case Op::Clamp: return "clamp";
    case Op::Broadcast: return "broadcast";
    case Op::Sum: return "sum";
    case Op::Slice: return "slice";
    case Op::Pad: return "pad";
    case Op::DynSlice: return "dynslice";
    case Op::DynUpdate: return "dynupdate";
    case Op::Concat: return "concat";
    case Op::Relabel: return "relabel";
    case Op::Reverse: return "reverse";
    case Op::Dot: return "dot";
    case Op::Conv: return "conv";
    case Op::Degenerate: return "degenerate";
  }
  return "?";
}

}  // namespace tr
