# Code size for the agent, which runs on every downstream cluster: most of its resident size is mapped code, and the
# text of its executable is resident in full once it has applied and watched (fault-around maps the neighbours of
# every page it runs). These settings trade a little speed of CPU-bound code for smaller code; the agent spends its
# time waiting on the API server and NATS. The hub services do not use them: their speed is benchmarked.
# Debug, sanitizer and fuzzing builds are left as they are.

#! flotilla_small_code(target): compile `target` (a library only the agent links, or its executable) for size, one
#! section per function and data object, so that the agent's link can drop what it does not reference.
function(flotilla_small_code target)
  if(FLOTILLA_SANITIZE OR FLOTILLA_FUZZ)
    return()
  endif()
  target_compile_options(${target} PRIVATE $<$<NOT:$<CONFIG:Debug>>:-Os> -ffunction-sections -fdata-sections)
endfunction()

#! flotilla_sectioned(targets...): one section per function and data object in libraries the agent shares with the
#! hub services, without changing how their code is compiled otherwise (no -Os): the agent's link then drops the
#! functions only the hub services call. The hub services' code and speed are unchanged.
function(flotilla_sectioned)
  if(FLOTILLA_SANITIZE OR FLOTILLA_FUZZ)
    return()
  endif()
  foreach(target ${ARGN})
    target_compile_options(${target} PRIVATE -ffunction-sections -fdata-sections)
  endforeach()
endfunction()

#! flotilla_small_link(executable): link without the sections nothing references (every inline function and
#! template instance has its own section in any object; with flotilla_small_code every function has).
function(flotilla_small_link target)
  if(FLOTILLA_SANITIZE OR FLOTILLA_FUZZ)
    return()
  endif()
  target_link_options(${target} PRIVATE $<$<NOT:$<CONFIG:Debug>>:-Wl,--gc-sections>)
endfunction()
