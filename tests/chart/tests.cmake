# Chart checks that need no cluster and no helm: Python 3 with Debian's python3-yaml.
# `make chart-test` (tests/chart/helm-test.sh) adds helm lint/template where helm is installed.
add_test(NAME chart COMMAND ${IW_PYTHON} ${CMAKE_SOURCE_DIR}/tests/chart/check_chart.py ${CMAKE_SOURCE_DIR})
# The alerts and the dashboard against the binary's real /metrics, with Debian's promtool (package prometheus,
# `make deps`; without it the test fails rather than passing unchecked).
add_test(NAME chart_alerts COMMAND ${IW_PYTHON} ${CMAKE_SOURCE_DIR}/tests/chart/check_alerts.py
         $<TARGET_FILE:inplace-webhook> ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/certs)
set_tests_properties(chart_alerts PROPERTIES FIXTURES_REQUIRED dev_certs TIMEOUT 120)
