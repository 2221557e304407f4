// World: Boost.MPI's environment and world communicator when built with QFLOW_MPI and
// launched by mpirun/srun; a world of one otherwise.
#include "framework/distributed/world.h"

#include <cstdlib>
#include <memory>

#if QFLOW_HAVE_MPI
#include <boost/mpi/collectives/broadcast.hpp>
#include <boost/mpi/communicator.hpp>
#include <boost/mpi/environment.hpp>
#include <boost/serialization/string.hpp>
#endif

namespace qflow {

namespace {

World& the_world() {
  static World world;
  return world;
}

#if QFLOW_HAVE_MPI
std::unique_ptr<boost::mpi::environment>& environment() {
  static std::unique_ptr<boost::mpi::environment> env;
  return env;
}

std::unique_ptr<boost::mpi::communicator>& communicator() {
  static std::unique_ptr<boost::mpi::communicator> comm;
  return comm;
}

// mpirun (Open MPI) and srun (PMI/PMIx) set these in every process they launch; a plain
// `qflow run` never initializes MPI, which would otherwise probe the network at start.
bool launched_by_mpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"})
    if (std::getenv(name)) return true;
  return false;
}
#endif

}  // namespace

World::Session::Session(int& argc, char**& argv) {
#if QFLOW_HAVE_MPI
  if (!launched_by_mpi()) return;
  // Only the thread running the stages talks to other ranks (the runner runs one stage at
  // a time when distributed; sweep threads never call MPI).
  environment() = std::make_unique<boost::mpi::environment>(argc, argv, boost::mpi::threading::funneled);
  communicator() = std::make_unique<boost::mpi::communicator>();
  the_world().rank_ = communicator()->rank();
  the_world().size_ = communicator()->size();
#else
  (void)argc;
  (void)argv;
#endif
}

World::Session::~Session() {
#if QFLOW_HAVE_MPI
  communicator().reset();
  environment().reset();  // MPI_Finalize
#endif
}

const World& World::get() { return the_world(); }

void World::send(int to, int tag, const std::string& bytes) const {
#if QFLOW_HAVE_MPI
  if (communicator()) communicator()->send(to, tag, bytes);
#else
  (void)to, (void)tag, (void)bytes;
#endif
}

std::string World::receive(int from, int tag) const {
  std::string bytes;
#if QFLOW_HAVE_MPI
  if (communicator()) communicator()->recv(from, tag, bytes);
#else
  (void)from, (void)tag;
#endif
  return bytes;
}

void World::broadcast_from_root(std::string& bytes) const {
#if QFLOW_HAVE_MPI
  if (communicator()) boost::mpi::broadcast(*communicator(), bytes, 0);
#else
  (void)bytes;
#endif
}

void World::abort(int code) const {
#if QFLOW_HAVE_MPI
  if (communicator() && size_ > 1) communicator()->abort(code);
#else
  (void)code;
#endif
}

}  // namespace qflow
