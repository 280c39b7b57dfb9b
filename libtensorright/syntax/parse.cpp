// Lexer and recursive-descent parser of the rule language. Purely syntactic: names are resolved
// by the checker. Items start with a keyword, so the grammar needs no statement separators.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>
#include <unordered_set>

#include "libtensorright/syntax/syntax.h"

namespace tr::syntax {

namespace {

const std::unordered_set<std::string>& keywords() {
  static const std::unordered_set<std::string> k = {
      // structure and declarations
      "rule", "rclass", "single", "map", "tensor", "scalar", "let", "pre", "assume", "match",
      "expect", "lhs", "rhs",
      // types and dtype sets
      "any", "num", "bool", "int", "real", "T",
      // literals and condition words
      "inf", "nan", "true", "false", "div", "mod", "all", "ite",
      // built-in functions
      "max", "min", "abs", "exp", "select", "clamp", "const", "iota", "broadcast", "sum", "slice",
      "pad", "dynslice", "dynupdate", "concat", "relabel", "reverse", "dot", "conv", "degenerate",
      "pow", "reduce_max", "reduce_min", "reduce_prod"};
  return k;
}

// Keywords that may be called like functions in expressions.
bool is_function_keyword(const std::string& w) {
  static const std::unordered_set<std::string> f = {
      "max", "min", "abs", "exp", "select", "clamp", "const", "iota", "broadcast", "sum", "slice",
      "pad", "dynslice", "dynupdate", "concat", "relabel", "reverse", "dot", "conv", "degenerate",
      "pow", "reduce_max", "reduce_min", "reduce_prod", "all", "any", "ite"};
  return f.count(w) > 0;
}

enum class TK { Ident, Int, Decimal, String, Punct, End };

struct Token {
  TK kind = TK::End;
  std::string text;  // identifier, punctuation, literal text, or the unescaped string
  mpz_class ival = 0;  // Int: the value (exact)
  SourceLoc loc;
};

class Lexer {
 public:
  Lexer(const std::string& text, const std::string& path, const std::string* source)
      : s_(text), path_(path), source_(source) {}

  std::vector<Token> run() {
    validate();
    std::vector<Token> out;
    for (;;) {
      skip_space();
      Token t;
      t.loc = here();
      if (i_ >= s_.size()) {
        t.kind = TK::End;
        out.push_back(t);
        return out;
      }
      char c = s_[i_];
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t b = i_;
        while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_' || s_[i_] == '\''))
          advance();
        t.kind = TK::Ident;
        t.text = s_.substr(b, i_ - b);
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        size_t b = i_;
        while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) advance();
        if (i_ + 1 < s_.size() && s_[i_] == '.' && std::isdigit(static_cast<unsigned char>(s_[i_ + 1]))) {
          advance();
          while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) advance();
          t.kind = TK::Decimal;
          t.text = s_.substr(b, i_ - b);
        } else {
          t.kind = TK::Int;
          t.text = s_.substr(b, i_ - b);
        }
        if (t.text.size() - (t.kind == TK::Decimal ? 1 : 0) > kMaxNumberDigits)
          fail(t.loc, "number literal has more than " + std::to_string(kMaxNumberDigits) + " digits");
        if (t.kind == TK::Int) t.ival = mpz_class(t.text, 10);
        if (i_ < s_.size() && (std::isalpha(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_'))
          fail(here(), "unexpected character '" + char_at(i_) + "' after a number");
      } else if (c == '"') {
        advance();
        t.kind = TK::String;
        for (;;) {
          if (i_ >= s_.size() || s_[i_] == '\n') fail(t.loc, "unterminated string");
          char d = s_[i_];
          if (d == '"') {
            advance();
            break;
          }
          if (d == '\\') {
            advance();
            if (i_ >= s_.size() || (s_[i_] != '"' && s_[i_] != '\\'))
              fail(here(), "unknown escape in string (only \\\" and \\\\ are allowed)");
            d = s_[i_];
          }
          t.text += d;
          advance();
        }
      } else {
        static const char* two[] = {"==", "!=", "<=", ">=", "&&", "||", "->"};
        t.kind = TK::Punct;
        bool found = false;
        for (const char* p : two) {
          if (s_.compare(i_, 2, p) == 0) {
            t.text = p;
            advance();
            advance();
            found = true;
            break;
          }
        }
        if (!found) {
          static const std::string one = "{}(),:=<>+-*/%!@";
          if (one.find(c) == std::string::npos) {
            if (c == '&' || c == '|')
              fail(t.loc, std::string("unexpected character '") + c + "' (did you mean '" + c + c + "'?)");
            fail(t.loc, "unexpected character '" + char_at(i_) + "'");
          }
          t.text = std::string(1, c);
          advance();
        }
      }
      out.push_back(std::move(t));
    }
  }

 private:
  SourceLoc here() const { return SourceLoc{path_, line_, col_}; }

  // The character at byte i, whole (the text is valid UTF-8 once validate() has run).
  std::string char_at(size_t i) const { return s_.substr(i, std::max<size_t>(1, utf8_sequence_length(s_, i))); }
  static std::string abbreviate(const std::string& text) {
    return text.size() <= 24 ? text : text.substr(0, 20) + "...";
  }

  // Rule files are UTF-8 text: every byte sequence must be UTF-8, and the only control characters
  // are tab, line feed and carriage return. Checked over the whole text (comments and strings
  // included) before any token, so that no invalid byte reaches a name, a title or a report.
  void validate() const {
    for (size_t k = 0; k < s_.size();) {
      unsigned char c = static_cast<unsigned char>(s_[k]);
      size_t n = utf8_sequence_length(s_, k);
      bool control = (c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f;
      if (n == 0 || control) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "%02x", c);
        SourceLoc loc{path_, 1, 1};
        for (size_t j = 0; j < k; ++j) {
          if (s_[j] == '\n') {
            ++loc.line;
            loc.col = 1;
          } else {
            ++loc.col;
          }
        }
        std::string at = " at byte offset " + std::to_string(k);
        if (control) fail(loc, std::string("control character \\x") + hex + at + " (rule files are text: only tab, line feed and carriage return are allowed)");
        fail(loc, std::string("invalid UTF-8 byte 0x") + hex + at + " (rule files must be UTF-8 text)");
      }
      k += n;
    }
  }
  void advance() {
    if (s_[i_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++i_;
  }
  void skip_space() {
    while (i_ < s_.size()) {
      char c = s_[i_];
      if (c == '#') {
        while (i_ < s_.size() && s_[i_] != '\n') advance();
      } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        advance();
      } else {
        break;
      }
    }
  }
  [[noreturn]] void fail(const SourceLoc& loc, const std::string& msg) const {
    throw Error(msg, loc, render_diagnostic(loc, msg, *source_));
  }

  const std::string& s_;
  std::string path_;
  const std::string* source_;
  size_t i_ = 0;
  int line_ = 1, col_ = 1;
};

class Parser {
 public:
  Parser(std::vector<Token> toks, const std::string* source) : t_(std::move(toks)), source_(source) {}

  std::vector<Rule> file() {
    std::vector<Rule> rules;
    while (peek().kind != TK::End) rules.push_back(rule());
    return rules;
  }

 private:
  // ---- token helpers ----
  const Token& peek(size_t k = 0) const { return t_[std::min(p_ + k, t_.size() - 1)]; }
  const Token& next() {
    const Token& t = t_[p_];
    if (p_ + 1 < t_.size()) ++p_;
    return t;
  }
  bool is_punct(const char* p, size_t k = 0) const { return peek(k).kind == TK::Punct && peek(k).text == p; }
  bool is_word(const char* w, size_t k = 0) const { return peek(k).kind == TK::Ident && peek(k).text == w; }
  bool accept(const char* p) {
    if (!is_punct(p)) return false;
    next();
    return true;
  }
  static std::string describe(const Token& t) {
    switch (t.kind) {
      case TK::End: return "end of file";
      case TK::String: return "a string";
      case TK::Ident: return (is_keyword(t.text) ? "keyword '" : "'") + t.text + "'";
      default: return "'" + t.text + "'";
    }
  }
  [[noreturn]] void fail(const SourceLoc& loc, const std::string& msg) const {
    throw Error(msg, loc, render_diagnostic(loc, msg, *source_));
  }
  [[noreturn]] void fail_expected(const std::string& what) const {
    fail(peek().loc, "expected " + what + ", found " + describe(peek()));
  }
  const Token& expect(const char* p) {
    if (!is_punct(p)) fail_expected(std::string("'") + p + "'");
    return next();
  }
  void expect_word(const char* w) {
    if (!is_word(w)) fail_expected(std::string("'") + w + "'");
    next();
  }
  // A user name (not a keyword).
  Ident name(const char* what) {
    const Token& t = peek();
    if (t.kind != TK::Ident) fail_expected(what);
    if (is_keyword(t.text))
      fail(t.loc, "'" + t.text + "' is a keyword and cannot be used as " + std::string(what));
    next();
    return Ident{t.text, t.loc};
  }
  // Any identifier, keywords included (dtype words, verdicts, element types).
  Ident word(const char* what) {
    const Token& t = peek();
    if (t.kind != TK::Ident) fail_expected(what);
    next();
    return Ident{t.text, t.loc};
  }
  std::vector<Ident> name_list(const char* what) {
    std::vector<Ident> v{name(what)};
    while (accept(",")) v.push_back(name(what));
    return v;
  }

  // ---- rules and items ----
  Rule rule() {
    Rule r;
    if (!is_word("rule")) fail_expected("'rule'");
    r.loc = next().loc;
    r.name = name("a rule name");
    if (peek().kind == TK::String) r.title = next().text;
    expect(":");
    r.dtypes.push_back(word("a dtype set (any, num, or a list of bool, int, real)"));
    while (accept(",")) r.dtypes.push_back(word("a dtype (bool, int, real)"));
    expect("{");
    while (!is_punct("}")) {
      if (peek().kind == TK::End) fail(peek().loc, "unexpected end of file inside rule '" + r.name.name + "' (missing '}')");
      r.items.push_back(item());
    }
    next();
    return r;
  }

  Item item() {
    const Token& kw = peek();
    if (kw.kind != TK::Ident) fail_expected("a rule item (rclass, map, tensor, scalar, let, pre, assume, match, expect, lhs, rhs)");
    Item it;
    it.loc = kw.loc;
    const std::string w = kw.text;
    if (w == "rclass") {
      next();
      it.kind = ItemKind::RClass;
      it.names = name_list("an rclass name");
      if (is_word("single")) {
        next();
        it.single = true;
      }
    } else if (w == "map") {
      next();
      it.kind = ItemKind::Map;
      it.names = name_list("a map name");
      expect(":");
      it.rclass = name("an rclass name");
      if (is_punct(">=")) {
        next();
        if (peek().kind != TK::Int || peek().ival != 0) fail_expected("'0' (the only bound a map declaration takes is '>= 0')");
        next();
        it.nonneg = true;
      } else if (is_punct("=")) {
        next();
        if (it.names.size() != 1) fail(it.names[1].loc, "a derived map ('= EXPR') declares exactly one name");
        it.expr = expr();
      }
    } else if (w == "tensor") {
      next();
      it.kind = ItemKind::Tensor;
      it.names = name_list("a tensor name");
      expect(":");
      if (peek().kind == TK::Ident) it.etype = word("an element type");
      if (!is_punct("{")) fail_expected("a shape '{R: size, ...}'");
      it.expr = braces();
    } else if (w == "scalar") {
      next();
      it.kind = ItemKind::Scalar;
      it.names = name_list("a scalar name");
      if (accept(":")) it.etype = word("an element type (bool, int, real, T)");
    } else if (w == "let") {
      next();
      it.kind = ItemKind::Let;
      it.names.push_back(name("a name"));
      expect("=");
      it.expr = expr();
    } else if (w == "pre" || w == "assume" || w == "lhs" || w == "rhs") {
      next();
      it.kind = w == "pre" ? ItemKind::Pre : w == "assume" ? ItemKind::Assume : w == "lhs" ? ItemKind::Lhs : ItemKind::Rhs;
      it.expr = expr();
    } else if (w == "match") {
      next();
      it.kind = ItemKind::Match;
      do {
        Ident a = name("a summation-index map");
        expect("==");
        Ident b = name("a summation-index map");
        it.pairs.emplace_back(a, b);
      } while (accept(","));
    } else if (w == "expect") {
      next();
      it.kind = ItemKind::Expect;
      it.verdict = word("a verdict");
    } else {
      fail(kw.loc, "expected a rule item (rclass, map, tensor, scalar, let, pre, assume, match, expect, lhs, rhs), found " + describe(kw));
    }
    return it;
  }

  // ---- expressions ----
  // The nesting limit (syntax.h, kMaxNesting) bounds both the depth of the tree (measured as each
  // node is built) and the parser's own recursion (parentheses and unary operators, which add no
  // level when they only wrap, e.g. `((A))`).
  [[noreturn]] void too_deep(const SourceLoc& loc) const {
    fail(loc, "expression nesting deeper than " + std::to_string(kMaxNesting) +
                  " levels (each operator, call, brace literal and parenthesis is one level)");
  }
  struct Nest {
    Parser& p;
    explicit Nest(Parser& parser) : p(parser) {
      if (++p.nesting_ > kMaxNesting) p.too_deep(p.peek().loc);
    }
    ~Nest() { --p.nesting_; }
    Nest(const Nest&) = delete;
    Nest& operator=(const Nest&) = delete;
  };
  // Sets e's depth from its children; a tree deeper than the limit is an error at e.
  ExprP measured(std::shared_ptr<Expr> e) const {
    int d = 0;
    for (const auto& a : e->args) d = std::max(d, a->depth);
    for (const auto& na : e->named) d = std::max(d, na.value->depth);
    for (const auto& be : e->entries)
      if (be.value) d = std::max(d, be.value->depth);
    e->depth = d + 1;
    if (e->depth > kMaxNesting) too_deep(e->loc);
    return e;
  }
  ExprP binary(const Token& op, ExprP a, ExprP b) const {
    auto e = std::make_shared<Expr>();
    e->kind = EK::Binary;
    e->loc = op.loc;
    e->text = op.text;
    e->args = {std::move(a), std::move(b)};
    return measured(std::move(e));
  }

  ExprP expr() {
    Nest nest(*this);
    return or_expr();
  }
  ExprP or_expr() {
    ExprP e = and_expr();
    while (is_punct("||")) {
      const Token& op = next();
      e = binary(op, e, and_expr());
    }
    return e;
  }
  ExprP and_expr() {
    ExprP e = cmp_expr();
    while (is_punct("&&")) {
      const Token& op = next();
      e = binary(op, e, cmp_expr());
    }
    return e;
  }
  bool at_cmp() const {
    for (const char* p : {"==", "!=", "<", "<=", ">", ">="})
      if (is_punct(p)) return true;
    return false;
  }
  ExprP cmp_expr() {
    ExprP e = add_expr();
    if (at_cmp()) {
      const Token& op = next();
      e = binary(op, e, add_expr());
      if (at_cmp()) fail(peek().loc, "comparisons do not chain; use '&&' or parentheses");
    }
    return e;
  }
  ExprP add_expr() {
    ExprP e = mul_expr();
    while (is_punct("+") || is_punct("-")) {
      const Token& op = next();
      e = binary(op, e, mul_expr());
    }
    return e;
  }
  ExprP mul_expr() {
    ExprP e = unary_expr();
    while (is_punct("*") || is_punct("/") || is_punct("%") || is_word("div") || is_word("mod")) {
      const Token& op = next();
      e = binary(op, e, unary_expr());
    }
    return e;
  }
  ExprP unary_expr() {
    if (is_punct("-") || is_punct("!")) {
      Nest nest(*this);
      const Token& op = next();
      auto e = std::make_shared<Expr>();
      e->kind = EK::Unary;
      e->loc = op.loc;
      e->text = op.text;
      e->args = {unary_expr()};
      return measured(std::move(e));
    }
    return primary();
  }

  KeyRef key_ref() {
    Ident r = name("an rclass name");
    KeyRef k{r.name, "", r.loc};
    if (accept("@")) k.label = name("a label").name;
    return k;
  }

  ExprP braces() {
    auto e = std::make_shared<Expr>();
    e->kind = EK::Braces;
    e->loc = expect("{").loc;
    if (!is_punct("}")) {
      do {
        BraceEntry be;
        be.key = key_ref();
        if (accept(":")) {
          // A trailing `@label` after a brace value labels the key (`{R: s @b}`), not the value.
          bool saved = in_brace_value_;
          in_brace_value_ = true;
          be.value = expr();
          in_brace_value_ = saved;
          if (is_punct("@")) {
            const Token& at = next();
            Ident lbl = name("a label");
            if (!be.key.label.empty()) fail(at.loc, "axis '" + be.key.str() + "' is already labelled");
            be.key.label = lbl.name;
          }
        } else if (accept("->")) {
          be.to = key_ref();
        }
        e->entries.push_back(std::move(be));
      } while (accept(","));
    }
    expect("}");
    return measured(std::move(e));
  }

  ExprP primary() {
    const Token& t = peek();
    auto e = std::make_shared<Expr>();
    e->loc = t.loc;
    switch (t.kind) {
      case TK::Int:
        next();
        e->kind = EK::Int;
        e->ival = t.ival;
        e->text = t.text;
        return e;
      case TK::Decimal:
        next();
        e->kind = EK::Decimal;
        e->text = t.text;
        return e;
      case TK::Punct:
        if (t.text == "(") {
          next();
          ExprP inner = expr();
          expect(")");
          return inner;
        }
        if (t.text == "{") return braces();
        fail_expected("an expression");
      case TK::Ident: {
        const std::string w = t.text;
        if (is_punct("(", 1)) {
          if (!is_keyword(w)) fail(t.loc, "'" + w + "' is not a function");
          if (!is_function_keyword(w)) fail(t.loc, "keyword '" + w + "' cannot be used here");
          next();
          next();
          e->kind = EK::Call;
          e->text = w;
          if (!is_punct(")")) {
            do {
              if (peek().kind == TK::Ident && is_punct("=", 1)) {
                const Token& n = next();
                next();
                NamedArg na{n.text, n.loc, expr()};
                for (const auto& prev : e->named)
                  if (prev.name == na.name) fail(na.loc, "attribute '" + na.name + "' given twice");
                e->named.push_back(std::move(na));
              } else {
                if (!e->named.empty()) fail(peek().loc, "positional argument after a named attribute");
                e->args.push_back(expr());
              }
            } while (accept(","));
          }
          expect(")");
          return measured(std::move(e));
        }
        if (is_keyword(w) && w != "inf" && w != "nan" && w != "true" && w != "false") {
          if (is_function_keyword(w)) fail(t.loc, "'" + w + "' needs arguments in parentheses");
          fail(t.loc, "keyword '" + w + "' cannot be used here");
        }
        next();
        e->kind = EK::Name;
        e->text = w;
        if (!in_brace_value_ && is_punct("@") && peek(1).kind == TK::Ident) {
          next();
          e->label = name("a label").name;
        }
        return e;
      }
      case TK::String: fail(t.loc, "unexpected string");
      case TK::End: fail_expected("an expression");
    }
    fail_expected("an expression");
  }

  std::vector<Token> t_;
  const std::string* source_;
  size_t p_ = 0;
  int nesting_ = 0;
  bool in_brace_value_ = false;
};

}  // namespace

bool is_keyword(const std::string& word) { return keywords().count(word) > 0; }

File parse(const std::string& text, const std::string& path) {
  File f;
  f.path = path;
  f.source = std::make_shared<const std::string>(text);
  Lexer lx(*f.source, path, f.source.get());
  Parser ps(lx.run(), f.source.get());
  f.rules = ps.file();
  return f;
}

File parse_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  // Locations name the file as it can be printed (a path need not be UTF-8).
  const std::string shown = escape_text(path);
  if (!in) throw Error("cannot read rule file '" + shown + "'", SourceLoc{shown, 0, 0});
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse(ss.str(), shown);
}

}  // namespace tr::syntax
