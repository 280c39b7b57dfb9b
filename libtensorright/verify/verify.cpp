// The verification driver: rank bound, one query per rank vector, verdicts, counterexamples
// (minimised and replayed through the concrete evaluator), SMT dumps, and the thread pool.
#include "libtensorright/verify/verify.h"
#include "libtensorright/verify/profile.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <type_traits>

#include <cvc5/cvc5.h>
#include <spdlog/spdlog.h>

#include "libtensorright/bound/bound.h"
#include "libtensorright/check/batch.h"
#include "libtensorright/encode/encode.h"
#include "libtensorright/semantics/machine.h"
#include "libtensorright/semantics/semantics.h"

namespace tr {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

int severity(Verdict v) {
  switch (v) {
    case Verdict::Proved: return 0;
    case Verdict::Vacuous: return 1;
    case Verdict::Timeout: return 2;
    case Verdict::Unknown: return 2;
    case Verdict::Unsupported: return 4;
    case Verdict::Counterexample: return 5;
  }
  return 0;
}

// Solver configurations: the first is the default, the others are the portfolio tried on unknown
// (reference/cvc5-1.0.3-notes.md B.4: the logic and decision strategy matter for NIA).
struct Config {
  const char* name;
  std::vector<std::pair<const char*, const char*>> options;
};
const std::vector<Config>& configs() {
  static const std::vector<Config> cs = {
      {"default", {}},
      {"decision=justification", {{"decision", "justification"}}},
      {"nl-ext-tplanes", {{"nl-ext-tplanes", "true"}}},
  };
  return cs;
}

// budget: resource units per check-sat (rlimit-per), the limit that decides verdicts; timeout_s:
// the wall-clock safety net per check-sat (tlimit-per).
std::unique_ptr<cvc5::Solver> make_solver(std::int64_t budget, double timeout_s, const Config& c) {
  auto s = std::make_unique<cvc5::Solver>();
  s->setLogic("ALL");
  s->setOption("produce-models", "true");
  s->setOption("incremental", "true");
  s->setOption("rlimit-per", std::to_string(std::max<std::int64_t>(1, budget)));
  s->setOption("tlimit-per", std::to_string(static_cast<long long>(std::max(1.0, timeout_s * 1000))));
  for (const auto& [k, v] : c.options) s->setOption(k, v);
  return s;
}

// A solver call stopped by the wall clock: the dtype's verdict is `timeout (wall clock)` at once,
// since whatever that call would have decided is unknown.
struct WallClockStop {
  std::string what;  // which call, for the reason
};

// Counts the resource units of every solver call of one dtype. Resource counts, unlike times, do
// not depend on the machine's load.
struct Meter {
  std::int64_t units = 0;      // all calls
  std::int64_t max_units = 0;  // the most a call that answered sat or unsat used
  bool isolate = false;        // machine dtypes: every call is tried in a forked copy first (try_in_copy)
  double timeout_s = 0;        // the solvers' wall-clock limit per call (for the copy's deadline)
};

// A solver call that stopped at its resource budget in the forked copy (Meter::isolate): either
// cleanly, or by aborting the copy (crashed, below). Callers treat it as out of budget.
struct SolverAborted {
  std::string what;
  bool crashed = false;
};

std::int64_t units_used(const cvc5::Solver& s) {
  return s.getStatistics().get("resource::resourceUnitsUsed").getInt();
}

// What the forked copy of a solver call did (try_in_copy).
struct CopyResult {
  enum Kind : std::int32_t { Answered, AnsweredUnsat, ResourceOut, WallClock, Died } kind = Died;
  std::int64_t units = 0;  // resource units it used (Died: unknown)
};

// cvc5 1.0.3 bit-blasts bit-vector and floating-point terms into CaDiCaL, and a resource or time
// limit that interrupts CaDiCaL aborts the whole process ("cadical: fatal error: invalid API usage
// of 'int CaDiCaL::Solver::val(int)' ... can only get value in satisfied state"; the cvc5 binary
// does the same, whatever --bv-sat-solver says). bv-solver=bitblast-internal stops cleanly but
// needs 100x the units on floats. So a call on such terms is made first in a forked copy of the
// process, whose death costs nothing. Only when the copy found a model (sat) is the call made here,
// to read the model: cvc5 is deterministic under a resource limit, so it answers as the copy did.
// A copy that answered unsat, or ran out of budget or time, tells so through a pipe, and the call
// is not repeated.
CopyResult try_in_copy(cvc5::Solver& s, double timeout_s) {
  std::fflush(nullptr);
  int fds[2];
  if (pipe(fds) != 0) return CopyResult{CopyResult::Answered, 0};  // no pipe: call in place
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return CopyResult{CopyResult::Answered, 0};  // no process to spare: call in place
  }
  if (pid == 0) {
    // The copy dies quietly: no crash handler of a test framework, fuzzer or sanitizer may report
    // (or save as a finding) the abort that this copy exists to absorb.
    for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) std::signal(sig, SIG_DFL);
    close(fds[0]);
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
      dup2(null, 1);
      dup2(null, 2);  // the abort message is expected: keep it off the user's stderr
    }
    std::int64_t before = units_used(s);
    cvc5::Result r = s.checkSat();
    CopyResult out;
    out.units = units_used(s) - before;
    out.kind = r.isUnsat()     ? CopyResult::AnsweredUnsat
               : !r.isUnknown() ? CopyResult::Answered
               : r.getUnknownExplanation() == cvc5::UnknownExplanation::TIMEOUT ? CopyResult::WallClock
                                                                                 : CopyResult::ResourceOut;
    ssize_t w = write(fds[1], &out, sizeof out);  // less than PIPE_BUF: never blocks, never partial
    _exit(w == static_cast<ssize_t>(sizeof out) ? 0 : 1);
  }
  close(fds[1]);
  // The copy's call is bounded by the solver's own wall-clock limit (timeout_s). A copy that
  // outlives it by far is stuck (a lock another thread held at the fork): it is killed, and the
  // call counts as died.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s + 30);
  int status = 0;
  bool reaped = false;
  for (int wait_us = 100; !reaped; wait_us = std::min(wait_us * 2, 20000)) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      reaped = true;
    } else if (r < 0 && errno != EINTR) {
      break;
    } else if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      break;
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(wait_us));
    }
  }
  CopyResult out;
  if (reaped && WIFEXITED(status) && WEXITSTATUS(status) == 0 && read(fds[0], &out, sizeof out) != sizeof out)
    out = CopyResult{};
  if (!reaped || !WIFEXITED(status) || WEXITSTATUS(status) != 0) out = CopyResult{};
  close(fds[0]);
  return out;
}

// check-sat, metered; throws WallClockStop when the wall-clock safety net ended the call, and
// SolverAborted when the call would have aborted the process (Meter::isolate).
Answer check(cvc5::Solver& s, Meter& m, const char* what) {
  if (m.isolate) {
    CopyResult c = try_in_copy(s, m.timeout_s);
    if (c.kind == CopyResult::Died) {  // it ran into its budget inside the bit-blaster
      m.units += std::stoll(s.getOption("rlimit-per"));
      throw SolverAborted{what, true};
    }
    m.units += c.units;
    if (c.kind == CopyResult::ResourceOut) throw SolverAborted{what, false};
    if (c.kind == CopyResult::WallClock) throw WallClockStop{what};
    if (c.kind == CopyResult::AnsweredUnsat) {
      m.max_units = std::max(m.max_units, c.units);
      return Answer::unsat_in_copy();
    }
  }
  std::int64_t before = units_used(s);
  cvc5::Result r = s.checkSat();
  std::int64_t used = units_used(s) - before;
  m.units += used;
  if (!r.isUnknown()) m.max_units = std::max(m.max_units, used);
  if (r.isUnknown() && r.getUnknownExplanation() == cvc5::UnknownExplanation::TIMEOUT) throw WallClockStop{what};
  return Answer(r);
}

// ---- SMT-LIB dump ------------------------------------------------------------------------------

std::string sort_str(const cvc5::Sort& s) { return s.toString(); }

void collect_symbols(const cvc5::Term& t, std::set<cvc5::Term>& seen, std::vector<cvc5::Term>& out) {
  if (!seen.insert(t).second) return;
  if (t.getKind() == cvc5::Kind::CONSTANT) out.push_back(t);
  for (size_t i = 0; i < t.getNumChildren(); ++i) collect_symbols(t[i], seen, out);
}

void write_smt(const std::string& path, const std::string& header, const cvc5::Term& query) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream o(tmp);
    if (!o) throw std::runtime_error("cannot write " + path);
    o << header;
    o << "(set-logic ALL)\n(set-option :produce-models true)\n";
    std::set<cvc5::Term> seen;
    std::vector<cvc5::Term> syms;
    collect_symbols(query, seen, syms);
    for (const auto& c : syms) {
      cvc5::Sort s = c.getSort();
      o << "(declare-fun " << c.toString() << " (";
      if (s.isFunction()) {
        auto dom = s.getFunctionDomainSorts();
        for (size_t i = 0; i < dom.size(); ++i) o << (i ? " " : "") << sort_str(dom[i]);
        s = s.getFunctionCodomainSort();
      }
      o << ") " << sort_str(s) << ")\n";
    }
    o << "(assert " << query.toString() << ")\n(check-sat)\n";
    if (!o.flush()) throw std::runtime_error("cannot write " + path);
  }
  std::filesystem::rename(tmp, path);
}

// One task's queries as FILESTEM.LINE.RULE.DTYPE.rRANKS[.shape|.vacuity].smt2: the element query,
// the tensor-level query (when its goals do not fold to true) and the vacuity query.
void dump_smt(const std::string& dir, const Rule& rule, const std::string& file, DType dt, const std::vector<int>& ranks,
              const enc::Query& q, std::int64_t budget) {
  std::filesystem::create_directories(dir);
  std::string rk, desc;
  for (size_t r = 0; r < ranks.size(); ++r) {
    rk += (r ? "-" : "") + std::to_string(ranks[r]);
    desc += (r ? ", " : "") + rule.rclasses[r].name + "=" + std::to_string(ranks[r]);
  }
  // File stems may hold any bytes (and "<stdin>"): only [A-Za-z0-9._-] go into the name.
  std::string fstem = std::filesystem::path(file).stem().string();
  for (char& c : fstem)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') c = '_';
  std::string stem = dir + "/" + fstem + "." + std::to_string(rule.loc.line) + "." + rule.name + "." + to_string(dt) +
                     ".r" + (rk.empty() ? "0" : rk);
  std::string task = "; trverify task: rule " + rule.name + " (" + file + ":" + std::to_string(rule.loc.line) +
                     "), dtype " + to_string(dt) + ", ranks {" + desc + "}\n";
  std::string limit = "; trverify gives each call " + std::to_string(budget) +
                      " resource units (cvc5 --rlimit-per=" + std::to_string(budget) + ")\n";
  write_smt(stem + ".smt2", task + "; unsat = this task is proved; sat = a counterexample\n" + limit, q.query);
  if (!q.shape_query.isNull())
    write_smt(stem + ".shape.smt2",
              task + "; tensor-level query (validity and shape, also for empty tensors): unsat = holds at these"
                     " ranks; sat = a counterexample\n" + limit,
              q.shape_query);
  write_smt(stem + ".vacuity.smt2",
            task + "; vacuity query: unsat = no input satisfies the preconditions with the left side defined"
                   " at these ranks (the rule is vacuous here); sat = not vacuous\n" + limit,
            q.vacuity);
}

// ---- model reading ------------------------------------------------------------------------------

struct ModelError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The exact integer of an Int model value (cvc5 gives it as a decimal string).
BigInt big_of(const cvc5::Term& v) {
  if (v.isInt64Value()) return BigInt(static_cast<long>(v.getInt64Value()));
  if (!v.isIntegerValue()) throw ModelError("model value is not an integer: " + v.toString());
  try {
    return parse_bigint(v.getIntegerValue());
  } catch (const std::invalid_argument&) {
    throw ModelError("model value is not a decimal integer: " + v.getIntegerValue());
  }
}

// A map value, size or index of the model: a machine integer. `what` names it for the message.
int64_t int_of(const cvc5::Term& v, const std::string& what) {
  BigInt b = big_of(v);
  if (auto r = to_int64(b)) return *r;
  std::string digits = b.get_str();
  if (digits.size() > 40) digits = digits.substr(0, 20) + "... (" + std::to_string(digits.size()) + " characters)";
  throw ModelError(what + " = " + digits + " does not fit in 64 bits (sizes and indices are machine integers)");
}

// The exact rational of a Real (or Int) model value ("n" or "n/d").
Rational rat_of(const cvc5::Term& v) {
  if (v.isInt64Value()) return Rational(v.getInt64Value());
  if (v.isIntegerValue()) return Rational(big_of(v));
  if (!v.isRealValue()) throw ModelError("model value is not rational: " + v.toString());
  std::string s = v.getRealValue();
  try {
    return Rational::parse(s);
  } catch (const std::invalid_argument&) {
    throw ModelError("model value is not an exact rational: " + s);
  }
}

Value value_of(cvc5::Solver& s, const cvc5::Term& t, DType dt) {
  cvc5::Term v = s.getValue(t);
  if (is_machine(dt)) return Value::machine(dt, enc::machine_bits(dt, v));
  switch (dt) {
    case DType::Bool: return Value::boolean(v.getBooleanValue());
    case DType::Int: return Value::integer(big_of(v));
    case DType::Real: return Value::real(rat_of(v));
    default: throw ModelError(std::string("no model reading for ") + to_string(dt));
  }
}

struct Model {
  Instance inst;
  Index index;
};

Model read_model(cvc5::Solver& s, const enc::Encoder& e) {
  Model m;
  const Rule& rule = e.rule;
  m.inst.dtype = e.dtype;
  for (size_t r = 0; r < rule.rclasses.size(); ++r) m.inst.rank[static_cast<int>(r)] = e.ranks[r];
  for (size_t id = 0; id < rule.maps.size(); ++id) {
    std::vector<int64_t> vals;
    for (const auto& c : e.map_consts[id])
      vals.push_back(c.isNull() ? 0 : int_of(s.getValue(c), "map " + rule.maps[id].name));
    m.inst.maps[static_cast<int>(id)] = vals;
  }
  for (size_t id = 0; id < rule.scalars.size(); ++id)
    m.inst.scalars[static_cast<int>(id)] = value_of(s, e.scalar_consts[id], rule.scalars[id].etype.resolve(e.dtype));
  for (const auto& [k, cs] : e.index)
    for (const auto& c : cs) m.index[k].push_back(int_of(s.getValue(c), "an index of the left side"));
  for (const auto& a : e.accesses) {
    const auto& td = rule.tensors.at(a.tensor);
    Index idx;
    size_t p = 0;
    for (const auto& [k, sz] : td.shape)
      for (int j = 0; j < e.ranks[k.rclass]; ++j)
        idx[k].push_back(int_of(s.getValue(a.args.at(p++)), "an index of tensor " + td.name));
    m.inst.inputs[a.tensor].elems[idx] = value_of(s, a.app, td.etype.resolve(e.dtype));
  }
  return m;
}

Counterexample::Integers decimals(const std::vector<int64_t>& v) {
  Counterexample::Integers d;
  for (int64_t x : v) d.push_back(std::to_string(x));
  return d;
}

std::string key_str(const Rule& rule, const AxisKey& k) {
  return rule.rclasses[k.rclass].name + (k.label.empty() ? "" : "@" + k.label);
}

std::string idx_str(const Rule& rule, const Index& idx) {
  std::ostringstream o;
  bool first = true;
  for (const auto& [k, v] : idx) {
    if (!first) o << ", ";
    first = false;
    o << key_str(rule, k) << "=(";
    for (size_t i = 0; i < v.size(); ++i) o << (i ? "," : "") << v[i];
    o << ")";
  }
  return o.str();
}

Counterexample render(const Rule& rule, const Model& m, const SideCheck& sc, const std::set<int>& si_maps) {
  Counterexample c;
  c.dtype = m.inst.dtype;
  for (const auto& [r, n] : m.inst.rank) c.ranks[rule.rclasses[r].name] = n;
  std::vector<Index> extent(rule.tensors.size());  // sizes per tensor, as an index of bounds
  for (size_t t = 0; t < rule.tensors.size(); ++t)
    for (const auto& [k, sz] : rule.tensors[t].shape) {
      std::vector<int64_t> v;
      Counterexample::Integers shown;
      for (int j = 0; j < m.inst.rank.at(k.rclass); ++j) {
        Value x = eval_iexpr(*sz, m.inst, j);
        // A size beyond int64 bounds no index of the model (indices are int64).
        v.push_back(x.kind == Value::Kind::Int ? to_int64(x.i).value_or(sgn(x.i) * INT64_MAX) : 0);
        shown.push_back(x.kind == Value::Kind::Int ? x.i.get_str() : std::string("0"));
      }
      extent[t][k] = v;
      c.sizes.push_back({rule.tensors[t].name + "." + key_str(rule, k), shown});
    }
  // The solver also applies a tensor's function under guards that end up false (reads that do not
  // happen); only elements inside the tensor are part of the counterexample.
  auto inside = [&](size_t t, const Index& idx) {
    for (const auto& [k, v] : idx) {
      auto it = extent[t].find(k);
      if (it == extent[t].end()) return false;
      for (size_t j = 0; j < v.size(); ++j)
        if (j >= it->second.size() || v[j] < 0 || v[j] >= it->second[j]) return false;
    }
    return true;
  };
  for (const auto& [id, v] : m.inst.maps)
    if (!si_maps.count(id)) c.maps.push_back({rule.maps[id].name, decimals(v)});
  for (const auto& [id, v] : m.inst.scalars) c.scalars.push_back({rule.scalars[id].name, v.str()});
  // A tensor-level counterexample (validity or shape) holds at no particular index or element.
  if (!sc.tensor_level) {
    for (const auto& [k, v] : m.index) c.index.push_back({key_str(rule, k), decimals(v)});
    for (const auto& [t, data] : m.inst.inputs)
      for (const auto& [idx, v] : data.elems)
        if (inside(static_cast<size_t>(t), idx))
          c.inputs.push_back({rule.tensors[t].name + "[" + idx_str(rule, idx) + "]", v.str()});
  }
  c.lhs_value = sc.tensor_level ? "valid" : sc.lhs.defined ? sc.lhs.value->str() : "undefined";
  c.rhs_value = sc.tensor_level ? (sc.rhs.why.empty() ? "valid" : "invalid") : sc.rhs.defined ? sc.rhs.value->str() : "undefined";
  std::ostringstream o;
  o << "dtype " << to_string(c.dtype) << ", ranks";
  for (const auto& [r, n] : c.ranks) o << " " << r << "=" << n;
  o << "\n";
  auto list = [&](const char* title, const auto& xs) {
    if (xs.empty()) return;
    o << title << ":";
    for (const auto& [k, v] : xs) {
      o << " " << k << " = ";
      if constexpr (std::is_same_v<std::decay_t<decltype(v)>, Counterexample::Integers>) {
        o << "[";
        for (size_t j = 0; j < v.size(); ++j) o << (j ? ", " : "") << v[j];
        o << "]";
      } else {
        o << v;
      }
      o << ";";
    }
    o << "\n";
  };
  list("sizes", c.sizes);
  list("maps", c.maps);
  list("scalars", c.scalars);
  list("index", c.index);
  list("inputs", c.inputs);
  o << "lhs = " << c.lhs_value << ", rhs = " << c.rhs_value;
  if (!sc.reason.empty()) o << " (" << sc.reason << ")";
  if (!sc.rhs.defined && !sc.rhs.why.empty()) o << "\nrhs undefined: " << sc.rhs.why;
  c.text = o.str();
  return c;
}

// ---- one dtype -------------------------------------------------------------------------------------

// q with every exp(x) replaced by 1 and x = 0 added (null when q has no exp). At float types exp is
// an uninterpreted function (enc::Encoder::machine_exp): each application's argument is a zero and
// its value 1, as in the evaluator.
cvc5::Term exp_free_probe(const enc::Encoder& e, const cvc5::Term& q) {
  const enc::Builder& b = e.b;
  std::vector<cvc5::Term> exps;
  std::set<cvc5::Term> seen;
  std::function<void(const cvc5::Term&)> walk = [&](const cvc5::Term& t) {
    if (!seen.insert(t).second) return;
    if (t.getKind() == cvc5::Kind::EXPONENTIAL) exps.push_back(t);
    for (size_t i = 0; i < t.getNumChildren(); ++i) walk(t[i]);
  };
  walk(q);
  std::vector<cvc5::Term> cs{q};
  for (const auto& [t, app] : e.exp_apps)
    if (seen.count(app)) {
      cs.push_back(b.s.mkTerm(cvc5::Kind::FLOATINGPOINT_IS_ZERO, {app[1]}));
      cs.push_back(b.eq(enc::machine_value(b, t, app), enc::machine_const(b.s, t, *mach::from_rational(t, Rational(1)))));
    }
  if (cs.size() > 1) return b.and_(cs);
  if (exps.empty()) return {};
  std::vector<cvc5::Term> ones(exps.size(), b.real(1));
  std::vector<cvc5::Term> rs{q.substitute(exps, ones)};
  for (const auto& x : exps) rs.push_back(b.eq(x[0], b.real(0)));
  return b.and_(rs);
}

// The element query with every Real input element it reads and every Real scalar an integer
// (null when there is none). A restriction of the query: a model of it is a model of the query.
cvc5::Term integer_probe(const enc::Encoder& e, const enc::Query& q) {
  std::vector<cvc5::Term> cs{q.query};
  for (const auto& a : e.accesses)
    if (a.app.getSort().isReal()) cs.push_back(e.b.s.mkTerm(cvc5::Kind::IS_INTEGER, {a.app}));
  for (const auto& c : e.scalar_consts)
    if (!c.isNull() && c.getSort().isReal()) cs.push_back(e.b.s.mkTerm(cvc5::Kind::IS_INTEGER, {c}));
  if (cs.size() == 1) return {};
  return e.b.and_(cs);
}

struct DTypeOutcome {
  DTypeResult res;
  std::optional<Counterexample> cex;
};

// Checks the task's tensor-level query, then (if that is unsat) its element query, leaving the
// deciding one asserted in the current push level (its model is read from there).
Answer check_task(cvc5::Solver& s, const enc::Query& q, const std::function<Answer()>& solve) {
  if (!q.shape_query.isNull()) {
    s.assertFormula(q.shape_query);
    Answer r = solve();
    if (!r.isUnsat()) return r;
    s.pop();
    s.push();
  }
  s.assertFormula(q.query);
  return solve();
}

std::vector<std::vector<int>> rank_vectors(const std::vector<int>& k) {
  std::vector<std::vector<int>> out{{}};
  for (int kr : k) {
    std::vector<std::vector<int>> next;
    for (const auto& v : out)
      for (int n = 1; n <= kr; ++n) {
        auto w = v;
        w.push_back(n);
        next.push_back(w);
      }
    out = std::move(next);
  }
  // Smallest total rank first, so that the first counterexample found is a small one.
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    int sa = 0, sb = 0;
    for (int x : a) sa += x;
    for (int x : b) sb += x;
    return sa < sb;
  });
  return out;
}

constexpr size_t kMaxTasks = 4096;

std::string rank_text(const Rule& rule, const std::vector<int>& ranks) {
  std::ostringstream o;
  for (size_t r = 0; r < ranks.size(); ++r) o << (r ? ", " : "") << rule.rclasses[r].name << "=" << ranks[r];
  return o.str();
}

// Shrinks the model: bounds the sum of |map values| and |scalars| and re-solves (binary search).
void minimise(cvc5::Solver& s, enc::Encoder& e, Model& best, Meter& meter) {
  std::vector<cvc5::Term> parts;
  for (size_t id = 0; id < e.map_consts.size(); ++id)
    for (const auto& c : e.map_consts[id])
      if (!c.isNull() && c.getKind() == cvc5::Kind::CONSTANT) parts.push_back(e.b.abs(c));
  for (const auto& c : e.scalar_consts)
    if (c.getSort().isInteger()) parts.push_back(e.b.abs(c));
  for (const auto& a : e.accesses)
    if (a.app.getSort().isInteger()) parts.push_back(e.b.abs(a.app));
  if (parts.empty()) return;
  cvc5::Term metric = parts[0];
  for (size_t i = 1; i < parts.size(); ++i) metric = e.b.add(metric, parts[i]);
  BigInt hi = big_of(s.getValue(metric)), lo = 0;
  for (int iter = 0; iter < 8 && lo < hi; ++iter) {
    BigInt mid = lo + (hi - lo) / 2;
    s.push();
    s.assertFormula(e.b.le(metric, e.b.integer(mid)));
    Answer r;
    try {
      r = check(s, meter, "minimising a counterexample");
    } catch (const SolverAborted&) {
      s.pop();
      return;  // keep the model found so far
    }
    if (r.isSat()) {
      try {
        best = read_model(s, e);
        BigInt now = big_of(s.getValue(metric));
        hi = now < mid ? now : mid;
      } catch (const ModelError&) {
        lo = mid + 1;
      }
    } else {
      lo = mid + 1;  // unsat or unknown: keep the current model
    }
    s.pop();
  }
}

// The rule has a sum (Reducer::Sum) on a side.
bool has_plain_sum(const Rule& rule) {
  std::set<const Node*> seen;
  std::function<bool(const Node&)> any = [&](const Node& n) {
    if (!seen.insert(&n).second) return false;
    if (n.op == Op::Sum && n.reducer == Reducer::Sum) return true;
    for (const auto& a : n.args)
      if (any(*a)) return true;
    return false;
  };
  return any(*rule.lhs) || any(*rule.rhs);
}

std::set<int> sum_index_maps(const Rule& rule) {
  std::set<int> si_maps;
  std::set<const Node*> si_seen;  // the rule is a DAG: each node once
  for (const Node* side : {rule.lhs.get(), rule.rhs.get()}) {
    std::function<void(const Node&)> sc = [&](const Node& n) {
      if (!si_seen.insert(&n).second) return;
      for (const auto& [k, id] : n.sum_index) si_maps.insert(id);
      for (const auto& a : n.args) sc(*a);
    };
    sc(*side);
  }
  return si_maps;
}

// One (rule, dtype): the bound, then one task per rank vector until the verdict is known.
//
// Limits, all counted in resource units so that they do not depend on the machine's load: every
// call gets opts.budget; after the default configuration runs out of budget the portfolio gets a
// fifth of it per configuration (it is for queries the default strategy gets stuck on, and a hard
// query should not cost 3x). Once a task is inconclusive the verdict cannot be `proved` any more,
// so the remaining tasks only look for a counterexample (a tenth of the budget per call, no
// portfolio) until the dtype has used 1.5 budgets.
class DTypeRun {
 public:
  DTypeRun(const Rule& rule, const std::string& file, DType dt, const VerifyOptions& opts)
      : rule_(rule), file_(file), dt_(dt), opts_(opts), si_maps_(sum_index_maps(rule)) {
    out_.res.dtype = dt;
    meter_.isolate = is_machine(dt);
    meter_.timeout_s = opts.timeout_s;
  }

  DTypeOutcome run() {
    auto t0 = Clock::now();
    try {
      if (auto why = dtype_problem(rule_, dt_)) throw enc::Unsupported(*why);
      run_tasks();
    } catch (const enc::Unsupported& u) {
      conclude(Verdict::Unsupported, u.what());
    } catch (const WallClockStop& w) {
      conclude(Verdict::Timeout, "stopped by the wall-clock safety net (" + num(opts_.timeout_s) +
                                     " s per solver call, --timeout) while " + w.what);
      out_.res.limit = Limit::WallClock;
    }
    out_.res.units = meter_.units;
    out_.res.max_units = meter_.max_units;
    out_.res.seconds = since(t0);
    return std::move(out_);
  }

 private:
  enum class Step { Next, Done };

  static std::string num(double x) {
    std::ostringstream o;
    o << x;
    return o.str();
  }

  void conclude(Verdict v, std::string reason) {
    out_.res.verdict = v;
    out_.res.reason = std::move(reason);
  }

  void run_tasks() {
    solver_ = make_solver(opts_.budget, opts_.timeout_s, configs()[0]);
    bound::Bounds bounds = bound::infer(rule_, dt_, *solver_);
    bounds_ = bounds.k;
    for (size_t r = 0; r < rule_.rclasses.size(); ++r) out_.res.bounds[rule_.rclasses[r].name] = bounds.k[r];
    size_t total = 1;
    for (int k : bounds.k) total = std::min(kMaxTasks + 1, total * static_cast<size_t>(k));
    if (total > kMaxTasks)
      return conclude(Verdict::Unknown, "the rank bound gives more than " + std::to_string(kMaxTasks) + " tasks");
    for (const auto& ranks : rank_vectors(bounds.k)) {
      if (inconclusive_ && meter_.units > opts_.budget * 3 / 2) {
        inconclusive_reason_ += "; stopped after " + std::to_string(out_.res.tasks) +
                                " tasks (1.5 budgets of resource units used)";
        break;
      }
      // A task that needed more than a quarter of the budget predicts that the larger ones will
      // run out of it: every remaining rank at once through the profiles first.
      if (out_.res.tasks > 0 && meter_.max_units > opts_.budget / 4 &&
          prove_by_profiles(bounds_, "a task needed " + std::to_string(meter_.max_units) +
                                         " resource units, more than a quarter of the budget"))
        return;
      out_.res.tasks++;
      if (task(ranks) == Step::Done || decided_) return;
    }
    if (inconclusive_ && prove_by_profiles(bounds_, "the rank tasks stopped: " + inconclusive_reason_)) return;
    if (inconclusive_) {
      conclude(*inconclusive_, inconclusive_reason_);
      if (*inconclusive_ == Verdict::Timeout) out_.res.limit = Limit::Budget;
    } else if (!nonvacuous_) {
      conclude(Verdict::Vacuous, "the preconditions and the left side's validity are unsatisfiable");
    } else {
      conclude(Verdict::Proved, is_float(dt_) && has_plain_sum(rule_)
                                    ? "float sums compared element by element: for every order of the right side's "
                                      "reductions, the left side's matched elements in the same order give the same "
                                      "value (docs/machine-types.md)"
                                    : "");
    }
  }

  // Every rank at once (profile.h), for a dtype whose rank tasks did not all decide: the query at
  // the bound with each axis abstracted to the profiles it can have. Only an unsat answer counts;
  // the caller keeps its inconclusive verdict otherwise.
  bool prove_by_profiles(const std::vector<int>& k, const std::string& because) {
    if (profiles_tried_ || !nonvacuous_) return false;
    profiles_tried_ = true;
    auto s = make_solver(opts_.budget, opts_.timeout_s, configs()[0]);
    std::unique_ptr<enc::Encoder> e;
    enc::Query q;
    try {
      e = std::make_unique<enc::Encoder>(*s, rule_, dt_, k);
      q = e->build();
    } catch (const enc::Unsupported& u) {
      spdlog::debug("{}: {} profiles not tried: {}", rule_.name, to_string(dt_), u.what());
      return false;
    }
    // Two budgets in all: the enumeration may take many calls, each with the full budget.
    const std::int64_t start = meter_.units;
    auto out = profile::prove(*s, *e, q, [&](const char* what) {
      if (meter_.units - start > 2 * opts_.budget) throw profile::Stop{};
      try {
        return check(*s, meter_, what);
      } catch (const SolverAborted&) {
        throw profile::Stop{};
      }
    });
    spdlog::debug("{}: {} profile abstraction at ranks {}: {}{}", rule_.name, to_string(dt_), rank_text(rule_, k),
                  out.proved ? "proved, " : "not proved, ", out.detail);
    if (!out.proved) return false;
    conclude(Verdict::Proved, "proved for every rank by the per-axis profile abstraction at ranks " +
                                  rank_text(rule_, k) + " (" + out.detail + "), tried because " + because);
    decided_ = true;
    return true;
  }

  // The portfolio for one rank vector; on return with a result, *s holds the query pushed (sat:
  // the model is read from it).
  std::optional<Answer> solve(const std::vector<int>& ranks, cvc5::Solver*& s, std::unique_ptr<enc::Encoder>& e,
                                    enc::Query& q, std::unique_ptr<cvc5::Solver>& s2) {
    s = solver_.get();
    if (degraded_) {
      if (!short_solver_) short_solver_ = make_solver(opts_.budget / 10, opts_.timeout_s, configs()[0]);
      s = short_solver_.get();
    }
    bool out_of_budget = false;
    std::optional<Verdict> task_inc;  // this task's inconclusive verdict, if no configuration decides it
    std::string task_reason;
    size_t n_configs = opts_.portfolio && !degraded_ ? configs().size() : 1;
    for (size_t ci = 0; ci < n_configs; ++ci) {
      if (ci > 0) {
        s2 = make_solver(out_of_budget ? std::max<std::int64_t>(1, opts_.budget / 5) : opts_.budget, opts_.timeout_s,
                         configs()[ci]);
        s = s2.get();
        spdlog::debug("{}: {} retrying with {}", rule_.name, to_string(dt_), configs()[ci].name);
      }
      e = std::make_unique<enc::Encoder>(*s, rule_, dt_, ranks);
      q = e->build();
      if (ci == 0 && !opts_.dump_smt_dir.empty()) dump_smt(opts_.dump_smt_dir, rule_, file_, dt_, ranks, q, opts_.budget);
      if (ci == 0)
        if (auto probed = probe_exp(*s, *e, q)) return probed;  // keep the push, as below
      s->push();
      Answer r;
      bool aborted = false, crashed = false;
      try {
        r = check_task(*s, q, [&] { return check(*s, meter_, "solving a task"); });
      } catch (const SolverAborted& a) {
        aborted = true;  // the call ran into its budget in the forked copy (try_in_copy)
        crashed = a.crashed;
      }
      if (!aborted && !r.isUnknown()) return r;  // keep the push: the model is read by the caller
      s->pop();
      bool ro = aborted || r.getUnknownExplanation() == cvc5::UnknownExplanation::RESOURCEOUT;
      if (ci == 0) out_of_budget = ro;
      // The first task out of budget (once an earlier one showed the rule non-vacuous): every rank
      // at once through the profiles, before this task's portfolio.
      if (ci == 0 && ro && !degraded_ &&
          prove_by_profiles(bounds_, "the task at ranks " + rank_text(rule_, ranks) + " ran out of budget"))
        return std::nullopt;
      if (ci == 0 && !degraded_ && opts_.portfolio)
        if (auto probed = probe_integers(ranks, s, e, q, s2, out_of_budget)) return probed;  // keep the push
      if (!task_inc || ro) {
        task_inc = ro ? Verdict::Timeout : Verdict::Unknown;
        std::ostringstream msg;
        if (crashed)
          msg << "solver ran out of its resource budget (" << (degraded_ ? opts_.budget / 10 : opts_.budget)
              << " units per call; cvc5 stopped in its bit-blaster) at ranks " << rank_text(rule_, ranks);
        else if (ro)
          msg << "solver ran out of its resource budget (" << (degraded_ ? opts_.budget / 10 : opts_.budget)
              << " units per call) at ranks " << rank_text(rule_, ranks);
        else
          msg << "solver answered unknown (" << r.getUnknownExplanation() << ") at ranks " << rank_text(rule_, ranks);
        task_reason = msg.str();
      }
    }
    if (!inconclusive_ || (*task_inc == Verdict::Timeout && *inconclusive_ != Verdict::Timeout)) {
      inconclusive_ = task_inc;
      inconclusive_reason_ = task_reason;
    }
    degraded_ = true;
    return std::nullopt;
  }

  // Transcendental models are out of cvc5's reach, so a query with exp is first tried with every
  // exp argument 0: then it is algebraic (exp(0) = 1 exactly, also in the evaluator). A model of
  // that restriction is a model of the query, and it is replayed like any other. True when it is
  // satisfiable (the result is returned and the probe left pushed). At machine types the probe's
  // call may run out of budget in the forked copy (SolverAborted): then it found nothing.
  std::optional<Answer> probe_exp(cvc5::Solver& s, const enc::Encoder& e, const enc::Query& q) {
    cvc5::Term probe = exp_free_probe(e, q.query);
    if (probe.isNull()) return std::nullopt;
    s.push();
    s.assertFormula(probe);
    Answer r;
    try {
      r = check(s, meter_, "probing exp(0)");
    } catch (const SolverAborted&) {
    }
    if (r.isSat()) return r;
    s.pop();
    return std::nullopt;
  }

  // Nonlinear real queries that the default configuration leaves undecided often have models
  // with integer inputs, which cvc5 finds by branching on integers: the query is solved once more
  // (in a fresh solver, with the portfolio's budget) with every Real input element and scalar an
  // integer. A model of that restriction is a model of the query (so no configuration could
  // have proved the task) and is read, minimised and replayed like any other. True when it is
  // satisfiable (the result is returned, *s holding the restricted query pushed). Not for a
  // query with exp: a model with a non-zero exp argument cannot replay exactly, and those with
  // every exp argument 0 are the exp probe's.
  std::optional<Answer> probe_integers(const std::vector<int>& ranks, cvc5::Solver*& s,
                                             std::unique_ptr<enc::Encoder>& e, enc::Query& q,
                                             std::unique_ptr<cvc5::Solver>& s2, bool out_of_budget) {
    if (dt_ != DType::Real) return std::nullopt;
    if (integer_probe(*e, q).isNull() || !exp_free_probe(*e, q.query).isNull()) return std::nullopt;
    s2 = make_solver(out_of_budget ? std::max<std::int64_t>(1, opts_.budget / 5) : opts_.budget, opts_.timeout_s,
                     configs()[0]);
    s = s2.get();
    e = std::make_unique<enc::Encoder>(*s, rule_, dt_, ranks);
    q = e->build();
    s->push();
    s->assertFormula(integer_probe(*e, q));
    Answer r = check(*s, meter_, "probing integer inputs");
    if (r.isSat()) return r;
    s->pop();
    return std::nullopt;
  }

  Step task(const std::vector<int>& ranks) {
    cvc5::Solver* s = nullptr;
    std::unique_ptr<enc::Encoder> e;
    std::unique_ptr<cvc5::Solver> s2;
    enc::Query q;
    std::optional<Answer> result = solve(ranks, s, e, q, s2);
    if (!result) return Step::Next;
    if (result->isUnsat()) {
      s->pop();
      if (!nonvacuous_) {
        s->push();
        s->assertFormula(q.vacuity);
        bool unsat = false;
        try {
          unsat = check(*s, meter_, "checking vacuity").isUnsat();
        } catch (const SolverAborted&) {
        }
        s->pop();
        if (!unsat) nonvacuous_ = true;  // sat, or unknown: do not claim vacuity
      }
      return Step::Next;
    }
    return on_sat(ranks, *s, *e, q);
  }

  Step on_sat(const std::vector<int>& ranks, cvc5::Solver& s, enc::Encoder& e, const enc::Query& q);

  const Rule& rule_;
  const std::string& file_;
  DType dt_;
  const VerifyOptions& opts_;
  std::set<int> si_maps_;
  DTypeOutcome out_;
  Meter meter_;
  std::unique_ptr<cvc5::Solver> solver_, short_solver_;
  bool nonvacuous_ = false, degraded_ = false;
  bool profiles_tried_ = false, decided_ = false;  // decided_: the profiles proved the dtype
  std::vector<int> bounds_;
  std::optional<Verdict> inconclusive_;
  std::string inconclusive_reason_;
};

// Satisfiable: read, shrink and replay the model (s holds the query pushed).
DTypeRun::Step DTypeRun::on_sat(const std::vector<int>& ranks, cvc5::Solver& s, enc::Encoder& e,
                                const enc::Query& q) {
  auto done = [&](Verdict v, std::string reason) {
    conclude(v, std::move(reason));
    return Step::Done;
  };
  Model m;
  try {
    m = read_model(s, e);
    if (opts_.minimise) minimise(s, e, m, meter_);
  } catch (const ModelError& me) {
    s.pop();
    return done(Verdict::Unknown, std::string("a counterexample exists but its model cannot be read: ") + me.what());
  }
  s.pop();
  bool pre = false;
  SideCheck sc;
  try {
    pre = preconditions_hold(rule_, m.inst);
    sc = check_at(rule_, m.inst, m.index);
  } catch (const EvalOverflow& ov) {
    return done(Verdict::Unknown, std::string("a counterexample exists but cannot be replayed: ") + ov.what());
  }
  if (pre && sc.refutes()) {
    if (is_machine(dt_)) {
      shrink_machine_values(rule_, m.inst, m.index);
      sc = check_at(rule_, m.inst, m.index);  // refutes: shrinking keeps only refuting values
    }
    out_.cex = render(rule_, m, sc, si_maps_);
    return done(Verdict::Counterexample, sc.reason);
  }
  std::string rk;
  for (size_t r = 0; r < ranks.size(); ++r) rk += (r ? "," : "") + std::to_string(ranks[r]);
  std::string detail = "ranks (" + rk + "): " + describe(rule_, m.inst) + " index " + idx_str(rule_, m.index) +
                       (pre ? "" : " [preconditions/assumptions fail on replay]") +
                       (sc.holds ? " [refinement holds on replay]" : " [" + sc.reason + "]");
  // max/min/prod reductions (encode/reduce.cpp): solve once more with each of the encoder's hints
  // (exact folds, a dominating difference); only a model that replays becomes a counterexample.
  for (const auto& hint : q.has_sums ? q.cex_hints : std::vector<cvc5::Term>{}) {
    s.push();
    s.assertFormula(q.query);
    s.assertFormula(hint);
    std::optional<Model> hm;
    bool sat = false;
    try {
      sat = check(s, meter_, "searching a counterexample with a fold hint").isSat();
    } catch (const SolverAborted&) {
    }
    if (sat) {
      try {
        hm = read_model(s, e);
        if (opts_.minimise) minimise(s, e, *hm, meter_);
      } catch (const ModelError&) {
        hm.reset();
      }
    }
    s.pop();
    if (!hm) continue;
    try {
      SideCheck hc = check_at(rule_, hm->inst, hm->index);
      if (preconditions_hold(rule_, hm->inst) && hc.refutes()) {
        out_.cex = render(rule_, *hm, hc, si_maps_);
        return done(Verdict::Counterexample, hc.reason);
      }
    } catch (const EvalOverflow&) {
      // inconclusive, as without the hint
    }
  }
  if (q.has_sums)
    return done(Verdict::Unknown, "the solver found a model that does not replay because `match` abstracts the sums "
                                  "(the sums may still be equal): " + detail);
  if (!pre && !rule_.assume.empty())
    return done(Verdict::Unknown, "the model violates an assumption at an index the query did not read: " + detail);
  if (sc.inexact)
    return done(Verdict::Unknown, "the model involves exp, which the evaluator only approximates: " + detail);
  if (!e.exp_apps.empty())
    return done(Verdict::Unknown, "the model gives exp, uninterpreted at float types, values that the evaluator's "
                                  "exp does not have: " + detail);
  throw InternalError("the solver's counterexample does not replay in the evaluator: " + detail);
}

DTypeOutcome verify_dtype(const Rule& rule, const std::string& file, DType dt, const VerifyOptions& opts) {
  return DTypeRun(rule, file, dt, opts).run();
}

// verify_dtype, with the rule and its location added to an internal error's message.
DTypeOutcome verify_dtype_located(const Rule& rule, const std::string& file, DType dt, const VerifyOptions& opts) {
  try {
    return verify_dtype(rule, file, dt, opts);
  } catch (const InternalError& e) {
    throw InternalError(file + ":" + std::to_string(rule.loc.line) + ": rule " + rule.name + ", dtype " +
                        to_string(dt) + ": " + e.what());
  }
}

}  // namespace

Verdict worse(Verdict a, Verdict b) { return severity(b) > severity(a) ? b : a; }

namespace {

RuleResult assemble(const Rule& rule, const std::string& file, std::vector<DTypeOutcome> outs) {
  RuleResult rr;
  rr.file = file;
  rr.line = rule.loc.line;
  rr.name = rule.name;
  rr.title = rule.title;
  rr.expect = rule.expect;
  rr.verdict = Verdict::Proved;
  bool first = true;
  for (auto& o : outs) {
    rr.seconds += o.res.seconds;
    if (first || severity(o.res.verdict) > severity(rr.verdict)) {
      rr.verdict = o.res.verdict;
      rr.limit = o.res.limit;
      rr.note = o.res.verdict == Verdict::Proved ? "" : std::string(to_string(o.res.dtype)) + ": " + o.res.reason;
      if (o.cex) rr.cex = o.cex;
    }
    first = false;
    rr.dtypes.push_back(o.res);
  }
  if (rr.verdict != Verdict::Counterexample) rr.cex.reset();
  return rr;
}

// Runs work(i) for every i < n, at most `jobs` at a time, each in a thread of its own. cvc5 1.0.x
// keeps its term store and random generator per thread: in a thread that ran other work first,
// term ids (hence term order and hash order inside the solver) would depend on that history, and
// with them the resource counts. A fresh thread per item keeps every item's solver runs the same
// whatever the scheduling and --jobs. Each thread is a StackThread (check/batch.h): the encoder, the
// rank bound, the evaluator and cvc5 recurse over terms as deep as the rule's expressions. Stops
// starting items when *stop becomes true or an item
// throws; the first exception is rethrown once the running items end.
void run_items(size_t n, int jobs, const std::function<void(size_t)>& work, const std::atomic<bool>* stop) {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::unique_ptr<StackThread>> slots(static_cast<size_t>(jobs));
  std::vector<size_t> idle, ended;  // slots free to use; slots whose thread has ended (to join)
  for (size_t j = 0; j < slots.size(); ++j) idle.push_back(j);
  std::exception_ptr failure;
  for (size_t i = 0; i < n; ++i) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return !idle.empty() || !ended.empty(); });
    std::vector<size_t> to_join;
    to_join.swap(ended);
    lock.unlock();
    for (size_t j : to_join) slots[j]->join();
    lock.lock();
    idle.insert(idle.end(), to_join.begin(), to_join.end());
    if (failure || (stop && stop->load())) break;
    size_t j = idle.back();
    idle.pop_back();
    lock.unlock();
    slots[j] = std::make_unique<StackThread>([&, i, j] {
      std::exception_ptr e;
      try {
        work(i);
      } catch (...) {
        e = std::current_exception();
      }
      std::lock_guard<std::mutex> g(mu);
      if (e && !failure) failure = e;
      ended.push_back(j);
      cv.notify_all();
    });
  }
  for (auto& t : slots)
    if (t) t->join();  // a thread already joined returns at once
  if (failure) std::rethrow_exception(failure);
}

}  // namespace

const char* to_string(Limit l) {
  switch (l) {
    case Limit::None: return "";
    case Limit::Budget: return "budget";
    case Limit::WallClock: return "wall clock";
  }
  return "";
}

RuleResult verify_rule(const Rule& rule, const std::string& file, const VerifyOptions& opts) {
  std::vector<DTypeOutcome> outs;
  for (DType dt : rule.dtypes) outs.push_back(verify_dtype_located(rule, file, dt, opts));
  return assemble(rule, file, std::move(outs));
}

void verify_rules(const std::vector<std::pair<std::string, Rule>>& rules, const VerifyOptions& opts,
                  const OnResult& on_result) {
  std::vector<size_t> picked;
  for (size_t i = 0; i < rules.size(); ++i)
    if (opts.rule_filter.empty() || rules[i].second.name == opts.rule_filter) picked.push_back(i);
  // Work items: (rule, dtype), in input order. A rule is reported when its last dtype ends.
  std::vector<std::pair<size_t, size_t>> items;
  std::vector<std::vector<DTypeOutcome>> slots(picked.size());
  std::vector<size_t> left(picked.size());
  for (size_t p = 0; p < picked.size(); ++p) {
    slots[p].resize(rules[picked[p]].second.dtypes.size());
    left[p] = slots[p].size();
    for (size_t d = 0; d < slots[p].size(); ++d) items.push_back({p, d});
  }
  int jobs = opts.jobs > 0 ? opts.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  jobs = std::max(1, std::min<int>(jobs, static_cast<int>(items.size())));
  std::mutex mu;
  run_items(items.size(), jobs, [&](size_t i) {
    auto [p, d] = items[i];
    const auto& [file, rule] = rules[picked[p]];
    DTypeOutcome o = verify_dtype_located(rule, file, rule.dtypes[d], opts);
    std::lock_guard<std::mutex> lock(mu);
    slots[p][d] = std::move(o);
    if (--left[p] == 0) on_result(picked[p], assemble(rule, file, std::move(slots[p])));
  }, opts.stop);
}

std::vector<RuleResult> verify_rules(const std::vector<std::pair<std::string, Rule>>& rules,
                                     const VerifyOptions& opts) {
  std::vector<std::optional<RuleResult>> got(rules.size());
  verify_rules(rules, opts, [&](size_t i, RuleResult&& r) { got[i] = std::move(r); });
  std::vector<RuleResult> out;
  for (auto& r : got)
    if (r) out.push_back(std::move(*r));
  return out;
}

}  // namespace tr
