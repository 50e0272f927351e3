# The test Kubernetes API server's own tests (Python 3 standard library only; about 10 s).
add_test(NAME apiserver COMMAND python3 ${CMAKE_SOURCE_DIR}/tests/apiserver/test_apiserver.py)
set_tests_properties(apiserver PROPERTIES TIMEOUT 180 LABELS "apiserver")
