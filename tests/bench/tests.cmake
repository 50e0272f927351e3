# README.md's rollout table against `make bench-cluster`'s own output format.
add_test(NAME readme_tables COMMAND ${IW_PYTHON} ${CMAKE_SOURCE_DIR}/tests/bench/test_readme_tables.py
         ${CMAKE_SOURCE_DIR})
