#pragma once
// The syntax tree of the trverify rule language, its parser and its printer.
//
// The parser is purely syntactic: it knows the grammar (items, expressions, brace literals,
// precedence) but not what names mean. Tensor expressions, index expressions (sizes, operator
// attributes) and conditions share one expression tree (Expr); the checker (libtensorright/check)
// decides from the context which language an expression is in and reports misuse.
//
// print_file/print_rule produce canonical source text that parses back to the same tree
// (parse -> print -> parse -> print is a fixpoint).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "libtensorright/check/error.h"
#include "libtensorright/check/ir.h"

namespace tr::syntax {

// A located diagnostic; render() gives "FILE:LINE:COL: error: MESSAGE" + source line + caret.
struct Diagnostic {
  SourceLoc loc;
  std::string message;
  std::string render(const std::string& source) const { return render_diagnostic(loc, message, source); }
};

// A reference to an aggregated axis: `R` or `R@label`.
struct KeyRef {
  std::string rclass;
  std::string label;  // empty: the unlabelled copy
  SourceLoc loc;
  std::string str() const { return label.empty() ? rclass : rclass + "@" + label; }
};

struct Expr;
using ExprP = std::shared_ptr<const Expr>;

// Number literals are exact and of any size up to this many digits (a longer one is a located
// parse error rather than a slow or huge computation).
constexpr size_t kMaxNumberDigits = 10000;

// One entry of a brace literal. The forms are
//   {R: e}        key with a value (shapes, attribute maps); `{R: e @b}` is the same as `{R@b: e}`
//   {R, S@b}      bare keys (reverse, batch, degenerate remove, ...)
//   {R@a -> R@b}  key renaming (relabel)
struct BraceEntry {
  KeyRef key;
  ExprP value;                // null for bare keys and renamings
  std::optional<KeyRef> to;   // renaming target
};

struct NamedArg {
  std::string name;
  SourceLoc loc;
  ExprP value;
};

enum class EK {
  Name,     // text = identifier (keywords `inf`, `true`, `false` are Name too); label for `R@b`
  Int,      // ival, exact (non-negative; unary minus is a Unary node)
  Decimal,  // text = the literal as written (digits '.' digits)
  Unary,    // text = "-" or "!"; args[0]
  Binary,   // text = "||" "&&" "==" "!=" "<" "<=" ">" ">=" "+" "-" "*" "/" "%" "div" "mod"
  Call,     // text = function name; args = positional; named = `name=value` attributes
  Braces,   // entries
};

struct Expr {
  EK kind = EK::Name;
  SourceLoc loc;          // first token (for Binary: the operator token)
  int depth = 1;          // levels of this tree (a leaf: 1); never above kMaxNesting
  std::string text;
  std::string label;      // Name: `R@label`
  mpz_class ival = 0;     // Int: the literal's value, of any size (at most kMaxNumberDigits digits)
  std::vector<ExprP> args;
  std::vector<NamedArg> named;
  std::vector<BraceEntry> entries;
};

struct Ident {
  std::string name;
  SourceLoc loc;
};

enum class ItemKind { RClass, Map, Tensor, Scalar, Let, Pre, Assume, Match, Expect, Lhs, Rhs };

struct Item {
  ItemKind kind = ItemKind::Pre;
  SourceLoc loc;                  // the keyword
  std::vector<Ident> names;       // RClass / Map / Tensor / Scalar: declared names; Let: one name
  bool single = false;            // RClass `single`
  Ident rclass;                   // Map: `: R`
  bool nonneg = false;            // Map: `>= 0`
  ExprP expr;                     // Map `= EXPR`; Let; Pre; Assume; Lhs; Rhs; Tensor: the shape (Braces)
  std::optional<Ident> etype;     // Tensor / Scalar: `bool`, `int`, `real` or `T` when written
  std::vector<std::pair<Ident, Ident>> pairs;  // Match: `i == j, ...`
  Ident verdict;                  // Expect
};

struct Rule {
  Ident name;
  std::optional<std::string> title;
  std::vector<Ident> dtypes;      // as written: `any`, `num`, or a list of bool/int/real
  std::vector<Item> items;
  SourceLoc loc;                  // the `rule` keyword
};

struct File {
  std::string path;
  std::shared_ptr<const std::string> source;  // the text, for rendering diagnostics
  std::vector<Rule> rules;
};

// The deepest expression the parser accepts: the depth of the tree (a name or literal is one level,
// each operator, call and brace literal one more, so a chain `a + b + ...` of n terms is n levels
// deep) and the nesting of parentheses and unary operators. Deeper input is a located error
// "expression nesting deeper than N", as clang's -fbracket-depth; every later stage relies on this
// bound (and the checker's bound on the checked tree, which counts the lets an expression uses)
// for its recursion.
constexpr int kMaxNesting = 1000;

// Parses a whole file. Throws tr::Error (rendered with source line and caret) on the first error.
// The text must be UTF-8 without control characters other than tab, line feed and carriage return
// (anywhere, comments included); the first offending byte is a located error.
File parse(const std::string& text, const std::string& path);
// Reads the file; an unreadable file is a tr::Error. Locations (and File::path) name the file by
// escape_text(path), so that every diagnostic and report is valid UTF-8 whatever the path's bytes.
File parse_file(const std::string& path);

// Keywords may not be used as names.
bool is_keyword(const std::string& word);

// Canonical source text.
std::string print_expr(const Expr&);
std::string print_rule(const Rule&);
std::string print_file(const File&);  // rules separated by blank lines

}  // namespace tr::syntax
