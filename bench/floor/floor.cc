// floor.cc: the parse-only floor of issue 24. Reads a Chrome/Kineto trace with simdjson's
// on-demand API (Debian's libsimdjson-dev) and sums "dur" per "name" over traceEvents: what
// any importer has to do at the least, with no storage and no analysis. firstpass's ingest
// time is quoted as a ratio to this (bench/shapes.sh).
//
//   make bench-floor               (bench's own rule, bench/out/floor; `make all` does not build it)
//   bench/out/floor FILE           prints: seconds events names total_dur
//
// The whole file is read into one padded buffer (simdjson needs it), so the floor's memory is
// the file's size: it is a speed floor, not a memory one. The seconds printed cover the read
// and the parse; the bench times the whole process too.
#include <simdjson.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>
#include <unordered_map>

using namespace simdjson;

int main(int argc, char **argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: floor FILE\n");
        return 2;
    }
    auto t0 = std::chrono::steady_clock::now();
    padded_string json;
    if (padded_string::load(argv[1]).get(json)) {
        std::fprintf(stderr, "floor: cannot read %s\n", argv[1]);
        return 1;
    }
    ondemand::parser parser;
    ondemand::document doc;
    if (parser.iterate(json).get(doc)) {
        std::fprintf(stderr, "floor: not JSON\n");
        return 1;
    }
    // Keys are the names' unescaped bytes in the parser's string buffer: they live as long
    // as the document does, so the map holds views, not copies.
    std::unordered_map<std::string_view, double> sums;
    unsigned long long events = 0;
    double total = 0;
    ondemand::array evs;
    auto err = doc["traceEvents"].get_array().get(evs);
    if (err) {
        std::fprintf(stderr, "floor: no traceEvents: %s\n", error_message(err));
        return 1;
    }
    for (auto ev : evs) {
        ondemand::object o;
        if (ev.get_object().get(o)) return std::fprintf(stderr, "floor: an event is not an object\n"), 1;
        std::string_view name;
        double dur = 0;
        // Fields in file order: one pass over the event, whatever order its keys come in.
        for (auto field : o) {
            // the raw key compared in place: no unescaping of keys nobody reads
            ondemand::raw_json_string key;
            if (field.key().get(key)) return std::fprintf(stderr, "floor: bad key\n"), 1;
            if (key == "name") {
                if (field.value().get_string().get(name)) name = std::string_view();
            } else if (key == "dur") {
                if (field.value().get_double().get(dur)) dur = 0;
            }
        }
        sums[name] += dur;
        total += dur;
        events++;
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%.3f %llu %zu %.3f\n", s, events, sums.size(), total);
    return 0;
}
