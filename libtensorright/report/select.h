#pragma once
// Which rules of a loaded batch a run verifies: --rule glob patterns and --shard K/N slices.
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "libtensorright/check/ir.h"

namespace tr::report {

using RuleList = std::vector<std::pair<std::string, Rule>>;  // (file, rule), in file-then-line order

// The rules whose names match at least one of the shell glob patterns (fnmatch(3): *, ?, [...]);
// every rule when there is no pattern. `unmatched` gets the patterns that matched no rule.
RuleList match_rules(RuleList rules, const std::vector<std::string>& patterns, std::vector<std::string>& unmatched);

// Whether `name` matches one of the patterns (or there are none), as match_rules selects.
bool glob_selected(const std::string& name, const std::vector<std::string>& patterns);

struct Shard {
  int k = 1, n = 1;  // the k-th (1-based) of n
};
// "K/N" with 1 <= K <= N (decimal integers); throws std::invalid_argument with a readable message.
Shard parse_shard(const std::string& text);

// The k-th of n disjoint slices: the rules at positions k-1, k-1+n, k-1+2n, ... of the batch's
// file-then-line order. Interleaving spreads the slow rules of one file over the shards; the n
// shards together hold every rule exactly once.
RuleList shard_rules(RuleList rules, const Shard& s);

}  // namespace tr::report
