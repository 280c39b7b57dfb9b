// The verification driver: rank bound, one query per rank vector, verdicts, counterexamples
// (minimised and replayed through the concrete evaluator), SMT dumps, and the thread pool.
#include "libtensorright/verify/verify.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <cvc5/cvc5.h>
#include <spdlog/spdlog.h>

#include "libtensorright/bound/bound.h"
#include "libtensorright/check/batch.h"
#include "libtensorright/encode/encode.h"
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

std::unique_ptr<cvc5::Solver> make_solver(double timeout_s, const Config& c) {
  auto s = std::make_unique<cvc5::Solver>();
  s->setLogic("ALL");
  s->setOption("produce-models", "true");
  s->setOption("incremental", "true");
  s->setOption("tlimit-per", std::to_string(static_cast<long long>(std::max(1.0, timeout_s * 1000))));
  for (const auto& [k, v] : c.options) s->setOption(k, v);
  return s;
}

// ---- SMT-LIB dump ------------------------------------------------------------------------------

std::string sort_str(const cvc5::Sort& s) { return s.toString(); }

void collect_symbols(const cvc5::Term& t, std::set<cvc5::Term>& seen, std::vector<cvc5::Term>& out) {
  if (!seen.insert(t).second) return;
  if (t.getKind() == cvc5::Kind::CONSTANT) out.push_back(t);
  for (size_t i = 0; i < t.getNumChildren(); ++i) collect_symbols(t[i], seen, out);
}

void dump_smt(const std::string& dir, const Rule& rule, const std::string& file, DType dt, const std::vector<int>& ranks,
              const cvc5::Term& query) {
  std::filesystem::create_directories(dir);
  std::string rk;
  std::string header;
  for (size_t r = 0; r < ranks.size(); ++r) {
    rk += (r ? "-" : "") + std::to_string(ranks[r]);
    header += (r ? ", " : "") + rule.rclasses[r].name + "=" + std::to_string(ranks[r]);
  }
  std::string path = dir + "/" + rule.name + "_" + to_string(dt) + "_" + (rk.empty() ? "0" : rk) + ".smt2";
  std::ofstream o(path);
  if (!o) throw std::runtime_error("cannot write " + path);
  o << "; trverify task: rule " << rule.name << " (" << file << ":" << rule.loc.line << "), dtype " << to_string(dt)
    << ", ranks {" << header << "}\n";
  o << "; unsat = this task is proved; sat = a counterexample\n";
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
  switch (dt) {
    case DType::Bool: return Value::boolean(v.getBooleanValue());
    case DType::Int: return Value::integer(big_of(v));
    case DType::Real: return Value::real(rat_of(v));
  }
  return Value::integer(0);
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

std::string vec_str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
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
      std::string shown = "[";
      for (int j = 0; j < m.inst.rank.at(k.rclass); ++j) {
        Value x = eval_iexpr(*sz, m.inst, j);
        // A size beyond int64 bounds no index of the model (indices are int64).
        v.push_back(x.kind == Value::Kind::Int ? to_int64(x.i).value_or(sgn(x.i) * INT64_MAX) : 0);
        shown += (j ? ", " : "") + (x.kind == Value::Kind::Int ? x.i.get_str() : std::string("0"));
      }
      extent[t][k] = v;
      c.sizes.push_back({rule.tensors[t].name + "." + key_str(rule, k), shown + "]"});
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
    if (!si_maps.count(id)) c.maps.push_back({rule.maps[id].name, vec_str(v)});
  for (const auto& [id, v] : m.inst.scalars) c.scalars.push_back({rule.scalars[id].name, v.str()});
  // A tensor-level counterexample (validity or shape) holds at no particular index or element.
  if (!sc.tensor_level) {
    for (const auto& [k, v] : m.index) c.index.push_back({key_str(rule, k), vec_str(v)});
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
  auto list = [&](const char* title, const std::vector<std::pair<std::string, std::string>>& xs) {
    if (xs.empty()) return;
    o << title << ":";
    for (const auto& [k, v] : xs) o << " " << k << " = " << v << ";";
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

// q with every exp(x) replaced by 1 and x = 0 added (null when q has no exp).
cvc5::Term exp_free_probe(const enc::Builder& b, const cvc5::Term& q) {
  std::vector<cvc5::Term> exps;
  std::set<cvc5::Term> seen;
  std::function<void(const cvc5::Term&)> walk = [&](const cvc5::Term& t) {
    if (!seen.insert(t).second) return;
    if (t.getKind() == cvc5::Kind::EXPONENTIAL) exps.push_back(t);
    for (size_t i = 0; i < t.getNumChildren(); ++i) walk(t[i]);
  };
  walk(q);
  if (exps.empty()) return {};
  std::vector<cvc5::Term> ones(exps.size(), b.real(1));
  std::vector<cvc5::Term> cs{q.substitute(exps, ones)};
  for (const auto& x : exps) cs.push_back(b.eq(x[0], b.real(0)));
  return b.and_(cs);
}

struct DTypeOutcome {
  DTypeResult res;
  std::optional<Counterexample> cex;
};

// Checks the task's tensor-level query, then (if that is unsat) its element query, leaving the
// deciding one asserted in the current push level (its model is read from there).
cvc5::Result check_task(cvc5::Solver& s, const enc::Query& q) {
  if (!q.shape_query.isNull()) {
    s.assertFormula(q.shape_query);
    cvc5::Result r = s.checkSat();
    if (!r.isUnsat()) return r;
    s.pop();
    s.push();
  }
  s.assertFormula(q.query);
  return s.checkSat();
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
void minimise(cvc5::Solver& s, enc::Encoder& e, Model& best, const VerifyOptions& opts) {
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
    cvc5::Result r = s.checkSat();
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
  (void)opts;
}

DTypeOutcome verify_dtype(const Rule& rule, const std::string& file, DType dt, const VerifyOptions& opts) {
  auto t0 = Clock::now();
  DTypeOutcome out;
  out.res.dtype = dt;
  auto finish = [&]() -> DTypeOutcome {
    out.res.seconds = since(t0);
    return out;
  };
  std::unique_ptr<cvc5::Solver> solver = make_solver(opts.timeout_s, configs()[0]);
  bound::Bounds bounds;
  try {
    bounds = bound::infer(rule, dt, *solver);
  } catch (const enc::Unsupported& u) {
    out.res.verdict = Verdict::Unsupported;
    out.res.reason = u.what();
    return finish();
  }
  for (size_t r = 0; r < rule.rclasses.size(); ++r) out.res.bounds[rule.rclasses[r].name] = bounds.k[r];
  size_t total = 1;
  for (int k : bounds.k) total = std::min(kMaxTasks + 1, total * static_cast<size_t>(k));
  if (total > kMaxTasks) {
    out.res.verdict = Verdict::Unknown;
    out.res.reason = "the rank bound gives more than " + std::to_string(kMaxTasks) + " tasks";
    return finish();
  }
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

  bool nonvacuous = false;
  std::optional<Verdict> inconclusive;
  std::string inconclusive_reason;
  // Time bound per dtype: once a task is inconclusive the verdict cannot be `proved` any more, so
  // the remaining tasks only look for a counterexample (short limit, no portfolio), and they stop
  // once the dtype has used its budget.
  const double budget_s = 1.5 * opts.timeout_s;
  const double short_s = std::min(opts.timeout_s, 1.0);
  bool degraded = false;
  std::unique_ptr<cvc5::Solver> short_solver;
  for (const auto& ranks : rank_vectors(bounds.k)) {
    if (inconclusive && since(t0) > budget_s) {
      inconclusive_reason += "; stopped after " + std::to_string(out.res.tasks) + " tasks (time budget " +
                             std::to_string(static_cast<int>(budget_s)) + " s)";
      break;
    }
    out.res.tasks++;
    std::optional<cvc5::Result> result;
    std::unique_ptr<cvc5::Solver> s2;
    cvc5::Solver* s = solver.get();
    if (degraded) {
      if (!short_solver) short_solver = make_solver(short_s, configs()[0]);
      s = short_solver.get();
    }
    std::unique_ptr<enc::Encoder> e;
    enc::Query q;
    bool timed_out = false;
    std::optional<Verdict> task_inc;  // this task's inconclusive verdict, if no configuration decides it
    std::string task_reason;
    for (size_t ci = 0; ci < (opts.portfolio && !degraded ? configs().size() : 1); ++ci) {
      if (ci > 0) {
        // After a timeout the other configurations get a fifth of the limit each: they are for
        // queries the default strategy gets stuck on, and a hard query should not cost 3x.
        s2 = make_solver(timed_out ? std::max(1.0, opts.timeout_s / 5) : opts.timeout_s, configs()[ci]);
        s = s2.get();
        spdlog::debug("{}: {} retrying with {}", rule.name, to_string(dt), configs()[ci].name);
      }
      try {
        e = std::make_unique<enc::Encoder>(*s, rule, dt, ranks);
        q = e->build();
      } catch (const enc::Unsupported& u) {
        out.res.verdict = Verdict::Unsupported;
        out.res.reason = u.what();
        return finish();
      }
      if (ci == 0 && !opts.dump_smt_dir.empty()) dump_smt(opts.dump_smt_dir, rule, file, dt, ranks, q.query);
      if (ci == 0) {
        // Transcendental models are out of cvc5's reach, so a query with exp is first tried with
        // every exp argument 0: then it is algebraic (exp(0) = 1 exactly, also in the evaluator).
        // A model of that restriction is a model of the query, and it is replayed like any other.
        cvc5::Term probe = exp_free_probe(e->b, q.query);
        if (!probe.isNull()) {
          s->push();
          s->assertFormula(probe);
          cvc5::Result r = s->checkSat();
          if (r.isSat()) {
            result = r;
            break;  // keep the push: the model is read below
          }
          s->pop();
        }
      }
      s->push();
      cvc5::Result r = check_task(*s, q);
      if (!r.isUnknown()) {
        result = r;
        break;  // keep the push: the model is read below
      }
      s->pop();
      std::ostringstream why;
      why << r.getUnknownExplanation();
      bool to = r.getUnknownExplanation() == cvc5::UnknownExplanation::TIMEOUT;
      if (ci == 0) timed_out = to;
      if (!task_inc || to) {
        task_inc = to ? Verdict::Timeout : Verdict::Unknown;
        std::ostringstream msg;
        if (to)
          msg << "solver timeout (" << (degraded ? short_s : opts.timeout_s) << " s per call) at ranks "
              << rank_text(rule, ranks);
        else
          msg << "solver answered unknown (" << why.str() << ") at ranks " << rank_text(rule, ranks);
        task_reason = msg.str();
      }
    }
    if (!result) {
      if (!inconclusive || (*task_inc == Verdict::Timeout && *inconclusive != Verdict::Timeout)) {
        inconclusive = task_inc;
        inconclusive_reason = task_reason;
      }
      degraded = true;
      continue;
    }
    if (result->isUnsat()) {
      s->pop();
      if (!nonvacuous) {
        s->push();
        s->assertFormula(q.vacuity);
        cvc5::Result v = s->checkSat();
        s->pop();
        if (!v.isUnsat()) nonvacuous = true;  // sat, or unknown: do not claim vacuity
      }
      continue;
    }
    // Satisfiable: read, shrink and replay the model.
    Model m;
    try {
      m = read_model(*s, *e);
      if (opts.minimise) minimise(*s, *e, m, opts);
    } catch (const ModelError& me) {
      s->pop();
      out.res.verdict = Verdict::Unknown;
      out.res.reason = std::string("a counterexample exists but its model cannot be read: ") + me.what();
      return finish();
    }
    s->pop();
    bool pre = false;
    SideCheck sc;
    try {
      pre = preconditions_hold(rule, m.inst);
      sc = check_at(rule, m.inst, m.index);
    } catch (const EvalOverflow& ov) {
      out.res.verdict = Verdict::Unknown;
      out.res.reason = std::string("a counterexample exists but cannot be replayed: ") + ov.what();
      return finish();
    }
    std::string rk;
    for (size_t r = 0; r < ranks.size(); ++r) rk += (r ? "," : "") + std::to_string(ranks[r]);
    if (pre && sc.refutes()) {
      out.res.verdict = Verdict::Counterexample;
      out.cex = render(rule, m, sc, si_maps);
      out.res.reason = sc.reason;
      return finish();
    }
    std::string detail = "ranks (" + rk + "): " + describe(rule, m.inst) + " index " + idx_str(rule, m.index) +
                         (pre ? "" : " [preconditions/assumptions fail on replay]") +
                         (sc.holds ? " [refinement holds on replay]" : " [" + sc.reason + "]");
    if (q.has_sums && !q.cex_hint.isNull()) {
      // max/min/prod reductions (encode/reduce.cpp): solve once more with the encoder's hint (exact
      // folds, a dominating difference); only a model that replays becomes a counterexample.
      s->push();
      s->assertFormula(q.query);
      s->assertFormula(q.cex_hint);
      std::optional<Model> hm;
      if (s->checkSat().isSat()) {
        try {
          hm = read_model(*s, *e);
          if (opts.minimise) minimise(*s, *e, *hm, opts);
        } catch (const ModelError&) {
          hm.reset();
        }
      }
      s->pop();
      if (hm) {
        try {
          SideCheck hc = check_at(rule, hm->inst, hm->index);
          if (preconditions_hold(rule, hm->inst) && hc.refutes()) {
            out.res.verdict = Verdict::Counterexample;
            out.cex = render(rule, *hm, hc, si_maps);
            out.res.reason = hc.reason;
            return finish();
          }
        } catch (const EvalOverflow&) {
          // fall through: inconclusive, as without the hint
        }
      }
    }
    if (q.has_sums) {
      out.res.verdict = Verdict::Unknown;
      out.res.reason = "the solver found a model that does not replay because `match` abstracts the sums "
                       "(the sums may still be equal): " + detail;
      return finish();
    }
    if (!pre && !rule.assume.empty()) {
      out.res.verdict = Verdict::Unknown;
      out.res.reason = "the model violates an assumption at an index the query did not read: " + detail;
      return finish();
    }
    if (sc.inexact) {
      out.res.verdict = Verdict::Unknown;
      out.res.reason = "the model involves exp, which the evaluator only approximates: " + detail;
      return finish();
    }
    throw InternalError("the solver's counterexample does not replay in the evaluator: " + detail);
  }
  if (inconclusive) {
    out.res.verdict = *inconclusive;
    out.res.reason = inconclusive_reason;
  } else if (!nonvacuous) {
    out.res.verdict = Verdict::Vacuous;
    out.res.reason = "the preconditions and the left side's validity are unsatisfiable";
  } else {
    out.res.verdict = Verdict::Proved;
  }
  return finish();
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
      rr.note = o.res.verdict == Verdict::Proved ? "" : std::string(to_string(o.res.dtype)) + ": " + o.res.reason;
      if (o.cex) rr.cex = o.cex;
    }
    first = false;
    rr.dtypes.push_back(o.res);
  }
  if (rr.verdict != Verdict::Counterexample) rr.cex.reset();
  return rr;
}

}  // namespace

RuleResult verify_rule(const Rule& rule, const std::string& file, const VerifyOptions& opts) {
  std::vector<DTypeOutcome> outs;
  for (DType dt : rule.dtypes) outs.push_back(verify_dtype_located(rule, file, dt, opts));
  return assemble(rule, file, std::move(outs));
}

std::vector<RuleResult> verify_rules(const std::vector<std::pair<std::string, Rule>>& rules,
                                     const VerifyOptions& opts) {
  std::vector<size_t> picked;
  for (size_t i = 0; i < rules.size(); ++i)
    if (opts.rule_filter.empty() || rules[i].second.name == opts.rule_filter) picked.push_back(i);
  // Work items: (rule, dtype). Results land in fixed slots, so the output order is the input order.
  std::vector<std::pair<size_t, size_t>> items;
  std::vector<std::vector<DTypeOutcome>> slots(picked.size());
  for (size_t p = 0; p < picked.size(); ++p) {
    slots[p].resize(rules[picked[p]].second.dtypes.size());
    for (size_t d = 0; d < slots[p].size(); ++d) items.push_back({p, d});
  }
  int jobs = opts.jobs > 0 ? opts.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  jobs = std::max(1, std::min<int>(jobs, static_cast<int>(items.size())));
  std::atomic<size_t> next{0};
  std::exception_ptr failure;
  std::mutex mu;
  auto worker = [&] {
    for (;;) {
      size_t i = next.fetch_add(1);
      if (i >= items.size()) return;
      auto [p, d] = items[i];
      const auto& [file, rule] = rules[picked[p]];
      try {
        slots[p][d] = verify_dtype_located(rule, file, rule.dtypes[d], opts);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!failure) failure = std::current_exception();
        next = items.size();  // stop the others early
        return;
      }
    }
  };
  // Workers run on threads with a large stack (StackThread), also for one job: the encoder, the
  // rank bound, the evaluator and cvc5 recurse over terms as deep as the rule's expressions.
  {
    std::vector<std::unique_ptr<StackThread>> ts;
    for (int j = 0; j < jobs; ++j) ts.push_back(std::make_unique<StackThread>(worker));
    for (auto& t : ts) t->join();
  }
  if (failure) std::rethrow_exception(failure);
  std::vector<RuleResult> out;
  for (size_t p = 0; p < picked.size(); ++p)
    out.push_back(assemble(rules[picked[p]].second, rules[picked[p]].first, std::move(slots[p])));
  return out;
}

}  // namespace tr
