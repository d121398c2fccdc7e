// packet_rate --workers N: the admitted pattern through N real workers at
// once, each polling its own queue pair of two ring ports, against one
// worker in the same run. Frames reach the queue a NIC's symmetric RSS would
// give them; the workers take that queue for a flow's owner (as sluiced does
// on ports with RSS) or, as on AF_PACKET, a keyed hash of the addresses,
// whose frames then mostly reach another worker first and are handed over.
#pragma once

#include <cstddef>

namespace sluice::perf {

struct WorkersRun {
  unsigned workers = 2;
  unsigned repetitions = 5;
  size_t requests = 1 << 18;  // per repetition and configuration, each with its response
  size_t flows = 4096;
  size_t contexts = 2048;      // per worker
  size_t chunk = 1024;         // requests per worker built, then timed, at a time
};

// Needs the EAL started with lcores 0 .. workers-1 (this thread is lcore 0).
// Prints the table and returns 0, or prints what went wrong and exits 1.
int run_workers(const WorkersRun& run);

}  // namespace sluice::perf
