#include "app/platform/build_info.h"

#include "app/platform/cpu_isa_env.h"

#include <mpi.h>

#include <Eigen/Core>
#include <sstream>
#include <string>

#include "app/platform/cuda_plugin_loader.h"

namespace lockstep::app {

std::string build_info() {
  std::ostringstream out;
  out << "lockstep " << LOCKSTEP_VERSION << "\n";
  out << "  compiler : " << __VERSION__ << "\n";
  out << "  CPU      : Eigen " << EIGEN_WORLD_VERSION << "." << EIGEN_MAJOR_VERSION << "."
      << EIGEN_MINOR_VERSION << ", " << cpu_isa_description() << "\n";
  char mpi_version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(mpi_version, &length);
  std::string mpi(mpi_version, static_cast<size_t>(length));
  if (auto eol = mpi.find('\n'); eol != std::string::npos) mpi.resize(eol);
  out << "  MPI      : " << mpi << "\n";
  out << cuda_plugin_info();
  return out.str();
}

}  // namespace lockstep::app
