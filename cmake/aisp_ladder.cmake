# aisp_add_ladder(NAME <chNN_ladder> SOURCES <variant .cu files> [LIBRARIES <libs>])
#
# One helper per concept (docs/style.md, rule 18). A ladder is an OBJECT library: its variants register
# themselves through static objects, which a static library would let the linker drop. Every binary that
# embeds the ladders (aisp, aisp_gpu_tests, aisp_selftest) links the objects of all of them, and the GPU
# correctness test (tests/gpu) then covers every registered variant automatically.
function(aisp_add_ladder)
  cmake_parse_arguments(L "" "NAME" "SOURCES;LIBRARIES" ${ARGN})
  if(NOT L_NAME OR NOT L_SOURCES)
    message(FATAL_ERROR "aisp_add_ladder needs NAME and SOURCES")
  endif()
  set(tgt aisp_ladder_${L_NAME})
  add_library(${tgt} OBJECT ${L_SOURCES})
  aisp_target_defaults(${tgt})
  target_link_libraries(${tgt} PUBLIC aisp_device ${L_LIBRARIES})
  set_property(GLOBAL APPEND PROPERTY AISP_LADDERS ${tgt})
endfunction()

# Links every ladder registered so far into `tgt`.
function(aisp_link_ladders tgt)
  get_property(ladders GLOBAL PROPERTY AISP_LADDERS)
  foreach(l IN LISTS ladders)
    target_sources(${tgt} PRIVATE $<TARGET_OBJECTS:${l}>)
    target_link_libraries(${tgt} PRIVATE ${l})
  endforeach()
endfunction()
