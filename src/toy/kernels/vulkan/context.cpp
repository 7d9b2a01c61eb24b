// kernels/vulkan/context.cpp — one Vulkan device to compute on (context.h).
#include "toy/kernels/vulkan/context.h"

#include <cstring>
#include <vector>

namespace toy::kernels::vulkan {

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  std::swap(ctx_, o.ctx_), std::swap(buffer_, o.buffer_), std::swap(memory_, o.memory_);
  std::swap(mapped_, o.mapped_), std::swap(bytes_, o.bytes_), std::swap(dispatched_, o.dispatched_);
  return *this;
}

Buffer::~Buffer() {
  if (!ctx_) return;
  ctx_->retire(
      [ctx = ctx_, r = Context::Raw{buffer_, memory_, mapped_}, bytes = bytes_]() mutable { ctx->recycle(r, bytes); });
}

Pipeline& Pipeline::operator=(Pipeline&& o) noexcept {
  std::swap(ctx_, o.ctx_), std::swap(set_layout_, o.set_layout_), std::swap(layout_, o.layout_);
  std::swap(pipeline_, o.pipeline_), std::swap(n_buffers_, o.n_buffers_), std::swap(push_bytes_, o.push_bytes_);
  return *this;
}

Pipeline::~Pipeline() {
  if (!ctx_) return;
  ctx_->retire([ctx = ctx_, pipeline = pipeline_, layout = layout_, set_layout = set_layout_] {
    if (ctx->lost_) return;  // a timed-out submission may still use them
    ctx->fn<PFN_vkDestroyPipeline>("vkDestroyPipeline")(ctx->device_, pipeline, nullptr);
    ctx->fn<PFN_vkDestroyPipelineLayout>("vkDestroyPipelineLayout")(ctx->device_, layout, nullptr);
    ctx->fn<PFN_vkDestroyDescriptorSetLayout>("vkDestroyDescriptorSetLayout")(ctx->device_, set_layout, nullptr);
  });
}

void Context::check(VkResult r, const char* what) const {
  if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY)
    throw Error("vulkan:" + std::to_string(index_) + " (" + name_ + "): out of device memory in " + what);
  if (r != VK_SUCCESS)
    throw Error("vulkan:" + std::to_string(index_) + " (" + name_ + "): " + what + " failed (VkResult " +
                std::to_string(int(r)) + ")");
}

Context::Context(int index, ContextOptions options) : options_(options), index_(index) {
  std::string problem;
  instance_ = create_instance(vk_, problem);
  if (!instance_) throw Error("vulkan: " + problem);
  try {
    const auto enumerate = vk_.fn<PFN_vkEnumeratePhysicalDevices>(instance_, "vkEnumeratePhysicalDevices");
    uint32_t n = 0;
    enumerate(instance_, &n, nullptr);
    std::vector<VkPhysicalDevice> devices(n);
    if (n) enumerate(instance_, &n, devices.data());
    if (index < 0 || uint32_t(index) >= n)
      throw Error("vulkan: no device vulkan:" + std::to_string(index) + " (the loader reports " + std::to_string(n) +
                  (n == 1 ? " device" : " devices") + "; `toy devices` lists them)");
    physical_ = devices[size_t(index)];
    VkPhysicalDeviceProperties props{};
    vk_.fn<PFN_vkGetPhysicalDeviceProperties>(instance_, "vkGetPhysicalDeviceProperties")(physical_, &props);
    name_ = props.deviceName;
    vk_.fn<PFN_vkGetPhysicalDeviceMemoryProperties>(instance_, "vkGetPhysicalDeviceMemoryProperties")(physical_,
                                                                                                      &memory_);
    for (uint32_t h = 0; h < memory_.memoryHeapCount; ++h)
      if (memory_.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
        heap_bytes_ = std::max<uint64_t>(heap_bytes_, memory_.memoryHeaps[h].size);

    const auto families =
        vk_.fn<PFN_vkGetPhysicalDeviceQueueFamilyProperties>(instance_, "vkGetPhysicalDeviceQueueFamilyProperties");
    uint32_t nq = 0;
    families(physical_, &nq, nullptr);
    std::vector<VkQueueFamilyProperties> q(nq);
    families(physical_, &nq, q.data());
    uint32_t family = nq;
    for (uint32_t i = 0; i < nq && family == nq; ++i)
      if (q[i].queueFlags & VK_QUEUE_COMPUTE_BIT) family = i;
    if (family == nq) throw Error("vulkan:" + std::to_string(index) + " (" + name_ + ") has no compute queue");

    // The features the shaders use: halves and bytes (quantized blocks) read from storage buffers.
    auto s8 = tagged<VkPhysicalDevice8BitStorageFeatures>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES);
    auto s16 =
        tagged<VkPhysicalDevice16BitStorageFeatures>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES, &s8);
    auto f2 = tagged<VkPhysicalDeviceFeatures2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &s16);
    vk_.fn<PFN_vkGetPhysicalDeviceFeatures2>(instance_, "vkGetPhysicalDeviceFeatures2")(physical_, &f2);
    if (!s16.storageBuffer16BitAccess || !s8.storageBuffer8BitAccess)
      throw Error("vulkan:" + std::to_string(index) + " (" + name_ +
                  ") cannot read 16- and 8-bit values from storage buffers, which toy's shaders need");
    auto want8 = tagged<VkPhysicalDevice8BitStorageFeatures>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES);
    want8.storageBuffer8BitAccess = VK_TRUE;
    auto want16 =
        tagged<VkPhysicalDevice16BitStorageFeatures>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES, &want8);
    want16.storageBuffer16BitAccess = VK_TRUE;

    const float priority = 1.0f;
    auto qi = tagged<VkDeviceQueueCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO);
    qi.queueFamilyIndex = family;
    qi.queueCount = 1;
    qi.pQueuePriorities = &priority;
    auto di = tagged<VkDeviceCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, &want16);
    di.queueCreateInfoCount = 1;
    di.pQueueCreateInfos = &qi;
    check(vk_.fn<PFN_vkCreateDevice>(instance_, "vkCreateDevice")(physical_, &di, nullptr, &device_), "vkCreateDevice");
    get_device_proc_ = vk_.fn<PFN_vkGetDeviceProcAddr>(instance_, "vkGetDeviceProcAddr");
    fn<PFN_vkGetDeviceQueue>("vkGetDeviceQueue")(device_, family, 0, &queue_);

    auto pi = tagged<VkCommandPoolCreateInfo>(VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO);
    pi.flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT;
    pi.queueFamilyIndex = family;
    check(fn<PFN_vkCreateCommandPool>("vkCreateCommandPool")(device_, &pi, nullptr, &commands_), "vkCreateCommandPool");
    // A descriptor set per recorded dispatch (at most 8 buffers each), all reset after a submission.
    const VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 8 * kMaxRecorded};
    auto dpi = tagged<VkDescriptorPoolCreateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO);
    dpi.maxSets = kMaxRecorded;
    dpi.poolSizeCount = 1;
    dpi.pPoolSizes = &size;
    check(fn<PFN_vkCreateDescriptorPool>("vkCreateDescriptorPool")(device_, &dpi, nullptr, &descriptors_),
          "vkCreateDescriptorPool");
    auto fi = tagged<VkFenceCreateInfo>(VK_STRUCTURE_TYPE_FENCE_CREATE_INFO);
    check(fn<PFN_vkCreateFence>("vkCreateFence")(device_, &fi, nullptr, &fence_), "vkCreateFence");
  } catch (...) {
    release();
    throw;
  }
}

Context::~Context() { release(); }

void Context::release() {
  if (device_ && recording_ && !lost_) {
    try {
      flush();  // recorded work that nobody read back still runs: buffers may not be freed under it
    } catch (const Error&) {
      // timed out: lost_ is set and handled below
    }
  }
  if (device_ && lost_) {
    // A submission timed out. Once it has finished (one more timeout), everything can go; if it
    // still runs, the device and its memory are left to the process's end rather than freed
    // under running work, or waited for without end.
    if (fn<PFN_vkWaitForFences>("vkWaitForFences")(device_, 1, &fence_, VK_TRUE,
                                                   uint64_t(options_.timeout.count()) * 1'000'000) != VK_SUCCESS)
      return;
    lost_ = false;
    for (auto& destroy : retired_) destroy();
    retired_.clear();
  }
  if (device_ && !lost_) {
    for (auto& [bytes, r] : pool_) free(r);
    pool_.clear();
  }
  if (device_) {
    if (fence_) fn<PFN_vkDestroyFence>("vkDestroyFence")(device_, fence_, nullptr);
    if (descriptors_) fn<PFN_vkDestroyDescriptorPool>("vkDestroyDescriptorPool")(device_, descriptors_, nullptr);
    if (commands_) fn<PFN_vkDestroyCommandPool>("vkDestroyCommandPool")(device_, commands_, nullptr);
    fn<PFN_vkDestroyDevice>("vkDestroyDevice")(device_, nullptr);
    device_ = VK_NULL_HANDLE;
  }
  if (instance_) vk_.fn<PFN_vkDestroyInstance>(instance_, "vkDestroyInstance")(instance_, nullptr);
  instance_ = VK_NULL_HANDLE;
}

Context::Raw Context::allocate(uint64_t bytes, VkBufferUsageFlags usage, bool host_visible) const {
  bytes = std::max<uint64_t>(bytes, 4);
  if (bytes > heap_bytes_)
    throw Error("vulkan:" + std::to_string(index_) + " (" + name_ + "): out of device memory: " +
                std::to_string(bytes) + " bytes asked for, the device's memory has " + std::to_string(heap_bytes_));
  Raw r;
  auto bi = tagged<VkBufferCreateInfo>(VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO);
  bi.size = bytes;
  bi.usage = usage;
  check(fn<PFN_vkCreateBuffer>("vkCreateBuffer")(device_, &bi, nullptr, &r.buffer), "vkCreateBuffer");
  VkMemoryRequirements req{};
  fn<PFN_vkGetBufferMemoryRequirements>("vkGetBufferMemoryRequirements")(device_, r.buffer, &req);
  // Device-local memory for a device buffer, host-visible and coherent for a staging one; the
  // first memory type that has it (the driver lists the fastest first).
  const VkMemoryPropertyFlags want = host_visible
                                         ? VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
                                         : VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
  uint32_t type = memory_.memoryTypeCount;
  for (uint32_t i = 0; i < memory_.memoryTypeCount && type == memory_.memoryTypeCount; ++i)
    if ((req.memoryTypeBits & (1u << i)) && (memory_.memoryTypes[i].propertyFlags & want) == want) type = i;
  try {
    if (type == memory_.memoryTypeCount)
      throw Error("vulkan:" + std::to_string(index_) + " (" + name_ + ") has no " +
                  (host_visible ? "host-visible" : "device-local") + " memory for a buffer");
    auto ai = tagged<VkMemoryAllocateInfo>(VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO);
    ai.allocationSize = req.size;
    ai.memoryTypeIndex = type;
    check(fn<PFN_vkAllocateMemory>("vkAllocateMemory")(device_, &ai, nullptr, &r.memory),
          ("allocating " + std::to_string(bytes) + " bytes").c_str());
    check(fn<PFN_vkBindBufferMemory>("vkBindBufferMemory")(device_, r.buffer, r.memory, 0), "vkBindBufferMemory");
    const VkMemoryPropertyFlags has = memory_.memoryTypes[type].propertyFlags;
    if ((has & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) && (has & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT))
      check(fn<PFN_vkMapMemory>("vkMapMemory")(device_, r.memory, 0, VK_WHOLE_SIZE, 0, &r.mapped), "vkMapMemory");
  } catch (...) {
    free(r);
    throw;
  }
  return r;
}

void Context::retire(std::function<void()> destroy) {
  if (recording_)
    retired_.push_back(std::move(destroy));
  else
    destroy();
}

void Context::free(Raw& r) const {
  if (lost_) return;  // a timed-out submission may still use it
  if (r.memory) fn<PFN_vkFreeMemory>("vkFreeMemory")(device_, r.memory, nullptr);  // unmaps it too
  if (r.buffer) fn<PFN_vkDestroyBuffer>("vkDestroyBuffer")(device_, r.buffer, nullptr);
  r = Raw{};
}

void Context::recycle(Raw& r, uint64_t bytes) {
  if (lost_ || bytes > kPoolLargest || pooled_bytes_ + bytes > kPoolBytes) return free(r);
  pool_.emplace(bytes, r);
  pooled_bytes_ += bytes;
  r = Raw{};
}

Buffer Context::buffer(uint64_t bytes) {
  Raw r;
  if (auto it = pool_.find(bytes); it != pool_.end()) {  // one of the same size, freed since
    r = it->second;
    pool_.erase(it);
    pooled_bytes_ -= bytes;
  } else {
    r = allocate(
        bytes, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
        /*host_visible=*/false);
  }
  Buffer b;
  b.ctx_ = this, b.buffer_ = r.buffer, b.memory_ = r.memory, b.mapped_ = r.mapped, b.bytes_ = bytes;
  return b;
}

void Context::copy(VkBuffer from, uint64_t from_offset, VkBuffer to, uint64_t to_offset, uint64_t bytes) {
  const VkCommandBuffer cb = begin();
  const VkBufferCopy region{from_offset, to_offset, bytes};
  fn<PFN_vkCmdCopyBuffer>("vkCmdCopyBuffer")(cb, from, to, 1, &region);
  submit(cb);
}

void Context::upload(Buffer& b, const void* src, uint64_t bytes, uint64_t offset) {
  if (offset > b.bytes_ || bytes > b.bytes_ - offset)
    throw Error("vulkan: upload of " + std::to_string(bytes) + " bytes at " + std::to_string(offset) +
                " to a smaller buffer");
  const bool mapped = b.mapped_ && !options_.always_stage;
  if (!(mapped && !b.dispatched_)) flush();  // no recorded work reads a buffer no dispatch has named
  if (mapped) {
    std::memcpy(static_cast<char*>(b.mapped_) + offset, src, bytes);
    return;
  }
  Raw staging = allocate(bytes, VK_BUFFER_USAGE_TRANSFER_SRC_BIT, /*host_visible=*/true);
  try {
    std::memcpy(staging.mapped, src, bytes);
    copy(staging.buffer, 0, b.buffer_, offset, bytes);
  } catch (...) {
    free(staging);
    throw;
  }
  free(staging);
}

void Context::download(const Buffer& b, void* dst, uint64_t bytes, uint64_t offset) {
  if (offset > b.bytes_ || bytes > b.bytes_ - offset)
    throw Error("vulkan: download of " + std::to_string(bytes) + " bytes at " + std::to_string(offset) +
                " from a smaller buffer");
  flush();
  if (b.mapped_ && !options_.always_stage) {
    std::memcpy(dst, static_cast<const char*>(b.mapped_) + offset, bytes);
    return;
  }
  Raw staging = allocate(bytes, VK_BUFFER_USAGE_TRANSFER_DST_BIT, /*host_visible=*/true);
  try {
    copy(b.buffer_, offset, staging.buffer, 0, bytes);
    std::memcpy(dst, staging.mapped, bytes);
  } catch (...) {
    free(staging);
    throw;
  }
  free(staging);
}

Pipeline Context::pipeline(std::span<const uint32_t> spirv, uint32_t n_buffers, uint32_t push_bytes) {
  Pipeline p;
  p.ctx_ = this, p.n_buffers_ = n_buffers, p.push_bytes_ = push_bytes;
  std::vector<VkDescriptorSetLayoutBinding> bind(n_buffers);
  for (uint32_t i = 0; i < n_buffers; ++i)
    bind[i] = {i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
  auto li = tagged<VkDescriptorSetLayoutCreateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO);
  li.bindingCount = n_buffers;
  li.pBindings = bind.data();
  check(fn<PFN_vkCreateDescriptorSetLayout>("vkCreateDescriptorSetLayout")(device_, &li, nullptr, &p.set_layout_),
        "vkCreateDescriptorSetLayout");
  const VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes};
  auto pli = tagged<VkPipelineLayoutCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO);
  pli.setLayoutCount = 1;
  pli.pSetLayouts = &p.set_layout_;
  pli.pushConstantRangeCount = push_bytes ? 1 : 0;
  pli.pPushConstantRanges = &range;
  check(fn<PFN_vkCreatePipelineLayout>("vkCreatePipelineLayout")(device_, &pli, nullptr, &p.layout_),
        "vkCreatePipelineLayout");
  auto si = tagged<VkShaderModuleCreateInfo>(VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO);
  si.codeSize = spirv.size_bytes();
  si.pCode = spirv.data();
  VkShaderModule module = VK_NULL_HANDLE;
  check(fn<PFN_vkCreateShaderModule>("vkCreateShaderModule")(device_, &si, nullptr, &module), "vkCreateShaderModule");
  auto ci = tagged<VkComputePipelineCreateInfo>(VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO);
  ci.stage = tagged<VkPipelineShaderStageCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO);
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = module;
  ci.stage.pName = "main";
  ci.layout = p.layout_;
  const VkResult r = fn<PFN_vkCreateComputePipelines>("vkCreateComputePipelines")(device_, VK_NULL_HANDLE, 1, &ci,
                                                                                  nullptr, &p.pipeline_);
  fn<PFN_vkDestroyShaderModule>("vkDestroyShaderModule")(device_, module, nullptr);
  check(r, "vkCreateComputePipelines");
  return p;
}

VkCommandBuffer Context::begin() {
  flush();
  return begin_commands();
}

VkCommandBuffer Context::begin_commands() {
  if (lost_)
    throw Error("vulkan:" + std::to_string(index_) + " (" + name_ + "): unusable after a timed-out submission");
  auto ai = tagged<VkCommandBufferAllocateInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO);
  ai.commandPool = commands_;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  VkCommandBuffer cb = VK_NULL_HANDLE;
  check(fn<PFN_vkAllocateCommandBuffers>("vkAllocateCommandBuffers")(device_, &ai, &cb), "vkAllocateCommandBuffers");
  auto bi = tagged<VkCommandBufferBeginInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO);
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  if (const VkResult r = fn<PFN_vkBeginCommandBuffer>("vkBeginCommandBuffer")(cb, &bi); r != VK_SUCCESS) {
    fn<PFN_vkFreeCommandBuffers>("vkFreeCommandBuffers")(device_, commands_, 1, &cb);
    check(r, "vkBeginCommandBuffer");
  }
  return cb;
}

void Context::submit(VkCommandBuffer cb) {
  // What the commands wrote is made visible to the host and to the next submission.
  auto mb = tagged<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT;
  fn<PFN_vkCmdPipelineBarrier>("vkCmdPipelineBarrier")(cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                                                       VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                                                       0, 1, &mb, 0, nullptr, 0, nullptr);
  VkResult r = fn<PFN_vkEndCommandBuffer>("vkEndCommandBuffer")(cb);
  if (r == VK_SUCCESS) {
    auto s = tagged<VkSubmitInfo>(VK_STRUCTURE_TYPE_SUBMIT_INFO);
    s.commandBufferCount = 1;
    s.pCommandBuffers = &cb;
    r = fn<PFN_vkQueueSubmit>("vkQueueSubmit")(queue_, 1, &s, fence_);
    if (r == VK_SUCCESS) {
      r = fn<PFN_vkWaitForFences>("vkWaitForFences")(device_, 1, &fence_, VK_TRUE,
                                                     uint64_t(options_.timeout.count()) * 1'000'000);
      if (r == VK_TIMEOUT) {
        lost_ = true;  // the command buffer and what it uses stay until release()
        throw Error("vulkan:" + std::to_string(index_) + " (" + name_ + "): a submission did not finish within " +
                    std::to_string(options_.timeout.count()) + " ms");
      }
      fn<PFN_vkResetFences>("vkResetFences")(device_, 1, &fence_);
    }
  }
  fn<PFN_vkFreeCommandBuffers>("vkFreeCommandBuffers")(device_, commands_, 1, &cb);
  check(r, "submitting commands");
}

void Context::dispatch(const Pipeline& p, std::span<const Buffer* const> buffers, const void* push, uint32_t groups_x,
                       uint32_t groups_y, uint32_t groups_z) {
  if (buffers.size() != p.n_buffers_ || buffers.size() > 8)
    throw Error("vulkan: dispatch: " + std::to_string(buffers.size()) + " buffers for a pipeline of " +
                std::to_string(p.n_buffers_) + " (at most 8)");
  if (!recording_) {
    recording_ = begin_commands();
  } else {  // what the dispatches before wrote, this one may read (or overwrite)
    auto mb = tagged<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
    fn<PFN_vkCmdPipelineBarrier>("vkCmdPipelineBarrier")(recording_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                                                         VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, nullptr, 0,
                                                         nullptr);
  }
  auto ai = tagged<VkDescriptorSetAllocateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO);
  ai.descriptorPool = descriptors_;
  ai.descriptorSetCount = 1;
  ai.pSetLayouts = &p.set_layout_;
  VkDescriptorSet set = VK_NULL_HANDLE;
  check(fn<PFN_vkAllocateDescriptorSets>("vkAllocateDescriptorSets")(device_, &ai, &set), "vkAllocateDescriptorSets");
  std::vector<VkDescriptorBufferInfo> bi(buffers.size());
  std::vector<VkWriteDescriptorSet> w(buffers.size());
  for (uint32_t i = 0; i < buffers.size(); ++i) {
    buffers[i]->dispatched_ = true;
    bi[i] = {buffers[i]->buffer_, 0, VK_WHOLE_SIZE};
    w[i] = tagged<VkWriteDescriptorSet>(VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET);
    w[i].dstSet = set, w[i].dstBinding = i, w[i].descriptorCount = 1;
    w[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, w[i].pBufferInfo = &bi[i];
  }
  fn<PFN_vkUpdateDescriptorSets>("vkUpdateDescriptorSets")(device_, uint32_t(w.size()), w.data(), 0, nullptr);
  fn<PFN_vkCmdBindPipeline>("vkCmdBindPipeline")(recording_, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline_);
  fn<PFN_vkCmdBindDescriptorSets>("vkCmdBindDescriptorSets")(recording_, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout_, 0,
                                                             1, &set, 0, nullptr);
  if (p.push_bytes_)
    fn<PFN_vkCmdPushConstants>("vkCmdPushConstants")(recording_, p.layout_, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                                                     p.push_bytes_, push);
  fn<PFN_vkCmdDispatch>("vkCmdDispatch")(recording_, groups_x, groups_y, groups_z);
  if (++recorded_ == kMaxRecorded) flush();  // the descriptor pool holds this many sets
}

void Context::flush() {
  if (!recording_) return;
  const VkCommandBuffer cb = recording_;
  recording_ = VK_NULL_HANDLE, recorded_ = 0;
  submit(cb);  // throws on a timeout, with lost_ set: nothing is freed then
  fn<PFN_vkResetDescriptorPool>("vkResetDescriptorPool")(device_, descriptors_, 0);
  for (auto& destroy : retired_) destroy();
  retired_.clear();
}

}  // namespace toy::kernels::vulkan
