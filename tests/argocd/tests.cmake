# The Argo CD health check (charts/inplace-webhook/argocd/health.lua) under Debian's lua5.1 (`make deps` installs it;
# without it the test fails rather than passing unchecked).
add_test(NAME argocd_health COMMAND ${IW_PYTHON} ${CMAKE_SOURCE_DIR}/tests/argocd/test_health.py)
