# Exact numbers of any size (tests/rules/*/numbers.tr): true rules with literals beyond int64 and
# 18 digits are proved; false rules whose counterexamples leave int64 get replayed counterexamples.
trsplat_e2e(rules_numbers_check EXIT 0 OUTPUT "10 as expected, 0 not" COMMAND trverify --check
            tests/rules/proved/numbers.tr tests/rules/counterexample/numbers.tr)
if(TEST e2e/rules_numbers_check)
  set_tests_properties(e2e/rules_numbers_check PROPERTIES LABELS corpus)
endif()
# The counterexample is printed with every digit.
trsplat_e2e(rules_numbers_cex_digits EXIT 1 OUTPUT "lhs = 1000000000000000000000000000000, rhs = 0"
            COMMAND trverify --rule add_10_pow_30 tests/rules/counterexample/numbers.tr)
