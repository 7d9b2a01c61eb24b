#pragma once
// kernels/vulkan/loader.h — the Vulkan loader, opened at run time (for devices.cpp and context.cpp).
//
// libvulkan.so.1 is opened with dlopen and every function fetched through vkGetInstanceProcAddr
// and vkGetDeviceProcAddr (VK_NO_PROTOTYPES: no Vulkan function is linked), so the toy binary
// starts, and computes on the CPU, on a machine without the loader. Only in a TOY_VULKAN build.
#define VK_NO_PROTOTYPES
#include <dlfcn.h>
#include <vulkan/vulkan.h>

#include <algorithm>
#include <string>

namespace toy::kernels::vulkan {

// The loader, closed when the last user is done with it.
struct Loader {
  void* lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
  PFN_vkGetInstanceProcAddr get =
      lib ? reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(lib, "vkGetInstanceProcAddr")) : nullptr;
  Loader() = default;
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;
  ~Loader() {
    if (lib) dlclose(lib);
  }
  // An instance-level function (a global one for a null instance), null where it is missing.
  template <class Fn>
  Fn fn(VkInstance instance, const char* name) const {
    return reinterpret_cast<Fn>(get(instance, name));
  }
};

// A Vulkan structure of type T, zeroed but for its type tag and next pointer.
template <class T>
T tagged(VkStructureType type, void* next = nullptr) {
  T t{};
  t.sType = type;
  t.pNext = next;
  return t;
}

// A Vulkan 1.1+ instance (1.3 where the loader has it), or VK_NULL_HANDLE with why in `problem`.
inline VkInstance create_instance(const Loader& vk, std::string& problem) {
  if (!vk.get) {
    problem =
        "no Vulkan loader (libvulkan.so.1) on this machine: Debian's libvulkan1 installs it, and a driver "
        "with it (mesa-vulkan-drivers, or the GPU vendor's)";
    return VK_NULL_HANDLE;
  }
  uint32_t version = VK_API_VERSION_1_0;
  if (auto enumerate = vk.fn<PFN_vkEnumerateInstanceVersion>(nullptr, "vkEnumerateInstanceVersion"))
    enumerate(&version);
  if (version < VK_API_VERSION_1_1) {
    problem = "the Vulkan loader offers version 1.0 only; toy needs 1.1 or newer";
    return VK_NULL_HANDLE;
  }
  auto app = tagged<VkApplicationInfo>(VK_STRUCTURE_TYPE_APPLICATION_INFO);
  app.pApplicationName = app.pEngineName = "toy";
  app.apiVersion = std::min<uint32_t>(version, VK_API_VERSION_1_3);
  auto create = tagged<VkInstanceCreateInfo>(VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO);
  create.pApplicationInfo = &app;
  VkInstance instance = VK_NULL_HANDLE;
  if (const VkResult r = vk.fn<PFN_vkCreateInstance>(nullptr, "vkCreateInstance")(&create, nullptr, &instance);
      r != VK_SUCCESS) {
    problem = "the Vulkan loader could not create an instance (VkResult " + std::to_string(int(r)) +
              "): no driver is installed, or it failed to start";
    return VK_NULL_HANDLE;
  }
  return instance;
}

}  // namespace toy::kernels::vulkan
