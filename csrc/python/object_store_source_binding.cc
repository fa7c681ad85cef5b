// ObjectStoreSource for Python (S3 or Google Cloud Storage, by its `store`):
// made from resolved URLs and settings, given fresh credentials by the Python
// side, and handed to ShardSet, which then reads through it with no Python
// in the loop. Its own fetch and will_need serve the RangeSource protocol
// for callers that read ranges directly.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "python/bindings.h"
#include "sources/cache_files.h"
#include "sources/object_store_source.h"

namespace py = pybind11;

namespace sdsl_python {
namespace {

// ShardSet owns its source; an ObjectStoreSource is shared with the Python object
// that sets its credentials and reads its counters.
class SharedObjectStoreSource : public sdsl::ShardSource {
 public:
  explicit SharedObjectStoreSource(std::shared_ptr<sdsl::ObjectStoreSource> source)
      : source_(std::move(source)) {}
  size_t num_files() const override { return source_->num_files(); }
  uint64_t Size(size_t file) override { return source_->Size(file); }
  std::string Name(size_t file) const override { return source_->Name(file); }
  using sdsl::ShardSource::Fetch;
  void Fetch(sdsl::RangeRequest* requests, size_t count, const sdsl::FetchPlan& plan) override {
    source_->Fetch(requests, count, plan);
  }
  sdsl::FetchPlan PlanBatch(const sdsl::RangeRequest* ranges, size_t count) override {
    return source_->PlanBatch(ranges, count);
  }
  void WillNeed(const sdsl::RangeRequest* ranges, size_t count) override {
    source_->WillNeed(ranges, count);
  }
  void OpenShards(const std::vector<size_t>& files) override { source_->OpenShards(files); }
  bool DropCopy(size_t file, uint64_t offset, uint64_t size) override {
    return source_->DropCopy(file, offset, size);
  }
  bool Refetch(size_t file, int failures, bool copy_dropped) override {
    return source_->Refetch(file, failures, copy_dropped);
  }
  int CheckAttempts() const override { return source_->CheckAttempts(); }

 private:
  std::shared_ptr<sdsl::ObjectStoreSource> source_;
};

sdsl::ObjectStoreKind StoreKind(const std::string& store) {
  if (store == "s3") return sdsl::ObjectStoreKind::kS3;
  if (store == "gcs") return sdsl::ObjectStoreKind::kGcs;
  throw py::value_error("store must be 's3' or 'gcs', not '" + store + "'");
}

std::shared_ptr<sdsl::ObjectStoreSource> MakeObjectStoreSource(
    std::vector<std::string> uris, std::vector<std::string> urls, int max_attempts,
    double backoff_seconds, double backoff_max_seconds, double connect_timeout, double read_timeout,
    size_t requests_in_flight, uint64_t tail_bytes, uint64_t head_bytes, uint64_t readahead_bytes,
    uint64_t part_bytes, const std::string& store, std::string cache_dir, uint64_t cache_limit,
    uint64_t cache_floor, bool check_openings) {
  if (requests_in_flight < 1) throw py::value_error("requests_in_flight must be at least 1");
  if (connect_timeout <= 0 || read_timeout <= 0 || backoff_seconds < 0 || backoff_max_seconds < 0) {
    throw py::value_error("timeouts must be positive and backoff times not negative");
  }
  if (tail_bytes < 1 || part_bytes < 1)
    throw py::value_error("tail_bytes and part_bytes must be positive");
  sdsl::ObjectStoreSettings settings;
  settings.store = StoreKind(store);
  settings.uris = std::move(uris);
  settings.urls = std::move(urls);
  settings.max_attempts = max_attempts;
  settings.backoff_s = backoff_seconds;
  settings.backoff_max_s = backoff_max_seconds;
  settings.http.connect_timeout_s = connect_timeout;
  settings.http.stall_timeout_s = read_timeout;
  settings.http.max_in_flight = requests_in_flight;
  settings.tail_bytes = tail_bytes;
  settings.head_bytes = head_bytes;
  settings.readahead_bytes = readahead_bytes;
  settings.part_bytes = part_bytes;
  settings.check_openings = check_openings;
  settings.cache_dir = std::move(cache_dir);
  settings.cache_limit = cache_limit;
  settings.cache_floor = cache_floor;
  py::gil_scoped_release release;  // a cache directory is created and read
  return std::make_shared<sdsl::ObjectStoreSource>(std::move(settings));
}

void Fetch(sdsl::ObjectStoreSource& source, const py::list& requests) {
  std::vector<sdsl::RangeRequest> ranges;
  std::vector<py::buffer_info> buffers;  // held until the fetch is done
  ranges.reserve(requests.size());
  buffers.reserve(requests.size());
  for (const py::handle item : requests) {
    const auto request = item.cast<py::tuple>();
    if (request.size() != 3)
      throw py::value_error("each request is (file, offset, writable buffer)");
    buffers.push_back(request[2].cast<py::buffer>().request(/*writable=*/true));
    sdsl::RangeRequest range;
    range.file = request[0].cast<size_t>();
    range.offset = request[1].cast<uint64_t>();
    range.size = static_cast<uint64_t>(buffers.back().size * buffers.back().itemsize);
    range.dst = static_cast<uint8_t*>(buffers.back().ptr);
    if (range.file >= source.num_files()) {
      throw py::index_error("no shard " + std::to_string(range.file));
    }
    ranges.push_back(range);
  }
  py::gil_scoped_release release;
  source.Fetch(ranges.data(), ranges.size());
}

void WillNeed(sdsl::ObjectStoreSource& source,
              const std::vector<std::tuple<size_t, uint64_t, uint64_t>>& wanted) {
  std::vector<sdsl::RangeRequest> ranges;
  for (const auto& [file, offset, size] : wanted) {
    sdsl::RangeRequest range;
    range.file = file;
    range.offset = offset;
    range.size = size;
    ranges.push_back(range);
  }
  py::gil_scoped_release release;
  source.WillNeed(ranges.data(), ranges.size());
}

}  // namespace

std::unique_ptr<sdsl::ShardSource> NativeSourceOf(const py::object& source) {
  if (!py::isinstance<sdsl::ObjectStoreSource>(source)) return nullptr;
  return std::make_unique<SharedObjectStoreSource>(
      source.cast<std::shared_ptr<sdsl::ObjectStoreSource>>());
}

void BindObjectStoreSource(py::module_& m) {
  m.def(
      "node_cache_faults",
      [](bool no_rename_noreplace, bool posix_locks) {
        sdsl::CacheFaults().no_rename_noreplace = no_rename_noreplace;
        sdsl::CacheFaults().posix_locks = posix_locks;
      },
      py::arg("no_rename_noreplace") = false, py::arg("posix_locks") = false,
      "Makes the node caches of this process behave as on a filesystem without "
      "RENAME_NOREPLACE or with NFS's per-process locks; for the tests.");
  py::class_<sdsl::ObjectStoreSource, std::shared_ptr<sdsl::ObjectStoreSource>>(
      m, "ObjectStoreSource",
      "Shard byte ranges from S3 or Google Cloud Storage, fetched natively with ranged GETs")
      .def(py::init(&MakeObjectStoreSource), py::arg("uris"), py::arg("urls"),
           py::arg("max_attempts"), py::arg("backoff_seconds"), py::arg("backoff_max_seconds"),
           py::arg("connect_timeout"), py::arg("read_timeout"), py::arg("requests_in_flight"),
           py::arg("tail_bytes"), py::arg("head_bytes"), py::arg("readahead_bytes"),
           py::arg("part_bytes"), py::arg("store") = "s3", py::arg("cache_dir") = "",
           py::arg("cache_limit") = 0, py::arg("cache_floor") = uint64_t{1} << 30,
           py::arg("check_openings") = false)
      .def(
          "set_credentials",
          [](sdsl::ObjectStoreSource& source, std::string region, std::string access_key,
             std::string secret_key, std::string session_token) {
            sdsl::HttpCredentials credentials;
            credentials.region = std::move(region);
            credentials.access_key = std::move(access_key);
            credentials.secret_key = std::move(secret_key);
            credentials.session_token = std::move(session_token);
            source.SetCredentials(std::move(credentials));
          },
          py::arg("region"), py::arg("access_key"), py::arg("secret_key"), py::arg("session_token"),
          "Credentials for every request from now on; an empty access key sends them unsigned.")
      .def(
          "set_bearer_token",
          [](sdsl::ObjectStoreSource& source, std::string token) {
            sdsl::HttpCredentials credentials;
            credentials.bearer_token = std::move(token);
            source.SetCredentials(std::move(credentials));
          },
          py::arg("token"),
          "An OAuth 2 access token every request carries from now on (Authorization: Bearer); "
          "an empty one sends them anonymous.")
      .def("size", &sdsl::ObjectStoreSource::Size, py::arg("file"),
           py::call_guard<py::gil_scoped_release>())
      .def("name", &sdsl::ObjectStoreSource::Name, py::arg("file"))
      .def("fetch", &Fetch, py::arg("requests"),
           "Fills each (file, offset, writable buffer) with those bytes of the shard.")
      .def("will_need", &WillNeed, py::arg("ranges"),
           "Starts fetching (file, offset, size) ranges in the background; never raises.")
      .def("set_readahead_into_cache", &sdsl::ObjectStoreSource::set_readahead_into_cache,
           py::arg("into_cache"),
           "With a node cache: announcements fetch into it only, not into memory too.")
      .def("open_shards", &sdsl::ObjectStoreSource::OpenShards, py::arg("files"),
           py::call_guard<py::gil_scoped_release>(),
           "Fetches the footers of these shards that are not open yet, all at once.")
      .def("wait_readahead", &sdsl::ObjectStoreSource::WaitForReadahead, py::arg("seconds"),
           py::call_guard<py::gil_scoped_release>(),
           "Waits until the ranges announced so far are fetched; False on timeout.")
      .def("wait_writes", &sdsl::ObjectStoreSource::WaitForWrites, py::arg("seconds"),
           py::call_guard<py::gil_scoped_release>(),
           "Waits until the node-cache writes queued so far are done; False on timeout.")
      .def("close", &sdsl::ObjectStoreSource::Close, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("counters",
                             [](const sdsl::ObjectStoreSource& source) {
                               const sdsl::ObjectStoreCounters counters = source.counters();
                               return py::make_tuple(counters.requests, counters.bytes,
                                                     counters.retries, counters.ahead_hits,
                                                     counters.refetches);
                             })
      .def_property_readonly(
          "cache_counters",
          [](const sdsl::ObjectStoreSource& source) -> py::object {
            const sdsl::NodeCache* cache = source.node_cache();
            if (cache == nullptr) return py::none();
            const sdsl::NodeCacheCounters counters = cache->counters();
            return py::make_tuple(counters.hits, counters.misses, counters.hit_bytes,
                                  counters.stored_bytes, counters.waits, counters.dropped);
          },
          "(hits, misses, hit_bytes, stored_bytes, waits, dropped) of the node cache, or None")
      .def_property_readonly(
          "cache_warning",
          [](const sdsl::ObjectStoreSource& source) {
            const sdsl::NodeCache* cache = source.node_cache();
            return cache == nullptr ? std::string() : cache->warning();
          },
          "Why the node cache is off, or '' while it is on (or none was asked for)")
      .def_property_readonly(
          "cache_limit",
          [](const sdsl::ObjectStoreSource& source) -> uint64_t {
            const sdsl::NodeCache* cache = source.node_cache();
            return cache == nullptr ? 0 : cache->limit();
          },
          "Bytes the node cache may take (0 without one)")
      .def(
          "cache_usage",
          [](const sdsl::ObjectStoreSource& source) -> uint64_t {
            sdsl::NodeCache* cache = source.node_cache();
            return cache == nullptr || !cache->enabled() ? 0 : cache->usage();
          },
          py::call_guard<py::gil_scoped_release>(),
          "Bytes the node cache's entries take now, for every process that shares it");
}

}  // namespace sdsl_python
