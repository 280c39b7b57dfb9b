// Canonical printer of the syntax tree. Parenthesises by precedence only where needed, so the
// output parses back to the same tree.
#include <sstream>

#include "libtensorright/syntax/syntax.h"

namespace tr::syntax {

namespace {

// Binding strength: || 1, && 2, comparisons 3, + - 4, * / % div mod 5, unary 6, primary 7.
int level_of(const Expr& e) {
  switch (e.kind) {
    case EK::Binary: {
      const std::string& o = e.text;
      if (o == "||") return 1;
      if (o == "&&") return 2;
      if (o == "==" || o == "!=" || o == "<" || o == "<=" || o == ">" || o == ">=") return 3;
      if (o == "+" || o == "-") return 4;
      return 5;
    }
    case EK::Unary: return 6;
    default: return 7;
  }
}

void print(std::ostream& os, const Expr& e);

void print_at(std::ostream& os, const Expr& e, int min_level) {
  if (level_of(e) < min_level) {
    os << '(';
    print(os, e);
    os << ')';
  } else {
    print(os, e);
  }
}

std::string key_str(const KeyRef& k) { return k.str(); }

void print(std::ostream& os, const Expr& e) {
  switch (e.kind) {
    case EK::Name:
      os << e.text;
      if (!e.label.empty()) os << '@' << e.label;
      return;
    case EK::Int: os << e.ival; return;
    case EK::Decimal: os << e.text; return;
    case EK::Unary:
      os << e.text;
      print_at(os, *e.args[0], 6);
      return;
    case EK::Binary: {
      int l = level_of(e);
      // Left-associative; comparisons do not associate at all.
      print_at(os, *e.args[0], l == 3 ? 4 : l);
      os << ' ' << e.text << ' ';
      print_at(os, *e.args[1], l + 1);
      return;
    }
    case EK::Call: {
      os << e.text << '(';
      bool first = true;
      for (const auto& a : e.args) {
        if (!first) os << ", ";
        first = false;
        print(os, *a);
      }
      for (const auto& n : e.named) {
        if (!first) os << ", ";
        first = false;
        os << n.name << '=';
        print(os, *n.value);
      }
      os << ')';
      return;
    }
    case EK::Braces: {
      os << '{';
      bool first = true;
      for (const auto& be : e.entries) {
        if (!first) os << ", ";
        first = false;
        os << key_str(be.key);
        if (be.value) {
          os << ": ";
          print(os, *be.value);
        } else if (be.to) {
          os << " -> " << key_str(*be.to);
        }
      }
      os << '}';
      return;
    }
  }
}

std::string names_str(const std::vector<Ident>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i].name;
  return s;
}

std::string quote(const std::string& s) {
  std::string q = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') q += '\\';
    q += c;
  }
  return q + '"';
}

}  // namespace

std::string print_expr(const Expr& e) {
  std::ostringstream os;
  print(os, e);
  return os.str();
}

std::string print_rule(const Rule& r) {
  std::ostringstream os;
  os << "rule " << r.name.name;
  if (r.title) os << ' ' << quote(*r.title);
  os << " : " << names_str(r.dtypes) << " {\n";
  for (const Item& it : r.items) {
    os << "  ";
    switch (it.kind) {
      case ItemKind::RClass:
        os << "rclass " << names_str(it.names) << (it.single ? " single" : "");
        break;
      case ItemKind::Map:
        os << "map " << names_str(it.names) << " : " << it.rclass.name;
        if (it.nonneg) os << " >= 0";
        if (it.expr) os << " = " << print_expr(*it.expr);
        break;
      case ItemKind::Tensor:
        os << "tensor " << names_str(it.names) << " : ";
        if (it.etype) os << it.etype->name << ' ';
        os << print_expr(*it.expr);
        break;
      case ItemKind::Scalar:
        os << "scalar " << names_str(it.names);
        if (it.etype) os << " : " << it.etype->name;
        break;
      case ItemKind::Let: os << "let " << it.names[0].name << " = " << print_expr(*it.expr); break;
      case ItemKind::Pre: os << "pre " << print_expr(*it.expr); break;
      case ItemKind::Assume: os << "assume " << print_expr(*it.expr); break;
      case ItemKind::Lhs: os << "lhs " << print_expr(*it.expr); break;
      case ItemKind::Rhs: os << "rhs " << print_expr(*it.expr); break;
      case ItemKind::Match:
        os << "match ";
        for (size_t i = 0; i < it.pairs.size(); ++i)
          os << (i ? ", " : "") << it.pairs[i].first.name << " == " << it.pairs[i].second.name;
        break;
      case ItemKind::Expect: os << "expect " << it.verdict.name; break;
    }
    os << '\n';
  }
  os << "}\n";
  return os.str();
}

std::string print_file(const File& f) {
  std::string out;
  for (size_t i = 0; i < f.rules.size(); ++i) {
    if (i) out += '\n';
    out += print_rule(f.rules[i]);
  }
  return out;
}

}  // namespace tr::syntax
