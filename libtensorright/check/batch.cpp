#include "libtensorright/check/batch.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <set>
#include <system_error>

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
      if (ec) failed.push_back({escape_text(p), escape_text(p) + ": error: cannot read directory: " + ec.message()});
      // A directory without rule files is almost always a wrong path: never a silent success.
      else if (found.empty()) failed.push_back({escape_text(p), escape_text(p) + ": error: no *.tr files in this directory"});
      std::sort(found.begin(), found.end());
      for (const auto& f : found) add(f);
    } else if (fs::exists(p, ec)) {
      add(p);
    } else {
      failed.push_back({escape_text(p), escape_text(p) + ": error: no such file or directory"});
    }
  }
  return files;
}

void load_files(LoadedBatch& b, const std::string& rule_filter, const CheckOptions& opts) {
  for (const auto& path : b.files) {
    // Reports name the file in valid UTF-8; "-" is one rule file on standard input.
    const std::string f = path == "-" ? kStdinName : escape_text(path);
    try {
      LoadedFile lf = path == "-" ? load_rule_source(std::string(std::istreambuf_iterator<char>(std::cin), {}), f, opts)
                                  : load_rule_file(path, opts);
      spdlog::debug("{}: {} rule(s)", f, lf.rules.size());
      // An empty file (or one of comments only) is almost always a wrong path or a truncated
      // file: never a silent success.
      for (auto& sk : lf.skipped)
        if (rule_filter.empty() || sk.name == rule_filter) b.skipped.emplace_back(f, std::move(sk));
      if (lf.rules.empty() && lf.skipped.empty()) {
        b.failed.push_back({f, escape_text(f) + ": error: no rules in this file"});
        continue;
      }
      for (auto& r : lf.rules)
        if (rule_filter.empty() || r.name == rule_filter) b.rules.emplace_back(f, std::move(r));
    } catch (const Error& e) {
      b.failed.push_back({f, e.what()});
    }
  }
}

}  // namespace

StackThread::StackThread(std::function<void()> fn, size_t stack_bytes) : fn_(std::move(fn)) {
  pthread_attr_t attr;
  int rc = pthread_attr_init(&attr);
  if (rc == 0) {
    if (pthread_attr_setstacksize(&attr, stack_bytes) == 0) rc = pthread_create(&thread_, &attr, &trampoline, this);
    else rc = -1;
    pthread_attr_destroy(&attr);
  }
  if (rc != 0) rc = pthread_create(&thread_, nullptr, &trampoline, this);  // the default stack
  if (rc != 0) throw std::system_error(rc, std::generic_category(), "cannot start a thread");
  running_ = true;
}

StackThread::~StackThread() {
  if (running_) pthread_join(thread_, nullptr);
}

void* StackThread::trampoline(void* self) {
  auto* t = static_cast<StackThread*>(self);
  try {
    t->fn_();
  } catch (...) {
    t->error_ = std::current_exception();
  }
  return nullptr;
}

void StackThread::join() {
  if (running_) pthread_join(thread_, nullptr);
  running_ = false;
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void run_with_stack(const std::function<void()>& fn) { StackThread(fn).join(); }

LoadedBatch load_rule_paths(const std::vector<std::string>& paths, const std::string& rule_filter,
                            const CheckOptions& opts) {
  LoadedBatch b;
  b.files = collect(paths, b.failed);
  run_with_stack([&] { load_files(b, rule_filter, opts); });
  return b;
}


}  // namespace tr
