# The Argo CD health check (charts/inplace-webhook/argocd/health.lua) under Debian's lua5.1; skipped without it.
add_test(NAME argocd_health COMMAND ${IW_PYTHON} ${CMAKE_SOURCE_DIR}/tests/argocd/test_health.py)
set_tests_properties(argocd_health PROPERTIES SKIP_RETURN_CODE 77)
