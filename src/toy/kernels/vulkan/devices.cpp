// kernels/vulkan/devices.cpp — asks the Vulkan loader which devices there are (devices.h).
//
// The loader is opened at run time (loader.h), so the binary does not depend on libvulkan.so.1.
#include "toy/kernels/vulkan/devices.h"

#if defined(TOY_VULKAN)
#include <algorithm>

#include "toy/kernels/vulkan/loader.h"
#endif

namespace toy::kernels::vulkan {

#if !defined(TOY_VULKAN)

DeviceList list_devices() {
  return {.built = false,
          .problem = "this toy was built without Vulkan (Debian's libvulkan-dev or glslc was not found)",
          .devices = {}};
}

#else

namespace {

std::string type_name(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return "cpu";
    default:
      return "other";
  }
}

DeviceInfo describe(const Loader& vk, VkInstance instance, VkPhysicalDevice d, int index) {
  DeviceInfo info;
  info.index = index;
  VkPhysicalDeviceProperties p{};
  vk.fn<PFN_vkGetPhysicalDeviceProperties>(instance, "vkGetPhysicalDeviceProperties")(d, &p);
  info.name = p.deviceName;
  info.type = type_name(p.deviceType);
  info.api_major = VK_API_VERSION_MAJOR(p.apiVersion);
  info.api_minor = VK_API_VERSION_MINOR(p.apiVersion);
  info.api_patch = VK_API_VERSION_PATCH(p.apiVersion);
  const bool v12 = p.apiVersion >= VK_API_VERSION_1_2, v13 = p.apiVersion >= VK_API_VERSION_1_3;

  // Properties and features of the versions the device has (a structure of a newer version in
  // the chain is not allowed).
  auto driver = tagged<VkPhysicalDeviceDriverProperties>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES);
  auto subgroup = tagged<VkPhysicalDeviceSubgroupProperties>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES,
                                                             v12 ? &driver : nullptr);
  auto p2 = tagged<VkPhysicalDeviceProperties2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, &subgroup);
  vk.fn<PFN_vkGetPhysicalDeviceProperties2>(instance, "vkGetPhysicalDeviceProperties2")(d, &p2);
  info.subgroup_size = subgroup.subgroupSize;
  if (v12) info.driver = std::string(driver.driverName) + " " + driver.driverInfo;

  auto dot = tagged<VkPhysicalDeviceShaderIntegerDotProductFeatures>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES);
  auto f12 = tagged<VkPhysicalDeviceVulkan12Features>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                                      v13 ? &dot : nullptr);
  auto s16 = tagged<VkPhysicalDevice16BitStorageFeatures>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES,
                                                          v12 ? &f12 : nullptr);
  auto f2 = tagged<VkPhysicalDeviceFeatures2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &s16);
  vk.fn<PFN_vkGetPhysicalDeviceFeatures2>(instance, "vkGetPhysicalDeviceFeatures2")(d, &f2);
  info.storage16 = s16.storageBuffer16BitAccess;
  info.float16 = v12 && f12.shaderFloat16;
  info.int8 = v12 && f12.shaderInt8;
  info.storage8 = v12 && f12.storageBuffer8BitAccess;
  info.int_dot = v13 && dot.shaderIntegerDotProduct;

  VkPhysicalDeviceMemoryProperties mem{};
  vk.fn<PFN_vkGetPhysicalDeviceMemoryProperties>(instance, "vkGetPhysicalDeviceMemoryProperties")(d, &mem);
  for (uint32_t h = 0; h < mem.memoryHeapCount; ++h)
    if (mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
      info.device_local_bytes = std::max<uint64_t>(info.device_local_bytes, mem.memoryHeaps[h].size);
  return info;
}

}  // namespace

DeviceList list_devices() {
  DeviceList out;
  const Loader vk;
  const VkInstance instance = create_instance(vk, out.problem);
  if (!instance) return out;
  const struct Destroy {
    VkInstance instance;
    PFN_vkDestroyInstance destroy;
    ~Destroy() { destroy(instance, nullptr); }
  } destroy{instance, vk.fn<PFN_vkDestroyInstance>(instance, "vkDestroyInstance")};
  const auto enumerate = vk.fn<PFN_vkEnumeratePhysicalDevices>(instance, "vkEnumeratePhysicalDevices");
  uint32_t n = 0;
  enumerate(instance, &n, nullptr);
  std::vector<VkPhysicalDevice> devices(n);
  if (n) enumerate(instance, &n, devices.data());
  devices.resize(n);
  for (uint32_t i = 0; i < n; ++i) out.devices.push_back(describe(vk, instance, devices[i], int(i)));
  if (out.devices.empty()) out.problem = "the Vulkan loader found no device (no driver is installed)";
  return out;
}

#endif

}  // namespace toy::kernels::vulkan
