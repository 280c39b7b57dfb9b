# trverify end to end (docs/cli.md). Input files that must be malformed or arranged in folders are
# written into the build tree at configure time, so the source tree holds only real rules.
set(_trv ${CMAKE_CURRENT_BINARY_DIR}/trverify_e2e)
file(WRITE ${_trv}/bad.tr "rule broken : int {\n  rclass R\n  lhs A +\n}\n")
file(WRITE ${_trv}/dir/a.tr [=[
rule add_zero "A + 0 => A" : num {
  rclass R
  map s : R
  tensor A : {R: s}
  lhs A + 0
  rhs A
  expect proved
}
]=])
file(WRITE ${_trv}/dir/sub/b.tr [=[
rule add_one "A + 1 => A" : int {
  rclass R
  map s : R
  tensor A : {R: s}
  lhs A + 1
  rhs A
  expect counterexample
}
]=])
file(WRITE ${_trv}/dir/sub/notes.txt "not a rule file: directories only contribute *.tr\n")

# Parse errors: FILE:LINE:COL once on stderr, exit 2, and the other files are still verified.
trsplat_e2e(trverify_parse_error EXIT 2 OUTPUT "bad\\.tr:4:1: error: " COMMAND trverify ${_trv}/bad.tr)
trsplat_e2e(trverify_parse_error_others_verified EXIT 2
            OUTPUT "PROVED +[^\n]*add_zero_right.*1 file failed to load: [^\n]*bad\\.tr"
            COMMAND trverify ${_trv}/bad.tr rules/xla/add.tr)
trsplat_e2e(trverify_missing_path EXIT 2 OUTPUT "nope\\.tr: error: no such file" COMMAND trverify nope.tr)
trsplat_e2e(trverify_bad_timeout EXIT 2 COMMAND trverify --timeout 0 rules/xla/add.tr)

# Flag values: one readable `trverify: error: --FLAG: ...` line, exit 2.
trsplat_e2e(trverify_bad_timeout_text EXIT 2
            OUTPUT "^trverify: error: --timeout: expected a number of seconds > 0 \\(at most 1e6\\), got 'abc'\n$"
            COMMAND trverify --timeout abc rules/xla/add.tr)
trsplat_e2e(trverify_bad_budget EXIT 2 OUTPUT "trverify: error: --budget: expected a whole number of resource units >= 1, got '1e3'"
            COMMAND trverify --budget 1e3 rules/xla/add.tr)
trsplat_e2e(trverify_bad_jobs EXIT 2 OUTPUT "trverify: error: --jobs: expected a whole number >= 0" COMMAND trverify --jobs x rules/xla/add.tr)
trsplat_e2e(trverify_bad_shard EXIT 2 OUTPUT "trverify: error: --shard: shard 3 of 2 does not exist"
            COMMAND trverify --shard 3/2 rules/xla/add.tr)
trsplat_e2e(trverify_bad_shard_text EXIT 2 OUTPUT "trverify: error: --shard: expected K/N with whole numbers 1 <= K <= N, got '1-2'"
            COMMAND trverify --shard 1-2 rules/xla/add.tr)
trsplat_e2e(trverify_unknown_flag EXIT 2 OUTPUT "^trverify: error: The following argument was not expected: --nope"
            COMMAND trverify --nope rules/xla/add.tr)
trsplat_e2e(trverify_json_jsonl_exclusive EXIT 2 OUTPUT "^trverify: error: --json excludes --jsonl"
            COMMAND trverify --json --jsonl rules/xla/add.tr)

# Rule selection, directories (recursive, sorted, only *.tr), --check.
trsplat_e2e(trverify_rule_select EXIT 0 OUTPUT "^PROVED +rules/xla/add\\.tr:[0-9]+ add_zero_right [^\n]*\n1 rule: 1 proved"
            COMMAND trverify rules/xla/add.tr --rule add_zero_right)
trsplat_e2e(trverify_rule_missing EXIT 2 OUTPUT "trverify: error: --rule: no rule matches 'no_such_rule' in the given files"
            COMMAND trverify rules/xla/add.tr --rule no_such_rule)
# --rule repeats and takes globs; --list-rules prints FILE:LINE NAME and verifies nothing.
trsplat_e2e(trverify_rule_globs EXIT 0
            OUTPUT "^rules/xla/add\\.tr:17 add_zero_right\nrules/xla/add\\.tr:27 add_zero_left\nrules/xla/add\\.tr:48 add_sub_const\nrules/xla/add\\.tr:80 add_zero_const_tensor\n$"
            COMMAND trverify --list-rules --rule add_zero_* --rule add_sub_[c]onst rules/xla/add.tr)
trsplat_e2e(trverify_list_rules EXIT 0 OUTPUT "^[^\n]*dir/a\\.tr:1 add_zero\n[^\n]*dir/sub/b\\.tr:1 add_one\n$"
            COMMAND trverify --list-rules ${_trv}/dir)
# Resource budget and wall clock: a run out of budget is `timeout (budget)`, one stopped by the
# wall-clock safety net `timeout (wall clock)`.
trsplat_e2e(trverify_timeout_budget EXIT 1
            OUTPUT "TIMEOUT \\(budget\\) +rules/wrong\\.tr:[0-9]+ div_rem_mixed[^\n]*\n    note: int: solver ran out of its resource budget \\(10000 units per call\\)"
            COMMAND trverify --check --budget 10000 rules/wrong.tr --rule div_rem_mixed)
trsplat_e2e(trverify_timeout_wall_clock EXIT 1
            OUTPUT "TIMEOUT \\(wall clock\\) +rules/xla/slice\\.tr:[0-9]+ slice_pad_undo[^\n]*\n    note: [a-z]+: stopped by the wall-clock safety net"
            COMMAND trverify --timeout 0.001 rules/xla/slice.tr --rule slice_pad_undo)
trsplat_e2e(trverify_directory EXIT 0 OUTPUT "dir/a\\.tr:[0-9]+ add_zero[^\n]*\n[^\n]*dir/sub/b\\.tr:[0-9]+ add_one.*2 rules: 1 proved, 1 counterexample; 2 as expected, 0 not"
            COMMAND trverify --check ${_trv}/dir)
trsplat_e2e(trverify_directory_nocheck EXIT 1 OUTPUT "COUNTEREXAMPLE +[^\n]*add_one"
            COMMAND trverify ${_trv}/dir)

# --json parses and has the documented shape; --junit has one testsuite per file; --sarif one
# result per unexpected verdict (none here: --check and every verdict as expected).
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/trverify_formats.cmake [=[
execute_process(COMMAND ${TOOL} --check --json --junit ${OUT}/report.xml --sarif ${OUT}/report.sarif ${DIR}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "exit ${rc}\n${out}\n${err}")
endif()
string(JSON version GET "${out}" schema_version)
string(JSON n LENGTH "${out}" rules)
string(JSON file GET "${out}" rules 0 file)
string(JSON verdict GET "${out}" rules 1 verdict)
string(JSON expect GET "${out}" rules 1 expect)
string(JSON tasks GET "${out}" rules 0 dtypes real tasks)
string(JSON units GET "${out}" rules 0 dtypes real units)
string(JSON cex GET "${out}" rules 1 counterexample lhs)
string(JSON total GET "${out}" summary rules)
string(JSON budget GET "${out}" options budget)
# Sizes are arrays of integers (schema 2): the counterexample's first size entry is a JSON array.
string(JSON sizes GET "${out}" rules 1 counterexample sizes)
string(JSON first_key MEMBER "${sizes}" 0)
string(JSON first_size_type TYPE "${sizes}" "${first_key}")
if(NOT first_size_type STREQUAL "ARRAY")
  message(FATAL_ERROR "counterexample sizes are not arrays:\n${out}")
endif()
if(NOT version EQUAL 2 OR NOT n EQUAL 2 OR NOT file MATCHES "a\\.tr$" OR NOT verdict STREQUAL "counterexample"
   OR NOT expect STREQUAL "counterexample" OR tasks LESS 1 OR units LESS 1 OR cex STREQUAL "" OR NOT total EQUAL 2
   OR budget LESS 1)
  message(FATAL_ERROR "unexpected JSON:\n${out}")
endif()
file(READ ${OUT}/report.xml xml)
string(REGEX MATCHALL "<testcase " cases "${xml}")
string(REGEX MATCHALL "<testsuite " suites "${xml}")
list(LENGTH cases ncases)
list(LENGTH suites nsuites)
if(NOT ncases EQUAL 2 OR NOT nsuites EQUAL 2 OR NOT xml MATCHES "failures=\"0\""
   OR NOT xml MATCHES "<testcase name=\"add_one\" classname=\"[^\"]*dir/sub/b\\.tr\" file=\"[^\"]*dir/sub/b\\.tr\" line=\"1\"")
  message(FATAL_ERROR "unexpected JUnit:\n${xml}")
endif()
file(READ ${OUT}/report.sarif sarif)
string(JSON sv GET "${sarif}" version)
string(JSON nres LENGTH "${sarif}" runs 0 results)
if(NOT sv STREQUAL "2.1.0" OR NOT nres EQUAL 0)
  message(FATAL_ERROR "unexpected SARIF:\n${sarif}")
endif()
# JSON Lines: one object per rule, then the summary.
execute_process(COMMAND ${TOOL} --check --jsonl ${DIR} RESULT_VARIABLE rc OUTPUT_VARIABLE out)
string(REPLACE ";" "," out "${out}")  # a CMake list separator (only inside JSON strings here)
string(REGEX MATCHALL "[^\n]+" lines "${out}")
list(LENGTH lines nlines)
list(GET lines 0 first)
list(GET lines 2 last)
string(JSON t0 GET "${first}" type)
string(JSON n0 GET "${first}" name)
string(JSON t2 GET "${last}" type)
string(JSON s2 GET "${last}" summary as_expected)
if(NOT rc EQUAL 0 OR NOT nlines EQUAL 3 OR NOT t0 STREQUAL "rule" OR NOT n0 STREQUAL "add_zero"
   OR NOT t2 STREQUAL "summary" OR NOT s2 EQUAL 2)
  message(FATAL_ERROR "unexpected JSONL (exit ${rc}):\n${out}")
endif()
]=])

# "-" reads one rule file from standard input.
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/trverify_stdin.cmake [=[
execute_process(COMMAND ${TOOL} --check - INPUT_FILE ${DIR}/sub/b.tr
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "^COUNTEREXAMPLE +<stdin>:1 add_one ")
  message(FATAL_ERROR "exit ${rc}\n${out}\n${err}")
endif()
]=])

# --dump-smt: FILESTEM.LINE.RULE.DTYPE.rRANKS.smt2 per task plus its vacuity query, and the
# documented loop replays them with the cvc5 binary (unsat: proved; vacuity sat: not vacuous).
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/trverify_dump.cmake [=[
file(REMOVE_RECURSE ${OUT}/smt)
execute_process(COMMAND ${TOOL} --dump-smt ${OUT}/smt rules/xla/add.tr --rule add_zero_right
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
file(GLOB files RELATIVE ${OUT}/smt ${OUT}/smt/*)
list(SORT files)
set(want add.17.add_zero_right.int.r1.smt2 add.17.add_zero_right.int.r1.vacuity.smt2
         add.17.add_zero_right.real.r1.smt2 add.17.add_zero_right.real.r1.vacuity.smt2)
if(NOT rc EQUAL 0 OR NOT "${files}" STREQUAL "${want}")
  message(FATAL_ERROR "exit ${rc}, files: ${files}\n${out}\n${err}")
endif()
find_program(CVC5 cvc5)
if(CVC5)
  execute_process(COMMAND bash -c "for f in \"$0\"/*.smt2; do cvc5 \"$f\"; done" ${OUT}/smt
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT out STREQUAL "unsat\nsat\nunsat\nsat\n")
    message(FATAL_ERROR "cvc5 on the dump (exit ${rc}):\n${out}\n${err}")
  endif()
endif()
]=])

if(TARGET trverify)
  foreach(_t formats stdin dump)
    add_test(NAME e2e/trverify_${_t}
             COMMAND ${CMAKE_COMMAND} -DTOOL=$<TARGET_FILE:trverify> -DDIR=${_trv}/dir -DOUT=${_trv}
                     -P ${CMAKE_CURRENT_BINARY_DIR}/trverify_${_t}.cmake
             WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    set_tests_properties(e2e/trverify_${_t} PROPERTIES LABELS e2e)
  endforeach()

  # Interrupts, shards and determinism: bash scripts, reports checked by trverify_reports.py.
  find_program(TRSPLAT_PYTHON3 python3)
  find_program(TRSPLAT_BASH bash)
  if(TRSPLAT_PYTHON3 AND TRSPLAT_BASH)
    set(_py ${CMAKE_CURRENT_SOURCE_DIR}/trverify_reports.py)
    add_test(NAME e2e/trverify_interrupt
             COMMAND ${TRSPLAT_BASH} ${CMAKE_CURRENT_SOURCE_DIR}/trverify_interrupt.sh $<TARGET_FILE:trverify>
                     ${TRSPLAT_PYTHON3} ${_py} ${_trv}/interrupt
             WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    # Shards for N = 1, 2, 3: the rule sets of all of rules/ (--list-rules: disjoint, together the
    # whole) and the merged verdicts and JSON of the demo rules (equal to one run's). The corpus's
    # verdicts are checked once, unsharded, by the corpus tests (rules.cmake).
    add_test(NAME e2e/trverify_shards
             COMMAND ${TRSPLAT_BASH} ${CMAKE_CURRENT_SOURCE_DIR}/trverify_shards.sh $<TARGET_FILE:trverify>
                     ${TRSPLAT_PYTHON3} ${_py} ${_trv}/shards
                     rules/elementwise.tr rules/shape.tr rules/reduce.tr rules/wrong.tr
             WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    # scripts/check-determinism, short form: two runs (idle with --jobs 1; cores busy with
    # --jobs 2) of rules with tasks of tens of thousands of resource units, and a budget small
    # enough that some run out of it.
    add_test(NAME e2e/trverify_determinism
             COMMAND ${TRSPLAT_BASH} ${PROJECT_SOURCE_DIR}/scripts/check-determinism -n 2 --budget 10000
                     rules/xla/pad.tr rules/wrong.tr rules/xla-mutants/slice.tr
             WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    set_tests_properties(e2e/trverify_determinism PROPERTIES ENVIRONMENT "BUILD_DIR=${PROJECT_BINARY_DIR}")
    set_tests_properties(e2e/trverify_interrupt e2e/trverify_shards e2e/trverify_determinism PROPERTIES LABELS e2e)
  endif()
endif()
