// kernels/bandwidth.h — this machine's memory read bandwidth, the roofline for generation.
#pragma once

namespace toy::kernels {

// Streams a buffer much larger than the caches (bytes; 0: 1 GiB, or a quarter of the RAM when
// that is less) with wide loads and independent accumulators on the pool's threads; returns the
// median of `reps` passes in GB/s (1e9 bytes). Allocates the buffer for the call.
double measure_read_bandwidth_gbs(int reps = 5, long long bytes = 0);

}  // namespace toy::kernels
