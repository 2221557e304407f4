# Sourced by the MPI pipeline tests (check_mpi_*.sh) after they set qflow, source_dir, work and
# with_mpi from their arguments: skips (exit 77) with the reason when qflow was built without
# QFLOW_MPI or mpirun is missing, makes a fresh WORK_DIR, enters SOURCE_DIR and sets `mpi`, the
# mpirun command line up to and including -np.
case "$with_mpi" in
  ON | on | 1 | TRUE | true) ;;
  *) echo "SKIP: qflow was built without QFLOW_MPI (install libboost-mpi-dev openmpi-bin and reconfigure)"; exit 77 ;;
esac
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found (apt-get install openmpi-bin)"; exit 77; }
rm -rf "$work" && mkdir -p "$work"
cd "$source_dir" || exit 1
# As root (containers, CI) Open MPI wants to be told; --oversubscribe allows more ranks than cores.
mpi=(mpirun --oversubscribe -np)
[ "$(id -u)" = 0 ] && mpi=(mpirun --allow-run-as-root --oversubscribe -np)
# Shared-memory transport only; the ranks of these tests share one machine.
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
