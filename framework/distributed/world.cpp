// World: Boost.MPI's environment and world communicator when built with QFLOW_MPI and
// launched by mpirun/srun; a world of one otherwise.
#include "framework/distributed/world.h"

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include <unistd.h>

#include "framework/core/file_io.h"

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

// mpirun ends the other ranks with SIGTERM when one rank ends without finishing (killed,
// crashed, or an error that called abort). A rank so ended says so in one line, unless it
// reports an error of its own (that is its line), removes the file it was writing and exits.
char ended_line[256];
std::size_t ended_line_size = 0;
std::atomic<bool> error_reported{false};

extern "C" void on_ended_by_launcher(int signal) {
  if (!error_reported.load() && ended_line_size > 0) {
    const ssize_t written = ::write(STDERR_FILENO, ended_line, ended_line_size);
    (void)written;
  }
  remove_temp_in_flight();
  ::_exit(128 + signal);
}

void handle_ended_by_launcher(int rank, int size) {
  const int n = std::snprintf(ended_line, sizeof(ended_line),
                              "qflow: error: rank %d of %d stopped: mpirun ended the job because another rank "
                              "stopped first (an error it printed, or killed or crashed)\n",
                              rank, size);
  ended_line_size = n > 0 ? std::min(static_cast<std::size_t>(n), sizeof(ended_line) - 1) : 0;
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = on_ended_by_launcher;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGTERM, &action, nullptr);
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
  if (the_world().size_ > 1) handle_ended_by_launcher(the_world().rank_, the_world().size_);
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

void World::note_error_reported() const {
#if QFLOW_HAVE_MPI
  error_reported = true;
#endif
}

void World::abort(int code) const {
#if QFLOW_HAVE_MPI
  if (communicator() && size_ > 1) {
    error_reported = true;
    communicator()->abort(code);
  }
#else
  (void)code;
#endif
}

}  // namespace qflow
