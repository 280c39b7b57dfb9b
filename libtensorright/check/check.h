#pragma once
// The checker: syntax tree -> checked IR (ir.h). It resolves names, type-checks at the aggregated
// level (key sets, labels, element types, maps on the right rclass, attribute domains), fills
// operator defaults, computes output shapes, inlines `let`, and turns declaration facts
// (non-negative and derived maps) into Rule::pre. Every error is a tr::Error located at the
// offending token and rendered with the source line and a caret.
#include <optional>
#include <string>
#include <vector>

#include "libtensorright/check/error.h"
#include "libtensorright/check/ir.h"

namespace tr {

namespace syntax {
struct File;
}

// A rule left out under CheckOptions::machine, and why (its checker error at those types, or no
// type of the list replacing its dtypes).
struct SkippedRule {
  std::string name;
  SourceLoc loc;
  std::string reason;
};

struct LoadedFile {
  std::string path;
  std::vector<Rule> rules;
  std::vector<SkippedRule> skipped;
};

struct CheckOptions {
  // `trverify --dtypes`: check every rule at machine types instead of its mathematical ones. Its
  // `int` is replaced by the integer types of this list, `real` by the float types, `bool` stays
  // (XLA's pred). A rule with no type left, or that does not type-check at the new types, is
  // skipped (LoadedFile::skipped) rather than failing its file.
  std::optional<std::vector<DType>> machine;
};

// Parse + check. Throw tr::Error on the first parse or type error (under CheckOptions::machine,
// on the first parse error or duplicate rule name).
LoadedFile load_rule_file(const std::string& path, const CheckOptions& opts = {});
LoadedFile load_rule_source(const std::string& text, const std::string& name, const CheckOptions& opts = {});
LoadedFile check_file(const syntax::File& file, const CheckOptions& opts = {});

// Readable renderings of checked IR, in the rule language's notation (map, scalar, tensor and
// rclass names from the rule). For reports and debugging; dump_rule is deterministic and shows
// every field, so two rules with equal dumps are equal.
std::string print_iexpr(const Rule& rule, const IExpr& e);
std::string print_key(const Rule& rule, const AxisKey& k);
std::string print_node(const Rule& rule, const Node& n);
std::string dump_rule(const Rule& rule);

}  // namespace tr
