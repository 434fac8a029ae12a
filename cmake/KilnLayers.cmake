# kiln_layer(NAME SOURCES file... SEES path...)
#
# One layer of Kiln as an OBJECT library whose sources can include only what the layer may
# see: the public headers (include/) and the source paths listed under SEES, each a folder
# or a file relative to the source root. Those paths are symlinked into a per-layer include
# root in the build tree, and the source root itself is not on the include path, so an
# include that runs back up a layer (ops/ including jit/, jit/ including runtime/cuda/)
# fails to compile. The layers' objects all go into the one `kiln` library.
function(kiln_layer name)
  cmake_parse_arguments(LAYER "" "" "SOURCES;SEES" ${ARGN})
  add_library(${name} OBJECT ${LAYER_SOURCES})
  set(root ${PROJECT_BINARY_DIR}/layers/${name})
  file(REMOVE_RECURSE ${root})
  foreach(path ${LAYER_SEES})
    get_filename_component(parent ${root}/${path} DIRECTORY)
    file(MAKE_DIRECTORY ${parent})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${path} ${root}/${path} SYMBOLIC)
  endforeach()
  target_include_directories(${name} PRIVATE ${root} ${PROJECT_SOURCE_DIR}/include)
  # A switch over ops, classes or kernel families names every case: no `default:` hides
  # an op that a device forgot.
  target_compile_options(${name} PRIVATE -Wall -Wextra -Werror=switch)
  target_link_libraries(${name} PRIVATE ${KILN_PRIVATE_DEPENDENCIES})
endfunction()
