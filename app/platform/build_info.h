// What this lockstep binary was built with, for `lockstep info` and the
// start-up banner.
#pragma once

#include <string>

namespace lockstep::app {

// Multi-line description: version, compiler, backends and libraries.
std::string build_info();

}  // namespace lockstep::app
