// Readable renderings of checked IR (for reports, debugging and the round-trip tests).
#include <sstream>

#include "libtensorright/check/check.h"

namespace tr {

namespace {

// Binding strength as in the rule language: || 1, && 2, comparisons 3, + - 4, * div mod 5, unary 6.
int ilevel(const IExpr& e) {
  switch (e.kind) {
    case IK::Or: return 1;
    case IK::And: return 2;
    case IK::Eq: case IK::Ne: case IK::Lt: case IK::Le: case IK::Gt: case IK::Ge: return 3;
    case IK::Add: case IK::Sub: return 4;
    case IK::Mul: case IK::Div: case IK::Mod: return 5;
    case IK::Neg: case IK::Not: return 6;
    case IK::Int: return e.value < 0 ? 6 : 7;
    default: return 7;
  }
}

const char* infix(IK k) {
  switch (k) {
    case IK::Or: return "||";
    case IK::And: return "&&";
    case IK::Eq: return "==";
    case IK::Ne: return "!=";
    case IK::Lt: return "<";
    case IK::Le: return "<=";
    case IK::Gt: return ">";
    case IK::Ge: return ">=";
    case IK::Add: return "+";
    case IK::Sub: return "-";
    case IK::Mul: return "*";
    case IK::Div: return "div";
    case IK::Mod: return "mod";
    default: return nullptr;
  }
}

void pi(std::ostream& os, const Rule& r, const IExpr& e, int min_level) {
  bool paren = ilevel(e) < min_level;
  if (paren) os << '(';
  switch (e.kind) {
    case IK::Int: os << e.value; break;
    case IK::Bool: os << (e.value ? "true" : "false"); break;
    case IK::Map:
      os << (e.id >= 0 && static_cast<size_t>(e.id) < r.maps.size() ? r.maps[static_cast<size_t>(e.id)].name : "?map");
      break;
    case IK::Scalar:
      os << (e.id >= 0 && static_cast<size_t>(e.id) < r.scalars.size() ? r.scalars[static_cast<size_t>(e.id)].name : "?scalar");
      break;
    case IK::Neg: os << '-'; pi(os, r, *e.args[0], 6); break;
    case IK::Not: os << '!'; pi(os, r, *e.args[0], 6); break;
    case IK::Abs: case IK::Min: case IK::Max: case IK::Ite: case IK::All: case IK::Any: {
      const char* f = e.kind == IK::Abs ? "abs" : e.kind == IK::Min ? "min" : e.kind == IK::Max ? "max"
                    : e.kind == IK::Ite ? "ite" : e.kind == IK::All ? "all" : "any";
      os << f << '(';
      for (size_t i = 0; i < e.args.size(); ++i) {
        if (i) os << ", ";
        pi(os, r, *e.args[i], 0);
      }
      os << ')';
      break;
    }
    default: {
      int l = ilevel(e);
      pi(os, r, *e.args[0], l == 3 ? 4 : l);
      os << ' ' << infix(e.kind) << ' ';
      pi(os, r, *e.args[1], l + 1);
    }
  }
  if (paren) os << ')';
}

std::string ety(const EType& e) { return e.is_t ? "T" : to_string(e.dtype); }

std::string literal_str(const Literal& l) {
  switch (l.kind) {
    case Literal::Kind::Int: return (l.neg_zero ? "-" : "") + l.num.get_str();
    case Literal::Kind::Real:
      if (l.den == 1) return (l.neg_zero ? "-" : "") + l.num.get_str() + ".0";
      return l.num.get_str() + "/" + l.den.get_str();
    case Literal::Kind::NaN: return "nan";
    case Literal::Kind::Bool: return l.num ? "true" : "false";
    case Literal::Kind::PosInf: return "inf";
    case Literal::Kind::NegInf: return "-inf";
  }
  return "?";
}

std::string axis_map(const Rule& r, const AxisMap& m) {
  std::string s = "{";
  for (const auto& [k, v] : m) s += (s.size() > 1 ? ", " : "") + print_key(r, k) + ": " + print_iexpr(r, *v);
  return s + "}";
}
std::string key_list(const Rule& r, const std::vector<AxisKey>& v) {
  std::string s = "{";
  for (const auto& k : v) s += (s.size() > 1 ? ", " : "") + print_key(r, k);
  return s + "}";
}
std::string si_list(const Rule& r, const std::map<AxisKey, int>& m) {
  std::string s = "{";
  for (const auto& [k, id] : m) s += (s.size() > 1 ? ", " : "") + print_key(r, k) + ": " + r.maps[static_cast<size_t>(id)].name;
  return s + "}";
}

const char* infix_op(Op op) {
  switch (op) {
    case Op::Add: return "+";
    case Op::Sub: return "-";
    case Op::Mul: return "*";
    case Op::Div: return "/";
    case Op::Rem: return "%";
    case Op::And: return "&&";
    case Op::Or: return "||";
    case Op::Eq: return "==";
    case Op::Ne: return "!=";
    case Op::Lt: return "<";
    case Op::Le: return "<=";
    case Op::Gt: return ">";
    case Op::Ge: return ">=";
    default: return nullptr;
  }
}

void pn(std::ostream& os, const Rule& r, const Node& n) {
  auto args = [&](size_t from = 0) {
    for (size_t i = from; i < n.args.size(); ++i) {
      if (i > from) os << ", ";
      pn(os, r, *n.args[i]);
    }
  };
  auto attr = [&](const char* name) {
    auto it = n.attrs.find(name);
    if (it != n.attrs.end()) os << ", " << name << '=' << axis_map(r, it->second);
  };
  if (const char* o = infix_op(n.op)) {
    os << '(';
    pn(os, r, *n.args[0]);
    os << ' ' << o << ' ';
    pn(os, r, *n.args[1]);
    os << ')';
    return;
  }
  switch (n.op) {
    case Op::Input: os << r.tensors[static_cast<size_t>(n.input)].name; return;
    case Op::ScalarRef: os << r.scalars[static_cast<size_t>(n.input)].name; return;
    case Op::Literal: os << literal_str(n.lit); return;
    case Op::Neg: os << "-("; args(); os << ')'; return;
    case Op::Not: os << "!("; args(); os << ')'; return;
    case Op::Const:
      if (n.args.size() > 1) {  // pow(A, 0) keeps A (ir.h)
        os << "pow(";
        pn(os, r, *n.args[1]);
        os << ", 0)";
        return;
      }
      os << "const(";
      args();
      os << ", " << axis_map(r, n.shape) << ')';
      return;
    case Op::Iota: os << "iota(" << axis_map(r, n.shape) << ", " << print_key(r, n.axes.at(0)) << ')'; return;
    case Op::Broadcast: {
      AxisMap added;
      for (const auto& [k, v] : n.shape)
        if (!n.args[0]->shape.count(k)) added[k] = v;
      os << "broadcast(";
      args();
      os << ", " << axis_map(r, added) << ')';
      return;
    }
    case Op::Sum:
      if (n.reducer == Reducer::Sum) {
        os << "sum("; args(); os << ", " << si_list(r, n.sum_index) << ')';
      } else {
        os << to_string(n.reducer) << '(';
        pn(os, r, *n.args.at(0));
        os << ", " << si_list(r, n.sum_index) << ", init=";
        pn(os, r, *n.args.at(1));
        os << ')';
      }
      return;
    case Op::Slice: os << "slice("; args(); attr("start"); attr("end"); attr("stride"); os << ')'; return;
    case Op::Pad: os << "pad("; args(); attr("low"); attr("high"); attr("interior"); os << ')'; return;
    case Op::DynSlice: os << "dynslice("; args(); attr("start"); attr("size"); os << ')'; return;
    case Op::DynUpdate: os << "dynupdate("; args(); attr("start"); os << ')'; return;
    case Op::Concat: os << "concat("; args(); os << ", axis=" << print_key(r, n.axes.at(0)) << ')'; return;
    case Op::Relabel: {
      os << "relabel(";
      args();
      os << ", {";
      bool first = true;
      for (const auto& [a, b] : n.relabel) {
        os << (first ? "" : ", ") << print_key(r, a) << " -> " << print_key(r, b);
        first = false;
      }
      os << "})";
      return;
    }
    case Op::Reverse: os << "reverse("; args(); os << ", " << key_list(r, n.axes) << ')'; return;
    case Op::Dot: os << "dot("; args(); os << ", contract=" << si_list(r, n.sum_index) << ", batch=" << key_list(r, n.axes) << ')'; return;
    case Op::Conv: {
      os << "conv(";
      args();
      if (n.conv) {
        std::map<AxisKey, int> feat, spat;
        for (const auto& k : n.conv->feature) feat[k] = n.sum_index.at(k);
        for (const auto& k : n.conv->spatial) spat[k] = n.sum_index.at(k);
        os << ", batch=" << key_list(r, n.conv->batch) << ", feature=" << si_list(r, feat)
           << ", output=" << key_list(r, n.conv->output_feature) << ", spatial=" << si_list(r, spat);
      }
      attr("stride"); attr("low"); attr("high"); attr("lhs_dilation"); attr("rhs_dilation");
      os << ')';
      return;
    }
    case Op::Degenerate: os << "degenerate("; args(); attr("add"); os << ", remove=" << key_list(r, n.axes) << ')'; return;
    default: os << to_string(n.op) << '('; args(); os << ')'; return;
  }
}

void dump_node(std::ostream& os, const Rule& r, const Node& n, int depth) {
  os << std::string(static_cast<size_t>(2 * depth), ' ') << to_string(n.op) << " : " << ety(n.etype) << ' ' << axis_map(r, n.shape);
  switch (n.op) {
    case Op::Input: os << ' ' << r.tensors[static_cast<size_t>(n.input)].name; break;
    case Op::ScalarRef: os << ' ' << r.scalars[static_cast<size_t>(n.input)].name; break;
    case Op::Literal: os << ' ' << literal_str(n.lit); break;
    default: break;
  }
  for (const auto& [name, m] : n.attrs) os << ' ' << name << '=' << axis_map(r, m);
  if (!n.axes.empty()) os << " axes=" << key_list(r, n.axes);
  if (!n.sum_index.empty()) os << " si=" << si_list(r, n.sum_index);
  if (n.reducer != Reducer::Sum) os << " reducer=" << to_string(n.reducer);
  for (const auto& [a, b] : n.relabel) os << ' ' << print_key(r, a) << "->" << print_key(r, b);
  if (n.conv)
    os << " conv(batch=" << key_list(r, n.conv->batch) << " feature=" << key_list(r, n.conv->feature)
       << " output=" << key_list(r, n.conv->output_feature) << " spatial=" << key_list(r, n.conv->spatial) << ')';
  os << '\n';
  for (const auto& a : n.args) dump_node(os, r, *a, depth + 1);
}

}  // namespace

std::string print_iexpr(const Rule& rule, const IExpr& e) {
  std::ostringstream os;
  pi(os, rule, e, 0);
  return os.str();
}

std::string print_key(const Rule& rule, const AxisKey& k) {
  std::string name = k.rclass >= 0 && static_cast<size_t>(k.rclass) < rule.rclasses.size()
                         ? rule.rclasses[static_cast<size_t>(k.rclass)].name
                         : "?rclass";
  return k.label.empty() ? name : name + "@" + k.label;
}

std::string print_node(const Rule& rule, const Node& n) {
  std::ostringstream os;
  pn(os, rule, n);
  return os.str();
}

std::string dump_rule(const Rule& r) {
  std::ostringstream os;
  os << "rule " << r.name << " \"" << r.title << "\" :";
  for (DType d : r.dtypes) os << ' ' << to_string(d);
  os << '\n';
  for (const auto& c : r.rclasses) os << "  rclass " << c.name << (c.single ? " single" : "") << '\n';
  for (const auto& m : r.maps) {
    os << "  map " << m.name << " : " << r.rclasses[static_cast<size_t>(m.rclass)].name << (m.nonneg ? " >= 0" : "");
    if (m.derived) os << " = " << print_iexpr(r, *m.derived);
    os << '\n';
  }
  for (const auto& t : r.tensors) os << "  tensor " << t.name << " : " << ety(t.etype) << ' ' << axis_map(r, t.shape) << '\n';
  for (const auto& s : r.scalars) os << "  scalar " << s.name << " : " << ety(s.etype) << '\n';
  for (const auto& p : r.pre) os << "  pre " << print_iexpr(r, *p.cond) << '\n';
  for (const auto& a : r.assume) {
    os << "  assume\n";
    dump_node(os, r, *a.cond, 2);
  }
  for (const auto& m : r.match)
    os << "  match " << r.maps[static_cast<size_t>(m.lhs_si)].name << " == " << r.maps[static_cast<size_t>(m.rhs_si)].name << '\n';
  if (r.lhs) {
    os << "  lhs\n";
    dump_node(os, r, *r.lhs, 2);
  }
  if (r.rhs) {
    os << "  rhs\n";
    dump_node(os, r, *r.rhs, 2);
  }
  if (r.expect) os << "  expect " << to_string(*r.expect) << '\n';
  return os.str();
}

}  // namespace tr
