#include "app/platform/build_info.h"

#include "app/platform/cpu_isa_env.h"

#include <mpi.h>

#include <Eigen/Core>
#include <sstream>
#include <string>

#include "app/platform/cuda_plugin_loader.h"
#include "distributed/mpi_communicator.h"

namespace lockstep::app {

std::string build_info() {
  std::ostringstream out;
  out << "lockstep " << LOCKSTEP_VERSION << "\n";
  out << "  compiler : " << __VERSION__ << "\n";
  out << "  CPU      : Eigen " << EIGEN_WORLD_VERSION << "." << EIGEN_MAJOR_VERSION << "."
      << EIGEN_MINOR_VERSION << ", " << cpu_isa_description() << "\n";
  out << "  MPI      : " << distributed::mpi_library_version() << "\n";
  out << cuda_plugin_info();
  return out.str();
}

}  // namespace lockstep::app
