# Writes TOOL's man page and bash completion (from its own --man and --bash-completion) into OUT_DIR.
execute_process(COMMAND ${TOOL} --man OUTPUT_FILE ${OUT_DIR}/${NAME}.1 RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "${NAME} --man failed: ${rc}")
endif()
execute_process(COMMAND ${TOOL} --bash-completion OUTPUT_FILE ${OUT_DIR}/${NAME}.bash RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "${NAME} --bash-completion failed: ${rc}")
endif()
