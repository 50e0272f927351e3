# The test Kubernetes API server's own tests (Python 3 standard library only; about 10 s).
add_test(NAME apiserver COMMAND ${IW_PYTHON} ${CMAKE_SOURCE_DIR}/tests/apiserver/test_apiserver.py)
set_tests_properties(apiserver PROPERTIES TIMEOUT 180 LABELS "apiserver")

# Its admission webhook support, against the real binary with the chart's webhook configuration
# (about 6 s). The dev certificates come from the `certs` test (tests/curl/tests.cmake).
add_test(NAME apiserver_admission COMMAND ${IW_PYTHON} ${CMAKE_SOURCE_DIR}/tests/apiserver/test_admission.py
         $<TARGET_FILE:inplace-webhook> ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/certs)
set_tests_properties(apiserver_admission PROPERTIES FIXTURES_REQUIRED dev_certs TIMEOUT 300 LABELS "apiserver")
