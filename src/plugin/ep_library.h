// Plugin EP libraries and devices: hardware discovery at Env creation, dlopen of libraries, their factories and
// the EP devices they report. Owned by the Env; sessions keep a library alive (and unregistration refused) through
// shared_ptr.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"
#include "plugin/ep_objects.h"

namespace epctx {

class EpLibrary {
 public:
  ~EpLibrary();  // releases factories (ReleaseEpFactory) and unloads
  const std::string& name() const { return name_; }
  const std::string& path() const { return path_; }
  const std::vector<EpctxEpFactory*>& factories() const { return factories_; }
  const std::vector<std::unique_ptr<EpctxEpDevice>>& devices() const { return devices_; }
  // True when RegisterFolder found it (an installed plugin), false when a caller named its path.
  bool discovered() const { return discovered_; }

 private:
  friend class EpRegistry;
  std::string name_, path_;
  bool discovered_ = false;
  void* handle_ = nullptr;
  EpctxReleaseEpFactoryFn release_ = nullptr;
  std::vector<EpctxEpFactory*> factories_;
  std::vector<std::unique_ptr<EpctxEpDevice>> devices_;
};

class EpRegistry {
 public:
  explicit EpRegistry(std::map<std::string, std::string> env_config, int log_level = EPCTX_LOG_WARNING);

  // dlopen + CreateEpFactories + GetSupportedDevices. On any failure nothing stays loaded. A name already taken is
  // FAIL ("library is already registered under <name>"), except when RegisterFolder registered it from the same
  // file (compared by realpath): then it is OK and nothing changes, so code written for an explicit path keeps
  // working where the plugin was also found installed.
  Status Register(const std::string& name, const std::string& path);
  // Registers every `folder`/libepctx_<name>.so under <name>, in name order, skipping names already taken. A folder
  // that does not exist registers nothing; a library that fails to load is logged as a warning (the Env's logger)
  // and skipped. Returns how many libraries were registered.
  size_t RegisterFolder(const std::string& folder);
  // FAIL when unknown or still used by a session.
  Status Unregister(const std::string& name);

  // The built-in CPU EP's device first, then every library's devices in registration order.
  std::vector<const EpctxEpDevice*> Devices() const;
  // The library that reported `device` (null for built-in EPs). Holding it keeps the library loaded.
  std::shared_ptr<EpLibrary> LibraryOf(const EpctxEpDevice* device) const;
  // A registered library by name (null if none).
  std::shared_ptr<EpLibrary> Find(const std::string& name) const;
  const std::vector<std::unique_ptr<EpctxHardwareDevice>>& hardware() const { return hardware_; }
  bool VirtualDevicesAllowed() const;
  const EpctxEpDevice* cpu_device() const { return cpu_ep_device_.get(); }

 private:
  // Register, marking the library as found by RegisterFolder when `discovered`.
  Status RegisterLibrary(const std::string& name, const std::string& path, bool discovered);

  mutable std::mutex mu_;
  EpctxKeyValuePairs env_config_;
  int virtual_count_ = 0;
  int log_level_ = EPCTX_LOG_WARNING;
  std::vector<std::unique_ptr<EpctxHardwareDevice>> hardware_;
  std::unique_ptr<EpctxEpDevice> cpu_ep_device_;
  std::vector<std::shared_ptr<EpLibrary>> libraries_;
};

// The CPU as a hardware device: vendor, model, ISA features (from /proc/cpuinfo), cores.
std::unique_ptr<EpctxHardwareDevice> DiscoverCpu();

// Where installed plugin EPs live: `<folder of the loaded libepctx.so>/epctx` (found with dladdr on a symbol of
// this library), e.g. /usr/lib/x86_64-linux-gnu/epctx. Empty when the library's path cannot be determined. In the
// build tree it names build/lib/epctx, which does not exist, so nothing is discovered there. docs/install.md.
std::string InstalledPluginFolder();

}  // namespace epctx
