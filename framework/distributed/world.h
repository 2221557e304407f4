// The ranks one `qflow run` is spread over: MPI's world under mpirun/srun, a world of one
// process otherwise (or when qflow is built without QFLOW_MPI), in which nothing is sent.
#pragma once

#include <string>

namespace qflow {

class World {
 public:
  // Starts MPI when the process was launched by mpirun or srun (their environment variables
  // say so) and qflow was built with MPI; otherwise the world is this process alone and MPI
  // is never touched, so a plain run behaves exactly as without MPI. Call once, in main,
  // before any other thread starts; the returned guard ends MPI when it goes out of scope.
  class Session {
   public:
    Session(int& argc, char**& argv);
    ~Session();
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;
  };

  // The world of this process (one rank of size 1 until a Session started MPI).
  static const World& get();

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool is_root() const { return rank_ == 0; }
  bool distributed() const { return size_ > 1; }

  // Point to point, in the order the two sides agree on (tags keep streams apart).
  void send(int to, int tag, const std::string& bytes) const;
  std::string receive(int from, int tag) const;
  // `bytes` of rank 0 reaches every rank.
  void broadcast_from_root(std::string& bytes) const;
  // This rank reports an error of its own: if mpirun then ends it (another rank ended the
  // job too), it stays quiet instead of saying why it stopped.
  void note_error_reported() const;
  // Ends every rank of the job with `code` (a rank that failed alone must not leave the
  // others waiting for it forever). Returns only in a world of one.
  void abort(int code) const;

 private:
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace qflow
