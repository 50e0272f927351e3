# The curl suite and the server's edge tests run the real binary on loopback.
set(IW_CERT_DIR ${CMAKE_BINARY_DIR}/certs)
add_test(NAME certs COMMAND ${CMAKE_SOURCE_DIR}/certs/gen-dev-certs.sh ${IW_CERT_DIR})
set_tests_properties(certs PROPERTIES FIXTURES_SETUP dev_certs)
add_test(NAME curl_cases COMMAND ${IW_PYTHON} ${CMAKE_SOURCE_DIR}/tests/curl/run_cases.py
         $<TARGET_FILE:inplace-webhook> ${CMAKE_SOURCE_DIR} ${IW_CERT_DIR})
add_test(NAME server_edges COMMAND ${IW_PYTHON} ${CMAKE_SOURCE_DIR}/tests/curl/server_test.py
         $<TARGET_FILE:inplace-webhook> ${CMAKE_SOURCE_DIR} ${IW_CERT_DIR})
set_tests_properties(curl_cases server_edges PROPERTIES FIXTURES_REQUIRED dev_certs TIMEOUT 300)
