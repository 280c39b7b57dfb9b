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

# Rule selection, directories (recursive, sorted, only *.tr), --check.
trsplat_e2e(trverify_rule_select EXIT 0 OUTPUT "^PROVED +rules/xla/add\\.tr:[0-9]+ add_zero_right [^\n]*\n1 rule: 1 proved"
            COMMAND trverify rules/xla/add.tr --rule add_zero_right)
trsplat_e2e(trverify_rule_missing EXIT 2 OUTPUT "no rule named 'no_such_rule'"
            COMMAND trverify rules/xla/add.tr --rule no_such_rule)
trsplat_e2e(trverify_directory EXIT 0 OUTPUT "dir/a\\.tr:[0-9]+ add_zero[^\n]*\n[^\n]*dir/sub/b\\.tr:[0-9]+ add_one.*2 rules: 1 proved, 1 counterexample; 2 as expected, 0 not"
            COMMAND trverify --check ${_trv}/dir)
trsplat_e2e(trverify_directory_nocheck EXIT 1 OUTPUT "COUNTEREXAMPLE +[^\n]*add_one"
            COMMAND trverify ${_trv}/dir)

# --json parses and has the documented shape; --junit writes one testcase per rule.
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/trverify_formats.cmake [=[
execute_process(COMMAND ${TOOL} --check --json --junit ${OUT}/report.xml ${DIR}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "exit ${rc}\n${out}\n${err}")
endif()
string(JSON n LENGTH "${out}" rules)
string(JSON file GET "${out}" rules 0 file)
string(JSON verdict GET "${out}" rules 1 verdict)
string(JSON expect GET "${out}" rules 1 expect)
string(JSON tasks GET "${out}" rules 0 dtypes real tasks)
string(JSON cex GET "${out}" rules 1 counterexample lhs)
string(JSON total GET "${out}" summary rules)
if(NOT n EQUAL 2 OR NOT file MATCHES "a\\.tr$" OR NOT verdict STREQUAL "counterexample"
   OR NOT expect STREQUAL "counterexample" OR tasks LESS 1 OR cex STREQUAL "" OR NOT total EQUAL 2)
  message(FATAL_ERROR "unexpected JSON:\n${out}")
endif()
file(READ ${OUT}/report.xml xml)
string(REGEX MATCHALL "<testcase " cases "${xml}")
list(LENGTH cases ncases)
if(NOT ncases EQUAL 2 OR NOT xml MATCHES "failures=\"0\"")
  message(FATAL_ERROR "unexpected JUnit:\n${xml}")
endif()
]=])
if(TARGET trverify)
  add_test(NAME e2e/trverify_json_junit
           COMMAND ${CMAKE_COMMAND} -DTOOL=$<TARGET_FILE:trverify> -DDIR=${_trv}/dir -DOUT=${_trv}
                   -P ${CMAKE_CURRENT_BINARY_DIR}/trverify_formats.cmake
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(e2e/trverify_json_junit PROPERTIES LABELS e2e)
endif()
