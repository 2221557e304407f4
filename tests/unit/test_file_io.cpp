// write_file_atomic in both durabilities, sync_filesystem and the temporary-file names.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>

#include "framework/core/file_io.h"
#include "test_dataset_util.h"

namespace qflow {
namespace {

std::vector<std::string> names_in(const std::string& folder) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

TEST_CASE("write_file_atomic: Synced and Deferred replace the file whole and leave no temporary file") {
  test::TempDir dir("file_io_write");
  const std::string path = dir.file("artifact.bin");
  for (const Durability durability : {Durability::Synced, Durability::Deferred}) {
    REQUIRE(write_file_atomic(path, "first version", durability).is_ok());
    REQUIRE(write_file_atomic(path, std::string("second\0version", 14), durability).is_ok());
    Expected<std::string> back = read_file(path);
    REQUIRE(back.has_value());
    CHECK(*back == std::string("second\0version", 14));
    CHECK(names_in(dir.path()) == std::vector<std::string>{"artifact.bin"});
  }
  CHECK(sync_filesystem(dir.path()).is_ok());
}

TEST_CASE("write_file_atomic and sync_filesystem name the path they cannot use") {
  test::TempDir dir("file_io_errors");
  const std::string missing = dir.file("no_such_folder");
  const Status write = write_file_atomic(missing + "/a.txt", "x", Durability::Deferred);
  CHECK(write.code() == StatusCode::IoError);
  CHECK(write.message().find("cannot write '" + missing + "/a.txt'") == 0);
  const Status sync = sync_filesystem(missing);
  CHECK(sync.code() == StatusCode::IoError);
  CHECK(sync.message().find("cannot open '" + missing + "'") == 0);
}

TEST_CASE("is_atomic_temp_name: <name>.tmp.<digits> only") {
  CHECK(is_atomic_temp_name("model.onnx.tmp.1234"));
  CHECK_FALSE(is_atomic_temp_name("model.onnx.tmp."));
  CHECK_FALSE(is_atomic_temp_name(".tmp.12"));
  CHECK_FALSE(is_atomic_temp_name("model.onnx.tmp.12a"));
  CHECK_FALSE(is_atomic_temp_name("model.onnx"));
}

}  // namespace qflow
