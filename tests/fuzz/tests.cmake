# Every fuzz target is also built as a plain program that replays the inputs saved under
# tests/fuzz/regressions/<target>/ (crashes the fuzzers found, now fixed), so `make test` and the
# sanitizer builds keep them fixed without clang or libFuzzer.
if(NOT IW_FUZZ)
  file(GLOB IW_FUZZ_TARGETS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_*.cpp)
  foreach(src ${IW_FUZZ_TARGETS})
    get_filename_component(name ${src} NAME_WE)
    add_executable(${name}_replay ${src} ${CMAKE_SOURCE_DIR}/tests/fuzz/replay_main.cpp)
    target_link_libraries(${name}_replay PRIVATE iw_server iw_warnings)
    set(dir ${CMAKE_SOURCE_DIR}/tests/fuzz/regressions/${name})
    if(EXISTS ${dir})
      add_test(NAME fuzz_regressions_${name} COMMAND ${name}_replay ${dir})
      set_tests_properties(fuzz_regressions_${name} PROPERTIES LABELS fuzz)
    endif()
  endforeach()
endif()
