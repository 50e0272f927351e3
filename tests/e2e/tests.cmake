# End-to-end scenarios: the test API server calls the real webhook binary, whose loop drives the
# in-place updates (tests/e2e/README.md). About two minutes.
add_test(NAME e2e COMMAND ${IW_PYTHON} ${CMAKE_SOURCE_DIR}/tests/e2e/test_e2e.py
         $<TARGET_FILE:inplace-webhook> ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/certs)
set_tests_properties(e2e PROPERTIES FIXTURES_REQUIRED dev_certs TIMEOUT 600 LABELS "e2e")
