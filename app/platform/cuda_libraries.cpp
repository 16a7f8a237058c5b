#include "app/platform/cuda_libraries.h"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>

namespace lockstep::app {
namespace fs = std::filesystem;

std::vector<std::string> python_prefixes() {
  std::vector<std::string> prefixes;
  const auto add = [&](const std::string& p) {
    if (!p.empty() && std::find(prefixes.begin(), prefixes.end(), p) == prefixes.end()) {
      prefixes.push_back(p);
    }
  };
  for (const char* name : {"VIRTUAL_ENV", "CONDA_PREFIX"}) {
    if (const char* v = std::getenv(name)) add(v);
  }
  if (const char* path = std::getenv("PATH")) {
    std::istringstream dirs(path);
    std::error_code ec;
    for (std::string dir; std::getline(dirs, dir, ':');) {
      if (!dir.empty() && fs::exists(fs::path(dir) / "python3", ec)) {
        add(fs::path(dir).parent_path().string());
      }
    }
  }
  if (const char* home = std::getenv("HOME")) add(std::string(home) + "/.local");
  add("/usr/local");
  add("/usr");
  return prefixes;
}

std::vector<std::string> wheel_library_dirs(const std::vector<std::string>& prefixes) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const std::string& prefix : prefixes) {
    std::set<std::string> here;  // sorted within one prefix
    const fs::path lib = fs::path(prefix) / "lib";
    for (fs::directory_iterator it(lib, ec), end; !ec && it != end; it.increment(ec)) {
      if (it->path().filename().string().rfind("python3", 0) != 0) continue;
      for (const char* packages : {"site-packages", "dist-packages"}) {
        const fs::path nvidia = it->path() / packages / "nvidia";
        std::error_code ec2;
        for (fs::directory_iterator w(nvidia, ec2), wend; !ec2 && w != wend; w.increment(ec2)) {
          if (fs::is_directory(w->path() / "lib", ec2)) here.insert((w->path() / "lib").string());
        }
      }
    }
    found.insert(found.end(), here.begin(), here.end());
  }
  return found;
}

std::string missing_library(const std::string& dlopen_error) {
  const std::string tail = ": cannot open shared object file";
  const size_t end = dlopen_error.find(tail);
  if (end == std::string::npos) return "";
  // The name is the text before the tail, after the last ": " (dlerror puts
  // the library that needed it first, when there is one).
  const size_t colon = dlopen_error.rfind(": ", end == 0 ? 0 : end - 1);
  const size_t start = colon == std::string::npos ? 0 : colon + 2;
  const std::string name = dlopen_error.substr(start, end - start);
  return name.find('/') == std::string::npos ? name : "";
}

std::string find_library_in(const std::string& soname, const std::vector<std::string>& dirs) {
  std::error_code ec;
  for (const std::string& dir : dirs) {
    const fs::path p = fs::path(dir) / soname;
    if (fs::exists(p, ec)) return p.string();
  }
  return "";
}

void* open_with_fallback(const std::string& path, const std::vector<std::string>& dirs, bool global,
                         std::string& error) {
  std::set<std::string> tried;
  const int mode = RTLD_NOW | (global ? RTLD_GLOBAL : RTLD_LOCAL);
  for (;;) {
    if (void* handle = dlopen(path.c_str(), mode)) return handle;
    const char* e = dlerror();
    error = e != nullptr ? e : "unknown dlopen error";
    const std::string soname = missing_library(error);
    const std::string found = soname.empty() ? "" : find_library_in(soname, dirs);
    if (found.empty() || !tried.insert(soname).second) return nullptr;
    std::string inner;
    if (open_with_fallback(found, dirs, true, inner) == nullptr) {
      error += " (and " + found + " failed: " + inner + ")";
      return nullptr;
    }
  }
}

std::string loaded_library_path(const std::string& prefix) {
  struct Search {
    const std::string* prefix;
    std::string path;
  } search{&prefix, ""};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* s = static_cast<Search*>(data);
        if (info->dlpi_name == nullptr || *info->dlpi_name == '\0') return 0;
        const std::string name = fs::path(info->dlpi_name).filename().string();
        if (name.rfind(*s->prefix, 0) != 0) return 0;
        s->path = info->dlpi_name;
        return 1;
      },
      &search);
  return search.path;
}

}  // namespace lockstep::app
