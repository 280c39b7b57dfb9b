// Loading a batch of paths: directories recurse in sorted order, failures are recorded and the
// rest still loads, the rule filter keeps only the named rule.
#include <doctest/doctest.h>

#include <filesystem>
#include <functional>
#include <stdexcept>
#include <fstream>

#include <unistd.h>

#include "libtensorright/check/batch.h"

TEST_SUITE_BEGIN("unit");

namespace fs = std::filesystem;

TEST_CASE("batch: directories, failures and the rule filter") {
  fs::path d = fs::temp_directory_path() / ("tr_batch_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d / "sub");
  auto write = [](const fs::path& p, const std::string& text) { std::ofstream(p) << text; };
  const std::string rule = "rule NAME : int {\n rclass R\n map s : R\n tensor A : {R: s}\n lhs A\n rhs A\n}\n";
  write(d / "b.tr", std::string(rule).replace(5, 4, "b_rule"));
  write(d / "sub" / "a.tr", std::string(rule).replace(5, 4, "a_rule"));
  write(d / "sub" / "notes.txt", "not a rule file");
  write(d / "bad.tr", "rule broken : int {\n  lhs A +\n}\n");

  tr::LoadedBatch all = tr::load_rule_paths({d.string(), (d / "nope.tr").string()});
  REQUIRE(all.files.size() == 3);  // b.tr, bad.tr, sub/a.tr: sorted by path, .txt skipped
  CHECK(fs::path(all.files[1]).filename() == "bad.tr");
  CHECK(fs::path(all.files[2]).filename() == "a.tr");
  REQUIRE(all.rules.size() == 2);
  CHECK(all.rules[0].second.name == "b_rule");
  CHECK(all.rules[1].second.name == "a_rule");
  REQUIRE(all.failed.size() == 2);
  CHECK(all.failed[0].message.find("nope.tr: error: no such file") != std::string::npos);
  CAPTURE(all.failed[1].message);
  CHECK(all.failed[1].message.find("bad.tr:3:1: error: ") != std::string::npos);  // located diagnostic

  tr::LoadedBatch one = tr::load_rule_paths({d.string(), (d / "b.tr").string()}, "a_rule");
  CHECK(one.files.size() == 3);  // b.tr named twice loads once
  REQUIRE(one.rules.size() == 1);
  CHECK(one.rules[0].second.name == "a_rule");

  fs::create_directories(d / "empty");
  tr::LoadedBatch none = tr::load_rule_paths({(d / "empty").string()});
  CHECK(none.rules.empty());
  REQUIRE(none.failed.size() == 1);
  CHECK(none.failed[0].message.find("no *.tr files") != std::string::npos);
  fs::remove_all(d);
}

TEST_CASE("batch: a file without rules is a failure; paths are shown escaped") {
  fs::path d = fs::temp_directory_path() / ("tr_batch_empty_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  std::ofstream(d / "empty.tr") << "";
  std::ofstream(d / "comments.tr") << "# only a comment\n\n   # and another\n";
  const std::string odd = std::string("odd\xff") + ".tr";
  std::ofstream(d / odd) << "rule a : int {\n rclass R\n map s : R\n tensor A : {R: s}\n lhs A\n rhs A\n}\n";
  tr::LoadedBatch b = tr::load_rule_paths({(d / "empty.tr").string(), (d / "comments.tr").string(), (d / odd).string()});
  REQUIRE(b.failed.size() == 2);
  CHECK(b.failed[0].message == (d / "empty.tr").string() + ": error: no rules in this file");
  CHECK(b.failed[1].message == (d / "comments.tr").string() + ": error: no rules in this file");
  REQUIRE(b.rules.size() == 1);
  CHECK(b.rules[0].first == (d / "odd\\xff.tr").string());  // reports get valid UTF-8
  CHECK(b.rules[0].second.loc.file == (d / "odd\\xff.tr").string());
  fs::remove_all(d);
}

TEST_CASE("batch: a StackThread runs deep recursion and passes exceptions on") {
  // 200,000 frames of this function need far more than a default 8 MiB stack, well within 64 MiB.
  std::function<int(int)> deep = [&](int n) -> int {
    volatile char pad[128];
    pad[0] = static_cast<char>(n);
    return n == 0 ? 0 : 1 + deep(n - 1) + (pad[0] & 0);
  };
  int got = -1;
  tr::run_with_stack([&] { got = deep(200000); });
  CHECK(got == 200000);
  CHECK_THROWS_WITH(tr::run_with_stack([] { throw std::runtime_error("from the thread"); }), "from the thread");
}

TEST_SUITE_END();
