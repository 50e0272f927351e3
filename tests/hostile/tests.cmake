# Hostile clients against the real binary: idle-connection floods and half-sent request heads on both
# ports, and memory attacks inside a 256 MiB memory cgroup (root; skipped with a message when the
# cgroup v1 memory hierarchy is missing). Label `hostile`; part of `make test-unit`.
add_test(NAME hostile COMMAND ${IW_PYTHON} ${CMAKE_SOURCE_DIR}/tests/hostile/hostile_test.py
         $<TARGET_FILE:inplace-webhook> ${CMAKE_SOURCE_DIR} ${IW_CERT_DIR})
set_tests_properties(hostile PROPERTIES FIXTURES_REQUIRED dev_certs TIMEOUT 300 LABELS hostile
                     RUN_SERIAL TRUE)
