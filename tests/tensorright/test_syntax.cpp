// Front end, syntax level: lexing, parsing, precedence, diagnostics, printer round trip.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "support.h"
#include "libtensorright/check/check.h"
#include "libtensorright/syntax/syntax.h"

TEST_SUITE_BEGIN("unit");

using namespace tr;
namespace fs = std::filesystem;

namespace {

std::string parse_error(const std::string& src) {
  try {
    syntax::parse(src, "t.tr");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Wraps items in a minimal rule header.
std::string rule_with(const std::string& items) { return "rule r : num {\n" + items + "\n}\n"; }

const syntax::Expr& lhs_of(const syntax::File& f, size_t rule = 0) {
  for (const auto& it : f.rules.at(rule).items)
    if (it.kind == syntax::ItemKind::Lhs) return *it.expr;
  throw std::runtime_error("no lhs");
}

std::string lhs_text(const std::string& expr) {
  auto f = syntax::parse(rule_with("lhs " + expr), "t.tr");
  return syntax::print_expr(lhs_of(f));
}

// Fully parenthesised rendering, to observe the tree shape.
std::string tree(const syntax::Expr& e) {
  switch (e.kind) {
    case syntax::EK::Binary: {
      std::string s(1, '(');
      s += tree(*e.args[0]);
      s += ' ';
      s += e.text;
      s += ' ';
      s += tree(*e.args[1]);
      return s + ')';
    }
    case syntax::EK::Unary: {
      std::string s(1, '(');
      s += e.text;
      s += tree(*e.args[0]);
      return s + ')';
    }
    default: return syntax::print_expr(e);
  }
}
std::string tree_of(const std::string& expr) {
  auto f = syntax::parse(rule_with("lhs " + expr), "t.tr");
  return tree(lhs_of(f));
}

std::vector<fs::path> tr_files(const fs::path& dir) {
  std::vector<fs::path> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".tr") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("syntax: rule header, title, dtypes, items") {
  auto f = syntax::parse(
      "# comment\n"
      "rule add_assoc \"Add(A, \\\"c\\\")\" : int, real {  # trailing comment\n"
      "  rclass R, S single\n"
      "  map s, t' : R\n"
      "  map n : R >= 0\n"
      "  map d : R = s + 1\n"
      "  tensor A, B : bool {R: s, R: t' @b}\n"
      "  scalar c, k : int\n"
      "  let x = A\n"
      "  pre s >= 0\n"
      "  assume A\n"
      "  match i == j, i2 == j2\n"
      "  lhs x\n"
      "  rhs B\n"
      "  expect proved\n"
      "}\n"
      "rule second : any { lhs A rhs A }\n",
      "t.tr");
  REQUIRE(f.rules.size() == 2);
  const auto& r = f.rules[0];
  CHECK(r.name.name == "add_assoc");
  CHECK(r.title.value() == "Add(A, \"c\")");
  REQUIRE(r.dtypes.size() == 2);
  CHECK(r.dtypes[1].name == "real");
  CHECK(r.loc.line == 2);
  CHECK(r.loc.col == 1);
  REQUIRE(r.items.size() == 13);
  CHECK(r.items[0].kind == syntax::ItemKind::RClass);
  CHECK(r.items[0].single);
  CHECK(r.items[0].names.size() == 2);
  CHECK(r.items[1].names[1].name == "t'");
  CHECK(r.items[2].nonneg);
  CHECK(r.items[3].expr != nullptr);
  const auto& tens = r.items[4];
  CHECK(tens.etype->name == "bool");
  REQUIRE(tens.expr->entries.size() == 2);
  CHECK(tens.expr->entries[1].key.label == "b");
  CHECK(tens.expr->entries[1].key.rclass == "R");
  CHECK(syntax::print_expr(*tens.expr->entries[1].value) == "t'");
  CHECK(r.items[5].etype->name == "int");
  CHECK(r.items[9].pairs.size() == 2);
  CHECK(r.items[9].pairs[1].second.name == "j2");
  CHECK(r.items[11].kind == syntax::ItemKind::Rhs);
  CHECK(r.items[12].verdict.name == "proved");
  CHECK(f.rules[1].items.size() == 2);
  CHECK_FALSE(f.rules[1].title.has_value());
}

TEST_CASE("syntax: operator precedence and associativity") {
  CHECK(tree_of("A || B && C") == "(A || (B && C))");
  CHECK(tree_of("A && B || C") == "((A && B) || C)");
  CHECK(tree_of("A == B && C < D") == "((A == B) && (C < D))");
  CHECK(tree_of("A + B < C * D") == "((A + B) < (C * D))");
  CHECK(tree_of("A - B - C") == "((A - B) - C)");
  CHECK(tree_of("A - (B - C)") == "(A - (B - C))");
  CHECK(tree_of("A + B * C") == "(A + (B * C))");
  CHECK(tree_of("A * B / C % D") == "(((A * B) / C) % D)");
  CHECK(tree_of("-A * B") == "((-A) * B)");
  CHECK(tree_of("!A && B") == "((!A) && B)");
  CHECK(tree_of("- -A") == "(-(-A))");
  CHECK(tree_of("a div 2 mod 3 + 1") == "(((a div 2) mod 3) + 1)");
  CHECK(tree_of("A * -inf") == "(A * (-inf))");
  CHECK(tree_of("(A || B) && C") == "((A || B) && C)");
}

TEST_CASE("syntax: calls, attributes and brace literals") {
  auto f = syntax::parse(rule_with("lhs slice(A, start={R: lo + 1, S@b: 0}, stride={R: 2 @c})"), "t.tr");
  const auto& e = lhs_of(f);
  REQUIRE(e.kind == syntax::EK::Call);
  CHECK(e.text == "slice");
  REQUIRE(e.args.size() == 1);
  REQUIRE(e.named.size() == 2);
  CHECK(e.named[0].name == "start");
  const auto& st = *e.named[0].value;
  REQUIRE(st.entries.size() == 2);
  CHECK(st.entries[1].key.str() == "S@b");
  CHECK(syntax::print_expr(*st.entries[0].value) == "lo + 1");
  // A trailing label belongs to the key, not to the value.
  CHECK(e.named[1].value->entries[0].key.str() == "R@c");
  CHECK(lhs_text("relabel(A, {R@a -> R, S -> S@x})") == "relabel(A, {R@a -> R, S -> S@x})");
  CHECK(lhs_text("reverse(A, {R, S@b})") == "reverse(A, {R, S@b})");
  CHECK(lhs_text("concat(A, B, C, axis=K@b)") == "concat(A, B, C, axis=K@b)");
  CHECK(lhs_text("iota({R: s, K: 1}, K)") == "iota({R: s, K: 1}, K)");
  CHECK(lhs_text("const(-inf, {})") == "const(-inf, {})");
  CHECK(lhs_text("A + 0.25 * 1.0") == "A + 0.25 * 1.0");
}

TEST_CASE("syntax: printer parenthesises only where needed and round-trips") {
  CHECK(lhs_text("((A + B)) + (C)") == "A + B + C");
  CHECK(lhs_text("A + (B + C)") == "A + (B + C)");
  CHECK(lhs_text("(A < B) == C") == "(A < B) == C");
  CHECK(lhs_text("-(A + B)") == "-(A + B)");
  CHECK(lhs_text("!(A && B) || C") == "!(A && B) || C");
  CHECK(lhs_text("A - -1") == "A - -1");
  CHECK(lhs_text("(A * B) % (C / D)") == "A * B % (C / D)");
}

TEST_CASE("syntax: print/parse fixpoint on the front-end test files") {
  auto files = tr_files(fs::path(TRSPLAT_SOURCE_DIR) / "tests/tensorright/data/frontend");
  REQUIRE(!files.empty());
  for (const auto& p : files) {
    if (p.filename().string().rfind("bad_", 0) == 0) continue;
    CAPTURE(p.string());
    auto f1 = syntax::parse_file(p.string());
    std::string t1 = syntax::print_file(f1);
    auto f2 = syntax::parse(t1, "printed.tr");
    std::string t2 = syntax::print_file(f2);
    CHECK(t1 == t2);
    // And the printed text checks to the same IR.
    auto l1 = check_file(f1);
    auto l2 = check_file(f2);
    REQUIRE(l1.rules.size() == l2.rules.size());
    for (size_t i = 0; i < l1.rules.size(); ++i) CHECK(dump_rule(l1.rules[i]) == dump_rule(l2.rules[i]));
  }
}

TEST_CASE("syntax: print/parse fixpoint on every rule file in rules/" * doctest::test_suite("corpus")) {
  // The corpus is written by others; every file that loads must round-trip exactly.
  for (const auto& p : tr_files(fs::path(TRSPLAT_SOURCE_DIR) / "rules")) {
    CAPTURE(p.string());
    syntax::File f1;
    try {
      f1 = syntax::parse_file(p.string());
    } catch (const Error&) {
      continue;  // files that do not parse are reported by their own tests
    }
    std::string t1 = syntax::print_file(f1);
    auto f2 = syntax::parse(t1, "printed.tr");
    CHECK(syntax::print_file(f2) == t1);
    try {
      auto l1 = check_file(f1);
      auto l2 = check_file(f2);
      REQUIRE(l1.rules.size() == l2.rules.size());
      for (size_t i = 0; i < l1.rules.size(); ++i) CHECK(dump_rule(l1.rules[i]) == dump_rule(l2.rules[i]));
    } catch (const Error&) {
    }
  }
}

TEST_CASE("syntax: diagnostics have FILE:LINE:COL, the source line and a caret") {
  std::string err = parse_error("rule r : num {\n  lhs A +\n}\n");
  CHECK(err == "t.tr:3:1: error: expected an expression, found '}'\n}\n^");
  err = parse_error("rule r : num {\n\tlhs  A $ B\n}\n");
  CHECK(err == "t.tr:2:9: error: unexpected character '$'\n\tlhs  A $ B\n\t       ^");
}

TEST_CASE("syntax: catalogue of parse errors") {
  struct Case {
    std::string src, first_line;
  };
  const Case cases[] = {
      {"rule r : num {\n  tensor map : {R: s}\n}", "t.tr:2:10: error: 'map' is a keyword and cannot be used as a tensor name"},
      {"rule r : num {\n  lhs A < B < C\n}", "t.tr:2:13: error: comparisons do not chain; use '&&' or parentheses"},
      {"rule r : num {\n  lhs foo(A)\n}", "t.tr:2:7: error: 'foo' is not a function"},
      {"rule r : num {\n  lhs A & B\n}", "t.tr:2:9: error: unexpected character '&' (did you mean '&&'?)"},
      {"rule r : num {\n  map m : R >= 1\n}", "t.tr:2:16: error: expected '0' (the only bound a map declaration takes is '>= 0'), found '1'"},
      {"rule r \"abc : num {}", "t.tr:1:8: error: unterminated string"},
      {"rule r : num {\n  lhs A\n", "t.tr:3:1: error: unexpected end of file inside rule 'r' (missing '}')"},
      {"rule r : num {\n  frob A\n}", "t.tr:2:3: error: expected a rule item (rclass, map, tensor, scalar, let, pre, assume, match, expect, lhs, rhs), found 'frob'"},
      {"rule r : num {\n  lhs slice(A, start={R: 1}, A)\n}", "t.tr:2:30: error: positional argument after a named attribute"},
      {"rule r : num {\n  lhs slice(A, end={R: 1}, end={R: 2})\n}", "t.tr:2:28: error: attribute 'end' given twice"},
      {"rule r : num {\n  lhs sum\n}", "t.tr:2:7: error: 'sum' needs arguments in parentheses"},
      {"rule r : num {\n  lhs " + std::string(10001, '9') + "\n}", "t.tr:2:7: error: number literal has more than 10000 digits"},
      {"rule r : num {\n  lhs 1." + std::string(10000, '5') + "\n}", "t.tr:2:7: error: number literal has more than 10000 digits"},
      {"rule r : num {\n  tensor A : {R: s @a @b}\n}", "t.tr:2:23: error: expected '}', found '@'"},
      {"rule r : num {\n  tensor A : {R@a: s @b}\n}", "t.tr:2:22: error: axis 'R@a' is already labelled"},
      {"rule 3 : num {}", "t.tr:1:6: error: expected a rule name, found '3'"},
      {"rule r : num {\n  lhs lhs\n}", "t.tr:2:7: error: keyword 'lhs' cannot be used here"},
      {"rule r : num {\n  map a, b : R = 1\n}", "t.tr:2:10: error: a derived map ('= EXPR') declares exactly one name"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.src);
    std::string err = parse_error(c.src);
    REQUIRE(!err.empty());
    CHECK(err.substr(0, err.find('\n')) == c.first_line);
    // Second line is the source line, third the caret under the column.
    trtest::check_diagnostic_layout(err, c.src);
  }
}

TEST_CASE("syntax: unreadable file is an error naming the file") {
  try {
    syntax::parse_file("/nonexistent/x.tr");
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) == "/nonexistent/x.tr: error: cannot read rule file '/nonexistent/x.tr'");
  }
}

// ---- hostile text: encoding, control characters, nesting, long lines ------------------------------

TEST_CASE("syntax: invalid UTF-8 anywhere is a located error naming the byte and its offset") {
  struct Case {
    std::string src, first_line;
  };
  const Case cases[] = {
      {"rule r \"caf\xe9\" : num {}", "t.tr:1:12: error: invalid UTF-8 byte 0xe9 at byte offset 11 (rule files must be UTF-8 text)"},
      {"rule r : num {\n  tensor A\xff : {R: s}\n}", "t.tr:2:11: error: invalid UTF-8 byte 0xff at byte offset 25 (rule files must be UTF-8 text)"},
      {"# \xc0\xaf over-long slash\nrule r : num {}", "t.tr:1:3: error: invalid UTF-8 byte 0xc0 at byte offset 2 (rule files must be UTF-8 text)"},
      {"# surrogate \xed\xa0\x80\n", "t.tr:1:13: error: invalid UTF-8 byte 0xed at byte offset 12 (rule files must be UTF-8 text)"},
      {"# truncated \xe2\x82", "t.tr:1:13: error: invalid UTF-8 byte 0xe2 at byte offset 12 (rule files must be UTF-8 text)"},
      {"# above U+10FFFF \xf4\x90\x80\x80\n", "t.tr:1:18: error: invalid UTF-8 byte 0xf4 at byte offset 17 (rule files must be UTF-8 text)"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.src);
    std::string err = parse_error(c.src);
    CHECK(err.substr(0, err.find('\n')) == c.first_line);
  }
  // Valid UTF-8 is accepted in titles and comments, and kept as written.
  auto f = syntax::parse("# λ ∑ 😀\nrule r \"A ⇒ B (café)\" : num {}", "t.tr");
  CHECK(f.rules.at(0).title == "A ⇒ B (café)");
  // Outside strings and comments a non-ASCII character is unexpected, and named whole.
  CHECK(parse_error("rule r : num {\n  lhs A ⇒ B\n}").rfind("t.tr:2:9: error: unexpected character '⇒'", 0) == 0);
}

TEST_CASE("syntax: control characters are errors, shown escaped; a NUL does not cut the message") {
  std::string src = std::string("rule r : num {\n  lhs A +") + '\0' + " B\n}\n";
  std::string err = parse_error(src);
  CHECK(err.find('\0') == std::string::npos);
  CHECK(err == "t.tr:2:10: error: control character \\x00 at byte offset 24 (rule files are text: only tab, line feed "
               "and carriage return are allowed)\n  lhs A +\\x00 B\n         ^");
  std::string in_comment = std::string("# a NUL ") + '\0' + "\nrule r : num {}";
  CHECK(parse_error(in_comment).rfind("t.tr:1:9: error: control character \\x00 at byte offset 8", 0) == 0);
  CHECK(parse_error("rule r : num {\x1b[31m}").rfind("t.tr:1:15: error: control character \\x1b", 0) == 0);
  // Tabs and CRLF line ends are text.
  CHECK_NOTHROW(syntax::parse("rule r : num {\r\n\tlhs A\r\n}\r\n", "t.tr"));
}

TEST_CASE("syntax: a diagnostic on a long line shows a window around the column, caret in place") {
  std::string pad(40000, ' ');
  std::string src = "rule r : num {\n  lhs A" + pad + "+ + B\n}\n";
  std::string err = parse_error(src);
  std::istringstream is(err);
  std::string l1, l2, l3;
  std::getline(is, l1);
  std::getline(is, l2);
  std::getline(is, l3);
  CHECK(l1 == "t.tr:2:40010: error: expected an expression, found '+'");
  CHECK(l2.size() < 200);
  CHECK(l2.rfind("...", 0) == 0);
  REQUIRE(l3.size() == l3.find('^') + 1);
  CHECK(l2.substr(l3.size() - 1, 3) == "+ B");  // the caret is under the offending '+'
  // The window is cut at character boundaries, and escaped bytes keep the caret aligned.
  std::string wide;
  for (int i = 0; i < 200; ++i) wide += "λ";
  CHECK(render_diagnostic(SourceLoc{"t.tr", 1, 201}, "m", wide + "\n").find("\xce\n") == std::string::npos);
  std::string shown = render_diagnostic(SourceLoc{"t.tr", 1, 3}, "m", std::string("a\xff") + "b");
  CHECK(shown == "t.tr:1:3: error: m\na\\xffb\n     ^");
  // A literal beyond the digit limit is reported without echoing it whole.
  std::string big(20000, '9');
  std::string big_err = parse_error("rule r : num {\n  lhs " + big + "\n}");
  CHECK(big_err.rfind("t.tr:2:7: error: number literal has more than 10000 digits", 0) == 0);
  CHECK(big_err.size() < 1000);
}

TEST_CASE("syntax: expression nesting is bounded, with a located error naming the limit") {
  const std::string limit = "expression nesting deeper than " + std::to_string(syntax::kMaxNesting) + " levels";
  const int n = 20000;  // far beyond the limit: each of these crashed the parser or a later stage
  const std::string forms[] = {
      std::string(n, '(') + "A" + std::string(n, ')'),
      std::string(n, '-') + "A",
      std::string(n, '!') + "A",
      [&] {
        std::string s = "A";
        for (int i = 0; i < n; ++i) s += " + A";
        return s;
      }(),
      [&] {
        std::string s;
        for (int i = 0; i < n; ++i) s += "abs(";
        return s + "A" + std::string(n, ')');
      }(),
      [&] {
        std::string s = "const(0, ";
        for (int i = 0; i < n; ++i) s += "{R: ";
        return s + "s" + std::string(n, '}') + ")";
      }(),
  };
  for (const auto& e : forms) {
    CAPTURE(e.substr(0, 20));
    std::string err = parse_error(rule_with("  lhs " + e));
    CHECK(err.find(limit) != std::string::npos);
    CHECK(err.rfind("t.tr:2:", 0) == 0);
  }
  // At the limit it parses: a chain of kMaxNesting terms is kMaxNesting levels deep.
  std::string chain = "A";
  for (int i = 1; i < syntax::kMaxNesting; ++i) chain += " + A";
  auto f = syntax::parse(rule_with("  lhs " + chain), "t.tr");
  CHECK(lhs_of(f).depth == syntax::kMaxNesting);
  CHECK(parse_error(rule_with("  lhs " + chain + " + A")).find(limit) != std::string::npos);
  std::string parens = std::string(syntax::kMaxNesting - 1, '(') + "A" + std::string(syntax::kMaxNesting - 1, ')');
  CHECK_NOTHROW(syntax::parse(rule_with("  lhs " + parens), "t.tr"));
}

TEST_SUITE_END();
