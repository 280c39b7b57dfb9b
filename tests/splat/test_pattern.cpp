// Pattern parsing, validation (a catalogue of bad inputs) and the ground-truth semantics.
#include <doctest/doctest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "libsplat/pattern/pattern.h"

TEST_SUITE_BEGIN("unit");

using namespace splat;
using json = nlohmann::json;

namespace {

json base(json pattern) {
  return json{{"seq_len", 64}, {"head_dim", 16}, {"pattern", std::move(pattern)}};
}

// Parses and expects a splat::Error at `path` whose message contains `msg`.
void expect_error(const std::string& text, const std::string& path, const std::string& msg) {
  CAPTURE(text);
  try {
    parse_problem_text(text, "t", "bad.json");
    FAIL("no error for: " << text);
  } catch (const Error& e) {
    CHECK(e.json_path() == path);
    CHECK_MESSAGE(e.message().find(msg) != std::string::npos, e.what());
    CHECK(std::string(e.what()).find("bad.json") == 0);
  }
}

void expect_error(const json& doc, const std::string& path, const std::string& msg) {
  expect_error(doc.dump(), path, msg);
}

}  // namespace

TEST_CASE("problem: the spec example parses with its defaults") {
  const char* text = R"({
    "name": "longformer-4k", "seq_len": 4096, "head_dim": 64, "heads": 16, "batch": 1, "dtype": "bf16",
    "causal": false,
    "pattern": {"union": [{"window": {"left": 256, "right": 256}}, {"global": {"tokens": [0, 1, 2, 3, 4, 5, 6, 7]}}]}
  })";
  Problem p = parse_problem_text(text, "hint");
  CHECK(p.name == "longformer-4k");
  CHECK(p.seq_len == 4096);
  CHECK(p.kv_len == 4096);
  CHECK(p.dtype == DType::BF16);
  CHECK(p.heads == 16);
  CHECK(p.scale == doctest::Approx(0.125));
  CHECK(p.pattern.kind == TermKind::Union);
  REQUIRE(p.pattern.children.size() == 2);
  CHECK(p.pattern.children[0].kind == TermKind::Window);
  CHECK(p.pattern.children[0].left == 256);
  CHECK(p.pattern.children[1].tokens.size() == 8);
  CHECK(p.pattern.children[1].path == "pattern.union[1]");

  Problem d = parse_problem(base({{"strided", {{"stride", 4}}}}), "stem");
  CHECK(d.name == "stem");
  CHECK(d.kv_len == 64);
  CHECK(d.dtype == DType::FP32);
  CHECK(d.heads == 1);
  CHECK(d.batch == 1);
  CHECK_FALSE(d.causal);
  CHECK(d.pattern.offset == 0);
  CHECK(tensor_bytes(d) == 1 * 1 * (2 * 64 + 2 * 64) * 16 * 4);
}

TEST_CASE("problem: catalogue of bad inputs, each with its JSON path") {
  expect_error(json{{"seq_len", 64}, {"head_dim", 16}, {"pattern", {{"window", {{"left", 1}}}}}, {"colour", 1}},
               "colour", "unknown field");
  expect_error(base({{"window", {{"left", 1}, {"width", 3}}}}), "pattern.window.width", "unknown field");
  expect_error(json{{"seq_len", "4096"}, {"head_dim", 16}, {"pattern", {{"window", json::object()}}}}, "seq_len",
               "expected an integer in [1, 2147483647], got \"4096\"");
  expect_error(base({{"union", {{{"window", {{"left", 1}}}}, {{"window", {{"left", -3}}}}}}}),
               "pattern.union[1].window.left", "expected a non-negative integer, got -3");
  expect_error(base({{"strided", {{"stride", 0}}}}), "pattern.strided.stride", "expected a positive integer, got 0");
  expect_error(base({{"strided", {{"stride", 8}, {"offset", 8}}}}), "pattern.strided.offset", "[0, 8)");
  expect_error(base({{"global", {{"tokens", {0, 64}}}}}), "pattern.global.tokens[1]", "token position in [0, 64)");
  expect_error(base({{"union", json::array()}}), "pattern.union", "non-empty array");
  expect_error(base({{"intersect", json::array()}}), "pattern.intersect", "non-empty array");
  expect_error(json{{"seq_len", 2000000000}, {"head_dim", 128}, {"heads", 16}, {"pattern", {{"window", json::object()}}}},
               "seq_len", "too large");
  expect_error(base({{"sliding", {{"left", 1}}}}), "pattern.sliding", "unknown pattern term");
  expect_error(base({{"window", {{"left", 1}}}, {"blocked", {{"block", 2}}}}), "pattern", "exactly one key");
  expect_error(json{{"seq_len", 64}, {"head_dim", 16}}, "pattern", "missing");
  expect_error(json{{"head_dim", 16}, {"pattern", {{"window", json::object()}}}}, "seq_len", "missing");
  expect_error(json{{"seq_len", 0}, {"head_dim", 16}, {"pattern", {{"window", json::object()}}}}, "seq_len", "got 0");
  expect_error(json{{"seq_len", 64}, {"head_dim", 16}, {"dtype", "fp64"}, {"pattern", {{"window", json::object()}}}},
               "dtype", "expected one of");
  expect_error(json{{"seq_len", 64}, {"head_dim", 16}, {"causal", "yes"}, {"pattern", {{"window", json::object()}}}},
               "causal", "true or false");
  expect_error(json{{"seq_len", 64}, {"head_dim", 16}, {"scale", -1.0}, {"pattern", {{"window", json::object()}}}},
               "scale", "positive finite number");
  expect_error(base({{"window", {{"left", 2.5}}}}), "pattern.window.left", "got 2.5");
  expect_error(base({{"dilated", {{"left", 2}, {"right", 2}, {"dilation", 0}}}}), "pattern.dilated.dilation", "positive");
  expect_error(base({{"fixed", {{"block", 8}, {"summary", 9}}}}), "pattern.fixed.summary", "[0, block]");
  expect_error(base({{"blocked", {{"block", 0}}}}), "pattern.blocked.block", "positive");
  expect_error(base({{"random_blocks", {{"block", 16}, {"per_row", 5}}}}), "pattern.random_blocks.per_row",
               "[1, key blocks] = [1, 4]");
  expect_error(base({{"random_blocks", {{"block", 16}, {"per_row", 1}, {"seed", -1}}}}), "pattern.random_blocks.seed",
               "non-negative");
  expect_error(base({{"coo", {{1, 2}, {3, 64}}}}), "pattern.coo[1][1]", "column in [0, kv_len)");
  expect_error(base({{"coo", {{1, 2}, {3}}}}), "pattern.coo[1]", "pair");
  expect_error(base({{"affine", {{"slope", 1}}}}), "pattern.affine.count", "missing");
  expect_error(base({{"global", {{"tokens", json::array()}}}}), "pattern.global.tokens", "non-empty");
  expect_error(base({{"union", {{{"window", {{"left", 1}}}}, 3}}}), "pattern.union[1]", "pattern term");
  expect_error(json{{"seq_len", 64}, {"kv_len", -5}, {"head_dim", 16}, {"pattern", {{"window", json::object()}}}},
               "kv_len", "got -5");
}

TEST_CASE("problem: kv_heads (grouped-query attention) and q_offset (queries at later positions)") {
  json doc = base({{"window", {{"left", 3}, {"right", 0}}}});
  Problem d = parse_problem(doc, "t");
  CHECK(d.kv_heads == 1);
  CHECK(d.q_offset == 0);
  doc["heads"] = 32;
  CHECK(parse_problem(doc, "t").kv_heads == 32);  // default: heads
  doc["kv_heads"] = 8;
  doc["kv_len"] = 100;
  doc["q_offset"] = 36;
  Problem p = parse_problem(doc, "t");
  CHECK(p.kv_heads == 8);
  CHECK(p.q_offset == 36);
  // Q and O over 32 heads, K and V over 8.
  CHECK(tensor_bytes(p) == (2 * 32 * 64 + 2 * 8 * 100) * 16 * 4);
  // Row i sits at position i + 36: row 0 keeps keys 33..36, the last row (position 99) 96..99.
  CHECK(kept(p, 0, 36));
  CHECK(kept(p, 0, 33));
  CHECK_FALSE(kept(p, 0, 32));
  CHECK_FALSE(kept(p, 0, 37));
  CHECK(kept(p, 63, 99));
  CHECK_FALSE(kept(p, 64, 99));  // no row 64
  // causal cuts at the position, not at the row index.
  doc["pattern"] = {{"window", {{"left", 0}, {"right", 5}}}};
  doc["causal"] = true;
  Problem c = parse_problem(doc, "t");
  CHECK(kept(c, 0, 36));
  CHECK_FALSE(kept(c, 0, 37));
  // Rows of coo points are positions in [q_offset, q_offset + seq_len).
  doc["pattern"] = {{"coo", {{36, 4}, {99, 0}}}};
  Problem k = parse_problem(doc, "t");
  CHECK(kept(k, 0, 4));
  CHECK(kept(k, 63, 0));
  json early = doc;
  early["pattern"] = {{"coo", {{35, 4}, {99, 0}}}};
  expect_error(early, "pattern.coo[0][0]", "row position in [q_offset, q_offset + seq_len) = [36, 100)");
  // Tokens may name positions up to q_offset + seq_len.
  doc["kv_len"] = 50;
  doc["pattern"] = {{"global", {{"tokens", {99}}}}};
  CHECK(parse_problem(doc, "t").pattern.tokens == std::vector<int64_t>{99});
  doc["pattern"] = {{"global", {{"tokens", {100}}}}};
  expect_error(doc, "pattern.global.tokens[0]", "token position in [0, 100)");

  json bad = base({{"window", json::object()}});
  bad["heads"] = 8;
  bad["kv_heads"] = 3;
  expect_error(bad, "kv_heads", "expected a divisor of heads (8), got 3");
  bad["kv_heads"] = 16;
  expect_error(bad, "kv_heads", "divisor of heads (8)");
  bad["kv_heads"] = 0;
  expect_error(bad, "kv_heads", "got 0");
  bad["kv_heads"] = 2;
  bad["q_offset"] = -1;
  expect_error(bad, "q_offset", "expected an integer in [0, 2147483647], got -1");
}

TEST_CASE("problem: head_patterns (per-head patterns in head groups)") {
  const json w3 = {{"window", {{"left", 3}, {"right", 0}}}}, w9 = {{"window", {{"left", 9}, {"right", 0}}}};
  const json dil = {{"dilated", {{"left", 2}, {"right", 2}, {"dilation", 4}}}};
  json doc = base(w3);
  doc.erase("pattern");
  doc["heads"] = 6;
  doc["kv_heads"] = 3;
  doc["head_patterns"] = {w3, w9, w3, dil, w9, w3};  // one per head; equal JSON values share a group
  Problem p = parse_problem(doc, "hp");
  REQUIRE(p.head_groups.size() == 3);
  CHECK(p.head_groups[0].heads == std::vector<int64_t>{0, 2, 5});
  CHECK(p.head_groups[1].heads == std::vector<int64_t>{1, 4});
  CHECK(p.head_groups[2].heads == std::vector<int64_t>{3});
  CHECK(p.head_groups[2].pattern.kind == TermKind::Dilated);
  CHECK(p.head_groups[2].pattern.path == "head_patterns[3]");
  CHECK(head_group_of(p, 4) == 1);
  CHECK_THROWS_AS(head_group_of(p, 6), std::out_of_range);
  // The mask of each head is its own pattern's; kept without a head is refused.
  CHECK(kept(p, 0, 10, 7));
  CHECK_FALSE(kept(p, 0, 10, 6));
  CHECK(kept(p, 1, 10, 1));
  CHECK(kept(p, 3, 10, 2));
  CHECK_FALSE(kept(p, 3, 10, 9));
  CHECK_THROWS_AS((void)kept(p, 10, 7), std::logic_error);
  // A head group as a problem of its own: its pattern, its heads, a share of the work limit.
  const Problem g = head_group(p, 1);
  CHECK(g.name == "hp.h1");
  CHECK(g.head_groups.empty());
  CHECK(g.group_heads == std::vector<int64_t>{1, 4});
  CHECK(g.pattern.left == 9);
  CHECK(g.heads == 6);
  CHECK(g.limits.max_work == p.limits.max_work / 3);
  CHECK(served_heads(g) == 2);
  CHECK(served_heads(p) == 6);
  CHECK(kept(g, 10, 1));
  CHECK(head_group_problems(p).size() == 3);
  CHECK(head_group_problems(g).size() == 1);

  // One term per group of heads: 2 terms over 6 heads, heads 0-2 and 3-5.
  doc["head_patterns"] = {w9, dil};
  p = parse_problem(doc, "hp");
  REQUIRE(p.head_groups.size() == 2);
  CHECK(p.head_groups[1].heads == std::vector<int64_t>{3, 4, 5});
  // The same term everywhere is the plain pattern.
  doc["head_patterns"] = {w9, w9, w9};
  p = parse_problem(doc, "hp");
  CHECK(p.head_groups.empty());
  CHECK(p.pattern.left == 9);
  CHECK(kept(p, 10, 1));

  json bad = doc;
  bad["pattern"] = w3;
  expect_error(bad, "head_patterns", "give either \"pattern\" (every head) or \"head_patterns\" (one per head), not both");
  bad = doc;
  bad["head_patterns"] = {w3, w9, w3, w9};
  expect_error(bad, "head_patterns", "a number of terms dividing heads (6), got 4");
  bad["head_patterns"] = json::array();
  expect_error(bad, "head_patterns", "expected a non-empty array of pattern terms");
  bad["head_patterns"] = {w3, {{"window", {{"left", -1}}}}};
  expect_error(bad, "head_patterns[1].window.left", "got -1");
  bad.erase("head_patterns");
  expect_error(bad, "pattern", "missing (expected a pattern term, or \"head_patterns\")");
  // At most kMaxHeadGroups distinct patterns (a module each).
  bad["heads"] = 128;
  bad["kv_heads"] = 1;
  bad["head_patterns"] = json::array();
  for (int h = 0; h < 128; ++h) bad["head_patterns"].push_back({{"window", {{"left", h}, {"right", 0}}}});
  expect_error(bad, "head_patterns[64]", "more than 64 distinct patterns");
}

TEST_CASE("problem: varlen (a packed variable-length batch)") {
  json doc = base({{"window", {{"left", 3}, {"right", 1}}}});
  doc["heads"] = 4;
  doc["kv_heads"] = 2;
  doc["varlen"] = {{"max_total_tokens", 1000}, {"lengths", {64, 0, 1, 30}}};
  Problem p = parse_problem(doc, "t");
  REQUIRE(p.varlen);
  CHECK(p.varlen->max_total_tokens == 1000);
  CHECK(p.varlen->lengths == std::vector<int64_t>{64, 0, 1, 30});
  CHECK(p.kv_len == p.seq_len);
  // Q and O over 4 heads, K and V over 2, of max_total_tokens tokens.
  CHECK(tensor_bytes(p) == (2 * 4 + 2 * 2) * 1000 * 16 * 4);
  doc["varlen"].erase("lengths");  // lengths are optional (given at launch)
  CHECK(parse_problem(doc, "t").varlen->lengths.empty());
  CHECK_FALSE(parse_problem(base({{"window", json::object()}}), "t").varlen);

  json bad = doc;
  bad["varlen"] = {{"lengths", {1}}};
  expect_error(bad, "varlen.max_total_tokens", "missing");
  bad["varlen"] = {{"max_total_tokens", 0}};
  expect_error(bad, "varlen.max_total_tokens", "expected an integer in [1, 2147483647], got 0");
  bad["varlen"] = {{"max_total_tokens", 100}, {"cu_seqlens", {0, 5}}};
  expect_error(bad, "varlen.cu_seqlens", "unknown field (expected one of: max_total_tokens, lengths)");
  bad["varlen"] = {{"max_total_tokens", 100}, {"lengths", {10, 65}}};
  expect_error(bad, "varlen.lengths[1]", "expected a length in [0, seq_len] = [0, 64], got 65");
  bad["varlen"] = {{"max_total_tokens", 100}, {"lengths", {64, 30, 7}}};
  expect_error(bad, "varlen.lengths", "the lengths add up to more than max_total_tokens (100) at [2]");
  bad["varlen"] = {{"max_total_tokens", 100}, {"lengths", json::array()}};
  expect_error(bad, "varlen.lengths", "expected a non-empty array");
  bad["varlen"] = 7;
  expect_error(bad, "varlen", "expected an object, got 7");
  bad = doc;
  bad["kv_len"] = 80;
  expect_error(bad, "kv_len", "kv_len must equal seq_len (64) or be left out, got 80");
  bad = doc;
  bad["q_offset"] = 3;
  expect_error(bad, "q_offset", "not with \"varlen\"");
  bad = doc;
  bad["batch"] = 2;
  expect_error(bad, "batch", "the number of sequences is given at launch");
  bad = doc;
  bad["varlen"] = {{"max_total_tokens", 2147483647}};
  bad["head_dim"] = 4096;
  expect_error(bad, "varlen.max_total_tokens", "problem too large");
}

TEST_CASE("problem: JSON syntax errors give line and column") {
  try {
    parse_problem_text("{\n  \"seq_len\": 64,\n  \"head_dim\" 16\n}", "t", "p.json");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.file() == "p.json:3:15");
    CHECK(e.message().find("invalid JSON") == 0);
    CHECK(std::string(e.what()).find("p.json:3:15: invalid JSON") == 0);
  }
  CHECK_THROWS_AS(load_problem("/nonexistent/x.json"), Error);
}

TEST_CASE("problem: every default pattern loads") {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(TRSPLAT_SOURCE_DIR) + "/patterns")) {
    if (e.path().extension() != ".json") continue;
    CAPTURE(e.path().string());
    Problem p = load_problem(e.path().string());
    CHECK(p.name == e.path().stem().string());
    CHECK(p.head_dim == 64);
    CHECK(p.heads == 16);
    ++n;
  }
  CHECK(n >= 30);
}

TEST_CASE("kept: term semantics on hand-picked positions") {
  Problem p = parse_problem(json{{"seq_len", 20}, {"kv_len", 30}, {"head_dim", 8}, {"pattern", {{"window", json::object()}}}}, "t");
  auto term = [&](json t) {
    p.pattern = parse_problem(json{{"seq_len", 20}, {"kv_len", 30}, {"head_dim", 8}, {"pattern", t}}, "t").pattern;
  };
  term({{"window", {{"left", 2}, {"right", 1}}}});
  CHECK(kept(p, 5, 3));
  CHECK_FALSE(kept(p, 5, 2));
  CHECK(kept(p, 5, 6));
  CHECK_FALSE(kept(p, 5, 7));
  CHECK(kept(p, 19, 20));       // kv_len > seq_len: column 20 exists
  CHECK_FALSE(kept(p, 20, 20));  // row 20 does not
  term({{"strided", {{"stride", 4}, {"offset", 1}}}});
  CHECK(kept(p, 2, 1));          // (2-1) mod 4 == 1
  CHECK(kept(p, 2, 5));          // (2-5) = -3, floor mod 4 == 1
  CHECK_FALSE(kept(p, 2, 3));
  term({{"dilated", {{"left", 1}, {"right", 2}, {"dilation", 3}}}});
  CHECK(kept(p, 10, 7));
  CHECK_FALSE(kept(p, 10, 4));
  CHECK(kept(p, 10, 16));
  CHECK_FALSE(kept(p, 10, 19));
  CHECK_FALSE(kept(p, 10, 11));
  term({{"fixed", {{"block", 4}, {"summary", 1}}}});
  CHECK(kept(p, 5, 4));
  CHECK(kept(p, 5, 7));
  CHECK(kept(p, 5, 23));         // 23 mod 4 == 3: a summary column
  CHECK_FALSE(kept(p, 5, 22));
  term({{"block_window", {{"block", 4}, {"left", 1}, {"right", 0}}}});
  CHECK(kept(p, 9, 4));
  CHECK(kept(p, 9, 11));
  CHECK_FALSE(kept(p, 9, 12));
  CHECK_FALSE(kept(p, 9, 3));
  term({{"global", {{"tokens", {3, 25}}}}});
  CHECK(kept(p, 3, 29));         // global row
  CHECK(kept(p, 7, 25));         // global column beyond seq_len
  CHECK_FALSE(kept(p, 7, 24));
  term({{"affine", {{"slope", 2}, {"offset", -1}, {"stride", 3}, {"count", 2}}}});
  CHECK(kept(p, 4, 7));
  CHECK(kept(p, 4, 10));
  CHECK_FALSE(kept(p, 4, 13));
  CHECK_FALSE(kept(p, 4, 8));
  term({{"intersect", {{{"window", {{"left", 4}, {"right", 4}}}}, {{"strided", {{"stride", 2}}}}}}});
  CHECK(kept(p, 6, 2));
  CHECK_FALSE(kept(p, 6, 3));
  CHECK_FALSE(kept(p, 6, 0));
  p.causal = true;
  CHECK(kept(p, 6, 4));
  CHECK_FALSE(kept(p, 6, 8));
}

TEST_CASE("random_blocks: the documented splitmix64 generator") {
  Term t;
  t.kind = TermKind::RandomBlocks;
  t.block = 64;
  t.per_row = 3;
  t.seed = 0;
  // Values from an independent implementation of the generator in docs/splatc-patterns.md.
  CHECK(random_key_blocks(t, 0, 64) == std::vector<int64_t>{15, 47, 52});
  CHECK(random_key_blocks(t, 1, 64) == std::vector<int64_t>{18, 47, 50});
  CHECK(random_key_blocks(t, 2, 64) == std::vector<int64_t>{4, 33, 36});
  t.seed = 12345;
  t.per_row = 5;
  CHECK(random_key_blocks(t, 7, 256) == std::vector<int64_t>{1, 54, 60, 67, 108});
  // All blocks when per_row == number of key blocks.
  t.per_row = 4;
  CHECK(random_key_blocks(t, 3, 4) == std::vector<int64_t>{0, 1, 2, 3});
}

TEST_SUITE_END();
