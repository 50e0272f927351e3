# The release artifacts agree on one version (release/release.sh, README "Releasing"): it builds the Release
# binaries in build-release (reused: seconds when warm, a few minutes cold), packages the chart with the pinned helm
# (cluster/upstream/build.sh helm: built once if missing), and checks every artifact and the refusals.
add_test(NAME release COMMAND ${IW_PYTHON} ${CMAKE_SOURCE_DIR}/tests/release/test_release.py ${CMAKE_SOURCE_DIR}
         ${CMAKE_BINARY_DIR}/release-test)
set_tests_properties(release PROPERTIES TIMEOUT 1500 LABELS "release")
