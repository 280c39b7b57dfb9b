# The rule corpus, checked against each rule's `expect` (trverify --check exits 0 only when every
# verdict is the expected one), label corpus. One run per folder, so that CI output says which part
# failed and no rule is verified twice in the suite: the demo rules are listed file by file (a
# directory argument may recurse into rules/xla and rules/xla-mutants).
trsplat_e2e(rules_demo_check EXIT 0 COMMAND trverify --check
            rules/elementwise.tr rules/shape.tr rules/reduce.tr rules/wrong.tr)
trsplat_e2e(rules_xla_check EXIT 0 COMMAND trverify --check rules/xla)
trsplat_e2e(rules_xla_mutants_check EXIT 0 COMMAND trverify --check rules/xla-mutants)
# Without --check a file of wrong rules must fail (exit 1: not every rule is proved).
trsplat_e2e(rules_wrong_not_proved EXIT 1 COMMAND trverify rules/wrong.tr)
# The corpus runs take solver time (minutes on CI's 2 cores when some tasks run to their timeout);
# COST makes ctest start the long ones first on a clean build (no timing history yet).
foreach(_t rules_demo_check rules_xla_check rules_xla_mutants_check)
  if(TEST e2e/${_t})
    set_tests_properties(e2e/${_t} PROPERTIES TIMEOUT 1800 LABELS corpus)
  endif()
endforeach()
if(TEST e2e/rules_xla_check)
  set_tests_properties(e2e/rules_xla_check PROPERTIES COST 40)
  set_tests_properties(e2e/rules_xla_mutants_check PROPERTIES COST 20)
endif()
# Regression rules of the soundness audit, one folder per expected verdict (tests/rules/README.md).
foreach(_v proved counterexample vacuous)
  trsplat_e2e(rules_regressions_${_v} EXIT 0 COMMAND trverify --check tests/rules/${_v})
  if(TEST e2e/rules_regressions_${_v})
    set_tests_properties(e2e/rules_regressions_${_v} PROPERTIES LABELS corpus)
  endif()
endforeach()
