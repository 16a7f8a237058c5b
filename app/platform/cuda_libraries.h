// Where the CUDA plugin's libraries (CUDA runtime, cuBLAS, cuDNN, NCCL) come
// from. The system's places first: the loader's own search (LD_LIBRARY_PATH,
// the plugin's RUNPATH, ld.so.cache). A library the loader cannot find there
// is taken from NVIDIA's pip wheels (`site-packages/nvidia/<name>/lib`) of
// the Python environments of python_prefixes(), loaded by full path before
// the plugin, so that the plugin's dependency on its soname is met.
#pragma once

#include <string>
#include <vector>

namespace lockstep::app {

// Python installation prefixes, in search order: $VIRTUAL_ENV,
// $CONDA_PREFIX, the parent of the folder of each `python3` on $PATH,
// ~/.local, /usr/local, /usr (unset or repeated ones left out).
std::vector<std::string> python_prefixes();

// The existing folders <prefix>/lib/python3*/{site,dist}-packages/nvidia/*/lib
// of each prefix, in prefix order (sorted within one prefix).
std::vector<std::string> wheel_library_dirs(const std::vector<std::string>& prefixes);

// The soname a failed dlopen could not find ("libcudnn.so.9" from
// "libcudnn.so.9: cannot open shared object file: No such file or
// directory"); "" when the error is another one.
std::string missing_library(const std::string& dlopen_error);

// dir/soname for the first dir that holds it; "" when none does.
std::string find_library_in(const std::string& soname, const std::vector<std::string>& dirs);

// dlopen(path, RTLD_NOW | local_or_global); each library it cannot find is
// loaded first from `dirs` (globally, by full path) and the open retried.
// Null with `error` (dlerror's text) when it still fails.
void* open_with_fallback(const std::string& path, const std::vector<std::string>& dirs, bool global,
                         std::string& error);

// The file of the loaded library whose name starts with `prefix`
// ("libcudnn.so"), as the loader mapped it; "" when none is loaded.
std::string loaded_library_path(const std::string& prefix);

}  // namespace lockstep::app
