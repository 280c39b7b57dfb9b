#include "libtensorright/check/batch.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <set>

#include "libtensorright/check/check.h"
#include "libtensorright/check/error.h"

namespace fs = std::filesystem;

namespace tr {
namespace {

std::vector<std::string> collect(const std::vector<std::string>& paths, std::vector<LoadFailure>& failed) {
  std::vector<std::string> files;
  std::set<std::string> seen;  // a file named twice (directly and through a directory) loads once
  auto add = [&](const std::string& f) {
    if (seen.insert(fs::path(f).lexically_normal().string()).second) files.push_back(f);
  };
  for (const auto& p : paths) {
    std::error_code ec;
    if (p == "-") {
      add(p);
    } else if (fs::is_directory(p, ec)) {
      std::vector<std::string> found;
      for (auto it = fs::recursive_directory_iterator(p, fs::directory_options::follow_directory_symlink, ec);
           !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
        if (it->is_regular_file(ec) && it->path().extension() == ".tr") found.push_back(it->path().string());
      if (ec) failed.push_back({p, p + ": error: cannot read directory: " + ec.message()});
      // A directory without rule files is almost always a wrong path: never a silent success.
      else if (found.empty()) failed.push_back({p, p + ": error: no *.tr files in this directory"});
      std::sort(found.begin(), found.end());
      for (const auto& f : found) add(f);
    } else if (fs::exists(p, ec)) {
      add(p);
    } else {
      failed.push_back({p, p + ": error: no such file or directory"});
    }
  }
  return files;
}

}  // namespace

LoadedBatch load_rule_paths(const std::vector<std::string>& paths, const std::string& rule_filter) {
  LoadedBatch b;
  b.files = collect(paths, b.failed);
  for (const auto& path : b.files) {
    const std::string& f = path == "-" ? kStdinName : path;  // "-": one rule file on standard input
    try {
      LoadedFile lf = path == "-" ? load_rule_source(std::string(std::istreambuf_iterator<char>(std::cin), {}), f)
                                  : load_rule_file(f);
      spdlog::debug("{}: {} rule(s)", f, lf.rules.size());
      for (auto& r : lf.rules)
        if (rule_filter.empty() || r.name == rule_filter) b.rules.emplace_back(f, std::move(r));
    } catch (const Error& e) {
      b.failed.push_back({f, e.what()});
    }
  }
  return b;
}

}  // namespace tr
