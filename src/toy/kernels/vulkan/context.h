#pragma once
// kernels/vulkan/context.h — one Vulkan device to compute on: the host side of the backend.
//
// A Context is vulkan:N (the index `toy devices` shows): an instance, the device, one compute
// queue, a command pool, a descriptor pool and a fence. On it: buffers (device-local; uploads and
// downloads go through a host-visible staging buffer unless the memory is host-visible itself, as
// on lavapipe and unified-memory GPUs), compute pipelines from SPIR-V embedded in the binary
// (shaders.h), and one submit path that waits on a fence with a timeout: a submission that does
// not finish in time is an Error, never a hang. Dispatches are recorded, not run: they queue up in
// one command buffer (a barrier between each and the next) until a download, an upload or flush()
// submits them together, so a whole decode step is one submission. Every failure is an Error with a clear message
// (no device N, no compute queue, out of device memory, the call and its VkResult).
// Only in a TOY_VULKAN build; docs/vulkan.md.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "toy/kernels/vulkan/loader.h"
#include "toy/tensor/device.h"

namespace toy::kernels::vulkan {

struct Error : DeviceError {  // tensor/device.h: `toy` exits 5
  using DeviceError::DeviceError;
};

class Context;

// Device memory of `bytes` bytes, bound as a storage buffer. Freed with its Context's help when
// destroyed (a buffer must not outlive its context); one that recorded work still uses is freed
// once that work has run (pipelines likewise).
class Buffer {
 public:
  Buffer() = default;
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept;
  ~Buffer();
  uint64_t bytes() const { return bytes_; }
  bool host_visible() const { return mapped_ != nullptr; }  // mapped for the host (lavapipe, unified memory)

 private:
  friend class Context;
  Context* ctx_ = nullptr;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  void* mapped_ = nullptr;  // where the memory is host-visible: mapped for the buffer's life
  uint64_t bytes_ = 0;
  mutable bool dispatched_ = false;  // named by a dispatch: uploads wait for the recorded work
};

// A compute pipeline: storage buffers at bindings 0..n_buffers-1, push constants of push_bytes.
class Pipeline {
 public:
  Pipeline() = default;
  Pipeline(Pipeline&& o) noexcept { *this = std::move(o); }
  Pipeline& operator=(Pipeline&& o) noexcept;
  ~Pipeline();

 private:
  friend class Context;
  Context* ctx_ = nullptr;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  VkPipeline pipeline_ = VK_NULL_HANDLE;
  uint32_t n_buffers_ = 0, push_bytes_ = 0;
};

struct ContextOptions {
  // How long a submission may take before it is an Error: a hung device still ends, while a
  // forward pass of a long prompt on lavapipe, which runs shaders on the CPU, takes minutes (a
  // 32-token prompt of a SmolLM2-135M-shaped Q8_0 file passed 60 s on 2 cores).
  std::chrono::milliseconds timeout{600'000};
  // Upload and download through a staging buffer even where the memory is host-visible: the path
  // a discrete GPU takes, for its test on lavapipe.
  bool always_stage = false;
};

class Context {
 public:
  // vulkan:index. Throws Error: no loader or driver, no device `index`, no compute queue, a
  // device without the features the shaders use (16- and 8-bit storage buffers).
  explicit Context(int index = 0, ContextOptions options = {});
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const std::string& name() const { return name_; }  // the device's, e.g. "llvmpipe (LLVM 15.0.6, 256 bits)"

  // Device memory for `bytes` bytes (Error "out of device memory" where it cannot be had). Its
  // contents are undefined: a buffer of the same size freed before is reused (a forward pass
  // makes the same activations every step), up to kPoolBytes of them, each at most kPoolLargest.
  Buffer buffer(uint64_t bytes);
  static constexpr uint64_t kPoolBytes = uint64_t(256) << 20, kPoolLargest = uint64_t(64) << 20;
  uint64_t pooled_bytes() const { return pooled_bytes_; }  // held for reuse now (for tests)
  // Host to device and back: `bytes` bytes at `offset` into the buffer. Both run the recorded
  // dispatches first: a download sees what they wrote, an upload does not change what they read
  // (except an upload into mapped memory of a buffer no dispatch has named yet, which no recorded
  // work can read: a forward pass's token ids and angle tables go up without a submission).
  void upload(Buffer& b, const void* src, uint64_t bytes, uint64_t offset = 0);
  void download(const Buffer& b, void* dst, uint64_t bytes, uint64_t offset = 0);

  Pipeline pipeline(std::span<const uint32_t> spirv, uint32_t n_buffers, uint32_t push_bytes);
  // Records one dispatch of groups_x × groups_y × groups_z workgroups with `push` as the push
  // constants, after a barrier that makes what the previous dispatches wrote visible to it.
  void dispatch(const Pipeline& p, std::span<const Buffer* const> buffers, const void* push, uint32_t groups_x,
                uint32_t groups_y = 1, uint32_t groups_z = 1);
  // Submits the recorded dispatches and waits for them (nothing recorded: nothing to do).
  void flush();
  // Dispatches recorded since the last submission (for tests of the batching).
  uint32_t recorded() const { return recorded_; }
  // At most this many dispatches are recorded before they are submitted anyway.
  static constexpr uint32_t kMaxRecorded = 1024;

  // The one submit path: a command buffer begun for one submission (the recorded dispatches are
  // submitted first), then submitted and waited for (at most options.timeout: Error after, and the
  // context is unusable from then on).
  VkCommandBuffer begin();
  void submit(VkCommandBuffer cb);

  // A device-level function, for code that records its own commands.
  template <class Fn>
  Fn fn(const char* name) const {
    return reinterpret_cast<Fn>(get_device_proc_(device_, name));
  }
  VkDevice device() const { return device_; }

 private:
  friend class Buffer;
  friend class Pipeline;
  struct Raw {  // a buffer and its memory, before they are a Buffer
    VkBuffer buffer = VK_NULL_HANDLE;
    VkDeviceMemory memory = VK_NULL_HANDLE;
    void* mapped = nullptr;
  };
  Raw allocate(uint64_t bytes, VkBufferUsageFlags usage, bool host_visible) const;
  void free(Raw& r) const;
  void recycle(Raw& r, uint64_t bytes);  // into the pool, or freed
  // Frees a buffer's memory or destroys a pipeline now, or after the recorded work that may use it.
  void retire(std::function<void()> destroy);
  VkCommandBuffer begin_commands();
  void copy(VkBuffer from, uint64_t from_offset, VkBuffer to, uint64_t to_offset, uint64_t bytes);
  void check(VkResult r, const char* what) const;
  void release();

  Loader vk_;
  ContextOptions options_;
  int index_ = 0;
  std::string name_;
  VkInstance instance_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkPhysicalDeviceMemoryProperties memory_{};
  uint64_t heap_bytes_ = 0;  // the largest device-local heap
  PFN_vkGetDeviceProcAddr get_device_proc_ = nullptr;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  VkCommandPool commands_ = VK_NULL_HANDLE;
  VkDescriptorPool descriptors_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  VkCommandBuffer recording_ = VK_NULL_HANDLE;  // the dispatches recorded and not yet submitted
  uint32_t recorded_ = 0;
  std::vector<std::function<void()>> retired_;   // what recorded work may still use, destroyed after it
  std::unordered_multimap<uint64_t, Raw> pool_;  // freed buffers by size, for buffer() to reuse
  uint64_t pooled_bytes_ = 0;
  bool lost_ = false;  // a submission timed out: it may still run, so nothing may be freed
};

}  // namespace toy::kernels::vulkan
