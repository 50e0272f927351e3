# Chart checks that need no cluster and no helm: Python 3 with Debian's python3-yaml.
# `make chart-test` (tests/chart/helm-test.sh) adds helm lint/template where helm is installed.
add_test(NAME chart COMMAND ${IW_PYTHON} ${CMAKE_SOURCE_DIR}/tests/chart/check_chart.py ${CMAKE_SOURCE_DIR})
