// kernels/bandwidth.h — this machine's memory read bandwidth, the roofline for generation.
#pragma once

namespace toy::kernels {

// Streams a buffer much larger than the caches with wide loads and several independent
// accumulators on the pool's threads; returns the best of `reps` passes in GB/s (1e9 bytes).
double measure_read_bandwidth_gbs(int reps = 5, long long bytes = 512ll << 20);

}  // namespace toy::kernels
