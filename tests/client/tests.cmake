# The Kubernetes API client and informer against the test API server (tests/apiserver/server.py).
# run.sh starts the server on a free port, runs client_tests with IW_TEST_APISERVER and
# IW_TEST_TOKEN_FILE set, and always stops the server. Without those variables (running
# client_tests by hand) only the tests that need no server run.
file(GLOB IW_CLIENT_TEST_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/client/*.cpp)
add_executable(client_tests ${IW_CLIENT_TEST_SOURCES})
target_include_directories(client_tests SYSTEM PRIVATE
                           $<TARGET_PROPERTY:doctest::doctest,INTERFACE_INCLUDE_DIRECTORIES>)
target_link_libraries(client_tests PRIVATE iw_server iw_warnings)
add_test(NAME client COMMAND ${CMAKE_SOURCE_DIR}/tests/client/run.sh
         $<TARGET_FILE:client_tests> ${CMAKE_SOURCE_DIR})
set_tests_properties(client PROPERTIES TIMEOUT 300)
