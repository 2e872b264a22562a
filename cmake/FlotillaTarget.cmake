# Compile settings shared by every Flotilla target: strict warnings (errors by default) for our own code,
# optional sanitizers. Third-party headers are included as SYSTEM by their imported targets, so their
# warnings do not count against us.
set(FLOTILLA_WARNINGS -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wcast-align -Wunused
    -Woverloaded-virtual -Wformat=2 -Wimplicit-fallthrough
    # -Wnull-dereference is left out: at -O2 it fires inside inlined Boost.Asio code we do not own.
    # Designated initializers that leave defaulted members out are our style for option structs.
    -Wno-missing-field-initializers)
if(FLOTILLA_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
  # GCC documents that sanitizer instrumentation makes flow-based warnings report false positives. GCC 12
  # reports -Wmaybe-uninitialized inside <regex> (std::function in _State) for any TU using std::regex, and
  # -Wmismatched-new-delete on Boost.Asio's coroutine frames (libs/http). The normal build keeps both as
  # errors, so here they stay visible but do not stop the build.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    add_compile_options(-Wno-error=maybe-uninitialized -Wno-error=mismatched-new-delete)
  endif()
  # clang 14's -fsanitize=function (part of "undefined", a check GCC does not have) cannot emit its prologue data
  # for split coroutine functions: libs/http's server fails with "Cannot represent a difference across sections".
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    add_compile_options(-fno-sanitize=function)
  endif()
endif()
if(FLOTILLA_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "FLOTILLA_FUZZ needs clang (libFuzzer): configure with -DCMAKE_CXX_COMPILER=clang++-14 "
                        "-DCMAKE_C_COMPILER=clang-14 (Debian: clang-14 and libclang-rt-14-dev)")
  endif()
  # Coverage instrumentation for every target; the fuzz_* executables add libFuzzer itself (fuzz/CMakeLists.txt).
  # The other executables (unit tests) link fine: the sanitizer runtime provides the coverage callbacks.
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  # Boost 1.74 enables co_await under clang only with the Coroutines TS (<experimental/coroutine>, libc++); clang 14
  # implements C++20 coroutines and libstdc++ 12 has <coroutine>, which Boost already detects through __GNUC__ for
  # BOOST_ASIO_HAS_STD_COROUTINE. libs/http's server needs co_await.
  add_compile_definitions(BOOST_ASIO_HAS_CO_AWAIT=1)
endif()

function(flotilla_target_settings target)
  target_compile_options(${target} PRIVATE ${FLOTILLA_WARNINGS})
  if(FLOTILLA_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  # Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility> under GCC 12 (G7).
  target_compile_options(${target} PRIVATE -include utility)
endfunction()

# flotilla_library(name SOURCES ... PUBLIC_DEPS ... PRIVATE_DEPS ...)
function(flotilla_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(flotilla_${name} STATIC ${ARG_SOURCES})
  add_library(flotilla::${name} ALIAS flotilla_${name})
  target_include_directories(flotilla_${name} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include)
  target_link_libraries(flotilla_${name} PUBLIC ${ARG_PUBLIC_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  flotilla_target_settings(flotilla_${name})
endfunction()

# flotilla_service(name SOURCES ... [DEPS ...] [PRIVATE_DEPS ...])
# A service: libflotilla_<name> from SOURCES, linked to what every service uses (core, bus, events, model, service,
# threads) plus DEPS / PRIVATE_DEPS, and the flotilla-<name> executable from the directory's main.cpp.
function(flotilla_service name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  flotilla_library(${name}
    SOURCES ${ARG_SOURCES}
    PUBLIC_DEPS flotilla::core flotilla::bus flotilla::events flotilla::model flotilla::service ${ARG_DEPS}
    PRIVATE_DEPS Threads::Threads ${ARG_PRIVATE_DEPS}
  )
  add_executable(flotilla-${name} main.cpp)
  target_link_libraries(flotilla-${name} PRIVATE flotilla::${name})
  flotilla_target_settings(flotilla-${name})
endfunction()

# flotilla_test(name LABEL unit|integration|e2e [ONE_PROCESS] [TIMEOUT s] [SERVICE service] SOURCES ... DEPS ...)
# Each gtest case becomes its own ctest entry carrying LABEL, so `ctest -L unit` selects by label.
# ONE_PROCESS registers the whole binary as one ctest entry instead: for suites that share expensive servers
# (Kubernetes API servers, the e2e hub) across their cases, which per-case processes would restart every time.
# SERVICE: the test runs the flotilla-<service> executable, whose path it gets as FLOTILLA_<SERVICE>_BINARY.
function(flotilla_test name)
  cmake_parse_arguments(ARG "ONE_PROCESS" "LABEL;TIMEOUT;SERVICE" "SOURCES;DEPS" ${ARGN})
  if(NOT FLOTILLA_BUILD_TESTS)
    return()
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  # flotilla::test_main (tests/support) instead of gtest_main: a skip fails the run when FLOTILLA_REQUIRE_TOOLS=1.
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gmock flotilla::test_main)
  flotilla_target_settings(${name})
  if(ARG_SERVICE)
    string(TOUPPER "${ARG_SERVICE}" service_upper)
    target_compile_definitions(${name} PRIVATE FLOTILLA_${service_upper}_BINARY="$<TARGET_FILE:flotilla-${ARG_SERVICE}>")
    add_dependencies(${name} flotilla-${ARG_SERVICE})
  endif()
  # Collected for the `unit_tests` target (tests/CMakeLists.txt): the sanitizer run builds only what it runs.
  if(ARG_LABEL STREQUAL "unit")
    set_property(GLOBAL APPEND PROPERTY FLOTILLA_UNIT_TESTS ${name})
  endif()
  if(ARG_ONE_PROCESS)
    add_test(NAME ${name} COMMAND ${name})
    set_tests_properties(${name} PROPERTIES LABELS ${ARG_LABEL} TIMEOUT ${ARG_TIMEOUT}
                         ENVIRONMENT "FLOTILLA_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
  else()
    gtest_discover_tests(${name} PROPERTIES LABELS ${ARG_LABEL} TIMEOUT ${ARG_TIMEOUT}
                         ENVIRONMENT "FLOTILLA_SOURCE_DIR=${PROJECT_SOURCE_DIR}"
                         DISCOVERY_TIMEOUT 60)
  endif()
endfunction()

# flotilla_harness_part(name SOURCES ... DEPS ...): one piece of the test harness, flotilla::harness_<name>,
# with headers under tests/harness/<name>/include/flotilla/harness/.
function(flotilla_harness_part name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(flotilla_harness_${name} STATIC ${ARG_SOURCES})
  add_library(flotilla::harness_${name} ALIAS flotilla_harness_${name})
  target_include_directories(flotilla_harness_${name} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include)
  target_link_libraries(flotilla_harness_${name} PUBLIC flotilla::core ${ARG_DEPS})
  target_compile_definitions(flotilla_harness_${name} PUBLIC
    FLOTILLA_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  flotilla_target_settings(flotilla_harness_${name})
endfunction()
