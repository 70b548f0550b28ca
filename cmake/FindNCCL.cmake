# FindNCCL: locate NVIDIA's NCCL (header nccl.h, library libnccl).
#
# Searches NCCL_ROOT / $NCCL_ROOT / $NCCL_HOME, the CUDA toolkit (CUDAToolkit_LIBRARY_ROOT,
# CUDAToolkit_TARGET_DIR) and the system paths. Sets:
#   NCCL_FOUND, NCCL_INCLUDE_DIR, NCCL_LIBRARY, NCCL_VERSION (from NCCL_MAJOR/MINOR/PATCH in nccl.h)
# and the imported target NCCL::NCCL.
set(_nccl_hints ${NCCL_ROOT} $ENV{NCCL_ROOT} $ENV{NCCL_HOME} ${CUDAToolkit_LIBRARY_ROOT} ${CUDAToolkit_TARGET_DIR}
    /usr/local/cuda)

find_path(NCCL_INCLUDE_DIR NAMES nccl.h HINTS ${_nccl_hints} PATH_SUFFIXES include)
find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${_nccl_hints} PATH_SUFFIXES lib lib64 lib/x86_64-linux-gnu)

if(NCCL_INCLUDE_DIR AND EXISTS "${NCCL_INCLUDE_DIR}/nccl.h")
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _nccl_major REGEX "^#define NCCL_MAJOR[ \t]+[0-9]+")
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _nccl_minor REGEX "^#define NCCL_MINOR[ \t]+[0-9]+")
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _nccl_patch REGEX "^#define NCCL_PATCH[ \t]+[0-9]+")
  string(REGEX REPLACE ".*NCCL_MAJOR[ \t]+([0-9]+).*" "\\1" _nccl_major "${_nccl_major}")
  string(REGEX REPLACE ".*NCCL_MINOR[ \t]+([0-9]+).*" "\\1" _nccl_minor "${_nccl_minor}")
  string(REGEX REPLACE ".*NCCL_PATCH[ \t]+([0-9]+).*" "\\1" _nccl_patch "${_nccl_patch}")
  if(_nccl_major)
    set(NCCL_VERSION "${_nccl_major}.${_nccl_minor}.${_nccl_patch}")
  endif()
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NCCL REQUIRED_VARS NCCL_LIBRARY NCCL_INCLUDE_DIR VERSION_VAR NCCL_VERSION)

if(NCCL_FOUND AND NOT TARGET NCCL::NCCL)
  add_library(NCCL::NCCL UNKNOWN IMPORTED)
  set_target_properties(NCCL::NCCL PROPERTIES IMPORTED_LOCATION "${NCCL_LIBRARY}"
                                              INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
endif()
mark_as_advanced(NCCL_INCLUDE_DIR NCCL_LIBRARY)
