#include "run.h"

#include <pthread.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <system_error>
#include <thread>

namespace trverify {

namespace rp = tr::report;

namespace {

// Prints each rule as soon as it and every rule before it are decided (out-of-order results wait
// in their slot), and keeps the [n/N] progress line on stderr.
class Streamer {
 public:
  explicit Streamer(const Run& run) : run_(run), got_(run.rules.size()) { draw_progress(); }

  // Called by the verifier (serialised), in completion order.
  void on_result(size_t i, tr::RuleResult&& r) {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
    got_[i] = std::move(r);
    ++decided_;
    last_ = got_[i]->name;
    clear_progress();
    while (next_ < got_.size() && got_[next_]) emit(*got_[next_++]);
    std::cout.flush();
    draw_progress();
  }

  // Stops the stream without a report (the run failed): later results are dropped.
  void close() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    clear_progress();
  }

  // Stops the stream (later results are dropped) and returns the batch of what was decided; the
  // decided rules not yet printed, the rules not run and the summary are printed.
  rp::Batch finish(int sig, double seconds) {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    clear_progress();
    rp::Batch b = run_.batch;
    b.signal = sig;
    b.seconds = seconds;
    for (size_t i = 0; i < got_.size(); ++i) {
      if (got_[i]) {
        if (i >= next_) emit(*got_[i]);
        b.results.push_back(std::move(*got_[i]));
      } else {
        const auto& [file, rule] = run_.rules[i];
        b.not_run.push_back({file, rule.loc.line, rule.name});
      }
    }
    if (run_.json) {
      std::cout << rp::dump(rp::to_json(b, run_.check), 2) << "\n";
    } else if (run_.jsonl) {
      for (const auto& r : b.not_run) std::cout << rp::dump(rp::jsonl_not_run(r)) << "\n";
      std::cout << rp::dump(rp::jsonl_summary(b, run_.check)) << "\n";
    } else {
      std::cout << rp::human_tail(b, run_.human);
    }
    std::cout.flush();
    return b;
  }

 private:
  void emit(const tr::RuleResult& r) {
    if (run_.json) return;  // printed whole at the end
    if (run_.jsonl)
      std::cout << rp::dump(rp::jsonl_rule(r, run_.check)) << "\n";
    else
      std::cout << rp::human_rule(r, run_.human);
  }

  void clear_progress() {
    if (run_.progress) std::cerr << "\r\033[K" << std::flush;
  }

  // "[n/N] last-rule", cut to the terminal's width so that "\r" can erase it.
  void draw_progress() {
    if (!run_.progress || closed_) return;
    std::string line = "[" + std::to_string(decided_) + "/" + std::to_string(got_.size()) + "]" +
                       (last_.empty() ? "" : " " + last_);
    winsize ws{};
    size_t width = ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1 ? ws.ws_col - 1 : 79;
    std::cerr << line.substr(0, width) << std::flush;
  }

  const Run& run_;
  std::mutex mu_;
  std::vector<std::optional<tr::RuleResult>> got_;
  size_t next_ = 0, decided_ = 0;
  std::string last_;
  bool closed_ = false;
};

sigset_t handled_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR1);  // the verifier thread's "done"
  return set;
}

// The report files; an I/O failure is reported and turns the exit code into 3.
int write_reports(const Run& run, const rp::Batch& b, int code) {
  try {
    if (!run.junit.empty()) write_atomically(run.junit, rp::junit(b, run.check));
    if (!run.sarif.empty()) write_atomically(run.sarif, rp::dump(rp::sarif(b, run.check), 2) + "\n");
  } catch (const std::exception& e) {
    std::cerr << "trverify: error: " << e.what() << "\n";
    return 3;
  }
  return code;
}

}  // namespace

void block_signals() {
  sigset_t set = handled_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void write_atomically(const std::string& path, const std::string& text) {
  namespace fs = std::filesystem;
  fs::path p(path);
  fs::path tmp = p.parent_path() / ("." + p.filename().string() + ".tmp" + std::to_string(getpid()));
  {
    std::ofstream out(tmp, std::ios::binary);
    out << text;
    if (!out.flush()) {
      std::error_code ec;
      fs::remove(tmp, ec);
      throw std::runtime_error("cannot write " + path);
    }
  }
  std::error_code ec;
  fs::rename(tmp, p, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw std::runtime_error("cannot write " + path + ": " + ec.message());
  }
}

int execute(Run& run) {
  auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  Streamer stream(run);
  std::atomic<bool> stop{false};
  run.verify.stop = &stop;
  std::exception_ptr failure;
  std::atomic<bool> done{false};
  pthread_t main_thread = pthread_self();
  std::thread verifier([&] {
    try {
      tr::verify_rules(run.rules, run.verify,
                       [&](size_t i, tr::RuleResult&& r) { stream.on_result(i, std::move(r)); });
    } catch (...) {
      failure = std::current_exception();
    }
    done = true;
    pthread_kill(main_thread, SIGUSR1);
  });
  sigset_t set = handled_signals();
  int sig = 0;
  while (!done) {
    int got = sigwaitinfo(&set, nullptr);
    if (got == SIGINT || got == SIGTERM) {
      sig = got;
      break;
    }
  }
  if (sig) {
    // The solvers cannot be interrupted from outside (cvc5 1.0.3 has no such call); the process
    // ends them by exiting once the reports of what was decided are written.
    stop = true;
    rp::Batch b = stream.finish(sig, elapsed());
    int code = write_reports(run, b, rp::exit_code(b, run.check));
    std::cout.flush();
    std::cerr.flush();
    std::_Exit(code);
  }
  verifier.join();
  if (failure) {
    stream.close();
    std::rethrow_exception(failure);
  }
  rp::Batch b = stream.finish(0, elapsed());
  return write_reports(run, b, rp::exit_code(b, run.check));
}

}  // namespace trverify
